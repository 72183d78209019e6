// The expert runtime on real stores with real threads and O_DIRECT reads: every expert tensor it
// hands out is bit-identical to the store's, for many budgets, pool subsets, codecs, eviction
// policies and the full-tensor baselines; memory stays within the budget (live changes included);
// bad input (a too-small budget, a corrupted chunk mid-run, a foreign profile) fails cleanly.
// Runs under ThreadSanitizer in CI.
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/budget_slider.h"
#include "engine/experts/runtime_fixture.h"
#include "io/page_reserve.h"
#include "test_support.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/error.h"
#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/format/store.h"
#include "tools/synthetic/synthetic_model.h"

using namespace zipmoe;
using zipmoe::testing::BudgetSlider;
using zipmoe::testing::TempDir;
using zipmoe::testing::Fixture;
using zipmoe::testing::makeFixture;
using zipmoe::testing::requestStream;
using zipmoe::testing::runStream;

class TestExpertRuntime : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;
  Fixture huffman_;

  std::shared_ptr<ExpertRuntime> open(Fixture& f, const RuntimeOptions& o) {
    const CostProfile& p = o.readMode == ReadMode::Direct ? f.directProfile : f.bufferedProfile;
    return ExpertRuntime::open(f.opened, o, p);
  }
  // The bytes of "the working set plus this share of the expert bytes" for a runtime of these options.
  uint64_t budgetFraction(Fixture& f, double fraction, RuntimeOptions o) {
    o.budget = MemoryBudget::poolsForShare(fraction);
    return open(f, o)->stats().budgetBytes;
  }

  // Each layer's two favourites (experts 2l and 2l + 1, mod the experts) serve 16·k tokens of a
  // prefill in which every other expert serves one (Σ tokens / k ≥ 16); the decode step requests
  // the two.
  struct FavouriteStreams {
    zipmoe::testing::Stream prefill = zipmoe::testing::Stream(1), decode = zipmoe::testing::Stream(1);
  };
  static std::pair<int, int> favourites(const Manifest& m, int layer) {
    return {(2 * layer) % m.numExperts, (2 * layer + 1) % m.numExperts};
  }
  static FavouriteStreams favouriteStreams(const Manifest& m) {
    const int k = static_cast<int>(m.config->value("num_experts_per_tok", 1));
    FavouriteStreams s;
    for (int l = 0; l < m.numLayers(); ++l) {
      const auto [a, b] = favourites(m, l);
      std::vector<ExpertRequest> all;
      for (int e = 0; e < m.numExperts; ++e) all.push_back({e, e == a || e == b ? 16 * k : 1, false, true});
      s.prefill[0].push_back(all);
      s.decode[0].push_back({{std::min(a, b), 1, true}, {std::max(a, b), 1, true}});
    }
    return s;
  }
  // Half the experts' bytes, no replans but those from a prompt (when `fromPrompt`).
  static RuntimeOptions favouriteOptions(bool fromPrompt) {
    RuntimeOptions o;
    o.decompressWorkers = 2;
    o.replanEverySteps = 1000;
    o.planFromPrompt = fromPrompt;
    o.budget = MemoryBudget::poolsForShare(0.5);
    return o;
  }
  // Runs the decode step: both favourites of every layer are F hits (this small model's plans are
  // all F), nothing is read, no plan failed.
  void expectFavouritesInF(ExpertRuntime& rt, const zipmoe::testing::Stream& decode) {
    const int layers = huffman_.opened->manifest().numLayers();
    const RuntimeStats before = rt.stats();
    runStream(huffman_, rt, decode);
    const RuntimeStats after = rt.stats();
    QCOMPARE(after.hits[poolIndex(Pool::F)] - before.hits[poolIndex(Pool::F)], static_cast<uint64_t>(2 * layers));
    QCOMPARE(after.misses, before.misses);
    QCOMPARE(after.planFailures, uint64_t{0});
  }

 private Q_SLOTS:
  void initTestCase() { makeFixture(huffman_, dir_ / "huffman", CodecSpec{}, 4); }

  void zipmoeIsBitExactForEveryBudgetAndPoolSubset() {
    const Manifest& m = huffman_.opened->manifest();
    const auto stream = requestStream(24, m.numLayers(), m.numExperts, 2, 7);
    for (unsigned pools : {0xFu, 0x1u, 0x5u, 0x2u, 0x4u, 0x8u, 0xEu}) {
      for (double fraction : {0.0, 0.1, 0.25, 0.5, 1.0}) {
        RuntimeOptions o;
        o.pools = pools;
        o.decompressWorkers = 2;
        o.replanEverySteps = 8;
        o.budget = MemoryBudget::poolsForShare(fraction);
        auto rt = open(huffman_, o);
        const int seen = runStream(huffman_, *rt, stream);
        const RuntimeStats st = rt->stats();
        QCOMPARE(st.activations, static_cast<uint64_t>(seen));
        QCOMPARE(st.hits[0] + st.hits[1] + st.hits[2] + st.hits[3] + st.misses, st.activations);
        if (fraction == 0.0) QCOMPARE(st.hits[0] + st.hits[1] + st.hits[2] + st.hits[3], uint64_t{0});
        if (fraction >= 1.0 && pools == 0x1u) QVERIFY2(st.hits[0] > st.activations / 2, "a whole-model F pool should mostly hit");
        for (int p = 0; p < 4; ++p)
          if (!(pools & (1u << p))) QCOMPARE(st.hits[static_cast<size_t>(p)], uint64_t{0});
        // Lemma B.3 on the recorded layers: no schedule beats max{I, C/L, P, Z} of the measured
        // operation times, so the executor's measured makespan is at least that.
        QVERIFY(st.layers > 0);
        QVERIFY2(st.measuredMakespan >= st.lowerBound, "measured makespan below the lower bound");
        if (pools == 0xFu && fraction == 0.1)
          qInfo("recorded layers: measured makespan / lower bound = %.2f (predicted / measured %.2f)",
                st.measuredMakespan / st.lowerBound, st.predictedMakespan / st.measuredMakespan);
      }
    }
  }

  // Recovery fused into the model's compute: requests that accept split tensors get the planes of
  // every tensor that is not kept whole in F (hits in C, S, E and misses; a miss that F keeps — all
  // of them with a whole-model budget — is recovered into F), bit-identical to the
  // store's once merged, within the budget after every layer (runStream checks both); without
  // fusion every tensor comes recovered. A request that only merges planes (the model's prefill:
  // mergesSplit, as every request of requestStream) gets them too where the runtime has no output
  // slots (the default with fusion), and recovered tensors where it has some.
  void splitTensorsWhenTheRequestAcceptsThem() {
    const Manifest& m = huffman_.opened->manifest();
    for (bool fuse : {true, false}) {
      for (unsigned pools : {0xFu, 0x2u, 0x4u, 0x8u, 0x1u}) {
        for (double fraction : {0.0, 0.25, 1.0}) {
          for (bool accepts : {true, false}) {
            for (int outSlots : {-1, 3}) {
              RuntimeOptions o;
              o.pools = pools;
              o.fuseRecovery = fuse;
              o.outputSlots = outSlots;
              o.decompressWorkers = 2;
              o.replanEverySteps = 8;
              o.budget = MemoryBudget::poolsForShare(fraction);
              auto rt = open(huffman_, o);
              QCOMPARE(rt->options().outputSlots, fuse ? std::max(outSlots, 0) : 3);
              runStream(huffman_, *rt, requestStream(12, m.numLayers(), m.numExperts, 2, 5, accepts));
              const RuntimeStats st = rt->stats();
              const uint64_t decoded = st.hits[1] + st.hits[2] + st.hits[3] + st.misses;  // C, S, E, misses
              const bool planes = fuse && (accepts || outSlots == -1);
              if (!planes) QCOMPARE(st.splitTensors, uint64_t{0});
              else if (pools != 0x1u && fraction < 1.0) QVERIFY2(st.splitTensors > 0, "no tensor was handed split");
              if (planes && fraction == 0.0)  // nothing is kept: every tensor comes split
                QCOMPARE(st.splitTensors, decoded * static_cast<uint64_t>(m.numKinds()));
              QVERIFY(st.splitTensors <= decoded * static_cast<uint64_t>(m.numKinds()));
            }
          }
        }
      }
    }
  }

  // From a `nibble` store, a prefill's miss that C keeps (a request that merges planes but does not
  // accept them: many tokens) has its codes indexed in its kept buffer by a worker instead of decoded
  // into a staging slot's plane, and goes to the model as codes: every tensor is the store's
  // (runStream reads the codes back), and the C member keeps its index, so that its next hits read it
  // in place without indexing it again on the model's thread. Runs under ThreadSanitizer.
  void aPrefillsMissesKeptInCAreIndexedNotDecoded() {
    Fixture f;
    makeFixture(f, dir_ / "nibble-prefill", parseCodecSpec("nibble"), 2);
    const Manifest& m = f.opened->manifest();
    RuntimeOptions o;
    o.pools = 0x2u;  // C only, with room for every expert (padded C parts: eight times the BF16 bytes)
    o.decompressWorkers = 2;
    o.replanEverySteps = 0;
    o.budget = MemoryBudget::poolsForShare(1.0);
    o.budget = MemoryBudget::bytes(open(f, o)->stats().budgetBytes * 8);
    auto rt = open(f, o);
    const auto stream = requestStream(4, m.numLayers(), m.numExperts, 2, 29, false);
    runStream(f, *rt, stream);
    const RuntimeStats first = rt->stats();
    const auto kinds = static_cast<uint64_t>(m.numKinds());
    QVERIFY2(first.misses > 0 && first.indexedMissTensors > 0 && first.indexedMissTensors <= first.misses * kinds,
             qPrintable(QString("misses %1, their tensors indexed %2").arg(first.misses).arg(first.indexedMissTensors)));
    QVERIFY(first.heldBytes <= first.budgetBytes);
    runStream(f, *rt, stream);  // every expert is a C member now
    const RuntimeStats second = rt->stats();
    QCOMPARE(second.misses, first.misses);
    const uint64_t cHits = second.hits[1] - first.hits[1];
    QVERIFY(cHits > 0 && second.inPlaceTensors - first.inPlaceTensors == cHits * kinds);
    QCOMPARE(second.indexedOnDemand, uint64_t{0});
  }

  // With room for every expert in its pools, an expert is read once: its first use. Nothing is
  // dropped after use while capacity is free (the pool its rank maps to may be full: the next one
  // keeps it), and a resident expert never evicts another to move up (that victim would be read
  // again). Whatever split the planner chooses, at every replan.
  void withRoomForAllAnExpertIsReadOnce() {
    const Manifest& m = huffman_.opened->manifest();
    const auto stream = requestStream(40, m.numLayers(), m.numExperts, 2, 23, true);
    std::set<std::pair<int, int>> distinct;
    for (const auto& step : stream)
      for (int l = 0; l < m.numLayers(); ++l)
        for (const ExpertRequest& r : step[static_cast<size_t>(l)]) distinct.insert({l, r.expert});
    for (unsigned pools : {0xFu, 0x3u, 0x1u, 0x2u}) {
      RuntimeOptions o;
      o.pools = pools;
      o.decompressWorkers = 2;
      o.replanEverySteps = 4;
      // Room for every expert in any pool: this tiny model's C and S parts are larger than its BF16
      // tensors (each chunk is padded to 4 KiB), so eight times the BF16 bytes.
      o.budget = MemoryBudget::poolsForShare(1.0);
      o.budget = MemoryBudget::bytes(open(huffman_, o)->stats().budgetBytes * 8);
      auto rt = open(huffman_, o);
      runStream(huffman_, *rt, stream);
      const RuntimeStats st = rt->stats();
      QVERIFY2(st.misses == distinct.size(),
               qPrintable(QString("pools %1: %2 misses for %3 distinct experts").arg(pools).arg(st.misses).arg(distinct.size())));
    }
  }

  // The page reserve (RuntimeOptions::reservePages) faults the free room in ahead of need, run by run,
  // as far as both the budget and the plan's pool capacities allow and no further; the buffers the
  // caches then keep are built from those pages, none fresh, and held bytes stay within the budget.
  // Off, they are fresh memory.
  void thePageReserveFaultsTheRoomInAheadOfNeed() {
    const Manifest& m = huffman_.opened->manifest();
    const auto stream = requestStream(6, m.numLayers(), m.numExperts, 2, 37, true);
    const uint64_t run = io::PageReserve::kRunBytes;
    auto capacity = [](const RuntimeStats& s) {
      uint64_t sum = 0;
      for (const auto& pool : s.pools) sum += pool.capacityBytes;
      return sum;
    };
    for (const bool reserve : {true, false}) {
      RuntimeOptions o;
      o.pools = poolBit(Pool::F) | poolBit(Pool::C);
      o.decompressWorkers = 2;
      o.reservePages = reserve;
      o.budget = MemoryBudget::poolsForShare(1.0);
      o.budget = MemoryBudget::bytes(open(huffman_, o)->stats().budgetBytes + 3 * run);  // more than the pools hold
      auto rt = open(huffman_, o);
      RuntimeStats before = rt->stats();
      // Nothing is kept yet: the room is the pools' capacity, capped by the budget.
      const uint64_t room = std::min(before.budgetBytes - before.workingSetBytes, capacity(before));
      QVERIFY2(room >= 2 * run, qPrintable(QString("room %1 bytes").arg(room)));
      // The reserve's thread (at the lowest priority) stops when one more run would not fit.
      while (reserve && before.reservedPageBytes < room / run * run) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        before = rt->stats();
      }
      QCOMPARE(before.reservedPageBytes, reserve ? room / run * run : 0);
      QCOMPARE(before.pooledPageBytes, before.reservedPageBytes);
      QVERIFY(before.heldBytes <= before.budgetBytes);
      runStream(huffman_, *rt, stream);  // every tensor checked, the budget after every layer
      const RuntimeStats after = rt->stats();
      QVERIFY(after.heldBytes <= after.budgetBytes);
      QCOMPARE(after.reservedPageBytes, before.reservedPageBytes);  // nothing freed: no room came back
      QVERIFY(after.reusedPageBytes + after.freshPageBytes > 0);
      uint64_t used = 0;
      for (const auto& pool : after.pools) used += pool.usedBytes;
      QVERIFY2(used <= room / run * run, qPrintable(QString("%1 bytes kept").arg(used)));  // all from reserved pages
      if (reserve)
        QCOMPARE(after.freshPageBytes, uint64_t{0});
      else
        QCOMPARE(after.reusedPageBytes, uint64_t{0});
    }
  }

  // A plan switch from C to F. Evicting at once (keepSurplus off): the C members' pages
  // (RuntimeOptions::recyclePages) become the F tensors read next — reused, not fresh memory — within
  // the budget, and what the cache does (hits, misses) is the same as with fresh buffers. Keeping the
  // surplus (the default): nothing is read again; each C member moves to F in memory when next hit.
  void aPlanSwitchReusesThePagesOfWhatItEvicts() {
    const Manifest& m = huffman_.opened->manifest();
    const auto stream = requestStream(12, m.numLayers(), m.numExperts, 2, 31, true);
    std::array<RuntimeStats, 2> after{};
    auto switchToF = [&](bool recycle, bool surplus, RuntimeStats& out) {
      RuntimeOptions o;
      o.pools = poolBit(Pool::C);
      o.decompressWorkers = 2;
      o.recyclePages = recycle;
      o.reservePages = false;  // only the pages the switch frees
      o.keepSurplus = surplus;
      o.budget = MemoryBudget::poolsForShare(1.0);
      o.budget = MemoryBudget::bytes(open(huffman_, o)->stats().budgetBytes * 8);  // room for all (see above)
      auto rt = open(huffman_, o);
      runStream(huffman_, *rt, stream);
      const RuntimeStats inC = rt->stats();
      QVERIFY(inC.pools[poolIndex(Pool::C)].residentExperts > 0);
      rt->setPools(poolBit(Pool::F));
      rt->waitForPlan();
      const RuntimeStats switched = rt->stats();
      QCOMPARE(switched.pools[poolIndex(Pool::C)].residentExperts, surplus ? inC.pools[poolIndex(Pool::C)].residentExperts : 0);
      QVERIFY(switched.heldBytes <= switched.budgetBytes);
      runStream(huffman_, *rt, stream);  // every tensor checked against the store
      const RuntimeStats inF = rt->stats();
      QCOMPARE(inF.pools[poolIndex(Pool::F)].residentExperts, inC.pools[poolIndex(Pool::C)].residentExperts);
      QCOMPARE(inF.pools[poolIndex(Pool::C)].residentExperts, 0);
      QVERIFY(inF.heldBytes <= inF.budgetBytes);
      if (surplus) QCOMPARE(inF.misses, inC.misses);  // the second pass read nothing
      if (recycle) {
        if (!surplus) QCOMPARE(switched.pooledPageBytes, inC.pools[poolIndex(Pool::C)].usedBytes);  // all C's pages
        const uint64_t reused = inF.reusedPageBytes - switched.reusedPageBytes;
        const uint64_t fresh = inF.freshPageBytes - switched.freshPageBytes;
        QVERIFY2(reused > 0 && (surplus || reused >= fresh),
                 qPrintable(QString("F built from %1 reused and %2 fresh bytes").arg(reused).arg(fresh)));
      } else {
        QCOMPARE(inF.pooledPageBytes + inF.reusedPageBytes + inF.freshPageBytes, uint64_t{0});
      }
      out = inF;
    };
    switchToF(true, false, after[0]);
    switchToF(false, false, after[1]);
    if (QTest::currentTestFailed()) return;
    QCOMPARE(after[0].misses, after[1].misses);
    QCOMPARE(after[0].hits, after[1].hits);
    RuntimeStats kept;
    switchToF(true, true, kept);
    if (QTest::currentTestFailed()) return;
    QVERIFY(kept.misses < after[0].misses);
  }

  // The plan switches from the prior to each layer's own history once every layer has 16 steps of
  // it: the replan comes when layer 0 starts its 17th step, when the others have their 16th.
  void theFirstHistoryReplanCoversEveryLayer() {
    const Manifest& m = huffman_.opened->manifest();
    RuntimeOptions o;
    o.decompressWorkers = 2;
    o.replanEverySteps = 1000;  // only the history replan
    o.budget = MemoryBudget::poolsForShare(0.3);
    auto rt = open(huffman_, o);
    QCOMPARE(rt->stats().layersPlannedFromHistory, 0);
    const auto stream = requestStream(17, m.numLayers(), m.numExperts, 2, 29);
    zipmoe::testing::Stream sixteen(stream.begin(), stream.begin() + 16);
    runStream(huffman_, *rt, sixteen);
    { auto batch = rt->acquire(0, stream[16][0]); while (batch->next()) {} }
    while (rt->stats().replans < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the planner thread
    QCOMPARE(rt->stats().layersPlannedFromHistory, m.numLayers());
  }

  // A prompt of 16 tokens or more plans each layer at its prefill, before the layer's experts are
  // placed; without it (planFromPrompt off) the layers keep the prior until 16 steps. Either way the
  // prompt's most-routed experts are kept where their rank puts them and are hits at the next step,
  // and the tensors are the store's (runStream checks every one and the budget after every layer).
  void aLongPromptPlansItsLayersAtPrefill() {
    const Manifest& m = huffman_.opened->manifest();
    const int k = static_cast<int>(m.config->value("num_experts_per_tok", 1));
    const FavouriteStreams streams = favouriteStreams(m);
    for (bool fromPrompt : {true, false}) {
      auto rt = open(huffman_, favouriteOptions(fromPrompt));
      runStream(huffman_, *rt, streams.prefill);
      QCOMPARE(rt->stats().layersPlannedFromPrompt, fromPrompt ? m.numLayers() : 0);
      QCOMPARE(rt->activationCounts().tokens[static_cast<size_t>(1)], static_cast<uint64_t>(16 * k));  // layer 0's b
      // The favourites rank first (count ties broken by tokens), so they displace same-count
      // experts the prefill placed before them.
      expectFavouritesInF(*rt, streams.decode);
    }
  }

  void aLongPromptBlendsIntoStoredHistory() {
    const Manifest& m = huffman_.opened->manifest();
    const int n = m.numExperts;
    // Stored statistics (no tokens): 100 steps in which every expert but the layer's two favourites
    // of this chat ran. The history alone ranks the favourites last.
    ActivationCounts history{m.numLayers(), n, std::vector<uint64_t>(static_cast<size_t>(m.numLayers() * n), 100),
                             std::vector<uint64_t>(static_cast<size_t>(m.numLayers()), 100), {}};
    for (int l = 0; l < m.numLayers(); ++l) {
      const auto [a, b] = favourites(m, l);
      history.counts[static_cast<size_t>(l * n + a)] = history.counts[static_cast<size_t>(l * n + b)] = 0;
    }
    const FavouriteStreams streams = favouriteStreams(m);
    for (bool fromPrompt : {true, false}) {
      RuntimeOptions o = favouriteOptions(fromPrompt);
      o.history = history;
      auto rt = open(huffman_, o);
      QCOMPARE(rt->stats().layersPlannedFromHistory, m.numLayers());
      QCOMPARE(rt->stats().layersPlannedFromSession, 0);
      runStream(huffman_, *rt, streams.prefill);
      // The prefill's tokens (≥ 16 a layer) are blended in at once, layer by layer.
      QCOMPARE(rt->stats().layersPlannedFromSession, fromPrompt ? m.numLayers() : 0);
      QCOMPARE(rt->stats().layersPlannedFromHistory, m.numLayers());
      // Blended, the favourites rank first.
      if (fromPrompt) expectFavouritesInF(*rt, streams.decode);
    }
  }

  void roomALayerLeavesIsLentToAnother() {
    const Manifest& m = huffman_.opened->manifest();
    const int n = m.numExperts;
    // Layer 0 routes to every expert in turn, the other layers to experts 0 and 1 only: three passes.
    zipmoe::testing::Stream pass;
    for (int s = 0; s < n / 2; ++s) {
      std::vector<std::vector<ExpertRequest>> step;
      step.push_back({{2 * s, 1, false, true}, {2 * s + 1, 1, false, true}});
      for (int l = 1; l < m.numLayers(); ++l) step.push_back({{0, 1, false, true}, {1, 1, false, true}});
      pass.push_back(step);
    }
    std::map<bool, uint64_t> misses, lent;
    for (bool lend : {true, false}) {
      RuntimeOptions o;
      o.decompressWorkers = 2;
      o.replanEverySteps = 1000;
      o.planFromPrompt = false;  // one plan, the same in both runs (no mid-run plan priced with observed costs)
      o.lendRoom = lend;
      o.budget = MemoryBudget::poolsForShare(0.5);
      auto rt = open(huffman_, o);
      runStream(huffman_, *rt, pass);  // checks the tensors and heldBytes ≤ budget after every layer
      const uint64_t before = rt->stats().misses;
      runStream(huffman_, *rt, pass);
      runStream(huffman_, *rt, pass);
      misses[lend] = rt->stats().misses - before;
      lent[lend] = rt->stats().lentBytes;
      QVERIFY(rt->stats().heldBytes <= rt->stats().budgetBytes);
    }
    // Half the experts' bytes per layer cannot hold all of layer 0's; the room the other layers
    // leave can, so after the first pass layer 0 reads (almost) nothing again.
    QVERIFY2(misses[true] < misses[false],
             (std::to_string(misses[true]) + " misses lent, " + std::to_string(misses[false]) + " own shares").c_str());
    qInfo("misses after the first pass: %llu lent, %llu own shares", static_cast<unsigned long long>(misses[true]),
          static_cast<unsigned long long>(misses[false]));
    QVERIFY(lent[true] > 0);
    QCOMPARE(lent[false], uint64_t{0});
  }

  void everyCodecAndShardCount() {
    int index = 0;
    for (const char* codec : {"zstd", "lz4", "raw"}) {
      Fixture f;
      ++index;
      makeFixture(f, dir_ / ("codec" + std::to_string(index)), parseCodecSpec(codec), index == 2 ? 1 : 3);
      const Manifest& m = f.opened->manifest();
      RuntimeOptions o;
      o.decompressWorkers = 3;
      o.budget = MemoryBudget::poolsForShare(0.3);
      auto rt = open(f, o);
      runStream(f, *rt, requestStream(10, m.numLayers(), m.numExperts, 2, 11));
    }
  }

  void policiesSchedulesAndBufferedReads() {
    const Manifest& m = huffman_.opened->manifest();
    const auto stream = requestStream(16, m.numLayers(), m.numExperts, 2, 3);
    for (auto policy : {EvictionPolicy::Lru, EvictionPolicy::Fifo, EvictionPolicy::Marking, EvictionPolicy::Lfu}) {
      RuntimeOptions o;
      o.eviction = policy;
      o.budget = MemoryBudget::poolsForShare(0.2);
      runStream(huffman_, *open(huffman_, o), stream);
    }
    RuntimeOptions fifo;
    fifo.fifoSchedule = true;
    fifo.planning = false;
    fifo.readMode = ReadMode::Buffered;
    fifo.outputSlots = 1;
    fifo.stagingSlots = 1;
    fifo.decompressWorkers = 1;
    fifo.coalesceReads = false;
    fifo.budget = MemoryBudget::poolsForShare(0.2);
    runStream(huffman_, *open(huffman_, fifo), stream);
  }

  void fullTensorBaselines() {
    const Manifest& m = huffman_.opened->manifest();
    const auto stream = requestStream(16, m.numLayers(), m.numExperts, 2, 5);
    for (auto policy : {EvictionPolicy::Lru, EvictionPolicy::Fifo, EvictionPolicy::Lfu, EvictionPolicy::Marking}) {
      for (double fraction : {0.0, 0.7}) {  // (LRU over a cyclic layer scan needs room for many layers)
        RuntimeOptions o;
        o.mode = OffloadMode::FullTensor;
        o.eviction = policy;
        o.checkpointDir = huffman_.hf;
        o.budget = MemoryBudget::poolsForShare(fraction);
        auto rt = open(huffman_, o);
        runStream(huffman_, *rt, stream);
        const RuntimeStats st = rt->stats();
        if (fraction == 0.0) QCOMPARE(st.hits[0], uint64_t{0});
        else QVERIFY(st.hits[0] > 0);
        QVERIFY(st.bytesRead > 0);
      }
    }
    RuntimeOptions noCheckpoint;
    noCheckpoint.mode = OffloadMode::FullTensor;
    noCheckpoint.budget = MemoryBudget::poolsForShare(1);
    ZIPMOE_EXPECT_ERROR(open(huffman_, noCheckpoint), "checkpoint");
  }

  // Every runtime closes the files it opened: the full-tensor baseline's checkpoint files, the
  // store's. Opening and closing many leaves the process with the open files it had.
  void openingAndClosingRuntimesLeaksNoFiles() {
    const auto openFiles = [] {
      size_t n = 0;
      for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
      return n;
    };
    const Manifest& m = huffman_.opened->manifest();
    RuntimeOptions full;
    full.mode = OffloadMode::FullTensor;
    full.checkpointDir = huffman_.hf;
    full.budget = MemoryBudget::poolsForShare(0.3);
    RuntimeOptions zip;
    zip.budget = MemoryBudget::poolsForShare(0.3);
    {  // once first: whatever a first use opens for good (thread pools, caches) is not counted
      auto rt = open(huffman_, full);
      runStream(huffman_, *rt, requestStream(1, m.numLayers(), m.numExperts, 2, 31));
    }
    const size_t before = openFiles();
    for (int i = 0; i < 40; ++i) {
      auto rt = open(huffman_, i % 2 ? zip : full);
      runStream(huffman_, *rt, requestStream(1, m.numLayers(), m.numExperts, 2, 32 + i));
    }
    QCOMPARE(openFiles(), before);
  }

  void liveBudgetChangesKeepMemoryWithinTheBudget() {
    const Manifest& m = huffman_.opened->manifest();
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.6);
    auto rt = open(huffman_, o);
    const uint64_t big = rt->stats().budgetBytes, small = budgetFraction(huffman_, 0.05, o);
    // A "slider" thread moves the budget while the model thread runs: at least one move is applied
    // before each step, and more while the step's layers run (each tensor is still checked against
    // the store by runStream).
    {
      BudgetSlider slider(*rt, {small, big});
      const int steps = runStream(huffman_, *rt, requestStream(30, m.numLayers(), m.numExperts, 2, 9), [&](int step) {
        slider.waitForMoves(step + 1);
        QVERIFY2(slider.error().empty(), slider.error().c_str());
      });
      QVERIFY(steps > 0);
      const int moves = slider.stop();
      QVERIFY2(slider.error().empty(), slider.error().c_str());
      QVERIFY(moves >= 30);
      QVERIFY(rt->stats().replans >= static_cast<uint64_t>(moves));
    }
    // While idle, a smaller budget frees memory at once (no layer has to run first).
    rt->setBudget(MemoryBudget::bytes(big));
    rt->waitForPlan();
    runStream(huffman_, *rt, requestStream(4, m.numLayers(), m.numExperts, 2, 8));
    QVERIFY(rt->stats().heldBytes > small);
    rt->setBudget(MemoryBudget::bytes(small));
    rt->waitForPlan();
    QVERIFY(rt->stats().heldBytes <= small);
    runStream(huffman_, *rt, requestStream(2, m.numLayers(), m.numExperts, 2, 10));
    const RuntimeStats st = rt->stats();
    QCOMPARE(st.budgetBytes, small);
    QVERIFY(st.heldBytes <= small);
    QVERIFY(st.replans > 2);
  }

  // A replan that fails on the planner thread is reported in the stats; the previous plan stays in
  // force, generation goes on under it, and the next replan works again.
  void aFailedReplanIsReportedAndThePreviousPlanStays() {
    const Manifest& m = huffman_.opened->manifest();
    std::atomic<bool> failing{false};
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.3);
    o.beforeReplan = [&] {
      if (failing.load()) throw Error("injected planner failure");
    };
    auto rt = open(huffman_, o);
    runStream(huffman_, *rt, requestStream(4, m.numLayers(), m.numExperts, 2, 21));
    const uint64_t before = rt->stats().budgetBytes, other = budgetFraction(huffman_, 0.6, o);
    QCOMPARE(rt->stats().planFailures, uint64_t{0});
    failing = true;
    rt->setBudget(MemoryBudget::bytes(other));
    rt->waitForPlan();
    RuntimeStats st = rt->stats();
    QCOMPARE(st.planFailures, uint64_t{1});
    QVERIFY2(st.lastPlanError.find("injected planner failure") != std::string::npos, st.lastPlanError.c_str());
    QCOMPARE(st.budgetBytes, before);  // the previous plan is in force
    runStream(huffman_, *rt, requestStream(4, m.numLayers(), m.numExperts, 2, 22));  // tensors still exact
    QVERIFY(rt->stats().heldBytes <= before);
    failing = false;
    rt->setBudget(MemoryBudget::bytes(other));
    rt->waitForPlan();
    st = rt->stats();
    QCOMPARE(st.budgetBytes, other);
    QCOMPARE(st.planFailures, uint64_t{1});
  }

  void activationCountsRoundTrip() {
    const Manifest& m = huffman_.opened->manifest();
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.3);
    auto rt = open(huffman_, o);
    runStream(huffman_, *rt, requestStream(20, m.numLayers(), m.numExperts, 2, 12));
    const ActivationCounts counts = rt->activationCounts();
    QCOMPARE(counts.steps[0], uint64_t{20});
    uint64_t total = 0;
    for (uint64_t c : counts.counts) total += c;
    QCOMPARE(total, uint64_t{20} * static_cast<uint64_t>(m.numLayers()) * 2);
    auto other = open(huffman_, o);
    other->loadActivationCounts(counts);
    other->waitForPlan();
    QCOMPARE(other->activationCounts().counts, counts.counts);
    ActivationCounts wrong = counts;
    wrong.experts += 1;
    ZIPMOE_EXPECT_ERROR(other->loadActivationCounts(wrong), "experts");
  }

  void traceEventsAndChromeJson() {
    const Manifest& m = huffman_.opened->manifest();
    RuntimeOptions o;
    o.decompressWorkers = 2;
    o.coalesceReads = false;  // one event per chunk
    o.outputSlots = 3;        // tensors recovered into them: every operation kind runs
    o.budget = MemoryBudget::poolsForShare(0.1);
    auto rt = open(huffman_, o);
    runStream(huffman_, *rt, requestStream(4, m.numLayers(), m.numExperts, 2, 13));
    std::vector<TraceEvent> events;
    rt->drainTrace(events);
    std::map<TraceOp, int> ops;
    for (const auto& e : events) {
      QVERIFY(e.endNs >= e.startNs);
      QVERIFY(e.lane < rt->lanes().count());
      ++ops[e.op];
    }
    QVERIFY(ops[TraceOp::ReadSM] > 0 && ops[TraceOp::ReadE] > 0 && ops[TraceOp::Decompress] > 0 &&
            ops[TraceOp::Recover] > 0 && ops[TraceOp::ExpertCompute] > 0);
    QVERIFY(ops[TraceOp::Decompress] >= ops[TraceOp::ReadE]);  // cached E-chunks decompress without a read
    // Two reads are in flight at once, but the I/O lane is one lane: each read is drawn (and priced)
    // from where the previous one ended, so its events never overlap.
    std::vector<TraceEvent> reads;
    for (const auto& e : events)
      if (e.lane == rt->lanes().io()) reads.push_back(e);
    std::sort(reads.begin(), reads.end(), [](const TraceEvent& a, const TraceEvent& b) { return a.startNs < b.startNs; });
    QVERIFY(reads.size() > 2);
    for (size_t i = 1; i < reads.size(); ++i)
      QVERIFY2(reads[i].startNs >= reads[i - 1].endNs, qPrintable(QString("I/O events %1 and %2 overlap").arg(i - 1).arg(i)));
    std::ostringstream json;
    writeChromeTrace(json, events, rt->lanes());
    const auto parsed = nlohmann::json::parse(json.str());
    QVERIFY(parsed["traceEvents"].size() > events.size());
    std::vector<TraceEvent> again;
    QCOMPARE(rt->drainTrace(again), size_t{0});
    // Coalesced reads: one request per tensor (E-chunks + SM-chunk of a plain miss).
    o.coalesceReads = true;
    auto coalesced = open(huffman_, o);
    runStream(huffman_, *coalesced, requestStream(4, m.numLayers(), m.numExperts, 2, 13));
    coalesced->drainTrace(again);
    QVERIFY(std::count_if(again.begin(), again.end(), [](const TraceEvent& e) { return e.op == TraceOp::ReadTensor; }) > 0);
    QCOMPARE(std::count_if(again.begin(), again.end(), [](const TraceEvent& e) { return e.op == TraceOp::ReadE && e.shard >= 0; }), 0);
  }

  void traceBufferDropsWhenFullAndIsThreadSafe() {
    TraceBuffer buffer(1024);
    std::vector<std::thread> producers;
    for (int t = 0; t < 4; ++t)
      producers.emplace_back([&, t] {
        for (int i = 0; i < 1000; ++i) {
          TraceEvent e;
          e.token = t;
          e.startNs = i;
          buffer.record(e);
        }
      });
    std::vector<TraceEvent> drained;
    while (drained.size() + buffer.dropped() < 4000) buffer.drain(drained);
    for (auto& p : producers) p.join();
    buffer.drain(drained);
    QCOMPARE(drained.size() + buffer.dropped(), size_t{4000});
    std::map<int, int64_t> last;
    for (const auto& e : drained) {  // per producer, in order
      if (last.count(e.token)) QVERIFY(e.startNs > last[e.token]);
      last[e.token] = e.startNs;
    }
  }

  void budgetBelowTheMinimumIsRejectedWithTheMinimum() {
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0);
    auto rt = open(huffman_, o);
    const uint64_t minimum = rt->minimumBudget();
    QCOMPARE(rt->stats().budgetBytes, minimum);
    o.budget = MemoryBudget::bytes(minimum - 1);
    ZIPMOE_EXPECT_ERROR(open(huffman_, o), "below the minimum", std::to_string(minimum));
    ZIPMOE_EXPECT_ERROR(rt->setBudget(MemoryBudget::bytes(minimum / 2)), "below the minimum", std::to_string(minimum));
    QCOMPARE(rt->setBudget(MemoryBudget::bytes(minimum / 2).clamped()), minimum);  // a clamped budget is raised
    o.budget = MemoryBudget::bytes(minimum);
    auto smallest = open(huffman_, o);
    const Manifest& m = huffman_.opened->manifest();
    runStream(huffman_, *smallest, requestStream(3, m.numLayers(), m.numExperts, 2, 1));
  }

  void foreignProfilesAreRejected() {
    CostProfile p = huffman_.directProfile;
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(1);
    p.storeId = "crc32c:00000000 size:1";
    ZIPMOE_EXPECT_ERROR(ExpertRuntime::open(huffman_.opened, o, p), "another store", "zipmoe profile");
    p = huffman_.directProfile;
    p.host = "elsewhere | some CPU | 64 cores";
    ZIPMOE_EXPECT_ERROR(ExpertRuntime::open(huffman_.opened, o, p), "another machine", "elsewhere");
    ZIPMOE_EXPECT_ERROR(ExpertRuntime::open(huffman_.opened, o, huffman_.bufferedProfile), "buffered reads");
    ZIPMOE_EXPECT_ERROR(ExpertRuntime::open(huffman_.opened, o, CostProfile{}), "not measured");
    // Saved and loaded intact; bad files named.
    const auto path = dir_ / "profile.json";
    saveCostProfile(huffman_.directProfile, path);
    const CostProfile back = loadCostProfile(path);
    QCOMPARE(back.smRead, huffman_.directProfile.smRead);
    QCOMPARE(back.storeId, huffman_.directProfile.storeId);
    std::ofstream(dir_ / "bad.json") << R"({"format":"zipmoe-cost-profile","version":1,"host":"h","store":"s",
      "read_mode":"direct","sm_read_s":-1})";
    ZIPMOE_EXPECT_ERROR(loadCostProfile(dir_ / "bad.json"), "bad.json", "sm_read_s");
    // Observed costs: saved only when there are some, loaded intact, a bad figure named.
    QVERIFY(!nlohmann::json::parse(std::ifstream(path)).contains("observed"));
    CostProfile withObserved = huffman_.directProfile;
    withObserved.observed.fullRead = {2.9e-3, 40};
    withObserved.observed.cpuLayer = {1.9, 200};
    saveCostProfile(withObserved, path);
    const CostProfile again = loadCostProfile(path);
    QCOMPARE(again.observed.fullRead.seconds, 2.9e-3);
    QCOMPARE(again.observed.fullRead.count, uint64_t{40});
    QCOMPARE(again.observed.cpuLayer.count, uint64_t{200});
    QCOMPARE(again.observed.decompress.count, uint64_t{0});
    nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
    j["observed"]["recover"] = {{"s", -1.0}, {"n", 3}};
    std::ofstream(dir_ / "bad-observed.json") << j.dump();
    ZIPMOE_EXPECT_ERROR(loadCostProfile(dir_ / "bad-observed.json"), "bad-observed.json", "'recover'");
    j["observed"] = {{"recover", 3}};
    std::ofstream(dir_ / "bad-observed.json") << j.dump();
    ZIPMOE_EXPECT_ERROR(loadCostProfile(dir_ / "bad-observed.json"), "observed.recover");
    // A profile handed to a runtime is checked the same way.
    CostProfile badSeed = huffman_.directProfile;
    badSeed.observed.decompress = {std::nan(""), 1};
    ZIPMOE_EXPECT_ERROR(ExpertRuntime::open(huffman_.opened, o, badSeed), "cost profile", "'decompress'");
  }

  void corruptedChunkStopsTheLayerCleanly() {
    Fixture f;
    makeFixture(f, dir_ / "corrupt", CodecSpec{}, 2);
    const Manifest& m = f.opened->manifest();
    // Flip a byte inside the SM-chunk of layer 1, expert 2, tensor 0.
    const ChunkRef& c = m.expert(1, 2, 0).smChunk;
    {
      std::fstream io(f.store / "experts.bin", std::ios::in | std::ios::out | std::ios::binary);
      io.seekg(static_cast<std::streamoff>(c.offset + 10));
      char b = 0;
      io.read(&b, 1);
      b = static_cast<char>(b ^ 0x40);
      io.seekp(static_cast<std::streamoff>(c.offset + 10));
      io.write(&b, 1);
    }
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.0);
    auto rt = open(f, o);
    const std::vector<ExpertRequest> good = {{0, 1, false, true}, {1, 1, false, true}},
                                     bad = {{2, 1, false, true}, {3, 1, false, true}};
    {
      auto batch = rt->acquire(1, bad);
      bool threw = false;
      try {
        while (batch->next()) {
        }
      } catch (const Error& e) {
        threw = true;
        const std::string msg = e.what();
        QVERIFY2(msg.find("checksum mismatch") != std::string::npos, msg.c_str());
        QVERIFY2(msg.find(m.expert(1, 2, 0).name) != std::string::npos, msg.c_str());
      }
      QVERIFY(threw);
    }
    // The runtime goes on serving other experts, and the same expert fails again (nothing cached).
    for (int round = 0; round < 2; ++round) {
      auto batch = rt->acquire(1, good);
      int n = 0;
      while (batch->next()) ++n;
      QCOMPARE(n, 2);
    }
    {
      auto batch = rt->acquire(1, bad);
      ZIPMOE_EXPECT_ERROR(while (batch->next()) {}, "checksum mismatch");
    }
    // A batch dropped half-way (the model failed between experts) leaves the runtime usable.
    {
      auto batch = rt->acquire(0, good);
      QVERIFY(batch->next().has_value());
    }
    auto batch = rt->acquire(0, good);
    int n = 0;
    while (batch->next()) ++n;
    QCOMPARE(n, 2);
  }

  void requestsAreValidated() {
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(1);
    auto rt = open(huffman_, o);
    const std::vector<ExpertRequest> twice = {{1, 1}, {1, 2}}, outside = {{999, 1}};
    ZIPMOE_EXPECT_ERROR(rt->acquire(0, twice), "requested twice");
    ZIPMOE_EXPECT_ERROR(rt->acquire(0, outside), "out of range");
    ZIPMOE_EXPECT_ERROR(rt->acquire(99, twice), "layer 99");
    auto empty = rt->acquire(0, {});
    QVERIFY(!empty->next().has_value());
  }

  // Output slots as needed: with fused recovery and no raw misses there are none (their room goes
  // to the pools), so a request that takes BF16 words only is refused with a message that says why;
  // a runtime given slots serves it recovered. Where slots are needed, 0 is refused at open.
  void outputSlotsOnlyWhereNeeded() {
    const Manifest& m = huffman_.opened->manifest();
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.0);
    auto none = open(huffman_, o);
    QCOMPARE(none->options().outputSlots, 0);
    const std::vector<ExpertRequest> wordsOnly = {{1, 1}}, merges = {{1, 1, false, true}};
    ZIPMOE_EXPECT_ERROR(none->acquire(0, wordsOnly), "expert 1 of MoE layer 0", "BF16 words only", "outputSlots = 0");
    {
      auto batch = none->acquire(0, merges);
      const auto ready = batch->next();
      QVERIFY(ready && !ready->tensors[0] && ready->exponents[0] && ready->signMantissa[0]);
      std::vector<uint16_t> scratch;
      const size_t numel = static_cast<size_t>(m.expert(0, 1, 0).numel);
      QVERIFY(std::memcmp(bf16Words(*ready, 0, numel, scratch), huffman_.reference[static_cast<size_t>(m.numKinds())].data(),
                          numel * 2) == 0);
    }
    o.outputSlots = 3;
    auto three = open(huffman_, o);
    {
      auto batch = three->acquire(0, wordsOnly);
      const auto ready = batch->next();
      QVERIFY(ready && ready->tensors[0]);
    }
    uint64_t expertBytes = 0;
    for (int kind = 0; kind < m.numKinds(); ++kind) expertBytes += m.expert(0, 0, kind).numel * 2;
    QCOMPARE(three->minimumBudget() - none->minimumBudget(), 3 * expertBytes);
    o.outputSlots = 0;
    o.fuseRecovery = false;
    ZIPMOE_EXPECT_ERROR(open(huffman_, o), "outputSlots = 0", "fused recovery");
    o.fuseRecovery = true;
    o.outputSlots = -2;
    ZIPMOE_EXPECT_ERROR(open(huffman_, o), "outputSlots = -2");
    o.outputSlots = -1;
    o.sessionPriorTokens = -1;
    ZIPMOE_EXPECT_ERROR(open(huffman_, o), "sessionPriorTokens = -1", "0 … 1000000");
    o.sessionPriorTokens = std::nan("");
    ZIPMOE_EXPECT_ERROR(open(huffman_, o), "sessionPriorTokens = nan");
    o.sessionPriorTokens = 4;
    o.smoothingTokens = 2e6;
    ZIPMOE_EXPECT_ERROR(open(huffman_, o), "smoothingTokens = 2000000", "0 … 1000000");
    o.smoothingTokens = -std::numeric_limits<double>::infinity();
    ZIPMOE_EXPECT_ERROR(open(huffman_, o), "smoothingTokens = -inf");
  }
};

QTEST_APPLESS_MAIN(TestExpertRuntime)
#include "test_expert_runtime.moc"
