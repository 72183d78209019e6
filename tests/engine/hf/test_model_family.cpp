// Tests of model_family.h: which tensor names are routed-expert weights, per family.
//
// Positives use the real checkpoints' spelling; negatives are the near misses a substring match would
// wrongly accept (shared experts, routers, biases, extra suffixes, malformed indices).
#include <nlohmann/json.hpp>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/model_family.h"

using namespace zipmoe;

class TestModelFamily : public QObject {
  Q_OBJECT

 private:
  static void expectExpert(ModelFamily family, const std::string& name, int stack, int block, int expert,
                           const std::string& kind) {
    const auto parsed = classifyTensor(family, name);
    QVERIFY2(parsed.has_value(), name.c_str());
    QCOMPARE(parsed->stack, stack);
    QCOMPARE(parsed->block, block);
    QCOMPARE(parsed->expert, expert);
    QCOMPARE(expertTensorKinds(family).at(static_cast<size_t>(parsed->kind)), kind);
  }
  static void expectDense(ModelFamily family, const std::string& name) {
    QVERIFY2(!classifyTensor(family, name).has_value(), (std::string(familyName(family)) + ": " + name).c_str());
  }

 private Q_SLOTS:
  void namesRoundTrip() {
    QCOMPARE(allFamilies().size(), size_t{6});
    for (ModelFamily family : allFamilies()) QCOMPARE(familyFromName(familyName(family)), std::optional(family));
    QCOMPARE(supportedFamilyList(), std::string("mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2, switch_transformers"));
    QVERIFY(!familyFromName("llama").has_value());
    QVERIFY(!familyFromName("Mixtral").has_value());
  }

  void kindsInStoreOrder() {
    using Kinds = std::vector<std::string>;
    QCOMPARE(expertTensorKinds(ModelFamily::Mixtral), (Kinds{"w1", "w3", "w2"}));
    for (ModelFamily f : {ModelFamily::Qwen2Moe, ModelFamily::Qwen3Moe, ModelFamily::Olmoe, ModelFamily::DeepseekV2})
      QCOMPARE(expertTensorKinds(f), (Kinds{"gate_proj", "up_proj", "down_proj"}));
    QCOMPARE(expertTensorKinds(ModelFamily::SwitchTransformers), (Kinds{"wi", "wo"}));
  }

  void mixtral() {
    const auto f = ModelFamily::Mixtral;
    expectExpert(f, "model.layers.0.block_sparse_moe.experts.0.w1.weight", 0, 0, 0, "w1");
    expectExpert(f, "model.layers.31.block_sparse_moe.experts.7.w2.weight", 0, 31, 7, "w2");
    expectExpert(f, "model.layers.5.block_sparse_moe.experts.3.w3.weight", 0, 5, 3, "w3");
    expectDense(f, "model.layers.0.block_sparse_moe.gate.weight");
    expectDense(f, "model.layers.0.block_sparse_moe.experts.0.w4.weight");
    expectDense(f, "model.layers.0.block_sparse_moe.experts.0.w1.bias");
    expectDense(f, "model.layers.0.mlp.experts.0.gate_proj.weight");  // another family's scheme
    expectDense(f, "model.layers.0.self_attn.q_proj.weight");
  }

  void decoderOnlyGatedProj() {
    for (ModelFamily f : {ModelFamily::Qwen2Moe, ModelFamily::Qwen3Moe, ModelFamily::Olmoe, ModelFamily::DeepseekV2}) {
      expectExpert(f, "model.layers.0.mlp.experts.0.gate_proj.weight", 0, 0, 0, "gate_proj");
      expectExpert(f, "model.layers.23.mlp.experts.59.up_proj.weight", 0, 23, 59, "up_proj");
      expectExpert(f, "model.layers.26.mlp.experts.63.down_proj.weight", 0, 26, 63, "down_proj");
      expectExpert(f, "model.layers.10.mlp.experts.100.down_proj.weight", 0, 10, 100, "down_proj");
      // Not routed experts.
      expectDense(f, "model.layers.1.mlp.shared_expert.gate_proj.weight");
      expectDense(f, "model.layers.1.mlp.shared_expert_gate.weight");
      expectDense(f, "model.layers.1.mlp.shared_experts.up_proj.weight");
      expectDense(f, "model.layers.1.mlp.gate.weight");
      expectDense(f, "model.layers.0.mlp.gate_proj.weight");  // deepseek's dense first layer
      expectDense(f, "model.embed_tokens.weight");
      expectDense(f, "lm_head.weight");
      // Near misses a substring test would accept.
      expectDense(f, "model.layers.0.mlp.experts.0.gate_proj.bias");
      expectDense(f, "model.layers.0.mlp.experts.0.gate_proj.weight.extra");
      expectDense(f, "model.layers.0.mlp.experts.0.gate_proj.weight_scale");
      expectDense(f, "model.layers.0.mlp.experts.0.gate_proj");
      expectDense(f, "model.layers.0.mlp.experts.x.gate_proj.weight");
      expectDense(f, "model.layers.x.mlp.experts.0.gate_proj.weight");
      expectDense(f, "model.layers.0.mlp.experts.-1.gate_proj.weight");
      expectDense(f, "model.layers.0.mlp.experts.01.gate_proj.weight");
      expectDense(f, "model.layers.0.mlp.experts..gate_proj.weight");
      expectDense(f, "model.layers.0.mlp.experts.0.w1.weight");
      expectDense(f, "model.layers.0.mlp.experts.gate_up_proj");  // fused 3-D layout, not per expert
      expectDense(f, "prefix.model.layers.0.mlp.experts.0.gate_proj.weight");
      expectDense(f, "model.layers.0.mlp.experts.0.gate_proj.weightx");
      expectDense(f, "model.layers.99999999999.mlp.experts.0.gate_proj.weight");
      expectDense(f, "");
    }
  }

  void switchTransformers() {
    const auto f = ModelFamily::SwitchTransformers;
    expectExpert(f, "encoder.block.1.layer.1.mlp.experts.expert_0.wi.weight", 0, 1, 0, "wi");
    expectExpert(f, "encoder.block.23.layer.1.mlp.experts.expert_127.wo.weight", 0, 23, 127, "wo");
    expectExpert(f, "decoder.block.1.layer.2.mlp.experts.expert_5.wi.weight", 1, 1, 5, "wi");
    expectExpert(f, "decoder.block.23.layer.2.mlp.experts.expert_127.wo.weight", 1, 23, 127, "wo");
    expectDense(f, "encoder.block.1.layer.1.mlp.router.classifier.weight");
    expectDense(f, "encoder.block.0.layer.1.mlp.wi.weight");
    expectDense(f, "decoder.block.0.layer.2.mlp.wo.weight");
    expectDense(f, "encoder.block.1.layer.2.mlp.experts.expert_0.wi.weight");  // encoder MLP is layer 1
    expectDense(f, "decoder.block.1.layer.1.mlp.experts.expert_0.wi.weight");  // decoder MLP is layer 2
    expectDense(f, "encoder.block.1.layer.1.mlp.experts.expert_0.wi.bias");
    expectDense(f, "encoder.block.1.layer.1.mlp.experts.expert_x.wi.weight");
    expectDense(f, "encoder.block.1.layer.1.mlp.experts.0.wi.weight");
    expectDense(f, "encoder.block.1.layer.1.mlp.experts.expert_0.wi_0.weight");
    expectDense(f, "encoder.block.1.layer.1.mlp.experts.expert_0.wi.weight.1");
    expectDense(f, "shared.weight");
    expectDense(f, "lm_head.weight");
  }

  void familyFromConfigAcceptsKnownTypes() {
    for (ModelFamily family : allFamilies())
      QCOMPARE(familyFromConfig(nlohmann::json{{"model_type", familyName(family)}}, "config.json"), family);
  }

  void familyFromConfigErrors() {
    ZIPMOE_EXPECT_ERROR(familyFromConfig(nlohmann::json{{"model_type", "llama"}}, "/m/config.json"),
                        "/m/config.json", "\"llama\"", "not supported", "mixtral", "switch_transformers");
    ZIPMOE_EXPECT_ERROR(familyFromConfig(nlohmann::json{{"hidden_size", 8}}, "/m/config.json"),
                        "/m/config.json", "model_type", "missing", "qwen2_moe");
    ZIPMOE_EXPECT_ERROR(familyFromConfig(nlohmann::json{{"model_type", 7}}, "cfg"), "cfg", "model_type",
                        "not a string", "7", "deepseek_v2");
    ZIPMOE_EXPECT_ERROR(familyFromConfig(nlohmann::json::array(), "cfg"), "cfg", "missing", "olmoe");
  }
};

QTEST_APPLESS_MAIN(TestModelFamily)
#include "test_model_family.moc"
