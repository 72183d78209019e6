// The usage-probability eviction policy (CoServe §4.3) of ExpertCache: the prior given by
// setActivationCounts ranks the members, not the counts observed since; without a prior the counts
// so far; among equals the larger member goes first, then the least recently used.
#include <QtTest>

#include "cache/expert_cache.h"

using namespace zipmoe;
using zipmoe::cache::ExpertCache;
using zipmoe::cache::TensorParts;

namespace {

std::vector<TensorParts> partsOf(size_t bytes) {
  std::vector<TensorParts> p(1);
  p[0].full = io::AlignedBuffer(bytes);
  return p;
}

}  // namespace

class TestUsageEviction : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void namesRoundTrip() {
    QCOMPARE(parseEvictionPolicy("usage"), EvictionPolicy::UsageProbability);
    QCOMPARE(std::string(evictionPolicyName(EvictionPolicy::UsageProbability)), std::string("usage"));
  }

  void priorRanksNotLaterCounts() {
    ExpertCache cache(1, 4, EvictionPolicy::UsageProbability, false);
    // The prior: expert 0 is used at 90 % of steps, 1 at 50 %, 2 at 10 %, 3 never.
    ActivationCounts prior{1, 4, {90, 50, 10, 0}, {100}, {}};
    cache.setActivationCounts(prior);
    QCOMPARE(cache.usageProbability(0, 0), 0.9);
    // Observed since: expert 2 is used often. The prior still ranks it below 0 and 1.
    for (int i = 0; i < 500; ++i) cache.recordActivations(0, {2});
    QCOMPARE(cache.usageProbability(0, 2), 0.1);

    const uint64_t unit = 4096;
    cache.setCapacity(0, 0, 3 * unit, 3);
    for (int e = 0; e < 3; ++e) {
      QVERIFY(cache.makeRoom(0, 0, unit, cache::Usage{}, nullptr));
      cache.insert(0, e, 0, partsOf(unit), static_cast<uint64_t>(e));
    }
    // A fourth expert needs room: expert 2 (prior 10 %) goes, although it was counted most.
    QVERIFY(cache.makeRoom(0, 0, unit, cache::Usage{}, nullptr));
    QCOMPARE(cache.entry(0, 2).pool, cache::kNoPool);
    QCOMPARE(cache.entry(0, 0).pool, 0);
    QCOMPARE(cache.entry(0, 1).pool, 0);
  }

  void withoutPriorCountsSoFarThenSizeThenAge() {
    ExpertCache cache(1, 4, EvictionPolicy::UsageProbability, false);
    cache.recordActivations(0, {0, 1, 2});
    cache.recordActivations(0, {0, 1});
    cache.setCapacity(0, 0, 1 << 20, 4);
    cache.insert(0, 0, 0, partsOf(4096), 1);
    cache.insert(0, 1, 0, partsOf(4096), 2);
    cache.insert(0, 2, 0, partsOf(4096), 3);
    // Expert 2 has the lowest probability (1 of 2 steps).
    cache.setCapacity(0, 0, 2 * 4096, 2);
    cache.enforceCapacities();
    QCOMPARE(cache.entry(0, 2).pool, cache::kNoPool);
    // 0 and 1 are equally probable: the larger goes first.
    cache.setCapacity(0, 0, 1 << 20, 4);
    cache.insert(0, 1, 0, partsOf(8192), 4);
    cache.setCapacity(0, 0, 8192, 1);
    cache.enforceCapacities();
    QCOMPARE(cache.entry(0, 1).pool, cache::kNoPool);
    QCOMPARE(cache.entry(0, 0).pool, 0);
  }
};

QTEST_GUILESS_MAIN(TestUsageEviction)
#include "test_usage_eviction.moc"
