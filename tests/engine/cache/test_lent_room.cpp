// ExpertCache with room lent between layers (keepSurplus + lendRoom): a newcomer takes room another
// layer leaves unused before it evicts anyone; the owner takes its room back when it needs it (the
// borrower's least used surplus goes, never a pinned expert, and a failed attempt evicts nothing);
// enforceCapacities after a budget shrink brings the cache's total, not each layer, within capacity;
// without lending each layer stays within its own share; the cache never holds more than its total.
#include <QtTest>

#include "cache/expert_cache.h"
#include "zipmoe/base/pools.h"

using namespace zipmoe;
using zipmoe::cache::ExpertCache;
using zipmoe::cache::TensorParts;

namespace {

constexpr uint64_t kUnit = 4096;
const int kF = poolIndex(Pool::F), kC = poolIndex(Pool::C);

std::vector<TensorParts> partsOf(uint64_t bytes) {
  std::vector<TensorParts> p(1);
  p[0].full = io::AlignedBuffer(bytes);
  return p;
}

// Two layers of 8 experts; expert e of layer l counted 10 + e times. Each layer's share: F holds 3
// experts of 4 units (12). Layer 0 holds experts 0..2, layer 1 only expert 0.
ExpertCache twoLayers(bool lend) {
  ExpertCache cache(2, 8, EvictionPolicy::LeastFrequent, false, 0x5eed, true, lend);
  for (int l = 0; l < 2; ++l) {
    for (int e = 0; e < 8; ++e)
      for (int i = 0; i < 10 + e; ++i) cache.recordActivations(l, {e});
    cache.setCapacity(l, kF, 12 * kUnit, 3);
  }
  for (int e = 0; e < 3; ++e) {
    if (!cache.makeRoom(0, kF, 4 * kUnit, cache.usage(0, e), nullptr)) qFatal("no room in layer 0");
    cache.insert(0, e, kF, partsOf(4 * kUnit), static_cast<uint64_t>(e));
  }
  if (!cache.makeRoom(1, kF, 4 * kUnit, cache.usage(1, 0), nullptr)) qFatal("no room in layer 1");
  cache.insert(1, 0, kF, partsOf(4 * kUnit), 3);
  return cache;
}

void admit(ExpertCache& cache, int layer, int expert, uint64_t now) {
  QVERIFY(cache.makeRoom(layer, kF, 4 * kUnit, cache.usage(layer, expert), nullptr));
  cache.insert(layer, expert, kF, partsOf(4 * kUnit), now);
  QVERIFY(cache.totalUsedBytes() <= cache.totalCapacityBytes());
}

}  // namespace

class TestLentRoom : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void aLayerBorrowsWhatAnotherLeavesUnused() {
    ExpertCache cache = twoLayers(true);
    QVERIFY(cache.lendsRoom());
    QVERIFY(cache.hasFreeRoom(8 * kUnit));
    QVERIFY(!cache.hasFreeRoom(8 * kUnit + 1));
    // Layer 0 is full; expert 3 comes: layer 1 leaves 8 units unused, so nobody is evicted.
    admit(cache, 0, 3, 10);
    for (int e = 0; e < 4; ++e) QCOMPARE(cache.entry(0, e).pool, kF);
    QCOMPARE(cache.layerUsedBytes(0), 16 * kUnit);
    QCOMPARE(cache.lentBytes(), 4 * kUnit);
  }

  void theOwnerTakesItsRoomBack() {
    ExpertCache cache = twoLayers(true);
    admit(cache, 0, 3, 10);
    admit(cache, 0, 4, 11);  // the last free room: layer 0 holds 20 of its 12
    QCOMPARE(cache.lentBytes(), 8 * kUnit);
    // Layer 1 needs room within its own share: the borrower's least used member (expert 0 of
    // layer 0, counted 10) goes, not layer 1's own.
    admit(cache, 1, 5, 12);
    QCOMPARE(cache.entry(0, 0).pool, cache::kNoPool);
    QCOMPARE(cache.entry(1, 0).pool, kF);
    admit(cache, 1, 6, 13);
    QCOMPARE(cache.entry(0, 1).pool, cache::kNoPool);
    QCOMPARE(cache.lentBytes(), uint64_t{0});
    QCOMPARE(cache.layerUsedBytes(0), 12 * kUnit);
    QCOMPARE(cache.layerUsedBytes(1), 12 * kUnit);
    // Both at their shares: a newcomer counted more than layer 1's least used member replaces it.
    admit(cache, 1, 7, 14);
    QCOMPARE(cache.entry(1, 0).pool, cache::kNoPool);
    QCOMPARE(cache.layerUsedBytes(0), 12 * kUnit);
  }

  void aPinnedBorrowerKeepsItsRoomAndAFailedAttemptEvictsNothing() {
    ExpertCache cache = twoLayers(true);
    admit(cache, 0, 3, 10);
    admit(cache, 0, 4, 11);
    for (int e = 0; e < 5; ++e) cache.entry(0, e).pinned = true;  // layer 0 is running
    // Layer 1 has room in its own pool but the cache's total is full, and the borrower's members
    // are all pinned: no room now.
    QVERIFY(!cache.makeRoom(1, kF, 4 * kUnit, cache::Usage{100, 0}, nullptr));
    QCOMPARE(cache.layerUsedBytes(0), 20 * kUnit);
    QCOMPARE(cache.residentCount(1, kF), 1);
    for (int e = 0; e < 5; ++e) cache.entry(0, e).pinned = false;
    QVERIFY(cache.makeRoom(1, kF, 4 * kUnit, cache::Usage{100, 0}, nullptr));
    QCOMPARE(cache.entry(0, 0).pool, cache::kNoPool);
  }

  void aBudgetShrinkTakesTheLeastUsedSurplusOfAnyLayer() {
    ExpertCache cache = twoLayers(true);
    admit(cache, 0, 3, 10);
    admit(cache, 0, 4, 11);
    // Layer 1's expert 0 is used a lot: it must outlive layer 0's little-used borrowed experts.
    for (int i = 0; i < 50; ++i) cache.recordActivations(1, {0});
    // A smaller budget: each layer's share is now 2 experts (8 units), 16 in all, 24 held.
    for (int l = 0; l < 2; ++l) cache.setCapacity(l, kF, 8 * kUnit, 2);
    cache.enforceCapacities();
    QCOMPARE(cache.totalUsedBytes(), 16 * kUnit);
    QCOMPARE(cache.entry(1, 0).pool, kF);
    QCOMPARE(cache.entry(0, 0).pool, cache::kNoPool);
    QCOMPARE(cache.entry(0, 1).pool, cache::kNoPool);
    QCOMPARE(cache.residentCount(0, kF), 3);  // layer 0 still borrows layer 1's unused 4 units
    QCOMPARE(cache.lentBytes(), 4 * kUnit);
  }

  void surplusOfAShrunkPoolStillGoesFirstWithinTheLayer() {
    ExpertCache cache = twoLayers(true);
    admit(cache, 1, 1, 10);
    admit(cache, 1, 2, 11);  // both layers full, no free room
    // A plan moves layer 0's room from F to C: F 4 units, C 8. Its three F members are surplus.
    cache.setCapacity(0, kF, 4 * kUnit, 1);
    cache.setCapacity(0, kC, 8 * kUnit, 3);
    cache.enforceCapacities();
    QCOMPARE(cache.residentCount(0, kF), 3);
    // Expert 7 comes to C (2 units): F's least used surplus member (expert 0) makes the room.
    QVERIFY(cache.makeRoom(0, kC, 2 * kUnit, cache.usage(0, 7), nullptr));
    QCOMPARE(cache.entry(0, 0).pool, cache::kNoPool);
    QCOMPARE(cache.residentCount(1, kF), 3);
  }

  void withoutLendingEachLayerStaysWithinItsShare() {
    ExpertCache cache = twoLayers(false);
    QVERIFY(!cache.lendsRoom());
    // Layer 1's unused room is not lent: expert 3 replaces layer 0's least used member.
    admit(cache, 0, 3, 10);
    QCOMPARE(cache.entry(0, 0).pool, cache::kNoPool);
    QCOMPARE(cache.layerUsedBytes(0), 12 * kUnit);
    QCOMPARE(cache.lentBytes(), uint64_t{0});
    // And a newcomer counted less than every member finds no room at all.
    QVERIFY(!cache.makeRoom(0, kF, 4 * kUnit, cache::Usage{1, 0}, nullptr));
  }

  void theGlobalPoolLendsNothing() {
    ExpertCache cache(2, 4, EvictionPolicy::Lru, true, 0x5eed, true, true);
    QVERIFY(!cache.lendsRoom());
    QVERIFY(!cache.keepsSurplus());
  }
};

QTEST_GUILESS_MAIN(TestLentRoom)
#include "test_lent_room.moc"
