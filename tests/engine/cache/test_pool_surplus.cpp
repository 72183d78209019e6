// ExpertCache under a plan change, with surplus kept: a pool shrunk below what it holds keeps its
// members as surplus while the layer's total fits; room another pool needs comes from that surplus
// (least counted first) before anything else; a newcomer to a pool holding surplus replaces its least
// counted member instead of evicting the pool down to its plan; a failed attempt evicts nothing; enforceCapacities
// brings each layer's total, not each pool, within capacity; without surplus kept (and in the global
// pool of the FullTensor baselines) a pool is still evicted down to its own capacity.
#include <QtTest>

#include "cache/expert_cache.h"
#include "zipmoe/base/pools.h"

using namespace zipmoe;
using zipmoe::cache::ExpertCache;
using zipmoe::cache::TensorParts;

namespace {

constexpr uint64_t kUnit = 4096;
const int kF = poolIndex(Pool::F), kC = poolIndex(Pool::C), kS = poolIndex(Pool::S);

std::vector<TensorParts> partsOf(uint64_t bytes) {
  std::vector<TensorParts> p(1);
  p[0].full = io::AlignedBuffer(bytes);
  return p;
}

// One layer of 8 experts, expert e counted 10 + e times; C holds experts 0..5 (3 units each = 18).
ExpertCache cacheWithSixInC(bool keepSurplus = true) {
  ExpertCache cache(1, 8, EvictionPolicy::LeastFrequent, false, 0x5eed, keepSurplus);
  for (int e = 0; e < 8; ++e)
    for (int i = 0; i < 10 + e; ++i) cache.recordActivations(0, {e});
  cache.setCapacity(0, kC, 18 * kUnit, 6);
  for (int e = 0; e < 6; ++e) {
    if (!cache.makeRoom(0, kC, 3 * kUnit, cache.usage(0, e), nullptr)) qFatal("no room in C");
    cache.insert(0, e, kC, partsOf(3 * kUnit), static_cast<uint64_t>(e));
  }
  return cache;
}

// A new plan for the layer: F gets `fUnits` (room for `fExperts`), C nothing; then the capacities are enforced.
void planAllF(ExpertCache& cache, uint64_t fUnits, int fExperts) {
  cache.setCapacity(0, kF, fUnits * kUnit, fExperts);
  cache.setCapacity(0, kC, 0, 0);
  cache.enforceCapacities();
}

}  // namespace

class TestPoolSurplus : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void aShrunkPoolKeepsItsMembersWhileTheLayerFits() {
    ExpertCache cache = cacheWithSixInC();
    // The new plan: everything to F (20 units), C none. The layer's total (20) still holds the 18.
    planAllF(cache, 20, 5);
    QCOMPARE(cache.residentCount(0, kC), 6);
    QCOMPARE(cache.usedBytes(0, kC), 18 * kUnit);
  }

  void anotherPoolsNewcomerEvictsSurplusLeastCountedFirst() {
    ExpertCache cache = cacheWithSixInC();
    planAllF(cache, 20, 5);
    // Expert 7 comes to F with 4 units: 18 + 4 > 20, so one C member goes: expert 0, counted least.
    QVERIFY(cache.makeRoom(0, kF, 4 * kUnit, cache.usage(0, 7), nullptr));
    QCOMPARE(cache.entry(0, 0).pool, cache::kNoPool);
    QCOMPARE(cache.residentCount(0, kC), 5);
    cache.insert(0, 7, kF, partsOf(4 * kUnit), 10);
    // 4 promised to S elsewhere this layer and 4 more to F: 15 + 4 + 4 + 4 = 27 > 20, so three more
    // go (1, 2, 3: 9 units).
    cache.setCapacity(0, kF, 12 * kUnit, 3);
    cache.setCapacity(0, kS, 8 * kUnit, 2);
    QVERIFY(cache.makeRoom(0, kF, 4 * kUnit, cache::Usage{100, 0}, nullptr, 4 * kUnit));
    QCOMPARE(cache.entry(0, 1).pool, cache::kNoPool);
    QCOMPARE(cache.entry(0, 2).pool, cache::kNoPool);
    QCOMPARE(cache.entry(0, 3).pool, cache::kNoPool);
    QCOMPARE(cache.entry(0, 4).pool, kC);
    QCOMPARE(cache.entry(0, 7).pool, kF);  // F's own member is not surplus
  }

  void aPromotionTakesOnlySurplus() {
    ExpertCache cache = cacheWithSixInC();
    planAllF(cache, 20, 5);
    // Expert 5 (in C, requested, so pinned by the runtime) moves to F: 4 units more in the layer.
    cache.entry(0, 5).pinned = true;
    QVERIFY(cache.makeLayerRoom(0, 4 * kUnit, nullptr));
    QCOMPARE(cache.entry(0, 0).pool, cache::kNoPool);
    QCOMPARE(cache.entry(0, 5).pool, kC);
    // No surplus can cover 40 units: nothing is evicted.
    QVERIFY(!cache.makeLayerRoom(0, 40 * kUnit, nullptr));
    QCOMPARE(cache.residentCount(0, kC), 5);
  }

  void aNewcomerToAShrunkPoolReplacesOneMember() {
    ExpertCache cache = cacheWithSixInC();
    // The new plan shrinks C to 2 experts (6 units) and gives F 14: C holds 18, 12 of them surplus.
    cache.setCapacity(0, kF, 14 * kUnit, 3);
    cache.setCapacity(0, kC, 6 * kUnit, 2);
    cache.enforceCapacities();
    QCOMPARE(cache.residentCount(0, kC), 6);
    // Expert 7 (counted most) comes to C: it replaces C's least counted member (expert 0) and no
    // more. Evicting C down to its planned 6 units would drop five experts that a later step would
    // read again, while the layer's total (20) holds the 18.
    QVERIFY(cache.makeRoom(0, kC, 3 * kUnit, cache.usage(0, 7), nullptr));
    QCOMPARE(cache.entry(0, 0).pool, cache::kNoPool);
    for (int e = 1; e < 6; ++e) QCOMPARE(cache.entry(0, e).pool, kC);
    cache.insert(0, 7, kC, partsOf(3 * kUnit), 10);
    QCOMPARE(cache.usedBytes(0, kC), 18 * kUnit);
    // A surplus pool does not grow: a newcomer counted less than every member finds no room.
    cache.setCapacity(0, kC, 6 * kUnit, 2);
    QVERIFY(!cache.makeRoom(0, kC, 3 * kUnit, cache::Usage{1, 0}, nullptr));
    QCOMPARE(cache.residentCount(0, kC), 6);
  }

  void withoutSurplusANewcomerEvictsDownToThePlan() {
    ExpertCache cache = cacheWithSixInC(false);
    cache.setCapacity(0, kC, 18 * kUnit, 6);
    QVERIFY(cache.makeRoom(0, kC, 3 * kUnit, cache.usage(0, 7), nullptr));
    QCOMPARE(cache.residentCount(0, kC), 5);  // room for one, as before
  }

  void aFailedAttemptEvictsNothing() {
    ExpertCache cache = cacheWithSixInC();
    cache.setCapacity(0, kF, 20 * kUnit, 5);
    cache.setCapacity(0, kC, 0, 0);
    // Every C member is pinned (the layer being executed requested them): no room for 4 more.
    for (int e = 0; e < 6; ++e) cache.entry(0, e).pinned = true;
    QVERIFY(!cache.makeRoom(0, kF, 4 * kUnit, cache::Usage{100, 0}, nullptr));
    QCOMPARE(cache.residentCount(0, kC), 6);
  }

  void enforceCapacitiesFitsTheLayersTotal() {
    ExpertCache cache = cacheWithSixInC();
    // A budget shrink: the layer now has 10 units, all in F. C's surplus goes down to 9 units.
    planAllF(cache, 10, 2);
    QCOMPARE(cache.residentCount(0, kC), 3);
    QCOMPARE(cache.entry(0, 5).pool, kC);  // the most counted stay
    QCOMPARE(cache.entry(0, 2).pool, cache::kNoPool);
    QVERIFY(cache.totalUsedBytes() <= 10 * kUnit);
  }

  void withoutSurplusAShrunkPoolIsEvictedAtOnce() {
    ExpertCache cache = cacheWithSixInC(false);
    QVERIFY(!cache.keepsSurplus());
    planAllF(cache, 20, 5);
    QCOMPARE(cache.residentCount(0, kC), 0);
    QCOMPARE(cache.totalUsedBytes(), uint64_t{0});
  }

  void theGlobalPoolStillEvictsToItsCapacity() {
    ExpertCache cache(2, 4, EvictionPolicy::Lru, true, 0x5eed, true);
    QVERIFY(!cache.keepsSurplus());
    cache.setCapacity(0, 0, 4 * kUnit, 4);
    for (int e = 0; e < 4; ++e) cache.insert(e / 2, e % 2, 0, partsOf(kUnit), static_cast<uint64_t>(e));
    cache.setCapacity(0, 0, 2 * kUnit, 2);
    cache.enforceCapacities();
    QCOMPARE(cache.totalUsedBytes(), 2 * kUnit);
    QCOMPARE(cache.entry(0, 0).pool, cache::kNoPool);  // least recently used first
    QCOMPARE(cache.entry(1, 1).pool, 0);
  }
};

QTEST_GUILESS_MAIN(TestPoolSurplus)
#include "test_pool_surplus.moc"
