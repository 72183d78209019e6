// What a prompt's tokens give the planner and the dispatch (RuntimeOptions::planFromPrompt): the
// cache counts tokens beside steps and ranks count ties by tokens; a layer with fewer than 16 steps
// plans from its tokens once they number 16 (per token, Σ f = k), from its steps' counts once it
// has 16 steps, and from the prior before either; LeastFrequent eviction breaks count ties by tokens
// too; stored statistics (no tokens) never plan from a prompt; token counts that do not match the
// experts are an error naming both sizes.
#include <QtTest>

#include <numeric>
#include <vector>

#include "cache/expert_cache.h"
#include "experts/planner_inputs.h"
#include "zipmoe/error.h"
#include "zipmoe/pool_planner.h"

using namespace zipmoe;
using zipmoe::cache::ExpertCache;
using zipmoe::experts::FrequencySource;

namespace {

constexpr int kExperts = 8, kTopK = 2;

double sum(const std::vector<double>& f) { return std::accumulate(f.begin(), f.end(), 0.0); }

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

    const std::vector<double> f = experts::layerFrequency(counts, 0, kExperts, kTopK, true);
    QCOMPARE(f.size(), static_cast<size_t>(kExperts));
    QVERIFY(std::abs(sum(f) - kTopK) < 1e-9);
    QCOMPARE(f[0], 1.0);   // in every token
    QCOMPARE(f[1], 0.75);  // 12 of 16
    QCOMPARE(f[2], 0.125);
    QCOMPARE(f[3], 0.125);
    QCOMPARE(f[7], 0.0);
    QCOMPARE(experts::layerFrequency(counts, 1, kExperts, kTopK, true), plan::priorRankFrequency(kExperts, kTopK));
    QCOMPARE(experts::layerFrequency(counts, 0, kExperts, kTopK, false), plan::priorRankFrequency(kExperts, kTopK));

    // 16 steps of one token each: the steps' counts take over (expert 7 in every step).
    for (int s = 0; s < 15; ++s) cache.recordActivations(0, {7, s % 2 ? 3 : 4});
    const ActivationCounts later = cache.activationCounts();
    QCOMPARE(experts::frequencySource(later, 0, kExperts, kTopK, true), FrequencySource::History);
    const std::vector<double> g = experts::layerFrequency(later, 0, kExperts, kTopK, true);
    QCOMPARE(g, experts::layerFrequencies(later, 2, kExperts, kTopK, false)[0]);
    QVERIFY(std::abs(sum(g) - kTopK) < 1e-9);
  }

  // The one-layer plan the runtime makes at a prefill is the plan the whole-model planner gives that
  // layer from the same counts; and a prompt's skew changes the split the prior gives.
  void aLayersOwnPlanIsTheModelPlansLayer() {
    ExpertCache cache(3, kExperts, EvictionPolicy::LeastFrequent, false);
    cache.recordActivations(1, {0, 3, 5, 6}, {16, 14, 1, 1});  // layer 1: a 16-token prompt, two favourites
    const ActivationCounts counts = cache.activationCounts();
    experts::PoolPlanInputs in;
    in.layers = 3;
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
