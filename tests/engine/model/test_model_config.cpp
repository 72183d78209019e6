// parseModelConfig: every family's tiny and real-shaped presets, HF defaults, layer patterns, YaRN,
// and errors naming the file and the field.
#include <QtTest>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/model_config.h"
#include "tools/synthetic/synthetic_model.h"

using namespace zipmoe;
using nlohmann::json;

namespace {

json presetConfig(ModelFamily family, const std::string& preset = "tiny") {
  SyntheticModelOptions options;
  options.family = family;
  options.preset = preset;
  return syntheticModelConfig(options);
}

}  // namespace

class TestModelConfig : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void mixtralTiny() {
    const ModelConfig c = parseModelConfig(presetConfig(ModelFamily::Mixtral), "cfg.json");
    QCOMPARE(c.family, ModelFamily::Mixtral);
    QCOMPARE(c.hiddenSize, 64);
    QCOMPARE(c.numHeads, 4);
    QCOMPARE(c.numKvHeads, 2);
    QCOMPARE(c.headDim, 16);
    QCOMPARE(c.numExperts, 4);
    QCOMPARE(c.numExpertsPerTok, 2);
    QCOMPARE(c.moeIntermediateSize, 128);
    QVERIFY(c.normTopkProb);
    QCOMPARE(c.ropeTheta, 1e6);
    QCOMPARE(c.rmsNormEps, 1e-5);
    QCOMPARE(c.numMoeLayers(), 2);
    QCOMPARE(c.moeLayerIndex(1), 1);
    QCOMPARE(c.eosTokenIds, std::vector<int>{2});
    QCOMPARE(c.bosTokenId.value_or(-1), 1);
  }

  void qwen2MoeSharedExpertAndSparseLayers() {
    json config = presetConfig(ModelFamily::Qwen2Moe);
    ModelConfig c = parseModelConfig(config, "cfg.json");
    QVERIFY(c.attentionBias);
    QVERIFY(c.sharedExpertGated);
    QCOMPARE(c.sharedExpertIntermediateSize, 128);
    QCOMPARE(c.moeIntermediateSize, 32);
    QCOMPARE(c.intermediateSize, 128);
    QVERIFY(!c.normTopkProb);
    config["num_hidden_layers"] = 6;
    config["decoder_sparse_step"] = 2;
    config["mlp_only_layers"] = {3};
    c = parseModelConfig(config, "cfg.json");
    QCOMPARE(c.layerIsMoe, (std::vector<bool>{false, true, false, false, false, true}));
    QCOMPARE(c.numMoeLayers(), 2);
    QCOMPARE(c.moeLayerIndex(1), 0);
    QCOMPARE(c.moeLayerIndex(5), 1);
    QCOMPARE(c.moeLayerIndex(2), -1);
    config["qkv_bias"] = false;
    QVERIFY(!parseModelConfig(config, "cfg.json").attentionBias);
  }

  void qwen3MoeHeadDimAndNorms() {
    json config = presetConfig(ModelFamily::Qwen3Moe, "qwen3-30b-a3b");
    const ModelConfig c = parseModelConfig(config, "cfg.json");
    QCOMPARE(c.headDim, 128);  // head_dim is independent of hidden_size / heads (2048 / 32 = 64)
    QVERIFY(c.qkNormPerHead);
    QVERIFY(!c.qkNormFull);
    QVERIFY(c.normTopkProb);
    QCOMPARE(c.numExperts, 128);
    QCOMPARE(c.numExpertsPerTok, 8);
    QVERIFY(c.sharedExpertIntermediateSize == 0);
  }

  void olmoeNormsAndClip() {
    json config = presetConfig(ModelFamily::Olmoe);
    ModelConfig c = parseModelConfig(config, "cfg.json");
    QVERIFY(c.qkNormFull);
    QVERIFY(!c.clipQkv);
    QCOMPARE(c.moeIntermediateSize, 32);
    config["clip_qkv"] = 8.0;
    c = parseModelConfig(config, "cfg.json");
    QCOMPARE(c.clipQkv.value_or(0), 8.0);
    config["clip_qkv"] = -1.0;
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "olmoe/config.json"), "olmoe/config.json", "clip_qkv");
  }

  void deepseekLite() {
    const ModelConfig c = parseModelConfig(presetConfig(ModelFamily::DeepseekV2, "deepseek-v2-lite"), "cfg.json");
    QCOMPARE(c.qLoraRank, 0);  // null → q_proj
    QCOMPARE(c.kvLoraRank, 512);
    QCOMPARE(c.qkNopeHeadDim, 128);
    QCOMPARE(c.qkRopeHeadDim, 64);
    QCOMPARE(c.vHeadDim, 128);
    QCOMPARE(c.headDim, 192);
    QCOMPARE(c.numExperts, 64);
    QCOMPARE(c.numExpertsPerTok, 6);
    QCOMPARE(c.sharedExpertIntermediateSize, 2 * 1408);
    QVERIFY(!c.sharedExpertGated);
    QCOMPARE(c.numLayers, 27);
    QVERIFY(!c.layerIsMoe[0]);
    QCOMPARE(c.numMoeLayers(), 26);
    QCOMPARE(c.ropeScaling.type, std::string("yarn"));
    QCOMPARE(c.ropeScaling.factor, 40.0);
    QCOMPARE(c.ropeScaling.originalMaxPositionEmbeddings, 4096);
    QCOMPARE(c.ropeScaling.mscale, 0.707);
    QCOMPARE(c.ropeScaling.mscaleAllDim, 0.707);
    QCOMPARE(c.topkMethod, std::string("greedy"));
    QCOMPARE(c.routedScalingFactor, 1.0);
  }

  void deepseekOptionsAndDefaults() {
    json config = presetConfig(ModelFamily::DeepseekV2);
    config.erase("q_lora_rank");  // DeepseekV2Config's default is 1536, not "no q_lora"
    QCOMPARE(parseModelConfig(config, "cfg.json").qLoraRank, 1536);
    config["q_lora_rank"] = 32;
    config["topk_method"] = "group_limited_greedy";
    config["n_group"] = 4;
    config["topk_group"] = 2;
    config["moe_layer_freq"] = 2;
    config["first_k_dense_replace"] = 1;
    config["num_hidden_layers"] = 5;
    const ModelConfig c = parseModelConfig(config, "cfg.json");
    QCOMPARE(c.qLoraRank, 32);
    QCOMPARE(c.nGroup, 4);
    QCOMPARE(c.topkGroup, 2);
    QCOMPARE(c.layerIsMoe, (std::vector<bool>{false, false, true, false, true}));
    config["n_group"] = 3;
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "ds/config.json"), "ds/config.json", "n_group");
    config["n_group"] = 4;
    config["topk_method"] = "noaux_tc";
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "ds/config.json"), "topk_method", "noaux_tc");
    config["topk_method"] = "greedy";
    config["scoring_func"] = "sigmoid";
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "ds/config.json"), "scoring_func", "sigmoid");
  }

  void transformers5RopeParameters() {
    json config = presetConfig(ModelFamily::DeepseekV2);
    json rope = config["rope_scaling"];
    rope.erase("type");
    rope["rope_type"] = "yarn";
    rope["rope_theta"] = 5000.0;
    config.erase("rope_scaling");
    config.erase("rope_theta");
    config["rope_parameters"] = rope;
    const ModelConfig c = parseModelConfig(config, "cfg.json");
    QCOMPARE(c.ropeTheta, 5000.0);
    QCOMPARE(c.ropeScaling.type, std::string("yarn"));
    QCOMPARE(c.ropeScaling.factor, 4.0);
    config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 20000.0}};
    const ModelConfig d = parseModelConfig(config, "cfg.json");
    QCOMPARE(d.ropeTheta, 20000.0);
    QVERIFY(d.ropeScaling.type.empty());
  }

  void hfDefaultsForOptionalFields() {
    json config = presetConfig(ModelFamily::Olmoe);
    for (const char* key : {"rms_norm_eps", "rope_theta", "num_key_value_heads", "tie_word_embeddings",
                            "max_position_embeddings", "norm_topk_prob"})
      config.erase(key);
    const ModelConfig c = parseModelConfig(config, "cfg.json");
    QCOMPARE(c.rmsNormEps, 1e-5);  // OlmoeConfig defaults
    QCOMPARE(c.ropeTheta, 10000.0);
    QCOMPARE(c.numKvHeads, c.numHeads);
    QCOMPARE(c.maxPositionEmbeddings, 4096);
    QVERIFY(!c.tieWordEmbeddings);
    QVERIFY(!c.normTopkProb);
  }

  void everyFamilyEveryPresetParses() {
    for (const ModelFamily family : allFamilies()) {
      if (family == ModelFamily::SwitchTransformers) continue;
      for (const std::string& preset : syntheticModelPresets(family)) {
        const ModelConfig c = parseModelConfig(presetConfig(family, preset), preset);
        QVERIFY(c.numMoeLayers() > 0);
        QVERIFY(c.vocabSize > 0);
      }
    }
  }

  void errorsNameFileAndField() {
    json config = presetConfig(ModelFamily::Mixtral);
    config.erase("hidden_size");
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "m/config.json"), "m/config.json", "\"hidden_size\"", "missing");
    config = presetConfig(ModelFamily::Mixtral);
    config["num_local_experts"] = "eight";
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "m/config.json"), "num_local_experts", "not an integer");
    config = presetConfig(ModelFamily::Mixtral);
    config["num_key_value_heads"] = 3;
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "m/config.json"), "num_key_value_heads", "divide");
    config = presetConfig(ModelFamily::Mixtral);
    config["num_experts_per_tok"] = 9;
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "m/config.json"), "num_experts_per_tok", "9");
    config = presetConfig(ModelFamily::Mixtral);
    config["rms_norm_eps"] = -1;
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "m/config.json"), "rms_norm_eps", "positive");
    config = presetConfig(ModelFamily::Mixtral);
    config["rope_scaling"] = {{"type", "longrope"}, {"factor", 2.0}};
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "m/config.json"), "rope_scaling", "longrope");
    config = presetConfig(ModelFamily::Mixtral);
    config["hidden_act"] = "gelu";
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "m/config.json"), "hidden_act", "gelu");
    config = presetConfig(ModelFamily::Qwen2Moe);
    config["mlp_only_layers"] = {0, 1};
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "q/config.json"), "q/config.json", "no MoE layer");
  }

  void unsupportedArchitectures() {
    json config = presetConfig(ModelFamily::Mixtral);
    config["model_type"] = "llama";
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "l/config.json"), "l/config.json", "\"llama\"",
                        "mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2");
    ZIPMOE_EXPECT_ERROR(parseModelConfig(presetConfig(ModelFamily::SwitchTransformers), "s/config.json"),
                        "switch_transformers", "encoder-decoder", "deepseek_v2");
    config.erase("model_type");
    ZIPMOE_EXPECT_ERROR(parseModelConfig(config, "l/config.json"), "model_type", "missing");
  }
};

QTEST_APPLESS_MAIN(TestModelConfig)
#include "test_model_config.moc"
