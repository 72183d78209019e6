// Speculative expert prefetch in the runtime, on a real store with real threads and O_DIRECT reads:
// with hints that are always right, always wrong, half right, or for the wrong layer, every tensor
// is bit-identical to the store's, memory stays within the budget after every layer, and the
// planner's statistics (activation counts, hits, misses, bytes a layer read on demand aside) are
// exactly those of the same run without prefetch. Right hints are used (useful bytes, fewer demand
// reads), wrong ones are counted as wasted and nothing else; prefetch reads show up as trace
// events of their own. Runs under ThreadSanitizer (label `threads`). No test asserts a duration.
#include <QtTest>

#include <algorithm>
#include <numeric>
#include <random>

#include "engine/experts/runtime_fixture.h"
#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/trace/trace_events.h"

using namespace zipmoe;
using zipmoe::testing::Fixture;
using zipmoe::testing::makeFixture;
using zipmoe::testing::requestStream;
using zipmoe::testing::runStream;
using zipmoe::testing::Stream;
using zipmoe::testing::TempDir;

namespace {

enum class Guess { Right, Wrong, Half, OtherLayer };

// The hint for the next layer (or layer 0 of the next step) of `stream` after (step, layer).
std::vector<int> hintFor(const Stream& stream, int step, int layer, int experts, Guess guess, std::mt19937_64& rng) {
  const int layers = static_cast<int>(stream[0].size());
  int nextStep = step, next = layer + 1;
  if (next == layers) {
    next = 0;
    ++nextStep;
  }
  if (nextStep >= static_cast<int>(stream.size())) return {};
  std::vector<int> truth;
  for (const ExpertRequest& r : stream[static_cast<size_t>(nextStep)][static_cast<size_t>(next)]) truth.push_back(r.expert);
  std::vector<int> wrong;
  for (int e = 0; e < experts; ++e)
    if (std::find(truth.begin(), truth.end(), e) == truth.end()) wrong.push_back(e);
  std::shuffle(wrong.begin(), wrong.end(), rng);
  switch (guess) {
    case Guess::Right: return truth;
    case Guess::Wrong: return {wrong.begin(), wrong.begin() + static_cast<long>(std::min(truth.size(), wrong.size()))};
    case Guess::Half: {
      std::vector<int> h(truth.begin(), truth.begin() + static_cast<long>(truth.size() / 2));
      h.insert(h.end(), wrong.begin(), wrong.begin() + static_cast<long>(truth.size() - h.size()));
      return h;
    }
    case Guess::OtherLayer: return truth;  // given for another layer below
  }
  return {};
}

}  // namespace

class TestPrefetch : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;
  Fixture f_;

  RuntimeStats run(const Stream& stream, RuntimeOptions o, int slotCount, Guess guess, ActivationCounts* counts = nullptr,
                   std::vector<TraceEvent>* events = nullptr) {
    o.prefetchSlots = slotCount;
    auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
    const Manifest& m = f_.opened->manifest();
    std::mt19937_64 rng(17);
    runStream(f_, *rt, stream, {}, [&](int step, int layer) {
      if (slotCount == 0) return;
      const std::vector<int> hint = hintFor(stream, step, layer, m.numExperts, guess, rng);
      int target = (layer + 1) % m.numLayers();
      if (guess == Guess::OtherLayer) target = (target + 1) % m.numLayers();
      rt->prefetch(target, hint);
      if (guess == Guess::Right) rt->waitForPrefetch();  // so that every right guess is read in time
    });
    if (counts) *counts = rt->activationCounts();
    if (events) rt->drainTrace(*events);
    return rt->stats();
  }

 private Q_SLOTS:
  void initTestCase() { makeFixture(f_, dir_ / "store", CodecSpec{}, 4); }

  void everyGuessIsBitExactWithinBudgetAndLeavesTheStatisticsAlone() {
    const Manifest& m = f_.opened->manifest();
    const Stream stream = requestStream(20, m.numLayers(), m.numExperts, 2, 23);
    for (unsigned pools : {0xFu, 0x1u, 0x8u, 0x6u}) {
      for (double fraction : {0.0, 0.2, 0.6}) {
        RuntimeOptions o;
        o.pools = pools;
        o.decompressWorkers = 2;
        // No plan changes mid-run — background replans, or a layer planning from its tokens once they
        // number 16 (this stream's requests carry 1–3 tokens each): both price plans with the costs
        // observed so far, which differ between runs. So the cache evolves the same in every run.
        o.replanEverySteps = 0;
        o.planFromPrompt = false;
        o.budget = MemoryBudget::poolsForShare(fraction);
        ActivationCounts offCounts;
        const RuntimeStats off = run(stream, o, 0, Guess::Right, &offCounts);
        for (Guess guess : {Guess::Right, Guess::Wrong, Guess::Half, Guess::OtherLayer}) {
          ActivationCounts onCounts;
          const RuntimeStats on = run(stream, o, 4, guess, &onCounts);  // runStream checks tensors and budget
          QCOMPARE(on.activations, off.activations);
          QCOMPARE(on.misses, off.misses);
          for (size_t p = 0; p < kNumPools; ++p) QCOMPARE(on.hits[p], off.hits[p]);
          QVERIFY(onCounts.counts == offCounts.counts);
          QCOMPARE(on.prefetchFailedReads, uint64_t{0});
          QVERIFY(on.prefetchHintedExperts > 0);
          // Every prefetched byte is accounted: used, wasted, or still held for the last hint.
          QVERIFY(on.prefetchUsefulBytes + on.prefetchWastedBytes <= on.prefetchedBytes);
          if (guess == Guess::Wrong || guess == Guess::OtherLayer) {
            QCOMPARE(on.prefetchUsefulBytes, uint64_t{0});
            QCOMPARE(on.prefetchHitExperts, uint64_t{0});
            QCOMPARE(on.bytesRead, off.bytesRead);  // the layers read what they need themselves
          }
          if (guess == Guess::Right && off.misses > 0) {
            QVERIFY2(on.prefetchUsefulBytes > 0, "right guesses were never used");
            QVERIFY(on.prefetchHitExperts > 0);
            QVERIFY(on.bytesRead < off.bytesRead);
          }
        }
      }
    }
  }

  void prefetchWorkingSetIsInsideTheBudget() {
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.0);
    const uint64_t without = ExpertRuntime::open(f_.opened, o, f_.directProfile)->minimumBudget();
    o.prefetchSlots = 3;
    const auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
    QVERIFY(rt->minimumBudget() > without);
    QCOMPARE(rt->stats().workingSetBytes, rt->minimumBudget());
    o.prefetchSlots = -1;  // twice the model's top-k
    QVERIFY(ExpertRuntime::open(f_.opened, o, f_.directProfile)->minimumBudget() > rt->minimumBudget());
  }

  void prefetchReadsAreTracedInTheirOwnKind() {
    const Manifest& m = f_.opened->manifest();
    const Stream stream = requestStream(6, m.numLayers(), m.numExperts, 2, 5);
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.0);  // everything misses: every right guess is read
    std::vector<TraceEvent> events;
    const RuntimeStats st = run(stream, o, 4, Guess::Right, nullptr, &events);
    const auto prefetches = std::count_if(events.begin(), events.end(), [](const TraceEvent& e) { return e.op == TraceOp::Prefetch; });
    QVERIFY(prefetches > 0);
    uint64_t bytes = 0;
    for (const TraceEvent& e : events)
      if (e.op == TraceOp::Prefetch) {
        QVERIFY(e.layer >= 0 && e.layer < m.numLayers());
        QVERIFY(e.expert >= 0 && e.expert < m.numExperts);
        QCOMPARE(int(e.lane), 0);  // the I/O thread
        bytes += e.bytes;
      }
    QCOMPARE(bytes, st.prefetchedBytes);
    QCOMPARE(QString(traceOpName(TraceOp::Prefetch)), QString("prefetch"));
  }

  void budgetMovesWhilePrefetching() {
    const Manifest& m = f_.opened->manifest();
    const Stream stream = requestStream(24, m.numLayers(), m.numExperts, 2, 9);
    RuntimeOptions o;
    o.decompressWorkers = 2;
    o.prefetchSlots = 4;
    o.budget = MemoryBudget::poolsForShare(0.5);
    auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
    std::mt19937_64 rng(3);
    const double shares[] = {0.1, 0.7, 0.0, 0.4};
    runStream(f_, *rt, stream, [&](int step) {
      if (step % 4 == 2) {
        rt->setBudget(MemoryBudget::poolsForShare(shares[(step / 4) % 4]));
        rt->waitForPlan();  // runStream checks heldBytes ≤ budget after every layer
      }
    }, [&](int step, int layer) { rt->prefetch((layer + 1) % m.numLayers(), hintFor(stream, step, layer, m.numExperts, Guess::Half, rng)); });
    QVERIFY(rt->stats().prefetchedBytes > 0);
  }

  void badHintsAreRejectedAndHintsWithoutSlotsIgnored() {
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.2);
    o.prefetchSlots = 2;
    auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
    const Manifest& m = f_.opened->manifest();
    const std::vector<int> one{0}, bad{m.numExperts};
    QVERIFY_THROWS_EXCEPTION(Error, rt->prefetch(m.numLayers(), one));
    QVERIFY_THROWS_EXCEPTION(Error, rt->prefetch(-1, one));
    QVERIFY_THROWS_EXCEPTION(Error, rt->prefetch(0, bad));
    o.prefetchSlots = 0;
    auto plain = ExpertRuntime::open(f_.opened, o, f_.directProfile);
    plain->prefetch(0, one);  // no slots: ignored
    QCOMPARE(plain->stats().prefetchHintedExperts, uint64_t{0});
    o.prefetchSlots = -2;
    QVERIFY_THROWS_EXCEPTION(Error, ExpertRuntime::open(f_.opened, o, f_.directProfile));
  }
};

QTEST_APPLESS_MAIN(TestPrefetch)
#include "test_prefetch.moc"
