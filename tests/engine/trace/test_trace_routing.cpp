// Forced routing in the model (ModelOptions::routing): the experts requested from the provider are
// exactly the override's (a TraceRouting over a small trace written here reproduces the trace's rows),
// the router weighs forced experts by the family's rule (replaying the router's own choice gives its
// logits bit for bit), runs are deterministic for a seed, and a bad override is reported.
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "zipmoe/trace/activation_trace.h"
#include "zipmoe/base/error.h"
#include "zipmoe/model/model.h"
#include "zipmoe/trace/request_routing.h"
#include "tools/synthetic/synthetic_model.h"

using namespace zipmoe;
using nlohmann::json;

namespace {

// Per acquire: the layer and the requests (expert → tokens), forwarded to the resident provider.
class RecordingProvider : public ExpertProvider {
 public:
  explicit RecordingProvider(std::shared_ptr<ExpertProvider> inner) : inner_(std::move(inner)) {}
  struct Call {
    int layer = 0;
    std::map<int, int> tokens;
    bool operator==(const Call&) const = default;
  };
  std::vector<Call> calls;

  std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) override {
    Call call{layer, {}};
    for (const auto& r : requests) call.tokens[r.expert] = r.tokens;
    calls.push_back(std::move(call));
    return inner_->acquire(layer, requests);
  }
  int numLayers() const override { return inner_->numLayers(); }
  int numExperts() const override { return inner_->numExperts(); }
  std::pair<int64_t, int64_t> tensorShape(int kind) const override { return inner_->tensorShape(kind); }

 private:
  std::shared_ptr<ExpertProvider> inner_;
};

// Hands out prepared choices, one list per choose() call, in order; records the calls.
class ScriptedRouting : public RoutingOverride {
 public:
  std::vector<std::vector<int64_t>> script;
  std::vector<std::pair<int, int64_t>> calls;  // (moeLayer, tokens)

  void choose(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) override {
    calls.emplace_back(moeLayer, tokens);
    const std::vector<int64_t>& next = script.at(next_++);
    if (next.size() != out.size() || out.size() != static_cast<size_t>(tokens * k))
      throw Error("ScriptedRouting: script entry of the wrong size");
    std::copy(next.begin(), next.end(), out.begin());
  }

 private:
  size_t next_ = 0;
};

std::filesystem::path makeModel(const testing::TempDir& tmp, ModelFamily family,
                                const json& overrides = json::object()) {
  SyntheticModelOptions options;
  options.family = family;
  options.seed = 11;
  json config = syntheticModelConfig(options);
  config.update(overrides);
  const auto dir = tmp / std::string(familyName(family));
  generateSyntheticModel(dir, config, options);
  return dir;
}

std::unique_ptr<MoeModel> load(const std::filesystem::path& dir, ComputeDtype dtype,
                               std::shared_ptr<ExpertProvider> experts, std::shared_ptr<RoutingOverride> routing) {
  ModelOptions options;
  options.dtype = dtype;
  options.experts = std::move(experts);
  options.routing = std::move(routing);
  return MoeModel::load(dir, options);
}

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back((i * 37 + salt * 101 + 3) % 512);
  return out;
}

constexpr int kTraceTokens = 12;  // tokens per trace prompt

// A trace for `experts` experts, top-k: three layers, layer 0 all zero (as DeepSeek-V2-Lite's), two
// prompts of kTraceTokens tokens. Token t of layer L uses expert experts−1 (so it serves every token,
// which a random router does not do) and k−1 experts after (t + L + prompt) mod (experts − 1).
std::filesystem::path writeTrace(const testing::TempDir& tmp, int experts, int k) {
  const auto path = tmp / "trace.tsv";
  std::ofstream out(path);
  out << "# expert-activation trace: model=Synthetic top_k=" << k << " experts=" << experts << " layers=3; test\n";
  out << "prompt\tlayer";
  for (int e = 0; e < experts; ++e) out << "\te" << e;
  out << "\n";
  for (int p = 0; p < 2; ++p)
    for (int l = 0; l < 3; ++l) {
      std::vector<int> counts(static_cast<size_t>(experts), 0);
      if (l > 0)
        for (int t = 0; t < kTraceTokens; ++t) {
          ++counts[static_cast<size_t>(experts - 1)];
          for (int j = 0; j < k - 1; ++j) ++counts[static_cast<size_t>((t + l + p + j) % (experts - 1))];
        }
      out << p << "\t" << l;
      for (const int c : counts) out << "\t" << c;
      out << "\n";
    }
  return path;
}

std::map<int, int> rowAsRequests(std::span<const uint32_t> row) {
  std::map<int, int> out;
  for (size_t e = 0; e < row.size(); ++e)
    if (row[e] > 0) out[static_cast<int>(e)] = static_cast<int>(row[e]);
  return out;
}

bool sameBits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

void addFamilies() {
  QTest::addColumn<int>("family");
  for (const ModelFamily f : {ModelFamily::Mixtral, ModelFamily::Qwen2Moe, ModelFamily::Qwen3Moe, ModelFamily::Olmoe,
                              ModelFamily::DeepseekV2})
    QTest::newRow(familyName(f)) << static_cast<int>(f);
}

}  // namespace

class TestTraceRouting : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void requestsFollowTheTrace_data() { addFamilies(); }
  void requestsFollowTheTrace() {
    QFETCH(int, family);
    testing::TempDir tmp;
    // Three layers (deepseek_v2: the first dense): MoE layers wrap around the two active trace layers.
    const auto dir = makeModel(tmp, static_cast<ModelFamily>(family), {{"num_hidden_layers", 3}});
    const auto plain = std::make_shared<RecordingProvider>(makeResidentExperts(dir));
    const auto natural = load(dir, ComputeDtype::Float32, plain, nullptr);
    const ModelConfig& c = natural->config();
    const int moeLayers = c.numMoeLayers(), experts = c.numExperts, k = c.numExpertsPerTok;
    const auto trace = ActivationTrace::load(writeTrace(tmp, experts, k));
    QCOMPARE(trace->activeLayers(), (std::vector<int>{1, 2}));

    auto routing = std::make_shared<TraceRouting>(trace, moeLayers, experts, k, 7);
    routing->setPrompt(1);
    const auto recorder = std::make_shared<RecordingProvider>(makeResidentExperts(dir));
    const auto forced = load(dir, ComputeDtype::Float32, recorder, routing);

    // A prefill of the prompt's token count requests exactly the trace's rows.
    const auto prompt = tokens(kTraceTokens, 1);
    natural->forward({{natural->addSequence(), prompt}});
    const auto seq = forced->addSequence();
    forced->forward({{seq, prompt}});
    QCOMPARE(recorder->calls.size(), static_cast<size_t>(moeLayers));
    bool differs = false;
    for (int l = 0; l < moeLayers; ++l) {
      const auto& call = recorder->calls[static_cast<size_t>(l)];
      QCOMPARE(call.layer, l);
      QVERIFY(call.tokens == rowAsRequests(trace->counts(1, routing->traceLayer(l))));
      differs = differs || call.tokens != plain->calls[static_cast<size_t>(l)].tokens;
    }
    QVERIFY2(differs, "the model's own router chose exactly the trace's experts");

    // Decode steps and a batch request, per MoE layer, exactly what the same TraceRouting gives.
    TraceRouting reference(trace, moeLayers, experts, k, 7);
    reference.setPrompt(1);
    for (int l = 0; l < moeLayers; ++l) {
      std::vector<int64_t> scratch(static_cast<size_t>(kTraceTokens * k));
      reference.choose(l, kTraceTokens, k, scratch);
    }
    recorder->calls.clear();
    const auto other = forced->addSequence();
    forced->forward({{seq, {21}}});
    forced->forward({{seq, {22}}, {other, tokens(5, 2)}});
    QCOMPARE(recorder->calls.size(), static_cast<size_t>(2 * moeLayers));
    for (const int64_t n : {1, 6})
      for (int l = 0; l < moeLayers; ++l) {
        std::vector<int64_t> chosen(static_cast<size_t>(n * k));
        reference.choose(l, n, k, chosen);
        std::map<int, int> expected;
        for (const int64_t e : chosen) ++expected[static_cast<int>(e)];
        const auto& call = recorder->calls[static_cast<size_t>((n == 1 ? 0 : 1) * moeLayers + l)];
        QCOMPARE(call.layer, l);
        QVERIFY(call.tokens == expected);
      }
  }

  void replayingTheRouterGivesItsLogits_data() {
    QTest::addColumn<int>("family");
    QTest::addColumn<int>("dtype");
    QTest::addColumn<QString>("overrides");
    const int fp32 = static_cast<int>(ComputeDtype::Float32), bf16 = static_cast<int>(ComputeDtype::BFloat16);
    QTest::newRow("mixtral fp32") << static_cast<int>(ModelFamily::Mixtral) << fp32 << "{}";
    QTest::newRow("mixtral bf16") << static_cast<int>(ModelFamily::Mixtral) << bf16 << "{}";
    QTest::newRow("qwen2_moe fp32") << static_cast<int>(ModelFamily::Qwen2Moe) << fp32 << "{}";
    QTest::newRow("qwen2_moe bf16") << static_cast<int>(ModelFamily::Qwen2Moe) << bf16 << "{}";
    QTest::newRow("qwen3_moe fp32 (norm_topk_prob)") << static_cast<int>(ModelFamily::Qwen3Moe) << fp32 << "{}";
    QTest::newRow("qwen3_moe bf16 (norm_topk_prob)") << static_cast<int>(ModelFamily::Qwen3Moe) << bf16 << "{}";
    QTest::newRow("olmoe fp32") << static_cast<int>(ModelFamily::Olmoe) << fp32 << "{}";
    QTest::newRow("deepseek_v2 fp32 (scaled)")
        << static_cast<int>(ModelFamily::DeepseekV2) << fp32 << R"({"routed_scaling_factor": 2.5})";
    QTest::newRow("deepseek_v2 bf16 (scaled, normalised)")
        << static_cast<int>(ModelFamily::DeepseekV2) << bf16
        << R"({"routed_scaling_factor": 2.5, "norm_topk_prob": true})";
  }
  // With one token per forward, the provider's requests are that token's experts: feeding them back
  // through an override must reproduce the router's weights and hence its logits, bit for bit (the
  // normalising sums run over k = 2 weights, or none, so their order cannot matter).
  void replayingTheRouterGivesItsLogits() {
    QFETCH(int, family);
    QFETCH(int, dtype);
    QFETCH(QString, overrides);
    testing::TempDir tmp;
    const auto dir = makeModel(tmp, static_cast<ModelFamily>(family), json::parse(overrides.toStdString()));
    const auto input = tokens(6, 3);
    const auto recorder = std::make_shared<RecordingProvider>(makeResidentExperts(dir));
    const auto natural = load(dir, static_cast<ComputeDtype>(dtype), recorder, nullptr);
    const auto a = natural->addSequence();
    std::vector<std::vector<float>> expected;
    for (const int32_t token : input) expected.push_back(natural->forward({{a, {token}}})[0]);

    const auto script = std::make_shared<ScriptedRouting>();
    for (const auto& call : recorder->calls) {
      std::vector<int64_t> chosen;
      for (const auto& [expert, count] : call.tokens) {
        QCOMPARE(count, 1);
        chosen.push_back(expert);
      }
      script->script.push_back(chosen);
    }
    const auto forced = load(dir, static_cast<ComputeDtype>(dtype), nullptr, script);
    const auto b = forced->addSequence();
    std::vector<std::vector<float>> actual;
    for (const int32_t token : input) actual.push_back(forced->forward({{b, {token}}})[0]);
    QCOMPARE(script->calls.size(), recorder->calls.size());
    QVERIFY(sameBits(actual, expected));
  }

  void deterministicForASeed() {
    testing::TempDir tmp;
    const auto dir = makeModel(tmp, ModelFamily::Qwen2Moe);
    const auto trace = ActivationTrace::load(writeTrace(tmp, 8, 4));
    const auto runOnce = [&](uint64_t seed, std::vector<RecordingProvider::Call>& calls) {
      const auto recorder = std::make_shared<RecordingProvider>(makeResidentExperts(dir));
      const auto routing = std::make_shared<TraceRouting>(trace, 2, 8, 4, seed);
      const auto model = load(dir, ComputeDtype::Float32, recorder, routing);
      const auto a = model->addSequence(), b = model->addSequence();
      std::vector<std::vector<float>> out = model->forward({{a, tokens(7, 1)}, {b, tokens(4, 2)}}, true);
      for (int d = 0; d < 4; ++d)
        for (auto& logits : model->forward({{a, {30 + d}}, {b, {50 + d}}})) out.push_back(std::move(logits));
      calls = recorder->calls;
      return out;
    };
    std::vector<RecordingProvider::Call> calls1, calls2, calls3;
    const auto first = runOnce(5, calls1);
    const auto second = runOnce(5, calls2);
    const auto third = runOnce(6, calls3);
    QVERIFY(sameBits(first, second));
    QVERIFY(calls1 == calls2);
    QVERIFY(!sameBits(first, third));
    QVERIFY(calls1 != calls3);
  }

  // RequestTraceRouting's replay plan (the bench harness's prompt list): after setPlan the n-th
  // request seen replays plan prompt n mod their count with seed + n and the plan's continuation,
  // exactly as its own TraceRouting would; a request seen before keeps its router; a prompt outside
  // the trace or a continuation out of range is refused naming it, and the old plan stays.
  void perRequestRoutingFollowsAPlan() {
    testing::TempDir tmp;
    const auto trace = ActivationTrace::load(writeTrace(tmp, 8, 2));
    RequestTraceRouting routing(trace, 2, 8, 2, 40);
    routing.setSegments({{9, 1}});  // seen before the plan: request 0 of the default rule
    routing.setPlan({{1, 1, 0}, 16});
    const std::vector<int> planned = {1, 1, 0, 1};
    std::vector<std::unique_ptr<TraceRouting>> alone;
    for (int n = 0; n < 4; ++n) {
      alone.push_back(std::make_unique<TraceRouting>(trace, 2, 8, 2, 40 + static_cast<uint64_t>(n)));
      alone.back()->setContinuation(16);
      alone.back()->setPrompt(planned[static_cast<size_t>(n)]);
    }
    for (int round = 0; round < 3; ++round) {  // past the prompt's counts: the continuation draws
      std::vector<RequestRouting::Segment> segments;
      for (uint64_t r = 0; r < 4; ++r) segments.push_back({100 + r, round == 0 ? kTraceTokens : 1});
      routing.setSegments(segments);
      const int64_t per = segments.front().tokens, tokens = per * 4;
      for (int layer = 0; layer < 2; ++layer) {
        std::vector<int64_t> out(static_cast<size_t>(tokens * 2));
        routing.choose(layer, tokens, 2, out);
        for (size_t r = 0; r < 4; ++r) {
          std::vector<int64_t> expected(static_cast<size_t>(per * 2));
          alone[r]->choose(layer, per, 2, expected);
          QVERIFY(std::equal(expected.begin(), expected.end(), out.begin() + static_cast<std::ptrdiff_t>(r * expected.size())));
        }
      }
    }
    for (uint64_t r = 0; r < 4; ++r) QCOMPARE(routing.promptOf(100 + r), planned[r]);
    QCOMPARE(routing.promptOf(9), 0);
    QCOMPARE(routing.requestsSeen(), uint64_t{5});
    try {
      routing.setPlan({{0, 2}, 0});
      QFAIL("a plan naming prompt 2 of a 2-prompt trace was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("prompt 2 (entry 1") != std::string::npos, e.what());
    }
    try {
      routing.setPlan({{0}, -1});
      QFAIL("a negative continuation was accepted");
    } catch (const Error&) {
    }
    routing.setSegments({{200, 1}});  // the old plan goes on: request 4 of it
    QCOMPARE(routing.promptOf(200), 1);
  }

  // RequestTraceRouting (serving): the n-th request seen replays prompt n mod prompts with seed + n,
  // each request's share of a batched forward is exactly what its own TraceRouting draws alone, a
  // forward whose tokens differ from the announced segments is refused, and release forgets.
  void perRequestRoutingSplitsTheForward() {
    testing::TempDir tmp;
    const auto trace = ActivationTrace::load(writeTrace(tmp, 8, 2));
    RequestTraceRouting routing(trace, 2, 8, 2, 40);
    std::vector<std::unique_ptr<TraceRouting>> alone;
    for (int n = 0; n < 3; ++n) {
      alone.push_back(std::make_unique<TraceRouting>(trace, 2, 8, 2, 40 + static_cast<uint64_t>(n)));
      alone.back()->setPrompt(n % 2);
    }
    const std::vector<std::vector<RequestRouting::Segment>> forwards = {
        {{70, 5}, {71, 3}}, {{71, 1}, {70, 1}, {72, 4}}, {{72, 1}, {70, 1}}};
    const std::map<uint64_t, int> ordinal = {{70, 0}, {71, 1}, {72, 2}};
    for (const auto& segments : forwards) {
      routing.setSegments(segments);
      int64_t tokens = 0;
      for (const auto& s : segments) tokens += s.tokens;
      for (int layer = 0; layer < 2; ++layer) {
        std::vector<int64_t> out(static_cast<size_t>(tokens * 2));
        routing.choose(layer, tokens, 2, out);
        size_t offset = 0;
        for (const auto& s : segments) {
          std::vector<int64_t> expected(static_cast<size_t>(s.tokens * 2));
          alone[static_cast<size_t>(ordinal.at(s.request))]->choose(layer, s.tokens, 2, expected);
          QVERIFY(std::equal(expected.begin(), expected.end(), out.begin() + static_cast<std::ptrdiff_t>(offset)));
          offset += expected.size();
        }
      }
    }
    QCOMPARE(routing.promptOf(70), 0);
    QCOMPARE(routing.promptOf(71), 1);
    QCOMPARE(routing.promptOf(72), 0);
    QCOMPARE(routing.requestsSeen(), uint64_t{3});
    routing.release(71);
    QCOMPARE(routing.promptOf(71), -1);

    routing.setSegments({{70, 2}});
    std::vector<int64_t> out(6);
    try {
      routing.choose(0, 3, 2, out);
      QFAIL("a forward of 3 tokens after segments of 2 was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("announced 2 tokens") != std::string::npos, e.what());
    }
  }

  void badOverrideIsReported_data() {
    QTest::addColumn<QString>("experts");
    QTest::addColumn<QString>("fragment");
    QTest::newRow("repeated") << "3,3" << "token 0 expert 3 in slot 1";
    QTest::newRow("descending") << "5,2" << "token 0 expert 2 in slot 1";
    QTest::newRow("out of range") << "1,8" << "token 0 expert 8 in slot 1";
    QTest::newRow("negative") << "-1,2" << "token 0 expert -1 in slot 0";
  }
  void badOverrideIsReported() {
    QFETCH(QString, experts);
    QFETCH(QString, fragment);
    testing::TempDir tmp;
    const auto dir = makeModel(tmp, ModelFamily::Olmoe);  // 8 experts, top-2
    const auto script = std::make_shared<ScriptedRouting>();
    std::vector<int64_t> chosen;
    for (const QString& e : experts.split(',')) chosen.push_back(e.toLongLong());
    script->script.push_back(chosen);
    const auto model = load(dir, ComputeDtype::Float32, nullptr, script);
    const auto seq = model->addSequence();
    ZIPMOE_EXPECT_ERROR(model->forward({{seq, {5}}}), "MoE layer 0", "routing override", fragment.toStdString(),
                        "2 distinct experts in 0 .. 7, ascending");
    QCOMPARE(model->sequenceLength(seq), int64_t{0});
  }
};

QTEST_APPLESS_MAIN(TestTraceRouting)
#include "test_trace_routing.moc"
