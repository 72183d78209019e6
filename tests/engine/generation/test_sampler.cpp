// Tests of sampler.h: validation, greedy decoding, determinism, and the distribution each warper
// leaves (temperature, top-k, top-p, min-p) and the repetition penalty, against transformers' rules.
//
// Statistical checks draw N samples with a fixed seed and require every token's frequency to be within
// 5 standard deviations (sqrt(p(1-p)/N)) of its probability: a correct sampler fails that with
// probability < 1e-5 per token for a random seed, and with the fixed seed the test is deterministic.
// Support checks draw many samples and compare the set of ids seen with the set that must survive.
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/generation/sampler.h"

using namespace zipmoe;

namespace {

SamplingParams params(double temperature, int topK = 0, double topP = 1.0, double minP = 0.0, uint64_t seed = 7) {
  SamplingParams p;
  p.temperature = temperature;
  p.topK = topK;
  p.topP = topP;
  p.minP = minP;
  p.seed = seed;
  return p;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double mx = -INFINITY;
  for (float x : logits) mx = std::max(mx, static_cast<double>(x) / temperature);
  std::vector<double> p;
  double total = 0;
  for (float x : logits) total += std::exp(static_cast<double>(x) / temperature - mx);
  for (float x : logits) p.push_back(std::exp(static_cast<double>(x) / temperature - mx) / total);
  return p;
}

std::map<int32_t, int> draw(Sampler& s, const std::vector<float>& logits, int n, std::span<const int32_t> history = {}) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits, history)];
  return counts;
}

std::set<int32_t> support(const std::map<int32_t, int>& counts) {
  std::set<int32_t> ids;
  for (const auto& [id, n] : counts) ids.insert(id);
  return ids;
}

void expectFrequencies(const std::map<int32_t, int>& counts, const std::vector<double>& p, int n) {
  for (size_t i = 0; i < p.size(); ++i) {
    const auto it = counts.find(static_cast<int32_t>(i));
    const double freq = it == counts.end() ? 0.0 : static_cast<double>(it->second) / n;
    const double sigma = std::sqrt(p[i] * (1 - p[i]) / n);
    QVERIFY2(std::fabs(freq - p[i]) <= 5 * sigma + 1e-12,
             qPrintable(QString("token %1: frequency %2, probability %3, 5 sigma %4").arg(i).arg(freq).arg(p[i]).arg(5 * sigma)));
  }
}

// Logits whose softmax (T = 1) is exactly the given probabilities.
std::vector<float> logitsOf(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

}  // namespace

class TestSampler : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void validateNamesTheField() {
    validate(SamplingParams{});
    const auto with = [](auto change) {
      SamplingParams p;
      change(p);
      return p;
    };
    ZIPMOE_EXPECT_ERROR(validate(with([](SamplingParams& p) { p.temperature = -0.1; })), "temperature");
    ZIPMOE_EXPECT_ERROR(validate(with([](SamplingParams& p) { p.temperature = NAN; })), "temperature");
    ZIPMOE_EXPECT_ERROR(validate(with([](SamplingParams& p) { p.topP = 0.0; })), "top_p");
    ZIPMOE_EXPECT_ERROR(validate(with([](SamplingParams& p) { p.topP = 1.5; })), "top_p", "1.5");
    ZIPMOE_EXPECT_ERROR(validate(with([](SamplingParams& p) { p.minP = 1.0; })), "min_p");
    ZIPMOE_EXPECT_ERROR(validate(with([](SamplingParams& p) { p.minP = -0.5; })), "min_p");
    ZIPMOE_EXPECT_ERROR(validate(with([](SamplingParams& p) { p.topK = -1; })), "top_k");
    ZIPMOE_EXPECT_ERROR(validate(with([](SamplingParams& p) { p.repetitionPenalty = 0.0; })), "repetition_penalty");
    ZIPMOE_EXPECT_ERROR(validate(with([](SamplingParams& p) { p.maxTokens = 0; })), "max_tokens");
    ZIPMOE_EXPECT_ERROR(validate(with([](SamplingParams& p) { p.stopStrings = {"ok", ""}; })), "stop string 1");
    ZIPMOE_EXPECT_ERROR(Sampler(with([](SamplingParams& p) { p.topK = -3; })), "top_k", "-3");
    // Boundaries that are allowed.
    validate(with([](SamplingParams& p) { p.temperature = 0; p.topP = 1.0; p.minP = 0.0; p.topK = 0; p.maxTokens = 1; }));
  }

  void greedyIsArgmaxLowestIdOnTies() {
    Sampler s(params(0.0));
    QCOMPARE(s.sample(std::vector<float>{0.1f, 2.0f, -1.0f, 1.9f}, {}), 1);
    QCOMPARE(s.sample(std::vector<float>{1.0f, 3.0f, 3.0f, 3.0f}, {}), 1);
    QCOMPARE(s.sample(std::vector<float>{-INFINITY, -INFINITY, -5.0f}, {}), 2);
    QCOMPARE(s.sample(std::vector<float>{NAN, 0.5f, 0.5f}, {}), 1);  // NaN never wins
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> logits(1000);
      for (float& x : logits) x = normal(rng);
      const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
      QCOMPARE(s.sample(logits, {}), static_cast<int32_t>(best));
    }
  }

  void sameSeedSameSequence() {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    std::vector<float> logits(5000);
    for (float& x : logits) x = normal(rng);
    for (const auto& p : {params(1.0, 0, 1.0, 0.0, 42), params(0.7, 50, 0.9, 0.05, 42)}) {
      Sampler a(p), b(p);
      std::vector<int32_t> x, y;
      for (int i = 0; i < 200; ++i) {
        x.push_back(a.sample(logits, x));
        y.push_back(b.sample(logits, y));
      }
      QCOMPARE(x, y);
      SamplingParams other = p;
      other.seed = 43;
      Sampler c(other);
      std::vector<int32_t> z;
      for (int i = 0; i < 200; ++i) z.push_back(c.sample(logits, z));
      QVERIFY(z != x);
    }
  }

  void topKOneIsGreedy() {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    Sampler greedy(params(0.0)), topOne(params(1.3, 1));
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> logits(300);
      for (float& x : logits) x = normal(rng);
      QCOMPARE(topOne.sample(logits, {}), greedy.sample(logits, {}));
    }
  }

  void frequenciesFollowSoftmaxOverTemperature() {
    const std::vector<float> logits{1.0f, 0.5f, 0.0f, -1.0f, 2.0f, -3.0f};
    const int n = 200000;
    for (double t : {1.0, 0.7, 2.5}) {
      Sampler s(params(t, 0, 1.0, 0.0, 1234));
      expectFrequencies(draw(s, logits, n), softmax(logits, t), n);
    }
  }

  void topKKeepsTheKLargestAndTies() {
    const std::vector<float> logits{0.0f, 1.0f, 3.0f, 2.0f, -1.0f};
    Sampler s(params(1.0, 2));
    const auto counts = draw(s, logits, 20000);
    QCOMPARE(support(counts), (std::set<int32_t>{2, 3}));
    // The renormalised probabilities of the two kept tokens.
    expectFrequencies(counts, {0, 0, 1 / (1 + std::exp(-1.0)), std::exp(-1.0) / (1 + std::exp(-1.0)), 0}, 20000);
    // Tokens tied with the k-th logit survive, as with transformers' threshold on torch.topk.
    Sampler tie(params(1.0, 1));
    QCOMPARE(support(draw(tie, std::vector<float>{1.0f, 3.0f, 3.0f, 0.0f}, 2000)), (std::set<int32_t>{1, 2}));
  }

  void topPKeepsTheSmallestSetReachingP() {
    const auto logits = logitsOf({0.15, 0.5, 0.05, 0.3});  // sorted: 1 (0.5), 3 (0.3), 0 (0.15), 2 (0.05)
    const struct {
      double topP;
      std::set<int32_t> kept;
    } cases[] = {{0.4, {1}}, {0.5, {1, 3}} /* 0.5 may round below 0.5: either way 1 is in */, {0.75, {1, 3}},
                 {0.81, {0, 1, 3}}, {0.96, {0, 1, 2, 3}}, {1.0, {0, 1, 2, 3}}};
    for (const auto& c : cases) {
      Sampler s(params(1.0, 0, c.topP));
      const auto seen = support(draw(s, logits, 20000));
      if (c.topP == 0.5) {
        QVERIFY(seen.count(1) && !seen.count(0) && !seen.count(2));
        continue;
      }
      QVERIFY2(seen == c.kept, qPrintable(QString("top_p %1").arg(c.topP)));
    }
    // Renormalised over the kept set.
    Sampler s(params(1.0, 0, 0.75, 0.0, 99));
    expectFrequencies(draw(s, logits, 50000), {0, 0.5 / 0.8, 0, 0.3 / 0.8}, 50000);
    // Always at least one token, even when the top token alone exceeds top_p.
    Sampler tiny(params(1.0, 0, 0.01));
    QCOMPARE(support(draw(tiny, logits, 1000)), (std::set<int32_t>{1}));
  }

  void minPIsRelativeToTheTopProbability() {
    const auto logits = logitsOf({0.15, 0.5, 0.05, 0.3});
    const struct {
      double minP;
      std::set<int32_t> kept;
    } cases[] = {{0.05, {0, 1, 2, 3}}, {0.2, {0, 1, 3}}, {0.35, {1, 3}}, {0.7, {1}}, {0.99, {1}}};
    for (const auto& c : cases) {
      Sampler s(params(1.0, 0, 1.0, c.minP));
      QVERIFY2(support(draw(s, logits, 20000)) == c.kept, qPrintable(QString("min_p %1").arg(c.minP)));
    }
    // Applied after top-p (transformers' order): top_p 0.81 keeps {1,3,0}; min_p 0.35 then drops 0.
    Sampler both(params(1.0, 0, 0.81, 0.35));
    QCOMPARE(support(draw(both, logits, 20000)), (std::set<int32_t>{1, 3}));
    // Temperature first: at T = 0.5 the probabilities sharpen (0.3/0.5)^2 = 0.36 ≥ 0.35 still keeps 3,
    // while 0.15 → (0.3)^2 = 0.09 < 0.2 drops 0.
    Sampler sharp(params(0.5, 0, 1.0, 0.2));
    QCOMPARE(support(draw(sharp, logits, 20000)), (std::set<int32_t>{1, 3}));
  }

  void repetitionPenaltyChangesExactlyThePenalisedLogits() {
    const std::vector<float> original{2.0f, -1.0f, 0.5f, -0.25f, 3.0f, 0.0f};
    std::vector<float> row = original;
    const std::vector<int32_t> history{0, 1, 1, 1, 5, 99, -3};  // duplicates once; out-of-range ignored
    applyRepetitionPenalty(row, history, 1.3);
    QCOMPARE(row[0], 2.0f / 1.3f);
    QCOMPARE(row[1], -1.0f * 1.3f);
    QCOMPARE(row[5], 0.0f);
    for (size_t i : {size_t{2}, size_t{3}, size_t{4}}) QCOMPARE(row[i], original[i]);  // bit-identical
    // A penalty below 1 rewards instead.
    row = original;
    applyRepetitionPenalty(row, std::vector<int32_t>{2, 3}, 0.5);
    QCOMPARE(row[2], 1.0f);
    QCOMPARE(row[3], -0.125f);

    // Through the sampler: greedy sees the penalised logits (applied once per distinct id).
    SamplingParams p = params(0.0);
    p.repetitionPenalty = 1.2;
    Sampler s(p);
    QCOMPARE(s.sample(std::vector<float>{2.0f, 1.5f}, std::vector<int32_t>{0, 0, 0}), 0);  // 2/1.2 > 1.5
    QCOMPARE(s.sample(std::vector<float>{2.0f, 1.8f}, std::vector<int32_t>{0}), 1);        // 2/1.2 < 1.8
    QCOMPARE(s.sample(std::vector<float>{-1.0f, -1.1f}, std::vector<int32_t>{0}), 1);      // -1.2 < -1.1
    // And sampling follows softmax of the penalised row.
    p.temperature = 1.0;
    Sampler t(p);
    std::vector<float> penalised = original;
    applyRepetitionPenalty(penalised, history, 1.2);
    const int n = 100000;
    expectFrequencies(draw(t, original, n, history), softmax(penalised, 1.0), n);
  }

  void largeVocabularyWithAllWarpers() {
    std::mt19937 rng(17);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(150000);
    for (float& x : logits) x = normal(rng);
    SamplingParams p = params(0.8, 40, 0.9, 0.01);
    Sampler s(p);
    std::vector<int32_t> order(logits.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::partial_sort(order.begin(), order.begin() + 40, order.end(),
                      [&](int32_t a, int32_t b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
    const std::set<int32_t> top40(order.begin(), order.begin() + 40);
    for (int i = 0; i < 300; ++i) QVERIFY(top40.count(s.sample(logits, {})));
  }
};

QTEST_APPLESS_MAIN(TestSampler)
#include "test_sampler.moc"
