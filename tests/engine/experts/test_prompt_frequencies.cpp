// What a prompt's tokens give the planner and the dispatch (RuntimeOptions::planFromPrompt): the
// cache counts tokens beside steps and ranks count ties by tokens; a layer with fewer than 16 steps
// plans from its tokens once they number 16 (per token, Σ f = k), from its steps' counts once it
// has 16 steps, and from the prior before either; LeastFrequent eviction breaks count ties by tokens
// too; stored statistics (no tokens) never plan from a prompt, but blend in the session's tokens once
// 16 went through a layer; what a layer has seen may be smoothed toward uniform before it is planned
// from; token counts that do not match the experts are an error naming both sizes.
#include <QtTest>

#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

#include "cache/expert_cache.h"
#include "experts/planner_inputs.h"
#include "zipmoe/base/error.h"
#include "zipmoe/plan/pool_planner.h"
#include "zipmoe/experts/runtime_options.h"

using namespace zipmoe;
using zipmoe::cache::ExpertCache;
using zipmoe::experts::FrequencySource;

namespace {

constexpr int kExperts = 8, kTopK = 2;

double sum(const std::vector<double>& f) { return std::accumulate(f.begin(), f.end(), 0.0); }

// The planner's inputs for `layers` layers of this file's experts, planned from prompts, with the
// pools' sizes and costs of a small Qwen-like expert.
experts::PoolPlanInputs planInputs(int layers) {
  experts::PoolPlanInputs in;
  in.layers = layers;
  in.experts = kExperts;
  in.topK = kTopK;
  in.fromPrompt = true;
  in.bytesPerExpert = {3e6, 2e6, 1.5e6, 0.5e6};
  in.cost.u = 1.4e-3;
  in.cost.v = 0.3e-3;
  in.cost.c = 0.25e-3;
  in.cost.recover = 0.5e-3;
  in.cost.threads = 2;
  in.cost.shards = 4;
  in.cost.tensorsPerExpert = 3;
  return in;
}

}  // namespace

class TestPromptFrequencies : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void ranksBreakCountTiesByTokens() {
    ExpertCache cache(1, kExperts, EvictionPolicy::LeastFrequent, false);
    // One prefill step: every expert once, expert 6 with the most tokens, then 3.
    std::vector<int> ids, tokens;
    for (int e = 0; e < kExperts; ++e) {
      ids.push_back(e);
      tokens.push_back(e == 6 ? 9 : e == 3 ? 5 : 1);
    }
    cache.recordActivations(0, ids, tokens);
    QCOMPARE(cache.rank(0, 6), 0);
    QCOMPARE(cache.rank(0, 3), 1);
    QCOMPARE(cache.rank(0, 0), 2);  // the rest by id
    QCOMPARE(cache.rank(0, 7), 7);
    QCOMPARE(cache.tokens(0, 6), uint64_t{9});
    // A higher count still ranks first: expert 1 used in two more steps of one token each.
    cache.recordActivations(0, {1});
    cache.recordActivations(0, {1});
    QCOMPARE(cache.rank(0, 1), 0);
    QCOMPARE(cache.rank(0, 6), 1);
    QCOMPARE(cache.tokens(0, 1), uint64_t{3});
    QCOMPARE(cache.steps(0), uint64_t{3});
  }

  // LeastFrequent eviction orders by the same usage: at an equal count the member with fewer tokens
  // goes, and a newcomer may displace only a member used less than itself.
  void evictionBreaksCountTiesByTokens() {
    ExpertCache cache(1, kExperts, EvictionPolicy::LeastFrequent, false);
    cache.recordActivations(0, {0, 1, 2}, {3, 1, 2});
    cache.setCapacity(0, 0, 2 * 4096, 2);
    for (int e : {0, 1}) {
      std::vector<cache::TensorParts> parts(1);
      parts[0].full = io::AlignedBuffer(4096);
      cache.insert(0, e, 0, std::move(parts), 1);
    }
    QVERIFY(!cache.makeRoom(0, 0, 4096, cache::Usage{1, 1}, nullptr));  // expert 1's own usage: no
    QVERIFY(cache.makeRoom(0, 0, 4096, cache.usage(0, 2), nullptr));   // 2 tokens beat 1
    QCOMPARE(cache.entry(0, 1).pool, cache::kNoPool);
    QCOMPARE(cache.entry(0, 0).pool, 0);
  }

  void tokenCountsMustMatchTheExperts() {
    ExpertCache cache(1, kExperts, EvictionPolicy::LeastFrequent, false);
    try {
      cache.recordActivations(0, {1, 2}, {4});
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains("1 token counts for 2 experts"), e.what());
    }
    QCOMPARE(cache.steps(0), uint64_t{0});  // nothing counted
  }

  void storedStatisticsCarryNoTokens() {
    ExpertCache cache(2, kExperts, EvictionPolicy::LeastFrequent, false);
    cache.recordActivations(0, {0, 1}, {30, 10});
    ActivationCounts stored = cache.activationCounts();
    QCOMPARE(stored.tokens.size(), stored.counts.size());
    stored.tokens.clear();  // as the app's database keeps them
    cache.setActivationCounts(stored);
    QCOMPARE(cache.tokens(0, 0), uint64_t{0});
    QCOMPARE(experts::frequencySource(cache.activationCounts(), 0, kExperts, kTopK, true), FrequencySource::Prior);
  }

  void aLayerPlansFromItsPromptUntilItHasHistory() {
    ExpertCache cache(2, kExperts, EvictionPolicy::LeastFrequent, false);
    // Layer 0: a prompt of 16 tokens (32 routed), expert 2 in all of them, expert 5 in 12, the rest 4 between them.
    cache.recordActivations(0, {2, 5, 0, 1}, {16, 12, 2, 2});
    // Layer 1: a prompt of 15 tokens only.
    cache.recordActivations(1, {2, 5}, {15, 15});
    const ActivationCounts counts = cache.activationCounts();
    QCOMPARE(experts::frequencySource(counts, 0, kExperts, kTopK, true), FrequencySource::Prompt);
    QCOMPARE(experts::frequencySource(counts, 0, kExperts, kTopK, false), FrequencySource::Prior);
    QCOMPARE(experts::frequencySource(counts, 1, kExperts, kTopK, true), FrequencySource::Prior);

    // The counts alone (no smoothing toward uniform):
    const std::vector<double> f = experts::layerFrequency(counts, 0, kExperts, kTopK, true, experts::kSessionPriorTokens, 0);
    QCOMPARE(f.size(), static_cast<size_t>(kExperts));
    QVERIFY(std::abs(sum(f) - kTopK) < 1e-9);
    QCOMPARE(f[0], 1.0);   // in every token
    QCOMPARE(f[1], 0.75);  // 12 of 16
    QCOMPARE(f[2], 0.125);
    QCOMPARE(f[3], 0.125);
    QCOMPARE(f[7], 0.0);
    QCOMPARE(experts::layerFrequency(counts, 1, kExperts, kTopK, true), plan::priorRankFrequency(kExperts, kTopK));
    QCOMPARE(experts::layerFrequency(counts, 0, kExperts, kTopK, false), plan::priorRankFrequency(kExperts, kTopK));

    // 16 steps of one token each: the steps' counts take over (expert 7 in every step), blended
    // with the session's tokens when planning from prompts; alone without.
    for (int s = 0; s < 15; ++s) cache.recordActivations(0, {7, s % 2 ? 3 : 4});
    const ActivationCounts later = cache.activationCounts();
    QCOMPARE(experts::frequencySource(later, 0, kExperts, kTopK, true), FrequencySource::Session);
    QCOMPARE(experts::frequencySource(later, 0, kExperts, kTopK, false), FrequencySource::History);
    const std::vector<double> g = experts::layerFrequency(later, 0, kExperts, kTopK, false);
    QCOMPARE(g, experts::layerFrequencies(later, 2, kExperts, kTopK, false)[0]);
    QVERIFY(std::abs(sum(g) - kTopK) < 1e-9);
    QVERIFY(std::abs(sum(experts::layerFrequency(later, 0, kExperts, kTopK, true)) - kTopK) < 1e-9);
  }

  // A layer with history (stored statistics carry no tokens) blends in the session's tokens once 16
  // or more went through it: w = n / (n + kSessionPriorTokens) for n tokens. Ranks, LeastFrequent
  // eviction and the planner's frequencies follow the blend, so a chat's own experts outrank those
  // the history counts more often.
  // The session is a window: past 2 × windowTokens tokens through a layer, its token counts halve,
  // so a later chat's experts overtake an earlier one's; without the window they stay level.
  void theSessionIsAWindowOfRecentTokens() {
    QCOMPARE(experts::sessionBlend(kTopK, true).windowTokens, experts::kSessionWindowTokens);
    for (uint64_t window : {uint64_t{16}, uint64_t{0}}) {  // 16: the blend's minimum stays met
      ExpertCache cache(1, kExperts, EvictionPolicy::LeastFrequent, false);
      cache::SessionBlend blend = experts::sessionBlend(kTopK, true);
      blend.windowTokens = window;
      cache.setSessionBlend(blend);
      // Two chats of 40 one-token steps each: experts 0 and 1, then 2 and 3.
      for (int chat = 0; chat < 2; ++chat)
        for (int step = 0; step < 40; ++step) {
          cache.recordActivations(0, {2 * chat, 2 * chat + 1});
          if (window > 0) QVERIFY(cache.tokenSum(0) <= 2 * window * kTopK);
        }
      QCOMPARE(cache.count(0, 0), cache.count(0, 2));  // the counts keep every step
      if (window > 0) {
        QVERIFY(cache.tokens(0, 2) > 4 * cache.tokens(0, 0));
        QCOMPARE(cache.rank(0, 2), 0);
        QCOMPARE(cache.rank(0, 3), 1);
        QVERIFY(cache.lessUsed(0, cache.usage(0, 0), 0, cache.usage(0, 2)));
        const std::vector<double> f = experts::layerFrequency(cache.activationCounts(), 0, kExperts, kTopK, true);
        QVERIFY(cache.blendWeight(0) > 0);
        // The recent chat's pair first, then the earlier one's, then the rest.
        QVERIFY(std::abs(f[0] - f[1]) < 1e-12 && f[1] > f[2] && f[3] > f[4]);
      } else {
        QCOMPARE(cache.tokens(0, 2), cache.tokens(0, 0));
        QCOMPARE(cache.rank(0, 0), 0);  // level: the lower id first
      }
    }
  }

  void aHistoryBlendsInTheSessionsTokens() {
    ExpertCache cache(1, kExperts, EvictionPolicy::LeastFrequent, false);
    const cache::SessionBlend blend = experts::sessionBlend(kTopK, true);
    QCOMPARE(experts::sessionBlend(kTopK, false).topK, 0);  // off without prompts
    cache.setSessionBlend(blend);
    // Stored history: 100 steps, experts 0 and 1 in every one.
    ActivationCounts history{1, kExperts, std::vector<uint64_t>(kExperts, 0), {100}, {}};
    history.counts[0] = history.counts[1] = 100;
    cache.setActivationCounts(history);
    QCOMPARE(cache.blendWeight(0), 0.0);
    QCOMPARE(experts::frequencySource(cache.activationCounts(), 0, kExperts, kTopK, true), FrequencySource::History);
    QCOMPARE(cache.rank(0, 0), 0);
    // A 15-token prompt: not yet (30 routed of the 32 that 16 tokens route).
    cache.recordActivations(0, {5, 6}, {15, 15});
    QCOMPARE(cache.blendWeight(0), 0.0);
    QCOMPARE(cache.rank(0, 5), 2);
    // One more token: 16 tokens, w = 16 / (16 + kSessionPriorTokens).
    cache.recordActivations(0, {5, 7}, {1, 1});
    const double w = 16 / (16 + experts::kSessionPriorTokens), steps = 102, tokens = 32;
    QCOMPARE(cache.blendWeight(0), w);
    const ActivationCounts counts = cache.activationCounts();
    QCOMPARE(experts::frequencySource(counts, 0, kExperts, kTopK, true), FrequencySource::Session);
    QCOMPARE(experts::frequencySource(counts, 0, kExperts, kTopK, false), FrequencySource::History);
    // Each expert's blended usage, by the formula; the cache ranks by it (ties: tokens, then id).
    const auto value = [&](uint64_t count, uint64_t toks) {
      return w * static_cast<double>(toks) * kTopK / tokens + (1 - w) * static_cast<double>(count) / steps;
    };
    const std::vector<double> v = {value(100, 0), value(100, 0), 0, 0, 0, value(2, 16), value(1, 15), value(1, 1)};
    for (int e = 0; e < kExperts; ++e) {
      int expected = 0;
      for (int o = 0; o < kExperts; ++o)
        expected += v[static_cast<size_t>(o)] > v[static_cast<size_t>(e)] ||
                    (v[static_cast<size_t>(o)] == v[static_cast<size_t>(e)] &&
                     (cache.tokens(0, o) > cache.tokens(0, e) || (cache.tokens(0, o) == cache.tokens(0, e) && o < e)));
      QCOMPARE(cache.rank(0, e), expected);
    }
    QCOMPARE(cache.rank(0, 5), 0);  // the session's favourite leads
    const std::vector<double> f = experts::layerFrequency(counts, 0, kExperts, kTopK, true, experts::kSessionPriorTokens, 0);
    QVERIFY(std::abs(sum(f) - kTopK) < 1e-9);
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    QVERIFY(std::abs(f[0] / f[1] - sorted[0] / sorted[1]) < 1e-9);  // normalised together: ratios stay
    // A heavier history (RuntimeOptions::sessionPriorTokens): w = 16 / (16 + 32) = 1/3, the same
    // formula in the blend and in the planner's frequencies, and the history's two experts lead.
    const cache::SessionBlend heavy = experts::sessionBlend(kTopK, true, 32);
    QCOMPARE(heavy.weight(102, 32), 16.0 / 48.0);
    const std::vector<double> fh = experts::layerFrequency(counts, 0, kExperts, kTopK, true, 32, 0);
    const double wh = 16.0 / 48.0;
    const auto heavyValue = [&](uint64_t count, uint64_t toks) {
      return wh * static_cast<double>(toks) * kTopK / tokens + (1 - wh) * static_cast<double>(count) / steps;
    };
    QVERIFY(heavyValue(100, 0) > heavyValue(2, 16));
    QVERIFY(std::abs(fh[0] / fh[2] - heavyValue(100, 0) / heavyValue(2, 16)) < 1e-9);
    QVERIFY(fh != f);
    // The history alone ranks the session's favourite below experts 0 and 1.
    ExpertCache alone(1, kExperts, EvictionPolicy::LeastFrequent, false);
    alone.setActivationCounts(history);
    alone.recordActivations(0, {5, 6}, {15, 15});
    alone.recordActivations(0, {5, 7}, {1, 1});
    QCOMPARE(alone.rank(0, 5), 2);

    // LeastFrequent by the blend: a pool holding experts 1 and 6 admits expert 5 in place of the
    // one blended lower, and not expert 7 (blended below both).
    const int lower = v[1] < v[6] ? 1 : 6, higher = lower == 1 ? 6 : 1;
    cache.setCapacity(0, 0, 2 * 4096, 2);
    for (int e : {1, 6}) {
      std::vector<cache::TensorParts> parts(1);
      parts[0].full = io::AlignedBuffer(4096);
      cache.insert(0, e, 0, std::move(parts), 1);
    }
    QVERIFY(!cache.makeRoom(0, 0, 4096, cache.usage(0, 7), nullptr));
    QVERIFY(cache.makeRoom(0, 0, 4096, cache.usage(0, 5), nullptr));
    QCOMPARE(cache.entry(0, lower).pool, cache::kNoPool);
    QCOMPARE(cache.entry(0, higher).pool, 0);
  }

  // What a layer has seen is smoothed toward uniform by RuntimeOptions::smoothingTokens (τ; off by
  // default, the fitted 16 here) before it is planned from: f ← (n·f + τ·k/N) / (n + τ) against n prompt tokens, history steps, or the
  // larger of the two for a session blend. Order and Σ f = k stay; an expert nothing routed to yet
  // gets τ·k/N / (n + τ), so that a plan covers it; the prior is not smoothed; τ = 0 is the counts.
  void whatALayerHasSeenIsSmoothedTowardUniform() {
    ExpertCache cache(2, kExperts, EvictionPolicy::LeastFrequent, false);
    cache.recordActivations(0, {2, 5, 0, 1}, {16, 12, 2, 2});  // the 16-token prompt of the test above
    const ActivationCounts counts = cache.activationCounts();
    const std::vector<double> raw = experts::layerFrequency(counts, 0, kExperts, kTopK, true, 4, 0);
    QCOMPARE(experts::layerFrequency(counts, 0, kExperts, kTopK, true), raw);  // off by default
    QCOMPARE(RuntimeOptions{}.smoothingTokens, experts::kSmoothingTokens);
    QCOMPARE(experts::kSmoothingTokens, 0.0);
    const double tau = experts::kFittedSmoothingTokens;
    QCOMPARE(tau, 16.0);
    const std::vector<double> f = experts::layerFrequency(counts, 0, kExperts, kTopK, true, 4, tau);
    QVERIFY(std::abs(sum(f) - kTopK) < 1e-9);
    const double even = 16.0 * kTopK / kExperts;
    for (size_t r = 0; r < f.size(); ++r) {
      QVERIFY2(std::abs(f[r] - (16 * raw[r] + even) / 32) < 1e-12, qPrintable(QString("rank %1").arg(r)));
      if (r > 0) QVERIFY(f[r] <= f[r - 1]);
    }
    QCOMPARE(raw[7], 0.0);
    QVERIFY(std::abs(f[7] - 0.125) < 1e-12);  // 16 · 2/8 / 32
    QVERIFY(std::abs(f[0] - 0.625) < 1e-12);  // (16 · 1 + 4) / 32
    QCOMPARE(experts::layerFrequency(counts, 0, kExperts, kTopK, true, 4, 1e6)[7] > 0.24, true);  // nearly even
    QCOMPARE(experts::layerFrequency(counts, 1, kExperts, kTopK, true, 4, tau), plan::priorRankFrequency(kExperts, kTopK));
    QCOMPARE(experts::smoothTowardUniform(raw, 16, 0), raw);

    // A long history: 1600 steps, experts 0 and 1 in every one; τ = 16 moves it by 1 %.
    ActivationCounts history{1, kExperts, std::vector<uint64_t>(kExperts, 0), {1600}, {}};
    history.counts[0] = history.counts[1] = 1600;
    const std::vector<double> h = experts::layerFrequency(history, 0, kExperts, kTopK, false, 4, tau);
    QVERIFY(std::abs(h[0] - (1600 + 4) / 1616.0) < 1e-12);
    QVERIFY(std::abs(h[7] - 4 / 1616.0) < 1e-12);
    QVERIFY(std::abs(sum(h) - kTopK) < 1e-9);

    // The plan covers what the counts alone leave out: with room for 4 experts in F, or more in the
    // compressed pools, the counts alone leave the 4 unrouted experts in no pool; smoothed, the plan
    // holds more of them.
    experts::PoolPlanInputs in = planInputs(1);
    const auto held = [](const plan::LayerPlan& lp) { return std::accumulate(lp.capacity.begin(), lp.capacity.end(), 0); };
    in.smoothingTokens = 0;
    const plan::LayerPlan countsOnly = experts::planPoolsOfLayer(in, 4 * 3e6, kAllPools, counts, 0);
    in.smoothingTokens = tau;
    const plan::LayerPlan smoothed = experts::planPoolsOfLayer(in, 4 * 3e6, kAllPools, counts, 0);
    QVERIFY2(held(smoothed) > held(countsOnly),
             qPrintable(QString("held %1 smoothed, %2 from the counts").arg(held(smoothed)).arg(held(countsOnly))));
  }

  // The one-layer plan the runtime makes at a prefill is the plan the whole-model planner gives that
  // layer from the same counts; and a prompt's skew changes the split the prior gives.
  void aLayersOwnPlanIsTheModelPlansLayer() {
    ExpertCache cache(3, kExperts, EvictionPolicy::LeastFrequent, false);
    cache.recordActivations(1, {0, 3, 5, 6}, {16, 14, 1, 1});  // layer 1: a 16-token prompt, two favourites
    const ActivationCounts counts = cache.activationCounts();
    experts::PoolPlanInputs in = planInputs(3);
    const double poolBytes = 3 * 4 * 3e6;  // a layer's share: 4 experts in F
    const auto model = experts::planPools(in, poolBytes, kAllPools, counts);
    for (int l = 0; l < 3; ++l) {
      const plan::LayerPlan one = experts::planPoolsOfLayer(in, poolBytes, kAllPools, counts, l);
      QCOMPARE(one.capacity, model[static_cast<size_t>(l)].capacity);
      QCOMPARE(one.ratio, model[static_cast<size_t>(l)].ratio);
      QCOMPARE(one.expectedMakespan, model[static_cast<size_t>(l)].expectedMakespan);
    }
    QCOMPARE(model[0].capacity, model[2].capacity);  // both from the prior
    QVERIFY(model[1].expectedMakespan != model[0].expectedMakespan);
  }
};

QTEST_GUILESS_MAIN(TestPromptFrequencies)
#include "test_prompt_frequencies.moc"
