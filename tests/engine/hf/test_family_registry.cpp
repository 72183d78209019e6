// Tests of the family registry (hf/family_description.h): every family is registered once under its
// own name; each description's tensor table holds what the converter splits (its routed experts,
// found by its own name patterns) and what the forward pass loads (the names and facts its description
// gives the model: router, shared experts, attention biases); unknown model types are refused by name.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/family_description.h"
#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/model_config.h"
#include "zipmoe/hf/model_family.h"
#include "hf/checkpoint_tensors.h"
#include "tools/synthetic/synthetic_model.h"

using namespace zipmoe;
using nlohmann::json;

namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;

Shapes shapesOf(ModelFamily family, const json& config) {
  Shapes out;
  for (const auto& t : checkpointTensors(family, config)) out[t.name] = t.shape;
  return out;
}

json presetConfig(ModelFamily family, const std::string& preset, std::optional<int> layers = std::nullopt) {
  SyntheticModelOptions options;
  options.family = family;
  options.preset = preset;
  options.layers = layers;
  return syntheticModelConfig(options);
}

// The configs each family is checked on: its tiny and small presets, three layers, and (for the
// families that have them) attention biases and a low-rank query.
std::vector<json> configsOf(ModelFamily family) {
  std::vector<json> out{presetConfig(family, "tiny"), presetConfig(family, "small"), presetConfig(family, "tiny", 3)};
  json biased = out[0];
  biased["attention_bias"] = true;
  biased["q_lora_rank"] = 16;
  out.push_back(biased);
  return out;
}

std::string label(const FamilyDescription& d, const std::string& what) { return std::string(d.name) + ": " + what; }

}  // namespace

class TestFamilyRegistry : public QObject {
  Q_OBJECT

 private:
  // `name` is in the table with exactly `shape`.
  static void expectTensor(const Shapes& table, const std::string& name, const std::vector<int64_t>& shape) {
    const auto it = table.find(name);
    QVERIFY2(it != table.end(), ("missing " + name).c_str());
    QVERIFY2(it->second == shape, ("wrong shape of " + name).c_str());
  }

 private Q_SLOTS:
  void everyFamilyRegisteredOnce() {
    std::set<ModelFamily> families;
    std::set<std::string> names;
    for (ModelFamily family : allFamilies()) {
      const FamilyDescription& d = describe(family);
      QCOMPARE(d.family, family);
      QVERIFY2(families.insert(family).second, d.name);
      QVERIFY2(names.insert(d.name).second, d.name);
      QCOMPARE(std::string(familyName(family)), std::string(d.name));
      QCOMPARE(familyFromName(d.name), std::optional(family));
      QCOMPARE(expertTensorKinds(family), d.expertKinds);
    }
    QCOMPARE(families.size(), size_t{6});
    // Store manifests name families by these strings: they must never change.
    QCOMPARE(names, (std::set<std::string>{"mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v2",
                                           "switch_transformers"}));
    ZIPMOE_EXPECT_ERROR(describe(static_cast<ModelFamily>(99)), "unknown model family", "99");
    QCOMPARE(std::string(familyName(static_cast<ModelFamily>(99))), std::string("unknown"));
  }

  void everyDescriptionIsComplete() {
    for (ModelFamily family : allFamilies()) {
      const FamilyDescription& d = describe(family);
      QVERIFY2(d.expertKinds.size() >= 2, d.name);
      QVERIFY2(!d.expertNames.empty(), d.name);
      QVERIFY2(d.tensors != nullptr, d.name);
      QVERIFY2(d.forward.has_value() != (d.withoutForwardPass != nullptr), d.name);
      if (d.forward) QVERIFY2(d.forward->readConfig != nullptr, d.name);
      QVERIFY2(d.synthetic.config != nullptr && d.synthetic.tokenizer != nullptr, d.name);
      QVERIFY2(d.synthetic.presets.size() >= 2, d.name);
      QCOMPARE(std::string(d.synthetic.presets[0].name), std::string("tiny"));
      QCOMPARE(std::string(d.synthetic.presets[1].name), std::string("small"));
      for (const auto& preset : d.synthetic.presets) {
        // A synthetic config names its own family.
        QCOMPARE(familyFromConfig(presetConfig(family, preset.name), d.name), family);
      }
    }
  }

  void forwardPassFamilies() {
    QCOMPARE(forwardFamilyList(), std::string("mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2"));
    ZIPMOE_EXPECT_ERROR(forwardPass(ModelFamily::SwitchTransformers), "switch_transformers", "encoder-decoder");
    // The facts the logits depend on (transformers' modeling code).
    using Facts = std::tuple<AttentionKind, RouterRule>;
    const std::map<ModelFamily, Facts> expected{
        {ModelFamily::Mixtral, {AttentionKind::GroupedQuery, RouterRule::SoftmaxTopKFp32Weights}},
        {ModelFamily::Qwen2Moe, {AttentionKind::GroupedQuery, RouterRule::SoftmaxTopK}},
        {ModelFamily::Qwen3Moe, {AttentionKind::GroupedQuery, RouterRule::SoftmaxTopK}},
        {ModelFamily::Olmoe, {AttentionKind::GroupedQuery, RouterRule::SoftmaxTopK}},
        {ModelFamily::DeepseekV2, {AttentionKind::MultiHeadLatent, RouterRule::ScaledGroupLimitedTopK}},
    };
    for (const auto& [family, facts] : expected) {
      const ForwardPass& forward = forwardPass(family);
      QVERIFY2((Facts{forward.attention, forward.router} == facts), familyName(family));
    }
  }

  // What the converter splits: every routed expert of every MoE block, found by the family's patterns,
  // each (stack, block, expert, kind) once, with one expert set per router in the table.
  void tensorTableHoldsTheRoutedExperts() {
    for (ModelFamily family : allFamilies()) {
      const FamilyDescription& d = describe(family);
      for (const json& config : configsOf(family)) {
        const auto tensors = checkpointTensors(family, config);
        std::set<std::tuple<int, int, int, int>> seen;
        std::set<std::pair<int, int>> blocks;
        int maxExpert = -1;
        for (const auto& t : tensors) {
          const auto where = classifyTensor(family, t.name);
          if (!where) continue;
          QVERIFY2(seen.insert({where->stack, where->block, where->expert, where->kind}).second, t.name.c_str());
          blocks.insert({where->stack, where->block});
          maxExpert = std::max(maxExpert, where->expert);
        }
        const size_t experts = static_cast<size_t>(maxExpert + 1);
        QVERIFY2(!blocks.empty(), label(d, "no routed experts").c_str());
        QCOMPARE(seen.size(), blocks.size() * experts * d.expertKinds.size());
        const std::string router = d.forward ? d.forward->names.router : "mlp.router.classifier.weight";
        size_t routers = 0;
        for (const auto& t : tensors) routers += t.name.ends_with(router);
        QCOMPARE(routers, blocks.size());
        if (!d.forward) continue;
        const ModelConfig m = parseModelConfig(config, d.name);
        QCOMPARE(experts, static_cast<size_t>(m.numExperts));
        for (int layer = 0; layer < m.numLayers; ++layer)
          QCOMPARE(blocks.count({0, layer}) == 1, static_cast<bool>(m.layerIsMoe[static_cast<size_t>(layer)]));
      }
    }
  }

  // What the forward pass loads, spelled from the description and the parsed config, is in the table
  // with the shapes the model expects.
  void tensorTableHoldsWhatTheModelLoads() {
    for (ModelFamily family : allFamilies()) {
      const FamilyDescription& d = describe(family);
      if (!d.forward) continue;
      for (const json& config : configsOf(family)) {
        const ModelConfig m = parseModelConfig(config, d.name);
        const Shapes table = shapesOf(family, config);
        const int64_t hidden = m.hiddenSize, vocab = m.vocabSize;
        expectTensor(table, "model.embed_tokens.weight", {vocab, hidden});
        expectTensor(table, "model.norm.weight", {hidden});
        QCOMPARE(table.count("lm_head.weight"), size_t{m.tieWordEmbeddings ? 0u : 1u});
        const DecoderLayerNames& names = d.forward->names;
        for (int layer = 0; layer < m.numLayers; ++layer) {
          const std::string p = "model.layers." + std::to_string(layer) + ".";
          expectTensor(table, p + "input_layernorm.weight", {hidden});
          expectTensor(table, p + "post_attention_layernorm.weight", {hidden});
          const std::string a = p + "self_attn.";
          if (d.forward->attention == AttentionKind::GroupedQuery) {
            const int64_t q = int64_t{m.numHeads} * m.headDim, kv = int64_t{m.numKvHeads} * m.headDim;
            expectTensor(table, a + "q_proj.weight", {q, hidden});
            expectTensor(table, a + "k_proj.weight", {kv, hidden});
            expectTensor(table, a + "o_proj.weight", {hidden, q});
            QCOMPARE(table.count(a + "q_proj.bias"), size_t{m.attentionBias ? 1u : 0u});
            const bool outputBias = m.attentionBias && d.forward->attentionBiasOnOutput;
            QCOMPARE(table.count(a + "o_proj.bias"), size_t{outputBias ? 1u : 0u});
            if (m.qkNormPerHead) expectTensor(table, a + "q_norm.weight", {m.headDim});
            if (m.qkNormFull) expectTensor(table, a + "k_norm.weight", {kv});
            QCOMPARE(table.count(a + "q_norm.weight"), size_t{m.qkNormPerHead || m.qkNormFull ? 1u : 0u});
          } else {
            const int64_t heads = m.numHeads;
            expectTensor(table, a + "kv_a_proj_with_mqa.weight", {m.kvLoraRank + m.qkRopeHeadDim, hidden});
            expectTensor(table, a + "kv_b_proj.weight", {heads * (m.qkNopeHeadDim + m.vHeadDim), m.kvLoraRank});
            expectTensor(table, a + "o_proj.weight", {hidden, heads * m.vHeadDim});
            if (m.qLoraRank > 0)
              expectTensor(table, a + "q_b_proj.weight", {heads * m.headDim, m.qLoraRank});
            else
              expectTensor(table, a + "q_proj.weight", {heads * m.headDim, hidden});
          }
          if (!m.layerIsMoe[static_cast<size_t>(layer)]) {
            expectTensor(table, p + "mlp.gate_proj.weight", {m.intermediateSize, hidden});
            continue;
          }
          expectTensor(table, p + names.router, {m.numExperts, hidden});
          if (m.sharedExpertIntermediateSize > 0)
            expectTensor(table, p + names.sharedExperts + "down_proj.weight", {hidden, m.sharedExpertIntermediateSize});
          if (m.sharedExpertGated) expectTensor(table, p + names.sharedExpertGate, {1, hidden});
        }
      }
    }
  }

  void unknownModelTypesAreRefusedByName() {
    ZIPMOE_EXPECT_ERROR(familyFromConfig(json{{"model_type", "llama4"}}, "/m/config.json"), "/m/config.json",
                        "\"llama4\"", "not supported",
                        "mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2, switch_transformers");
    QVERIFY(!familyFromName("llama4").has_value());
    ZIPMOE_EXPECT_ERROR(parseModelConfig(json{{"model_type", "llama4"}}, "/m/config.json"), "/m/config.json",
                        "\"llama4\"", "forward pass", "mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2");
    ZIPMOE_EXPECT_ERROR(parseModelConfig(presetConfig(ModelFamily::SwitchTransformers, "tiny"), "cfg"),
                        "\"switch_transformers\"", "encoder-decoder", "deepseek_v2");
  }
};

QTEST_APPLESS_MAIN(TestFamilyRegistry)
#include "test_family_registry.moc"
