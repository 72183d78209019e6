// End to end: the model fed by the expert runtime produces logits and tokens bit-identical to the
// all-resident run — for several budgets, pool subsets, codecs, eviction policies, the scheduler
// variants and the full-tensor baselines — on a generated model and on the trained demo model; also
// while the budget moves during generation. Engine::open measures and reuses a cost profile.
#include <QtTest>

#include <algorithm>
#include <functional>
#include <cstring>
#include <fstream>

#include "engine/budget_slider.h"
#include "test_support.h"
#include "zipmoe/trace/activation_trace.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/engine.h"
#include "zipmoe/base/error.h"
#include "zipmoe/model/generator.h"
#include "tools/synthetic/synthetic_model.h"

using namespace zipmoe;
using zipmoe::testing::TempDir;

namespace {

struct Run {
  std::vector<std::vector<float>> logits;  // prefill (all positions) then one per decode step
  std::vector<int32_t> tokens;
};

// `beforeStep(s)` runs before decode step s (a test's hook to interleave other threads' work).
Run runModel(MoeModel& model, const std::vector<int32_t>& prompt, int steps,
             const std::function<void(int)>& beforeStep = {}) {
  Run r;
  const auto seq = model.addSequence();
  auto out = model.forward({{seq, prompt}}, true);
  r.logits.push_back(out[0]);
  const int64_t vocab = model.config().vocabSize;
  for (int s = 0; s < steps; ++s) {
    if (beforeStep) beforeStep(s);
    const float* last = r.logits.back().data() + (r.logits.back().size() - static_cast<size_t>(vocab));
    const auto next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
    r.tokens.push_back(next);
    r.logits.push_back(model.forward({{seq, {next}}})[0]);
  }
  model.removeSequence(seq);
  return r;
}

bool identical(const Run& a, const Run& b) {
  if (a.tokens != b.tokens || a.logits.size() != b.logits.size()) return false;
  for (size_t i = 0; i < a.logits.size(); ++i)
    if (a.logits[i].size() != b.logits[i].size() ||
        std::memcmp(a.logits[i].data(), b.logits[i].data(), a.logits[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

struct Model {
  std::filesystem::path hf, store;
  std::shared_ptr<const Store> opened;
  CostProfile profile;
  Run resident;
  std::vector<int32_t> prompt;
  std::shared_ptr<ExpertTokenTable> table;  // recorded from the resident run (prefetch predictor `table`)
};

}  // namespace

class TestGenerationBitExact : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;

  void prepare(Model& m, const std::filesystem::path& hf, const std::string& name, CodecSpec codec, int shards) {
    m.hf = hf;
    m.store = dir_ / name;
    ConvertOptions c;
    c.codec = codec;
    c.shards = shards;
    convertCheckpoint(hf, m.store, c);
    m.opened = std::shared_ptr<const Store>(Store::open(m.store).release());
    m.profile = profileStore(*m.opened, ReadMode::Direct, ComputeDtype::Auto, 0, 6);
    ModelOptions recording;
    {
      auto probe = MoeModel::load(m.store);
      m.table = std::make_shared<ExpertTokenTable>(probe->config().numMoeLayers(), probe->config().numExperts);
    }
    recording.prefetch.record = m.table;
    auto model = MoeModel::load(m.store, recording);
    for (int i = 0; i < 12; ++i) m.prompt.push_back(static_cast<int32_t>((37 * i + 11) % model->config().vocabSize));
    m.resident = runModel(*model, m.prompt, 12);
    QVERIFY(m.table->pairs() > 0);
  }

  std::filesystem::path tinyModel(ModelFamily family, int layers, const std::string& name) {
    SyntheticModelOptions o;
    o.family = family;
    o.preset = "tiny";
    o.layers = layers;
    generateSyntheticModel(dir_ / name, o);
    return dir_ / name;
  }

  void checkConfigurations(Model& m) {
    struct Case {
      const char* name;
      double fraction;
      RuntimeOptions options;
      PrefetchOptions prefetch = {};
      bool computesInPlace = false;  // from a nibble store in BF16, C hits must be computed from their codes
      bool warmStart = false;        // the pools filled (ExpertRuntime::warmUp) before the prompt
    };
    std::vector<Case> cases;
    for (double f : {0.0, 0.1, 0.35, 1.0}) {
      for (unsigned pools : {0xFu, 0x1u, 0x4u, 0xAu}) {
        RuntimeOptions o;
        o.pools = pools;
        o.replanEverySteps = 4;
        cases.push_back({"zipmoe", f, o});
      }
    }
    for (auto policy : {EvictionPolicy::Lru, EvictionPolicy::Fifo, EvictionPolicy::Marking}) {
      RuntimeOptions o;
      o.eviction = policy;
      cases.push_back({"zipmoe-eviction", 0.25, o});
    }
    {  // C only, room for every expert: each expert is a C member after its first use whatever the
       // measured costs, so C hits are certain (a tiny model's padded C parts are larger than its
       // BF16 tensors, so at smaller budgets C may hold nothing)
      RuntimeOptions o;
      o.pools = 0x2u;
      cases.push_back({"zipmoe-c-only", 1.0, o, {}, true});
    }
    for (double f : {0.1, 0.35}) {  // C hits' exponents decoded into a plane (a nibble store's default reads them in place)
      RuntimeOptions o;
      o.pools = 0x2u;
      o.readCodesInPlace = false;
      cases.push_back({"zipmoe-decoded-planes", f, o});
    }
    for (double f : {0.0, 0.35}) {  // every tensor recovered before the model computes it
      RuntimeOptions o;
      o.fuseRecovery = false;
      cases.push_back({"zipmoe-unfused", f, o});
    }
    // Raw misses (whole BF16 tensors from the checkpoint), always and as planned.
    for (double f : {0.0, 0.1, 0.35, 1.0})
      for (auto raw : {RawMisses::Always, RawMisses::Planned}) {
        RuntimeOptions o;
        o.replanEverySteps = 4;
        o.checkpointDir = m.hf;
        o.rawMisses = raw;
        cases.push_back({raw == RawMisses::Always ? "zipmoe-raw-always" : "zipmoe-raw-planned", f, o});
      }
    // Speculative prefetch with each real predictor (the oracle needs a trace: its own test).
    for (double f : {0.0, 0.35})
      for (auto predictor : {PrefetchPredictor::NextRouter, PrefetchPredictor::PreviousToken, PrefetchPredictor::TokenTable}) {
        RuntimeOptions o;
        o.replanEverySteps = 4;
        o.prefetchSlots = predictor == PrefetchPredictor::PreviousToken ? 1 : -1;
        PrefetchOptions p;
        p.predictor = predictor;
        p.table = m.table;
        cases.push_back({"zipmoe-prefetch", f, o, p});
      }
    // What every door runs by default: planned from the statistics of earlier runs (here skewed
    // counts, 32 steps a layer) and warm-started from them.
    ActivationCounts earlier;
    earlier.layers = m.opened->manifest().numLayers();
    earlier.experts = m.opened->manifest().numExperts;
    for (int l = 0; l < earlier.layers; ++l) {
      earlier.steps.push_back(32);
      for (int e = 0; e < earlier.experts; ++e) earlier.counts.push_back(static_cast<uint64_t>((e * 7 + l * 3) % earlier.experts) * 4);
    }
    for (double f : {0.1, 0.35}) {  // warm starts: ZipMoE, raw misses as planned, the LRU baseline
      RuntimeOptions o;
      cases.push_back({"zipmoe-warm-start", f, o, {}, false, true});
      o.history = earlier;
      cases.push_back({"zipmoe-defaults-history-warm-start", f, o, {}, false, true});
      o.history.reset();
      o.checkpointDir = m.hf;
      o.rawMisses = RawMisses::Planned;
      cases.push_back({"zipmoe-raw-warm-start", f, o, {}, false, true});
      RuntimeOptions full;
      full.mode = OffloadMode::FullTensor;
      full.eviction = EvictionPolicy::Lru;
      full.checkpointDir = m.hf;
      cases.push_back({"full-tensor-warm-start", f, full, {}, false, true});
    }
    RuntimeOptions variant;
    variant.fifoSchedule = true;
    variant.planning = false;
    variant.decompressWorkers = 1;
    variant.readMode = ReadMode::Buffered;
    cases.push_back({"fifo-schedule-noplan-buffered", 0.25, variant});
    for (auto policy : {EvictionPolicy::Lru, EvictionPolicy::Fifo, EvictionPolicy::Lfu, EvictionPolicy::Marking})
      for (double f : {0.0, 0.4}) {
        RuntimeOptions o;
        o.mode = OffloadMode::FullTensor;
        o.eviction = policy;
        o.checkpointDir = m.hf;
        cases.push_back({"full-tensor", f, o});
      }
    uint64_t split = 0;     // tensors the model computed from split planes (recovery fused)
    bool bf16 = false;
    for (const Case& c : cases) {
      RuntimeOptions o = c.options;
      o.budget = MemoryBudget::poolsForShare(c.fraction);
      const CostProfile profile =
          o.readMode == ReadMode::Direct ? m.profile : profileStore(*m.opened, o.readMode, ComputeDtype::Auto, 0, 4);
      auto rt = ExpertRuntime::open(m.opened, o, profile);
      ModelOptions mo;
      mo.experts = rt;
      mo.prefetch = c.prefetch;
      auto model = MoeModel::load(m.store, mo);
      if (c.warmStart) {
        const WarmUpResult w = rt->warmUp();
        QVERIFY(!w.stopped);
        QVERIFY(rt->stats().heldBytes <= rt->stats().budgetBytes);
      }
      const Run r = runModel(*model, m.prompt, 12);
      QVERIFY2(identical(r, m.resident), qPrintable(QString("%1 (%2) at %3 of expert bytes, pools %4 differs from the resident run")
                                                        .arg(c.name, prefetchPredictorName(c.prefetch.predictor))
                                                        .arg(c.fraction).arg(o.pools)));
      const RuntimeStats st = rt->stats();
      QVERIFY(st.heldBytes <= st.budgetBytes);
      QVERIFY(st.activations > 0);
      if (!o.fuseRecovery) QCOMPARE(st.splitTensors, uint64_t{0});
      split += st.splitTensors;
      if (m.opened->manifest().codec.id != CodecId::Nibble || !o.readCodesInPlace)
        QCOMPARE(st.inPlaceTensors, uint64_t{0});
      bf16 = model->computeDtype() == ComputeDtype::BFloat16;
      // Which pools the other cases' plans use depends on the costs measured as they run (a loaded or
      // sanitized machine may plan no C at all); the C-only case does not.
      if (c.computesInPlace && bf16 && m.opened->manifest().codec.id == CodecId::Nibble)
        QVERIFY2(st.inPlaceTensors > 0,
                 qPrintable(QString("C only: no C hit was computed from its nibble codes in place (C hits %1, misses %2, "
                                    "activations %3, C capacity %4 used %5, budget %6, working set %7)")
                                .arg(st.hits[1]).arg(st.misses).arg(st.activations)
                                .arg(st.pools[1].capacityBytes).arg(st.pools[1].usedBytes)
                                .arg(st.budgetBytes).arg(st.workingSetBytes)));
      if (c.prefetch.predictor != PrefetchPredictor::Off) {
        QVERIFY(st.prefetchHintedExperts > 0);
        const PrefetchAccuracy a = model->prefetchAccuracy();
        QCOMPARE(a.layers.size(), static_cast<size_t>(model->config().numMoeLayers()));
        QVERIFY(a.recall() >= 0 && a.recall() <= 1);
      }
    }
    // Decoding in BF16 computes from the planes: the fused path was taken (and matched above).
    if (bf16) QVERIFY2(split > 0, "no tensor was computed from its split planes");
  }

 private Q_SLOTS:
  void generatedModelEveryConfigurationIsBitIdentical() {
    const auto hf = tinyModel(ModelFamily::Olmoe, 3, "olmoe-hf");
    Model huffman, zstd;
    prepare(huffman, hf, "olmoe-huffman", CodecSpec{}, 4);
    checkConfigurations(huffman);
    prepare(zstd, hf, "olmoe-zstd", parseCodecSpec("zstd"), 2);
    checkConfigurations(zstd);
    // `nibble`: C hits read in place by the decoding kernels (and, with readCodesInPlace off, decoded).
    Model nibble;
    prepare(nibble, hf, "olmoe-nibble", parseCodecSpec("nibble"), 2);
    checkConfigurations(nibble);
  }

  // A prefill's C hits from a nibble store — experts routed more tokens than the GEMV takes — are
  // handed as their codes and turned into words by the model in one pass: the same tokens and logits
  // as the resident run, every C hit read in place and no exponent plane decoded for any of them.
  void prefillComputesCHitsFromTheirCodes() {
    const auto hf = tinyModel(ModelFamily::Olmoe, 2, "olmoe-prefill-hf");
    Model m;
    prepare(m, hf, "olmoe-prefill-nibble", parseCodecSpec("nibble"), 2);
    auto resident = MoeModel::load(m.store);
    const ModelConfig& c = resident->config();
    // n · k > kMaxGemvRows (8) · E: some expert of every layer is routed more than 8 of the tokens.
    const int n = 8 * c.numExperts / c.numExpertsPerTok + 8;
    std::vector<int32_t> prompt;
    for (int i = 0; i < n; ++i) prompt.push_back(static_cast<int32_t>((53 * i + 7) % c.vocabSize));
    const Run want = runModel(*resident, prompt, 4);
    RuntimeOptions o;
    // C only, room for every expert (a tiny model's C parts are padded to 4 KiB a chunk, far more than
    // its BF16 bytes): the warm start makes each one a C member.
    o.pools = 0x2u;
    o.budget = MemoryBudget::bytes(64ull << 20);
    auto rt = ExpertRuntime::open(m.opened, o, m.profile);
    const WarmUpResult warm = rt->warmUp();
    QVERIFY(!warm.stopped);
    QCOMPARE(warm.experts, static_cast<uint64_t>(c.numMoeLayers() * c.numExperts));
    ModelOptions mo;
    mo.experts = rt;
    auto model = MoeModel::load(m.store, mo);
    QVERIFY(identical(runModel(*model, prompt, 4), want));
    const RuntimeStats st = rt->stats();
    QCOMPARE(st.misses, uint64_t{0});
    QCOMPARE(st.inPlaceTensors, st.hits[1] * static_cast<uint64_t>(m.opened->manifest().numKinds()));
    QCOMPARE(st.splitTensors, uint64_t{0});  // no C hit went through a worker's decoding
    QVERIFY(st.heldBytes <= st.budgetBytes);

    // Cold, the same prompt's misses that C keeps, where routed more than 8 tokens: a worker indexes
    // their codes instead of decoding them, and the model gets them as codes. At the prompt's second
    // prefill those C members are read in place without being indexed again on the model's thread
    // (only the ones routed 8 tokens or fewer the first time, decoded then, are).
    auto cold = ExpertRuntime::open(m.opened, o, m.profile);
    ModelOptions coldOptions;
    coldOptions.experts = cold;
    auto coldModel = MoeModel::load(m.store, coldOptions);
    const Run prefillOnly{{want.logits.front()}, {}};
    QVERIFY(identical(runModel(*coldModel, prompt, 0), prefillOnly));
    const RuntimeStats first = cold->stats();
    QVERIFY2(first.misses > 0 && first.indexedMissTensors > 0,
             qPrintable(QString("misses %1, their tensors indexed %2").arg(first.misses).arg(first.indexedMissTensors)));
    QVERIFY(identical(runModel(*coldModel, prompt, 0), prefillOnly));
    const RuntimeStats second = cold->stats();
    const uint64_t cHits = second.hits[1] - first.hits[1];
    QVERIFY2(cHits > 0 && second.indexedOnDemand < cHits,
             qPrintable(QString("C hits %1, indexed on demand %2").arg(cHits).arg(second.indexedOnDemand)));
    QVERIFY(identical(runModel(*coldModel, prompt, 4), want));
    QVERIFY(cold->stats().heldBytes <= cold->stats().budgetBytes);
  }

  // The oracle predictor on trace-replayed routing, at accuracies 0 (every guess wrong), 0.5 and 1:
  // the same tokens and logits as the resident run with the same replayed routing, and the model's
  // own score of its guesses matches the accuracy asked for at its ends.
  void oraclePrefetchAtEveryAccuracyIsBitIdentical() {
    const auto hf = tinyModel(ModelFamily::Qwen2Moe, 3, "qwen-oracle-hf");
    Model m;
    prepare(m, hf, "qwen-oracle", CodecSpec{}, 4);
    auto probe = MoeModel::load(m.store);
    const int experts = probe->config().numExperts, k = probe->config().numExpertsPerTok;
    const int layers = probe->config().numMoeLayers(), tokens = 64;
    const auto path = dir_ / "oracle-trace.tsv";
    {
      std::ofstream out(path);
      out << "# expert-activation trace: model=Synthetic top_k=" << k << " experts=" << experts << " layers=" << layers << "; test\n";
      out << "prompt\tlayer";
      for (int e = 0; e < experts; ++e) out << "\te" << e;
      out << "\n";
      for (int l = 0; l < layers; ++l) {
        std::vector<int> counts(static_cast<size_t>(experts), 0);
        for (int t = 0; t < tokens; ++t)
          for (int j = 0; j < k; ++j) ++counts[static_cast<size_t>((t * 3 + l + j * (experts / k)) % experts)];
        out << 0 << "\t" << l;
        for (int c : counts) out << "\t" << c;
        out << "\n";
      }
    }
    const auto trace = ActivationTrace::load(path);
    const auto replay = [&] { return std::make_shared<TraceRouting>(trace, layers, experts, k, 5); };
    ModelOptions residentOptions;
    residentOptions.routing = replay();
    auto resident = MoeModel::load(m.store, residentOptions);
    const Run reference = runModel(*resident, m.prompt, 12);
    for (double accuracy : {0.0, 0.5, 1.0}) {
      RuntimeOptions o;
      o.budget = MemoryBudget::poolsForShare(0.1);
      o.prefetchSlots = -1;
      auto rt = ExpertRuntime::open(m.opened, o, m.profile);
      ModelOptions mo;
      mo.experts = rt;
      mo.routing = replay();
      mo.prefetch.predictor = PrefetchPredictor::Oracle;
      mo.prefetch.oracleAccuracy = accuracy;
      auto model = MoeModel::load(m.store, mo);
      const Run r = runModel(*model, m.prompt, 12);
      QVERIFY2(identical(r, reference), qPrintable(QString("oracle prefetch at accuracy %1 changed the output").arg(accuracy)));
      const PrefetchAccuracy a = model->prefetchAccuracy();
      // Layers 1.. are predicted by the oracle; layer 0 by the previous step's experts.
      uint64_t requested = 0, covered = 0;
      for (size_t l = 1; l < a.layers.size(); ++l) {
        requested += a.layers[l].requested;
        covered += a.layers[l].covered;
      }
      QVERIFY(requested > 0);
      if (accuracy == 0.0) QCOMPARE(covered, uint64_t{0});
      if (accuracy == 1.0) QCOMPARE(covered, requested);
      const RuntimeStats st = rt->stats();
      QVERIFY(st.heldBytes <= st.budgetBytes);
      QVERIFY(st.prefetchHintedExperts > 0);
    }
    ModelOptions bad;
    bad.prefetch.predictor = PrefetchPredictor::Oracle;  // no routing override to look ahead in
    QVERIFY_THROWS_EXCEPTION(Error, MoeModel::load(m.store, bad));
    bad.prefetch.predictor = PrefetchPredictor::TokenTable;  // no table
    QVERIFY_THROWS_EXCEPTION(Error, MoeModel::load(m.store, bad));
  }

  void demoModelIsBitIdenticalWhileTheBudgetMoves() {
    const std::filesystem::path demo = std::filesystem::path(ZIPMOE_FIXTURES_DIR) / "../../resources/demo-model";
    if (!std::filesystem::exists(demo / "config.json")) QSKIP("resources/demo-model is absent");
    Model m;
    prepare(m, demo, "demo-store", CodecSpec{}, 4);
    checkConfigurations(m);
    // Generation with a "slider" moving the budget from another thread: each decode step waits
    // until the slider has made one more move, and the slider keeps moving while the step's
    // layers run, so plans are applied in the middle of generation whatever the machine's load.
    RuntimeOptions o;
    o.budget = MemoryBudget::poolsForShare(0);
    auto rt = ExpertRuntime::open(m.opened, o, m.profile);
    const uint64_t lo = rt->minimumBudget(), hi = rt->minimumBudget() + rt->expertBytes() / 2;
    ModelOptions mo;
    mo.experts = rt;
    auto model = MoeModel::load(m.store, mo);
    std::vector<uint64_t> budgets;
    for (int i = 0; i < 21; ++i) budgets.push_back(i % 3 == 0 ? lo : hi - static_cast<uint64_t>(i % 7) * (hi - lo) / 8);
    testing::BudgetSlider slider(*rt, budgets);
    const Run r = runModel(*model, m.prompt, 12, [&](int step) { slider.waitForMoves(step + 1); });
    const int moves = slider.stop();
    QVERIFY2(slider.error().empty(), slider.error().c_str());
    QVERIFY(identical(r, m.resident));
    QVERIFY(moves >= 12);
    QVERIFY(rt->stats().replans >= static_cast<uint64_t>(moves));
  }

  void aCorruptedChunkStopsGenerationCleanly() {
    const auto hf = tinyModel(ModelFamily::Qwen2Moe, 2, "corrupt-hf");
    Model m;
    prepare(m, hf, "corrupt-store", CodecSpec{}, 4);
    // Corrupt every expert's first E-chunk of MoE layer 1: any routing hits one.
    for (int e = 0; e < m.opened->manifest().numExperts; ++e) {
      const ChunkRef& c = m.opened->manifest().expert(1, e, 0).eChunks[0];
      std::fstream f(m.store / "experts.bin", std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(c.offset));
      const char junk[4] = {1, 2, 3, 4};
      f.write(junk, 4);
    }
    RuntimeOptions ro;
    ro.budget = MemoryBudget::poolsForShare(1);
    auto rt = ExpertRuntime::open(m.opened, ro, m.profile);
    ModelOptions mo;
    mo.experts = rt;
    auto model = MoeModel::load(m.store, mo);
    for (int attempt = 0; attempt < 2; ++attempt) {  // fails the same way each time, nothing else breaks
      const auto seq = model->addSequence();
      ZIPMOE_EXPECT_ERROR(model->forward({{seq, m.prompt}}), "checksum mismatch", "layers.1.");
      model->removeSequence(seq);
    }
    QVERIFY(rt->stats().heldBytes <= rt->stats().budgetBytes);
  }

  void engineMeasuresAndReusesItsProfileAndGeneratesTheSameText() {
    const std::filesystem::path demo = std::filesystem::path(ZIPMOE_FIXTURES_DIR) / "../../resources/demo-model";
    if (!std::filesystem::exists(demo / "config.json")) QSKIP("resources/demo-model is absent");
    const auto store = dir_ / "engine-store";
    convertCheckpoint(demo, store, ConvertOptions{});
    SamplingParams params;
    params.temperature = 0;
    params.maxTokens = 24;
    auto textOf = [&](Engine& e) {
      std::string text;
      generate(e.model(), e.tokenizer(), e.tokenizer().encode("ROMEO:", true), params, [&](std::string_view t) {
        text += t;
        return true;
      });
      return text;
    };
    EngineOptions resident;
    const std::string expected = textOf(*Engine::open(store, resident));
    EngineOptions withRuntime;
    withRuntime.runtime = RuntimeOptions{};
    withRuntime.runtime->budget = MemoryBudget::bytes(64ull << 20);
    withRuntime.warmStart = false;  // the default; taken apart at the end
    int statuses = 0;
    withRuntime.onStatus = [&](const std::string& s) { statuses += s.find("cost profile") != std::string::npos; };
    auto engine = Engine::open(store, withRuntime);
    QCOMPARE(statuses, 1);
    QVERIFY(std::filesystem::exists(store / "profile.json"));
    QCOMPARE(textOf(*engine), expected);
    const ObservedCosts observed = engine->runtime()->stats().observed;
    QVERIFY(observed.decompress.count > 0);
    engine.reset();  // saves what the runtime observed into the profile
    QVERIFY(loadCostProfile(store / "profile.json").observed.decompress.count == observed.decompress.count);
    statuses = 0;
    engine = Engine::open(store, withRuntime);  // the saved profile is reused, with the observations
    QCOMPARE(statuses, 0);
    QCOMPARE(engine->runtime()->stats().observed.decompress.count, observed.decompress.count);
    QCOMPARE(engine->runtime()->stats().observed.recover.seconds, observed.recover.seconds);
    QCOMPARE(textOf(*engine), expected);  // and plans with them: still the same text
    ZIPMOE_EXPECT_ERROR(engine->runtime()->setBudget(MemoryBudget::bytes(1)), "below the minimum");
    ZIPMOE_EXPECT_ERROR(Engine::open(demo, withRuntime), "ZipMoE store", "zipmoe convert");
    EngineOptions foreign = withRuntime;
    foreign.profilePath = dir_ / "foreign.json";
    CostProfile p = engine->profile();
    p.host = "another | cpu | 1 cores";
    saveCostProfile(p, foreign.profilePath);
    ZIPMOE_EXPECT_ERROR(Engine::open(store, foreign), "another machine");
    // A store's profile timed by other code (an older build's kernels) is measured again, with a
    // status saying why, and replaced by this build's.
    engine.reset();
    p = loadCostProfile(store / "profile.json");
    p.kernels = "code 0123456789abcdef; Debug build, GNU 12.2.0";
    saveCostProfile(p, store / "profile.json");
    std::vector<std::string> said;
    EngineOptions upgraded = withRuntime;
    upgraded.onStatus = [&](const std::string& s) { said.push_back(s); };
    engine = Engine::open(store, upgraded);
    QVERIFY(std::any_of(said.begin(), said.end(), [](const std::string& s) {
      return s.find("re-measuring") != std::string::npos && s.find("0123456789abcdef") != std::string::npos;
    }));
    QCOMPARE(loadCostProfile(store / "profile.json").kernels, kernelsIdentity());
    QCOMPARE(textOf(*engine), expected);

    // A warm start fills the pools in the background: waited for, it has read every layer's planned
    // experts; not waited for, the first prompt stops it. Either way the text is the same.
    EngineOptions warm = withRuntime;
    warm.warmStart = true;
    engine = Engine::open(store, warm);
    const std::optional<WarmUpResult> filled = engine->waitForWarmUp();
    QVERIFY(filled.has_value());
    QVERIFY(!filled->stopped);
    QCOMPARE(filled->layers, engine->model().config().numMoeLayers());
    QVERIFY(filled->experts > 0);
    QCOMPARE(engine->runtime()->stats().activations, uint64_t{0});
    QCOMPARE(textOf(*engine), expected);
    QVERIFY(engine->runtime()->stats().hits[0] + engine->runtime()->stats().hits[1] > 0);
    engine = Engine::open(store, warm);
    QCOMPARE(textOf(*engine), expected);
    QVERIFY(engine->waitForWarmUp().has_value());
    engine = Engine::open(store, withRuntime);
    QVERIFY(!engine->waitForWarmUp().has_value());  // none was started (turned off)
  }
};

QTEST_APPLESS_MAIN(TestGenerationBitExact)
#include "test_generation_bit_exact.moc"
