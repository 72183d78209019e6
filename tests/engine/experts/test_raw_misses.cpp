// Raw misses and the contention profile on a real store with real threads: with the HF checkpoint
// given, misses served by whole-tensor reads (RawMisses::Always, and as planned) hand out tensors
// bit-identical to the store's at every budget and pool subset, within the budget; a raw miss kept
// in F is found again. The profile's contention figures are measured with real decoder threads,
// saved and loaded (version 2), a version-1 file loads without them and is reported as not fitting.
// Runs under ThreadSanitizer (label `threads`). No test asserts a duration.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "zipmoe/converter.h"
#include "zipmoe/cost_profile.h"
#include "zipmoe/error.h"
#include "zipmoe/expert_runtime.h"
#include "zipmoe/store.h"
#include "zipmoe/synthetic_model.h"

using namespace zipmoe;
using zipmoe::testing::TempDir;

namespace {

struct Fixture {
  std::filesystem::path hf, store;
  std::shared_ptr<const Store> opened;
  std::vector<std::vector<uint16_t>> reference;  // [(layer * experts + expert) * kinds + kind]
  CostProfile profile;
};

void makeFixture(Fixture& f, const std::filesystem::path& root) {
  f.hf = root / "hf";
  f.store = root / "store";
  SyntheticModelOptions options;
  options.family = ModelFamily::Qwen2Moe;
  options.preset = "tiny";
  options.layers = 3;
  generateSyntheticModel(f.hf, options);
  ConvertOptions convert;
  convert.shards = 4;
  convertCheckpoint(f.hf, f.store, convert);
  f.opened = std::shared_ptr<const Store>(Store::open(f.store).release());
  const Manifest& m = f.opened->manifest();
  for (int l = 0; l < m.numLayers(); ++l)
    for (int e = 0; e < m.numExperts; ++e)
      for (int k = 0; k < m.numKinds(); ++k) {
        std::vector<uint16_t> words(m.expert(l, e, k).numel);
        f.opened->readExpertTensor(l, e, k, words.data(), ReadMode::Buffered);
        f.reference.push_back(std::move(words));
      }
  f.profile = measureCostProfile(*f.opened, ReadMode::Direct, 8);
}

// Skewed requests: k distinct experts per layer and step, popular ones more often.
std::vector<std::vector<std::vector<ExpertRequest>>> requestStream(int steps, int layers, int experts, int k,
                                                                   uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::vector<ExpertRequest>>> out;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<ExpertRequest>> step;
    for (int l = 0; l < layers; ++l) {
      std::vector<double> w;
      for (int e = 0; e < experts; ++e) w.push_back(1.0 / (1.0 + (e + 3 * l) % experts));
      std::vector<ExpertRequest> reqs;
      for (int j = 0; j < k; ++j) {
        std::discrete_distribution<int> pick(w.begin(), w.end());
        const int e = pick(rng);
        w[static_cast<size_t>(e)] = 0;
        reqs.push_back({e, 1 + static_cast<int>(rng() % 2)});
      }
      std::sort(reqs.begin(), reqs.end(), [](auto& a, auto& b) { return a.expert < b.expert; });
      step.push_back(reqs);
    }
    out.push_back(step);
  }
  return out;
}

// Runs the stream, checking every tensor against the store's and the memory bound.
void runStream(Fixture& f, ExpertRuntime& rt, const std::vector<std::vector<std::vector<ExpertRequest>>>& stream) {
  const Manifest& m = f.opened->manifest();
  for (const auto& step : stream)
    for (int l = 0; l < m.numLayers(); ++l) {
      const auto& reqs = step[static_cast<size_t>(l)];
      auto batch = rt.acquire(l, reqs);
      std::set<int> got;
      while (auto ready = batch->next()) {
        if (!got.insert(ready->expert).second) qFatal("expert returned twice");
        for (int k = 0; k < m.numKinds(); ++k) {
          const auto& ref = f.reference[(static_cast<size_t>(l) * static_cast<size_t>(m.numExperts) +
                                         static_cast<size_t>(ready->expert)) * static_cast<size_t>(m.numKinds()) +
                                        static_cast<size_t>(k)];
          if (std::memcmp(ref.data(), ready->tensors[static_cast<size_t>(k)], ref.size() * 2) != 0)
            qFatal("layer %d expert %d tensor %d differs from the store", l, ready->expert, k);
        }
      }
      if (got.size() != reqs.size()) qFatal("batch returned %zu of %zu experts", got.size(), reqs.size());
      batch.reset();
      const RuntimeStats st = rt.stats();
      if (st.heldBytes > st.budgetBytes)
        qFatal("held %llu bytes over the budget %llu", static_cast<unsigned long long>(st.heldBytes),
               static_cast<unsigned long long>(st.budgetBytes));
    }
}

}  // namespace

class TestRawMisses : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;
  Fixture f_;

 private Q_SLOTS:
  void initTestCase() { makeFixture(f_, dir_ / "model"); }

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
          auto rt = ExpertRuntime::open(f_.opened, o, f_.profile);
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
    auto rt = ExpertRuntime::open(f_.opened, o, f_.profile);
    runStream(f_, *rt, requestStream(3, m.numLayers(), m.numExperts, 2, 9));
    const RuntimeStats st = rt->stats();
    QCOMPARE(st.misses, st.activations);
    uint64_t weights = 0;
    for (int k = 0; k < m.numKinds(); ++k) weights += m.expert(0, 0, k).numel;
    QVERIFY(st.bytesRead >= st.misses * weights * 2);
  }

  void alwaysNeedsACheckpoint() {
    RuntimeOptions o;
    o.rawMisses = RawMisses::Always;
    o.budget = MemoryBudget::poolsForShare(0.2);
    ZIPMOE_EXPECT_ERROR(ExpertRuntime::open(f_.opened, o, f_.profile), "checkpointDir");
  }

  void contentionIsMeasuredWithRealDecoders() {
    CostProfile p = f_.profile;
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
    CostProfile q = f_.profile;
    measureContention(q, *f_.opened, ReadMode::Direct, 1, {}, 2);
    QVERIFY(!q.hasContention());
    QCOMPARE(q.computeSlowdown(), 1.0);
    ZIPMOE_EXPECT_ERROR(measureContention(q, *f_.opened, ReadMode::Direct, 0, spin, 2), "worker");

    // Saved and loaded intact (version 2).
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
    j["version"] = 3;
    std::ofstream(dir_ / "v3.json") << j.dump();
    ZIPMOE_EXPECT_ERROR(loadCostProfile(dir_ / "v3.json"), "v3.json", "version");
  }
};

QTEST_GUILESS_MAIN(TestRawMisses)
#include "test_raw_misses.moc"
