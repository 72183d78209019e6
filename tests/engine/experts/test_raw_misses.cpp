// Raw misses and the contention profile on a real store with real threads: with the HF checkpoint
// given, misses served by whole-tensor reads (RawMisses::Always, and as planned) hand out tensors
// bit-identical to the store's at every budget and pool subset, within the budget; a raw miss kept
// in F is found again. The profile's contention figures are measured with real decoder threads,
// saved and loaded (version 2), a version-1 file loads without them and is reported as not fitting.
// Runs under ThreadSanitizer (label `threads`). No test asserts a duration.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/experts/runtime_fixture.h"
#include "test_support.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/error.h"
#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/format/store.h"
#include "tools/synthetic/synthetic_model.h"

using namespace zipmoe;
using zipmoe::testing::Fixture;
using zipmoe::testing::makeFixture;
using zipmoe::testing::requestStream;
using zipmoe::testing::runStream;
using zipmoe::testing::TempDir;

class TestRawMisses : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;
  Fixture f_;

 private Q_SLOTS:
  void initTestCase() { makeFixture(f_, dir_ / "model", CodecSpec{}, 4); }

  void rawMissesAreBitExactAtEveryBudget() {
    const Manifest& m = f_.opened->manifest();
    const auto stream = requestStream(20, m.numLayers(), m.numExperts, 2, 5);
    for (RawMisses mode : {RawMisses::Always, RawMisses::Planned})
      for (unsigned pools : {0xFu, 0x1u, 0x9u})
        for (double fraction : {0.0, 0.1, 0.35, 1.0}) {
          RuntimeOptions o;
          o.pools = pools;
          o.decompressWorkers = 2;
          o.replanEverySteps = 6;
          o.checkpointDir = f_.hf;
          o.rawMisses = mode;
          o.budget = MemoryBudget::poolsForShare(fraction);
          auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
          runStream(f_, *rt, stream);
          const RuntimeStats st = rt->stats();
          QCOMPARE(st.hits[0] + st.hits[1] + st.hits[2] + st.hits[3] + st.misses, st.activations);
          // A whole-model F pool: raw misses kept in F are found again.
          if (fraction >= 1.0 && pools == 0x1u) QVERIFY2(st.hits[0] > st.activations / 2, "F should mostly hit");
        }
  }

  void rawMissesReadWholeTensors() {
    // Nothing kept (budget = the working set): every request is a raw miss reading the
    // checkpoint's aligned BF16 tensors, at least 2 bytes per weight.
    const Manifest& m = f_.opened->manifest();
    RuntimeOptions o;
    o.checkpointDir = f_.hf;
    o.rawMisses = RawMisses::Always;
    o.budget = MemoryBudget::poolsForShare(0.0);
    auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
    runStream(f_, *rt, requestStream(3, m.numLayers(), m.numExperts, 2, 9));
    const RuntimeStats st = rt->stats();
    QCOMPARE(st.misses, st.activations);
    uint64_t weights = 0;
    for (int k = 0; k < m.numKinds(); ++k) weights += m.expert(0, 0, k).numel;
    QVERIFY(st.bytesRead >= st.misses * weights * 2);
    // Every raw read was observed (a tensor each), and no decoding.
    QVERIFY(st.observed.fullRead.count > 0);
    QVERIFY(st.observed.fullRead.seconds > 0);
    QCOMPARE(st.observed.decompress.count, uint64_t{0});
    QVERIFY(st.observed.readLayer.count > 0);
    QCOMPARE(st.observed.cpuLayer.count, uint64_t{0});
  }

  void observedCostsAreSeededAndGrow() {
    // A runtime that decodes observes its reads, decompression and recovery; one seeded with
    // those figures starts from them and goes on observing.
    const Manifest& m = f_.opened->manifest();
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0.0);
    o.outputSlots = 3;  // the requests' tensors are recovered into them, so recovery is observed
    RuntimeStats first;
    {
      auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
      runStream(f_, *rt, requestStream(3, m.numLayers(), m.numExperts, 2, 9));
      first = rt->stats();
    }
    QVERIFY(first.observed.decompress.count > 0);
    QVERIFY(first.observed.recover.count > 0);
    QVERIFY(first.observed.tensorRead.count + first.observed.eRead.count > 0);
    QVERIFY(first.observed.cpuLayer.count > 0);
    QCOMPARE(first.observed.fullRead.count, uint64_t{0});
    o.observed = first.observed;
    auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
    QCOMPARE(rt->stats().observed.decompress.count, first.observed.decompress.count);
    runStream(f_, *rt, requestStream(3, m.numLayers(), m.numExperts, 2, 9));
    QVERIFY(rt->stats().observed.decompress.count > first.observed.decompress.count ||
            first.observed.decompress.count == ObservedCost::kObservedWindow);
    // A seed that is not a cost is refused, naming the figure.
    ObservedCosts bad;
    bad.recover.seconds = std::nan("");
    bad.recover.count = 3;
    o.observed = bad;
    ZIPMOE_EXPECT_ERROR(ExpertRuntime::open(f_.opened, o, f_.directProfile), "observed figure 'recover'");
  }

  void alwaysNeedsACheckpoint() {
    RuntimeOptions o;
    o.rawMisses = RawMisses::Always;
    o.budget = MemoryBudget::poolsForShare(0.2);
    ZIPMOE_EXPECT_ERROR(ExpertRuntime::open(f_.opened, o, f_.directProfile), "checkpointDir");
  }

  void contentionIsMeasuredWithRealDecoders() {
    CostProfile p = f_.directProfile;
    QVERIFY(p.tensorRead > 0);
    // A stand-in for the FFN: a short busy loop; the figures' shape, not their values, is checked.
    const auto spin = [] {
      const auto start = std::chrono::steady_clock::now();
      volatile double x = 0;
      for (int i = 0; i < 20000; ++i) x = x + 1e-9 * i;
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    measureContention(p, *f_.opened, ReadMode::Direct, 2, spin, 3);
    QVERIFY(p.hasContention());
    QCOMPARE(p.computeBusy.size(), size_t{3});
    for (double t : p.computeBusy) QVERIFY(t > 0);
    QVERIFY(p.decompressBusy > 0);
    QVERIFY(p.fullReadBusy > 0);
    QVERIFY(p.computeSlowdown() >= 1 && p.decompressSlowdown() >= 1 && p.readSlowdown() >= 1);
    // Without an FFN: the decoders' pace and the reads, no compute figures (no contention term).
    CostProfile q = f_.directProfile;
    measureContention(q, *f_.opened, ReadMode::Direct, 1, {}, 2);
    QVERIFY(!q.hasContention());
    QCOMPARE(q.computeSlowdown(), 1.0);
    ZIPMOE_EXPECT_ERROR(measureContention(q, *f_.opened, ReadMode::Direct, 0, spin, 2), "worker");

    // Saved and loaded intact (version 3).
    const auto path = dir_ / "profile.json";
    saveCostProfile(p, path);
    const CostProfile back = loadCostProfile(path);
    QCOMPARE(back.computeBusy, p.computeBusy);
    QCOMPARE(back.contentionWorkers, 2);
    QCOMPARE(back.decompressBusy, p.decompressBusy);
    QCOMPARE(back.fullReadBusy, p.fullReadBusy);
    QCOMPARE(back.tensorRead, p.tensorRead);
    QVERIFY(loadMatchingProfile(path, *f_.opened, ReadMode::Direct).has_value());

    // Version 1 (no contention): loads with none, and does not fit (the engine re-measures it).
    nlohmann::json j = nlohmann::json::parse(zipmoe::testing::readText(path));
    j["version"] = 1;
    j.erase("contention");
    j.erase("tensor_read_s");
    std::ofstream(dir_ / "v1.json") << j.dump();
    const CostProfile old = loadCostProfile(dir_ / "v1.json");
    QVERIFY(!old.hasContention());
    QCOMPARE(old.tensorRead, 0.0);
    QCOMPARE(old.smRead, p.smRead);
    std::string whyNot;
    QVERIFY(!loadMatchingProfile(dir_ / "v1.json", *f_.opened, ReadMode::Direct, &whyNot));
    QVERIFY2(whyNot.find("v1.json") != std::string::npos && whyNot.find("contention") != std::string::npos,
             whyNot.c_str());
    // Bad contention fields and unknown versions are named.
    j = nlohmann::json::parse(zipmoe::testing::readText(path));
    j["contention"]["compute_busy_s"] = {1e-3};
    std::ofstream(dir_ / "bad.json") << j.dump();
    ZIPMOE_EXPECT_ERROR(loadCostProfile(dir_ / "bad.json"), "bad.json", "contention.compute_busy_s");
    j = nlohmann::json::parse(zipmoe::testing::readText(path));
    j.erase("contention");
    std::ofstream(dir_ / "bad2.json") << j.dump();
    ZIPMOE_EXPECT_ERROR(loadCostProfile(dir_ / "bad2.json"), "bad2.json", "contention");
    j = nlohmann::json::parse(zipmoe::testing::readText(path));
    j["version"] = 4;
    std::ofstream(dir_ / "v4.json") << j.dump();
    ZIPMOE_EXPECT_ERROR(loadCostProfile(dir_ / "v4.json"), "v4.json", "version");
    j = nlohmann::json::parse(zipmoe::testing::readText(path));
    j["kernels"] = 7;
    std::ofstream(dir_ / "bad3.json") << j.dump();
    ZIPMOE_EXPECT_ERROR(loadCostProfile(dir_ / "bad3.json"), "bad3.json", "'kernels'");
  }

  // A profile names the code that timed it; one timed by other code (an older kernel) or naming none
  // (version 2) loads but does not fit, so that the engine measures this build's costs.
  void aProfileFromOtherCodeDoesNotFit() {
    const std::string here = kernelsIdentity();
    QVERIFY2(here.rfind("code ", 0) == 0 && here.size() > 22 && here.find(" build, ") != std::string::npos, here.c_str());
    QCOMPARE(f_.directProfile.kernels, here);
    const auto path = dir_ / "kernels.json";
    saveCostProfile(f_.directProfile, path);
    QCOMPARE(loadCostProfile(path).kernels, here);
    QVERIFY(loadMatchingProfile(path, *f_.opened, ReadMode::Direct).has_value());

    nlohmann::json j = nlohmann::json::parse(zipmoe::testing::readText(path));
    j["kernels"] = "code 0123456789abcdef; Release build, GNU 12.2.0";
    std::ofstream(dir_ / "older.json") << j.dump();
    QCOMPARE(loadCostProfile(dir_ / "older.json").smRead, f_.directProfile.smRead);  // still readable
    std::string whyNot;
    QVERIFY(!loadMatchingProfile(dir_ / "older.json", *f_.opened, ReadMode::Direct, &whyNot));
    QVERIFY2(whyNot.find("older.json") != std::string::npos && whyNot.find("0123456789abcdef") != std::string::npos &&
                 whyNot.find(here) != std::string::npos && whyNot.find("zipmoe profile") != std::string::npos,
             whyNot.c_str());
    ZIPMOE_EXPECT_ERROR(checkProfile(loadCostProfile(dir_ / "older.json"), *f_.opened, ReadMode::Direct, "p"),
                        "other code", "0123456789abcdef");

    j = nlohmann::json::parse(zipmoe::testing::readText(path));
    j["version"] = 2;
    j.erase("kernels");
    std::ofstream(dir_ / "v2.json") << j.dump();
    QVERIFY(loadCostProfile(dir_ / "v2.json").kernels.empty());
    whyNot.clear();
    QVERIFY(!loadMatchingProfile(dir_ / "v2.json", *f_.opened, ReadMode::Direct, &whyNot));
    QVERIFY2(whyNot.find("v2.json") != std::string::npos && whyNot.find("'kernels'") != std::string::npos, whyNot.c_str());
  }
};

QTEST_GUILESS_MAIN(TestRawMisses)
#include "test_raw_misses.moc"
