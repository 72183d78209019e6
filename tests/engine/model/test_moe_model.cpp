// MoeModel at run time: batching, the KV cache, the expert-provider contract (one acquire per MoE
// layer per forward, order independence), input errors and loading errors.
// libtorch before Qt: Qt's `slots` macro would rewrite a libtorch method of that name.
#include "model/weights.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/model/model.h"
#include "tools/synthetic/synthetic_model.h"

using namespace zipmoe;
using nlohmann::json;

namespace {

// Forwards to another provider, records every acquire, and optionally hands experts back in the
// reverse of the order the inner provider returns them.
class RecordingProvider : public ExpertProvider {
 public:
  RecordingProvider(std::shared_ptr<ExpertProvider> inner, bool reverse) : inner_(std::move(inner)), reverse_(reverse) {}
  struct Call {
    int layer = 0;
    int tokens = 0;  // sum over the requests
    size_t experts = 0;
  };
  std::vector<Call> calls;

  std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) override {
    Call call{layer, 0, requests.size()};
    for (const auto& r : requests) call.tokens += r.tokens;
    calls.push_back(call);
    auto batch = inner_->acquire(layer, requests);
    if (!reverse_) return batch;
    std::vector<ReadyExpert> ready;
    while (auto e = batch->next()) ready.push_back(std::move(*e));
    std::reverse(ready.begin(), ready.end());
    return std::make_unique<Replay>(std::move(ready), std::move(batch));
  }
  int numLayers() const override { return inner_->numLayers(); }
  int numExperts() const override { return inner_->numExperts(); }
  std::pair<int64_t, int64_t> tensorShape(int kind) const override { return inner_->tensorShape(kind); }

 private:
  class Replay : public ExpertBatch {
   public:
    Replay(std::vector<ReadyExpert> ready, std::unique_ptr<ExpertBatch> owner)
        : ready_(std::move(ready)), owner_(std::move(owner)) {}
    std::optional<ReadyExpert> next() override {
      if (next_ >= ready_.size()) return std::nullopt;
      return ready_[next_++];
    }

   private:
    std::vector<ReadyExpert> ready_;
    std::unique_ptr<ExpertBatch> owner_;  // keeps the buffers valid
    size_t next_ = 0;
  };
  std::shared_ptr<ExpertProvider> inner_;
  bool reverse_;
};

std::filesystem::path makeModel(const testing::TempDir& tmp, ModelFamily family, const json& overrides = json::object(),
                                uint64_t seed = 7) {
  SyntheticModelOptions options;
  options.family = family;
  options.seed = seed;
  json config = syntheticModelConfig(options);
  config.update(overrides);
  const auto dir = tmp / (std::string(familyName(family)) + "-" + std::to_string(seed));
  generateSyntheticModel(dir, config, options);
  return dir;
}

std::unique_ptr<MoeModel> load(const std::filesystem::path& dir, ComputeDtype dtype = ComputeDtype::Float32,
                               std::shared_ptr<ExpertProvider> experts = nullptr) {
  ModelOptions options;
  options.dtype = dtype;
  options.experts = std::move(experts);
  return MoeModel::load(dir, options);
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
  return d;
}

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back((i * 37 + salt * 101 + 3) % 512);
  return out;
}

// fp32 logits of the tiny models are ~0.5; the same math over differently shaped matrix products
// (a batch of rows vs one row, a prefill vs a decode) differs only by summation order, ~1e-7.
constexpr double kFp32Tolerance = 1e-5;

void rewriteTensorShape(const std::filesystem::path& file, const std::string& name, const std::vector<int64_t>& shape) {
  const std::string bytes = testing::readText(file);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), sizeof length);
  json header = json::parse(bytes.substr(8, length));
  header[name]["shape"] = shape;
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  const uint64_t newLength = text.size();
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&newLength), sizeof newLength);
  out << text;
  out.write(bytes.data() + 8 + length, static_cast<std::streamsize>(bytes.size() - 8 - length));
}

}  // namespace

class TestMoeModel : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void batchMatchesOneByOne_data() {
    QTest::addColumn<int>("family");
    QTest::newRow("mixtral") << static_cast<int>(ModelFamily::Mixtral);
    QTest::newRow("qwen2_moe") << static_cast<int>(ModelFamily::Qwen2Moe);
    QTest::newRow("deepseek_v2") << static_cast<int>(ModelFamily::DeepseekV2);
  }
  void batchMatchesOneByOne() {
    QFETCH(int, family);
    testing::TempDir tmp;
    const auto dir = makeModel(tmp, static_cast<ModelFamily>(family));
    const auto model = load(dir);
    const std::vector<int> lengths{5, 9, 3};
    // One by one.
    std::vector<std::vector<float>> alone;
    for (size_t s = 0; s < lengths.size(); ++s) {
      const auto seq = model->addSequence();
      alone.push_back(model->forward({{seq, tokens(lengths[s], static_cast<int>(s))}})[0]);
      for (int d = 0; d < 2; ++d) alone.push_back(model->forward({{seq, {static_cast<int32_t>(40 + d + 10 * static_cast<int>(s))}}})[0]);
      model->removeSequence(seq);
    }
    // Together: a ragged prefill, then two stacked decode steps.
    std::vector<MoeModel::SequenceId> seqs;
    std::vector<MoeModel::Step> prefill;
    for (size_t s = 0; s < lengths.size(); ++s) {
      seqs.push_back(model->addSequence());
      prefill.push_back({seqs.back(), tokens(lengths[s], static_cast<int>(s))});
    }
    std::vector<std::vector<std::vector<float>>> together(lengths.size());
    auto out = model->forward(prefill);
    for (size_t s = 0; s < seqs.size(); ++s) together[s].push_back(out[s]);
    for (int d = 0; d < 2; ++d) {
      std::vector<MoeModel::Step> decode;
      for (size_t s = 0; s < seqs.size(); ++s) decode.push_back({seqs[s], {static_cast<int32_t>(40 + d + 10 * static_cast<int>(s))}});
      out = model->forward(decode);
      for (size_t s = 0; s < seqs.size(); ++s) together[s].push_back(out[s]);
    }
    for (size_t s = 0; s < seqs.size(); ++s) {
      QCOMPARE(model->sequenceLength(seqs[s]), static_cast<int64_t>(lengths[s] + 2));
      for (size_t i = 0; i < 3; ++i) QVERIFY(maxAbsDiff(together[s][i], alone[s * 3 + i]) <= kFp32Tolerance);
    }
  }

  void decodeMatchesFullRerun_data() {
    QTest::addColumn<int>("family");
    QTest::addColumn<int>("dtype");
    QTest::newRow("qwen3_moe fp32") << static_cast<int>(ModelFamily::Qwen3Moe) << static_cast<int>(ComputeDtype::Float32);
    QTest::newRow("olmoe fp32") << static_cast<int>(ModelFamily::Olmoe) << static_cast<int>(ComputeDtype::Float32);
    QTest::newRow("deepseek_v2 fp32") << static_cast<int>(ModelFamily::DeepseekV2) << static_cast<int>(ComputeDtype::Float32);
    QTest::newRow("deepseek_v2 bf16") << static_cast<int>(ModelFamily::DeepseekV2) << static_cast<int>(ComputeDtype::BFloat16);
  }
  void decodeMatchesFullRerun() {
    QFETCH(int, family);
    QFETCH(int, dtype);
    testing::TempDir tmp;
    const auto dir = makeModel(tmp, static_cast<ModelFamily>(family));
    const auto model = load(dir, static_cast<ComputeDtype>(dtype));
    const auto all = tokens(14, 5);
    const auto vocab = static_cast<size_t>(model->config().vocabSize);
    const auto full = model->addSequence();
    const auto rerun = model->forward({{full, all}}, true)[0];
    const auto seq = model->addSequence();
    std::vector<std::vector<float>> stepwise{model->forward({{seq, std::vector<int32_t>(all.begin(), all.begin() + 8)}})[0]};
    for (size_t i = 8; i < all.size(); ++i) stepwise.push_back(model->forward({{seq, {all[i]}}})[0]);
    // BF16: a decode and a full re-run round their differently shaped products differently.
    const double tolerance = dtype == static_cast<int>(ComputeDtype::Float32) ? kFp32Tolerance : 0.02;
    for (size_t i = 0; i < stepwise.size(); ++i) {
      const size_t position = 7 + i;
      const std::vector<float> row(rerun.begin() + static_cast<std::ptrdiff_t>(position * vocab),
                                   rerun.begin() + static_cast<std::ptrdiff_t>((position + 1) * vocab));
      const double d = maxAbsDiff(stepwise[i], row);
      QVERIFY2(d <= tolerance, qPrintable(QString("position %1: max diff %2").arg(position).arg(d)));
    }
  }

  // Weights a decode step streams start on a 2 MiB boundary from a huge page's size up, so that
  // transparent huge pages can back them (io::AlignedBuffer): the dense tensors WeightLoader loads
  // and every resident expert tensor. Whether the kernel grants huge pages is its choice; the
  // placement, and the contents, are checked here.
  void largeWeightsStartOnHugePageBoundaries() {
    testing::TempDir tmp;
    constexpr int64_t kWide = 16384;  // × hidden 64 × 2 bytes = 2 MiB per tensor
    const auto dir = makeModel(tmp, ModelFamily::Qwen2Moe,
                               {{"num_hidden_layers", 1}, {"num_experts", 4}, {"num_experts_per_tok", 2},
                                {"moe_intermediate_size", kWide}, {"shared_expert_intermediate_size", kWide}});
    const int64_t hidden = json::parse(std::ifstream(dir / "config.json"))["hidden_size"].get<int64_t>();
    QCOMPARE(hidden * kWide * 2, int64_t{2} << 20);
    const auto isAligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % (uintptr_t{2} << 20) == 0; };

    const auto weights = WeightLoader::open(dir);
    const at::Tensor large = weights->load("model.layers.0.mlp.shared_expert.gate_proj.weight", {kWide, hidden}, at::kBFloat16);
    QVERIFY(isAligned(large.data_ptr()));
    const at::Tensor asFloat = weights->load("model.layers.0.mlp.shared_expert.gate_proj.weight", {kWide, hidden}, at::kFloat);
    QVERIFY(at::equal(large.to(at::kFloat), asFloat));  // the same bytes through libtorch's allocation
    QVERIFY(large.abs().sum().item<double>() > 0);

    const auto experts = makeResidentExperts(dir);
    std::vector<ExpertRequest> requests;
    for (int e = 0; e < 4; ++e) requests.push_back({e, 1, false, false});
    const auto batch = experts->acquire(0, requests);
    int seen = 0;
    while (auto ready = batch->next()) {
      for (const uint16_t* t : ready->tensors) QVERIFY(isAligned(t));
      ++seen;
    }
    QCOMPARE(seen, 4);
    // And the model computes with them as with any other allocation (the values: test_model_logits).
    const auto model = load(dir, ComputeDtype::BFloat16);
    const auto seq = model->addSequence();
    const auto logits = model->forward({{seq, tokens(3, 1)}})[0];
    QVERIFY(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
  }

  void providerCalledOncePerMoeLayer() {
    testing::TempDir tmp;
    // Three layers, the middle one dense: two MoE layers.
    const auto dir = makeModel(tmp, ModelFamily::Qwen2Moe, {{"num_hidden_layers", 3}, {"mlp_only_layers", {1}}});
    auto recorder = std::make_shared<RecordingProvider>(makeResidentExperts(dir), false);
    const auto model = load(dir, ComputeDtype::Float32, recorder);
    const int k = model->config().numExpertsPerTok;
    QCOMPARE(model->config().numMoeLayers(), 2);
    const auto a = model->addSequence(), b = model->addSequence();
    model->forward({{a, tokens(4, 1)}, {b, tokens(3, 2)}});
    QCOMPARE(recorder->calls.size(), size_t{2});
    for (int l = 0; l < 2; ++l) {
      QCOMPARE(recorder->calls[static_cast<size_t>(l)].layer, l);
      QCOMPARE(recorder->calls[static_cast<size_t>(l)].tokens, 7 * k);
      QVERIFY(recorder->calls[static_cast<size_t>(l)].experts > static_cast<size_t>(k));  // non-degenerate routing
    }
    recorder->calls.clear();
    model->forward({{a, {11}}, {b, {12}}});
    QCOMPARE(recorder->calls.size(), size_t{2});
    for (const auto& call : recorder->calls) QCOMPARE(call.tokens, 2 * k);
  }

  void expertOrderDoesNotChangeResults_data() {
    QTest::addColumn<int>("family");
    QTest::addColumn<int>("dtype");
    for (const ModelFamily f : {ModelFamily::Mixtral, ModelFamily::Qwen2Moe, ModelFamily::DeepseekV2})
      for (const ComputeDtype d : {ComputeDtype::Float32, ComputeDtype::BFloat16})
        QTest::newRow((std::string(familyName(f)) + (d == ComputeDtype::Float32 ? " fp32" : " bf16")).c_str())
            << static_cast<int>(f) << static_cast<int>(d);
  }
  // Bit-identity is by construction: each expert's weighted output rows are written to their own
  // (token, slot) rows and nothing is summed until every expert has arrived; the sum then runs over
  // each token's slots in ascending expert id, independent of the arrival order.
  void expertOrderDoesNotChangeResults() {
    QFETCH(int, family);
    QFETCH(int, dtype);
    testing::TempDir tmp;
    const auto dir = makeModel(tmp, static_cast<ModelFamily>(family));
    std::vector<std::vector<float>> results[2];
    for (int reverse = 0; reverse < 2; ++reverse) {
      const auto model = load(dir, static_cast<ComputeDtype>(dtype),
                              std::make_shared<RecordingProvider>(makeResidentExperts(dir), reverse == 1));
      const auto a = model->addSequence(), b = model->addSequence();
      for (auto& r : model->forward({{a, tokens(9, 3)}, {b, tokens(4, 4)}}, true)) results[reverse].push_back(r);
      for (auto& r : model->forward({{a, {17}}, {b, {18}}})) results[reverse].push_back(r);
    }
    QCOMPARE(results[0].size(), results[1].size());
    for (size_t i = 0; i < results[0].size(); ++i) {
      QCOMPARE(results[0][i].size(), results[1][i].size());
      QVERIFY(std::memcmp(results[0][i].data(), results[1][i].data(), results[0][i].size() * sizeof(float)) == 0);
    }
  }

  void inputErrors() {
    testing::TempDir tmp;
    const auto dir = makeModel(tmp, ModelFamily::Mixtral, {{"max_position_embeddings", 16}});
    const auto model = load(dir);
    const auto seq = model->addSequence();
    model->forward({{seq, tokens(10, 1)}});
    ZIPMOE_EXPECT_ERROR(model->forward({{seq, tokens(7, 2)}}), "10 cached + 7 new tokens = 17", "context window of 16");
    ZIPMOE_EXPECT_ERROR(model->forward({{seq, {}}}), "empty step");
    ZIPMOE_EXPECT_ERROR(model->forward({{seq, {1, 512}}}), "token id 512", "index 1", "vocabulary (size 512)");
    ZIPMOE_EXPECT_ERROR(model->forward({{seq, {-3}}}), "token id -3");
    ZIPMOE_EXPECT_ERROR(model->forward({{seq + 42, {1}}}), "unknown sequence " + std::to_string(seq + 42));
    ZIPMOE_EXPECT_ERROR(model->forward({{seq, {1}}, {seq, {2}}}), "appears twice");
    // A valid step next to a bad one: nothing is applied.
    const auto other = model->addSequence();
    ZIPMOE_EXPECT_ERROR(model->forward({{other, {1, 2}}, {seq, {600}}}), "token id 600");
    QCOMPARE(model->sequenceLength(other), int64_t{0});
    QCOMPARE(model->sequenceLength(seq), int64_t{10});
    model->forward({{seq, tokens(6, 3)}});  // exactly fills the window
    QCOMPARE(model->sequenceLength(seq), int64_t{16});
    ZIPMOE_EXPECT_ERROR(model->forward({{seq, {5}}}), "16 cached + 1 new tokens = 17");
    model->removeSequence(seq);
    ZIPMOE_EXPECT_ERROR(model->sequenceLength(seq), "unknown sequence");
    ZIPMOE_EXPECT_ERROR(model->removeSequence(seq), "unknown sequence");
  }

  void loadingErrors() {
    testing::TempDir tmp;
    const auto dir = makeModel(tmp, ModelFamily::Mixtral);
    const std::string configText = testing::readText(dir / "config.json");
    auto writeConfig = [&](const json& config) { std::ofstream(dir / "config.json", std::ios::trunc) << config.dump(); };

    json config = json::parse(configText);
    config.erase("num_attention_heads");
    writeConfig(config);
    ZIPMOE_EXPECT_ERROR(load(dir), (dir / "config.json").string(), "\"num_attention_heads\"", "missing");

    config = json::parse(configText);
    config["model_type"] = "llama";
    writeConfig(config);
    ZIPMOE_EXPECT_ERROR(load(dir), "\"llama\"", "mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2");

    writeConfig(json::parse(configText));
    rewriteTensorShape(dir / "model.safetensors", "model.layers.1.self_attn.q_proj.weight", {32, 128});
    ZIPMOE_EXPECT_ERROR(load(dir), "model.safetensors", "model.layers.1.self_attn.q_proj.weight", "[32, 128]",
                        "expected [64, 64]");

    const auto switchDir = tmp / "switch";
    SyntheticModelOptions options;
    options.family = ModelFamily::SwitchTransformers;
    generateSyntheticModel(switchDir, options);
    ZIPMOE_EXPECT_ERROR(load(switchDir), "switch_transformers", "encoder-decoder", "deepseek_v2");
  }

  void autoDtypeAndTiedEmbeddings() {
    testing::TempDir tmp;
    const auto dir = makeModel(tmp, ModelFamily::Olmoe, {{"tie_word_embeddings", true}});
    // checkpointTensors leaves lm_head out of a tied model; the model must use the embedding.
    QVERIFY(testing::readText(dir / "model.safetensors").find("lm_head") == std::string::npos);
    const auto model = load(dir, ComputeDtype::Auto);
    QVERIFY(model->computeDtype() != ComputeDtype::Auto);
    const auto seq = model->addSequence();
    const auto logits = model->forward({{seq, tokens(5, 9)}})[0];
    QCOMPARE(logits.size(), size_t{512});
    QVERIFY(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
  }
};

QTEST_APPLESS_MAIN(TestMoeModel)
#include "test_moe_model.moc"
