// Warm start (ExpertRuntime::warmUp) on a real store with real threads and O_DIRECT reads: it fills
// the pools the plan in force sizes with the experts the history ranks highest — ZipMoE's four pools
// and the full-tensor baseline's one cache — inside the budget, without counting an activation, hit,
// miss, read byte or stall; a run after it is bit-identical to the store and finds its first
// experts in memory; a second call has nothing left to read; a demand (the first acquire) or the
// caller's stop ends it, and one running beside the model on another thread leaves every tensor
// bit-exact and the model's statistics those of the same run without it. From a `nibble` store it
// indexes the C members it keeps, so that their first hits read the codes in place with nothing
// indexed on the model's thread, and it leaves nothing in the schedule's trace. Runs under
// ThreadSanitizer (label `threads`). No test asserts a duration.
#include <QtTest>

#include <atomic>
#include <thread>

#include "engine/experts/runtime_fixture.h"
#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/exponent_codec.h"

using namespace zipmoe;
using zipmoe::testing::Fixture;
using zipmoe::testing::makeFixture;
using zipmoe::testing::requestStream;
using zipmoe::testing::runStream;
using zipmoe::testing::Stream;
using zipmoe::testing::TempDir;

namespace {

uint64_t residentExperts(const RuntimeStats& s) {
  uint64_t n = 0;
  for (const PoolState& p : s.pools) n += static_cast<uint64_t>(p.residentExperts);
  return n;
}

// Nothing the model's demand is measured by has moved.
void checkNothingCounted(const RuntimeStats& s) {
  QCOMPARE(s.activations, uint64_t{0});
  QCOMPARE(s.misses, uint64_t{0});
  for (size_t p = 0; p < kNumPools; ++p) QCOMPARE(s.hits[p], uint64_t{0});
  QCOMPARE(s.bytesRead, uint64_t{0});
  QCOMPARE(s.steps, uint64_t{0});
  QCOMPARE(s.layers, uint64_t{0});
  QCOMPARE(s.stallSeconds, 0.0);
  QCOMPARE(s.denseSeconds, 0.0);
}

// Runs `rt`'s warm start on another thread while the model's stream starts on this one (runStream
// checks every tensor and the budget); returns what the warm start did once both are done.
WarmUpResult warmUpBesideStream(Fixture& f, ExpertRuntime& rt, const Stream& stream) {
  std::atomic<bool> started{false};
  WarmUpResult r;
  std::thread warm([&] {
    started = true;
    r = rt.warmUp();
  });
  while (!started.load()) std::this_thread::yield();
  runStream(f, rt, stream);
  warm.join();
  return r;
}

}  // namespace

class TestWarmStart : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;
  Fixture f_;
  Stream history_, stream_;
  ActivationCounts counts_;  // the history's activation counts

  // The runtimes compared: ZipMoE with several pool subsets, and the LRU full-tensor baseline.
  std::vector<RuntimeOptions> configurations(double share) const {
    std::vector<RuntimeOptions> out;
    for (unsigned pools : {0xFu, 0x1u, 0x6u, 0x9u}) {
      RuntimeOptions o;
      o.pools = pools;
      o.decompressWorkers = 2;
      o.replanEverySteps = 0;  // no plan changes mid-run: warm and cold runs plan the same
      o.planFromPrompt = false;
      o.budget = MemoryBudget::poolsForShare(share);
      o.history = counts_;
      out.push_back(o);
    }
    RuntimeOptions full;
    full.mode = OffloadMode::FullTensor;
    full.checkpointDir = f_.hf;
    full.eviction = EvictionPolicy::Lru;
    full.budget = MemoryBudget::poolsForShare(share);
    full.history = counts_;
    out.push_back(full);
    return out;
  }

 private Q_SLOTS:
  void initTestCase() {
    makeFixture(f_, dir_ / "store", CodecSpec{}, 4);
    const Manifest& m = f_.opened->manifest();
    history_ = requestStream(24, m.numLayers(), m.numExperts, 2, 41);
    stream_ = requestStream(6, m.numLayers(), m.numExperts, 2, 43);
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.0);
    auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
    runStream(f_, *rt, history_);
    counts_ = rt->activationCounts();
  }

  void fillsThePlannedPoolsWithinBudgetAndCountsNothing() {
    const Manifest& m = f_.opened->manifest();
    for (double share : {0.4, 0.8}) {
      int warmed = 0;
      for (const RuntimeOptions& o : configurations(share)) {
        const QString what = QStringLiteral("%1, pools 0x%2, share %3")
                                 .arg(o.mode == OffloadMode::FullTensor ? "full-tensor LRU" : "zipmoe")
                                 .arg(o.pools, 0, 16)
                                 .arg(share);
        auto warm = ExpertRuntime::open(f_.opened, o, f_.directProfile);
        const WarmUpResult r = warm->warmUp();
        QVERIFY2(!r.stopped, qPrintable(what));
        QCOMPARE(r.layers, m.numLayers());
        const RuntimeStats s = warm->stats();
        uint64_t room = 0;  // the plan may leave a pool subset unused where it does not pay here
        for (const PoolState& p : s.pools) room += p.capacityBytes;
        if (room == 0) {
          QCOMPARE(r.experts, uint64_t{0});
          continue;
        }
        ++warmed;
        QVERIFY2(r.experts > 0 && r.bytesRead > 0, qPrintable(what));
        checkNothingCounted(s);
        QVERIFY2(s.heldBytes <= s.budgetBytes, qPrintable(what));
        QCOMPARE(residentExperts(s), r.experts);
        QCOMPARE(s.warmExperts, r.experts);
        QCOMPARE(s.warmBytes, r.bytesRead);
        QCOMPARE(s.warmLayers, m.numLayers());
        const ActivationCounts after = warm->activationCounts();
        QVERIFY2(after.counts == counts_.counts && after.steps == counts_.steps, qPrintable(what));

        // Everything the plan keeps is in: a second call reads nothing.
        const WarmUpResult again = warm->warmUp();
        QCOMPARE(again.experts, uint64_t{0});
        QCOMPARE(again.bytesRead, uint64_t{0});

        // The first step finds experts in memory that a cold runtime has to read; every tensor of
        // the whole run is the store's (runStream), and the budget holds after every layer.
        auto cold = ExpertRuntime::open(f_.opened, o, f_.directProfile);
        const Stream first(stream_.begin(), stream_.begin() + 1);
        runStream(f_, *cold, first);
        runStream(f_, *warm, first);
        QVERIFY2(warm->stats().misses < cold->stats().misses, qPrintable(what));
        QCOMPARE(warm->stats().activations, cold->stats().activations);
        runStream(f_, *warm, stream_);
      }
      QVERIFY2(warmed >= 3, "fewer than three configurations had pools to fill");
    }
  }

  void aStopOrADemandEndsIt() {
    RuntimeOptions o = configurations(0.6).front();
    auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
    std::atomic<bool> stop{true};
    WarmUpResult r = rt->warmUp(&stop);
    QVERIFY(r.stopped);
    QCOMPARE(r.layers, 0);
    QCOMPARE(residentExperts(rt->stats()), uint64_t{0});

    // After the model's first acquire, a warm start does nothing.
    const Stream first(stream_.begin(), stream_.begin() + 1);
    runStream(f_, *rt, first);
    const uint64_t resident = residentExperts(rt->stats());
    r = rt->warmUp();
    QVERIFY(r.stopped);
    QCOMPARE(r.experts, uint64_t{0});
    QCOMPARE(residentExperts(rt->stats()), resident);
  }

  void readiesCMembersForTheirFirstUse() {
    // From a `nibble` store, a C member is read in place by decoding once its codes are indexed. A
    // warm start indexes what it keeps in C, so that the first steps' C hits find them indexed
    // (none is indexed on the model's thread); a cold runtime indexes at first use. Every tensor
    // handed as codes is read back and compared with the store (runStream).
    TempDir dir;
    Fixture f;
    makeFixture(f, dir / "store", parseCodecSpec("nibble"), 2);
    const Manifest& m = f.opened->manifest();
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.0);
    auto seed = ExpertRuntime::open(f.opened, o, f.directProfile);
    runStream(f, *seed, requestStream(24, m.numLayers(), m.numExperts, 2, 41, true));
    o.pools = 0x2;  // C only
    o.decompressWorkers = 2;
    o.replanEverySteps = 0;
    o.planFromPrompt = false;
    o.budget = MemoryBudget::poolsForShare(0.6);
    o.history = seed->activationCounts();
    const Stream stream = requestStream(6, m.numLayers(), m.numExperts, 2, 43, true);

    auto warm = ExpertRuntime::open(f.opened, o, f.directProfile);
    const WarmUpResult r = warm->warmUp();
    QVERIFY(r.experts > 0);
    QCOMPARE(r.prepared, r.experts);  // every expert it kept is a C member
    checkNothingCounted(warm->stats());
    QCOMPARE(warm->stats().warmPrepared, r.prepared);
    QCOMPARE(warm->stats().indexedOnDemand, uint64_t{0});
    std::vector<TraceEvent> events;  // no step of the model's: nothing in the schedule's trace
    QCOMPARE(warm->drainTrace(events), size_t{0});
    runStream(f, *warm, Stream(stream.begin(), stream.begin() + 1));
    QVERIFY(warm->drainTrace(events) > 0);
    RuntimeStats s = warm->stats();
    QVERIFY2(s.hits[1] > 0 && s.inPlaceTensors == s.hits[1] * static_cast<uint64_t>(m.numKinds()),
             qPrintable(QString("C hits %1, tensors read in place %2").arg(s.hits[1]).arg(s.inPlaceTensors)));
    QCOMPARE(s.indexedOnDemand, uint64_t{0});  // the first step's C hits were all warm ones

    // Without a warm start the same run indexes its C members at their first hit.
    auto cold = ExpertRuntime::open(f.opened, o, f.directProfile);
    runStream(f, *cold, stream);
    s = cold->stats();
    QVERIFY2(s.inPlaceTensors > 0 && s.indexedOnDemand > 0,
             qPrintable(QString("tensors read in place %1, indexed on demand %2").arg(s.inPlaceTensors).arg(s.indexedOnDemand)));
    QVERIFY(s.indexedOnDemand <= s.hits[1]);
    QCOMPARE(s.warmPrepared, uint64_t{0});

    // Beside the model on another thread (under ThreadSanitizer in CI): whichever experts it
    // indexed before the demand came, every tensor handed as codes is the store's, and what it did
    // not reach is indexed on demand.
    auto beside = ExpertRuntime::open(f.opened, o, f.directProfile);
    const WarmUpResult b = warmUpBesideStream(f, *beside, stream);
    s = beside->stats();
    QVERIFY(b.prepared <= b.experts);
    QCOMPARE(s.warmPrepared, b.prepared);
    QVERIFY(s.inPlaceTensors > 0);
  }

  void besideTheModelOnAnotherThread() {
    // The warm start runs while the model's stream starts: whichever layer it reached, every tensor
    // is bit-exact, the budget holds after every layer, and the demand's statistics are counted as
    // in a run without it (activations and activation counts do not depend on the cache).
    for (const RuntimeOptions& o : configurations(0.6)) {
      auto plain = ExpertRuntime::open(f_.opened, o, f_.directProfile);
      runStream(f_, *plain, stream_);
      auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
      const WarmUpResult r = warmUpBesideStream(f_, *rt, stream_);
      QVERIFY(r.layers <= f_.opened->manifest().numLayers());
      const RuntimeStats s = rt->stats();
      QCOMPARE(s.activations, plain->stats().activations);
      QCOMPARE(s.steps, plain->stats().steps);
      const ActivationCounts a = rt->activationCounts(), b = plain->activationCounts();
      QVERIFY(a.counts == b.counts && a.steps == b.steps);
      QCOMPARE(s.warmExperts, r.experts);
    }
  }
};

QTEST_APPLESS_MAIN(TestWarmStart)
#include "test_warm_start.moc"
