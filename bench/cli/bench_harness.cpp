#include "bench_harness.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "runtime_options.h"
#include "zipmoe/converter.h"
#include "zipmoe/engine.h"
#include "zipmoe/error.h"
#include "zipmoe/file_priming.h"
#include "zipmoe/model_family.h"
#include "tools/synthetic/synthetic_model.h"
#include "zipmoe/trace_events.h"

namespace zipmoe::cli {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Forwards to whichever runtime the benchmark has plugged in; with a recorder set, notes each MoE
// layer's measured makespan and lower bound (the runtime adds them up when a layer's batch ends,
// which is before the model asks for the next layer).
class SwitchableExperts : public ExpertProvider {
 public:
  // The store answers the model's shape questions while no runtime is plugged in.
  explicit SwitchableExperts(std::shared_ptr<const Store> store) : store_(std::move(store)) {}
  void set(std::shared_ptr<ExpertRuntime> p) {
    current_ = std::move(p);
    recording_ = false;
  }
  // The all-resident reference: while set, it answers instead of the runtime (which is not set).
  void setResident(std::shared_ptr<ExpertProvider> p) { resident_ = std::move(p); }
  void record(std::vector<double>* ratios) {
    ratios_ = ratios;
    recording_ = ratios != nullptr;
    if (recording_) last_ = current_->stats();
  }
  void noteLastLayer() {
    if (!recording_) return;
    const RuntimeStats s = current_->stats();
    if (s.layers == last_.layers + 1 && s.lowerBound > last_.lowerBound)
      ratios_->push_back((s.measuredMakespan - last_.measuredMakespan) / (s.lowerBound - last_.lowerBound));
    last_ = s;
  }
  std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) override {
    if (resident_) return resident_->acquire(layer, requests);
    noteLastLayer();
    return current_->acquire(layer, requests);
  }
  void prefetch(int layer, std::span<const int> experts) override {
    if (current_) current_->prefetch(layer, experts);
  }
  int numLayers() const override { return store_->manifest().numLayers(); }
  int numExperts() const override { return store_->manifest().numExperts; }
  std::pair<int64_t, int64_t> tensorShape(int kind) const override {
    const auto& shape = store_->manifest().expert(0, 0, kind).shape;
    return {shape.at(0), shape.at(1)};
  }

 private:
  std::shared_ptr<const Store> store_;
  std::shared_ptr<ExpertRuntime> current_;
  std::shared_ptr<ExpertProvider> resident_;
  bool recording_ = false;
  std::vector<double>* ratios_ = nullptr;
  RuntimeStats last_{};
};

// Replays one trace prompt per request of a batch: the tokens of a forward come in step order, so
// the router hands each request's share of them to that request's own TraceRouting.
class BatchTraceRouting : public RoutingOverride {
 public:
  BatchTraceRouting(std::shared_ptr<const ActivationTrace> trace, int layers, int experts, int k)
      : trace_(std::move(trace)), layers_(layers), experts_(experts), k_(k) {}
  void setRequests(const std::vector<int>& prompts, double continuation = 0) {
    routers_.clear();
    for (size_t r = 0; r < prompts.size(); ++r) {
      // Each request its own seed: two requests replaying the same prompt still differ in detail.
      routers_.push_back(std::make_unique<TraceRouting>(trace_, layers_, experts_, k_, 1 + r));
      routers_.back()->setContinuation(continuation);
      routers_.back()->setPrompt(prompts[r]);
    }
  }
  void setSegments(std::vector<int64_t> tokensPerRequest) { segments_ = std::move(tokensPerRequest); }
  void choose(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) override {
    int64_t offset = 0;
    for (size_t r = 0; r < segments_.size(); ++r) {
      if (segments_[r] == 0) continue;
      routers_[r]->choose(moeLayer, segments_[r], k, out.subspan(static_cast<size_t>(offset * k), static_cast<size_t>(segments_[r] * k)));
      offset += segments_[r];
    }
    if (offset != tokens)
      throw Error("bench: the batch router was told " + std::to_string(offset) + " tokens, the model sent " + std::to_string(tokens));
  }
  bool peek(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) override {
    int64_t offset = 0;
    for (size_t r = 0; r < routers_.size(); ++r) {
      if (segments_[r] == 0) continue;
      routers_[r]->peek(moeLayer, segments_[r], k, out.subspan(static_cast<size_t>(offset * k), static_cast<size_t>(segments_[r] * k)));
      offset += segments_[r];
    }
    return offset == tokens;
  }

 private:
  std::shared_ptr<const ActivationTrace> trace_;
  int layers_, experts_, k_;
  std::vector<std::unique_ptr<TraceRouting>> routers_;
  std::vector<int64_t> segments_;
};

}  // namespace

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

BenchSystem parseBenchSystem(const std::string& text, const RuntimeOptions& base, const std::filesystem::path& hf) {
  // SYSTEM+SUFFIX: SYSTEM with one runtime option changed, for comparison.
  struct Suffix {
    const char* text;
    void (*apply)(RuntimeOptions&);
  };
  static const Suffix suffixes[] = {
      {"+fresh", [](RuntimeOptions& o) { o.recyclePages = false; }},      // every kept buffer in fresh memory
      {"+noreserve", [](RuntimeOptions& o) { o.reservePages = false; }},  // no pages faulted in ahead of need
      {"+evict", [](RuntimeOptions& o) { o.keepSurplus = false; }},       // a shrunk pool is evicted at once
      {"+own", [](RuntimeOptions& o) { o.lendRoom = false; }},            // each layer within its own share
      {"+prior", [](RuntimeOptions& o) { o.planFromPrompt = false; }},    // the prior until 16 steps
      {"+planes", [](RuntimeOptions& o) { o.readCodesInPlace = false; }},  // C hits' codes decoded to a plane
  };
  for (const Suffix& suffix : suffixes) {
    const size_t n = std::strlen(suffix.text), plus = text.rfind(suffix.text);
    if (plus != std::string::npos && plus + n == text.size() && plus > 0) {
      BenchSystem s = parseBenchSystem(text.substr(0, plus), base, hf);
      s.name = text;
      suffix.apply(s.options);
      return s;
    }
  }
  // SYSTEM+NAMEvalue: SYSTEM with one numeric runtime option set.
  struct NumericSuffix {
    const char* text;
    const char* what;
    bool integer;
    double min, max;
    void (*apply)(RuntimeOptions&, double);
  };
  static const NumericSuffix numeric[] = {
      // ZipMoE's session blend with T tokens of history weight (RuntimeOptions::sessionPriorTokens).
      {"+session", "the session blend's history tokens", false, 0, 1e6,
       [](RuntimeOptions& o, double v) { o.sessionPriorTokens = v; }},
      // ZipMoE's plans smoothed toward uniform by T tokens (RuntimeOptions::smoothingTokens).
      {"+smooth", "tokens of smoothing toward uniform", false, 0, 1e6,
       [](RuntimeOptions& o, double v) { o.smoothingTokens = v; }},
      // N output slots (RuntimeOptions::outputSlots; the default is as needed).
      {"+out", "output slots", true, 0, 64, [](RuntimeOptions& o, double v) { o.outputSlots = static_cast<int>(v); }},
  };
  for (const NumericSuffix& suffix : numeric) {
    const size_t n = std::strlen(suffix.text), plus = text.rfind(suffix.text);
    if (plus == std::string::npos || plus == 0 || plus + n >= text.size()) continue;
    BenchSystem s = parseBenchSystem(text.substr(0, plus), base, hf);
    s.name = text;
    const std::string what = "--systems " + text + " (" + suffix.what + ")", value = text.substr(plus + n);
    suffix.apply(s.options, suffix.integer ? parseInt<int>(what, value, static_cast<int>(suffix.min), static_cast<int>(suffix.max))
                                           : parseNumberIn(what, value, suffix.min, suffix.max));
    return s;
  }
  BenchSystem s{text, base};
  if (text == "zipmoe") return s;
  if (text == "resident") {
    s.resident = true;
    return s;
  }
  if (text == "zipmoe-prefetch" || text.rfind("zipmoe-prefetch:", 0) == 0) {
    s.options.prefetchSlots = -1;
    s.prefetch = true;
    if (text.size() > 16) s.oracleAccuracy = parseNumberIn("--systems " + text + " (the oracle's accuracy)", text.substr(16), 0, 1);
    return s;
  }
  if (text == "zipmoe-raw" || text.rfind("zipmoe-raw:", 0) == 0) {  // misses may be raw reads (the plan decides)
    s.options.checkpointDir = hf;
    if (text.size() > 10) s.options.pools = parsePoolMask(text.substr(11), "system " + text);
    return s;
  }
  if (text == "zipmoe-raw-always" || text.rfind("zipmoe-raw-always:", 0) == 0) {
    s.options.checkpointDir = hf;
    s.options.rawMisses = RawMisses::Always;
    if (text.size() > 17) s.options.pools = parsePoolMask(text.substr(18), "system " + text);
    return s;
  }
  if (text.rfind("zipmoe:", 0) == 0) {  // zipmoe:FS = ZipMoE with only those pools
    s.options.pools = parsePoolMask(text.substr(7), "system " + text);
    return s;
  }
  if (text.rfind("zipmoe-workers:", 0) == 0) {
    s.options.decompressWorkers = parseInt<int>("--systems " + text, text.substr(15), 1, 256);
    return s;
  }
  if (text == "zipmoe-noplan") {
    s.options.planning = false;
    return s;
  }
  if (text == "zipmoe-fifo-schedule") {
    s.options.fifoSchedule = true;
    return s;
  }
  if (text == "zipmoe-unfused" || text.rfind("zipmoe-unfused:", 0) == 0) {  // every tensor recovered first
    s.options.fuseRecovery = false;
    if (text.size() > 14) s.options.pools = parsePoolMask(text.substr(15), "system " + text);
    return s;
  }
  for (const char* policy : {"lru", "fifo", "marking"})
    if (text == std::string("zipmoe-") + policy) {
      s.options.eviction = parseEvictionPolicy(policy);
      return s;
    }
  if (text.rfind("full-", 0) == 0) {
    s.options.mode = OffloadMode::FullTensor;
    s.options.eviction = parseEvictionPolicy(text.substr(5));
    s.options.checkpointDir = hf;
    return s;
  }
  throw Error("unknown system '" + text +
              "' (resident, zipmoe, zipmoe-prefetch, zipmoe-prefetch:ORACLE_ACCURACY, zipmoe:POOLS e.g. zipmoe:FS, zipmoe-raw, zipmoe-raw:POOLS, zipmoe-raw-always[:POOLS], zipmoe-noplan, zipmoe-fifo-schedule, zipmoe-unfused[:POOLS], zipmoe-lru, zipmoe-fifo, "
              "zipmoe-marking, zipmoe-workers:L, full-lru, full-fifo, full-lfu, full-marking; any of them +fresh, +noreserve, +evict, +prior, +own, +outN, +sessionT, +smoothT)");
}

struct BenchWorkload::Impl {
  std::shared_ptr<const Store> store;
  std::shared_ptr<SwitchableExperts> experts;
  std::shared_ptr<BatchTraceRouting> routing;  // null: the model's router
  std::shared_ptr<const ActivationTrace> trace;
  std::unique_ptr<MoeModel> model;
};

BenchWorkload::~BenchWorkload() = default;

std::unique_ptr<BenchWorkload> BenchWorkload::open(const WorkloadSpec& spec) {
  std::unique_ptr<BenchWorkload> w(new BenchWorkload);
  w->spec_ = spec;
  w->impl_ = std::make_unique<Impl>();
  Impl& d = *w->impl_;
  if (!std::filesystem::exists(spec.hf / "config.json")) {
    if (spec.generatePreset.empty()) throw Error(spec.hf.string() + " has no config.json");
    std::fprintf(stderr, "bench: generating %s (%s %s shapes, %d layers)…\n", spec.hf.string().c_str(),
                 spec.generateFamily.c_str(), spec.generatePreset.c_str(), spec.generateLayers);
    SyntheticModelOptions o;
    const auto family = familyFromName(spec.generateFamily);
    if (!family) throw Error("unknown family '" + spec.generateFamily + "' (" + supportedFamilyList() + ")");
    o.family = *family;
    o.preset = spec.generatePreset;
    o.layers = spec.generateLayers;
    generateSyntheticModel(spec.hf, o);
  }
  if (!std::filesystem::exists(spec.store / "manifest.json")) {
    std::fprintf(stderr, "bench: converting %s to %s…\n", spec.hf.string().c_str(), spec.store.string().c_str());
    convertCheckpoint(spec.hf, spec.store, ConvertOptions{});
  }
  d.store = std::shared_ptr<const Store>(Store::open(spec.store).release());
  const auto profilePath = spec.store / (spec.readMode == ReadMode::Direct ? "profile.json" : "profile-buffered.json");
  std::optional<CostProfile> saved;
  try {
    std::string whyNot;
    saved = loadMatchingProfile(profilePath, *d.store, spec.readMode, &whyNot);
    if (!whyNot.empty()) std::fprintf(stderr, "bench: %s: re-measuring\n", whyNot.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "bench: %s: re-measuring\n", e.what());
  }
  if (!saved) {
    std::fprintf(stderr, "bench: measuring the cost profile of %s…\n", spec.store.string().c_str());
    saved = profileStore(*d.store, spec.readMode, ComputeDtype::Auto, spec.threads, 24);
    try {
      saveCostProfile(*saved, profilePath);
    } catch (const Error& e) {
      std::fprintf(stderr, "bench: %s (the profile is used, not kept)\n", e.what());
    }
  }
  w->profile_ = *saved;

  w->expertBytes_ = d.store->manifest().routedExpertBytes();
  d.experts = std::make_shared<SwitchableExperts>(d.store);
  const Manifest& m = d.store->manifest();
  ModelOptions mo;
  mo.threads = spec.threads;
  mo.experts = d.experts;
  if (!spec.traceFile.empty()) {
    d.trace = ActivationTrace::load(spec.traceFile);
    d.routing = std::make_shared<BatchTraceRouting>(d.trace, m.numLayers(), m.numExperts,
                                                    static_cast<int>(m.config->value("num_experts_per_tok", 1)));
    d.routing->setRequests({0});
    mo.routing = d.routing;
  }
  std::fprintf(stderr, "bench: loading the dense weights of %s…\n", spec.store.string().c_str());
  const auto t0 = Clock::now();
  d.model = MoeModel::load(spec.store, mo);
  std::fprintf(stderr, "bench: loaded in %.1f s: %s\n", since(t0), w->describe().c_str());
  return w;
}

int BenchWorkload::numLayers() const { return impl_->store->manifest().numLayers(); }
int BenchWorkload::tracePrompts() const { return impl_->trace ? impl_->trace->numPrompts() : 0; }

std::string BenchWorkload::describe() const {
  const Manifest& m = impl_->store->manifest();
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s, %d MoE layers × %d experts (top-%d), %.2f GiB of experts in BF16%s%s",
                familyName(m.family), m.numLayers(), m.numExperts, static_cast<int>(m.config->value("num_experts_per_tok", 1)),
                static_cast<double>(expertBytes_) / (1 << 30), impl_->trace ? ", routing replayed from " : ", its own router",
                impl_->trace ? spec_.traceFile.filename().string().c_str() : "");
  return buf;
}

namespace {

// The activation counts of settings.historyPrompts trace prompts after the highest measured one, per
// MoE layer as TraceRouting maps layers (activeLayers()[l mod their count]); each prompt counts its
// tokens as steps.
ActivationCounts traceHistory(const ActivationTrace& trace, const RunSettings& settings, int layers, int experts) {
  const int first = *std::max_element(settings.prompts.begin(), settings.prompts.end()) + 1;
  if (first + settings.historyPrompts > trace.numPrompts())
    throw Error("--history " + std::to_string(settings.historyPrompts) + ": the trace has " +
                std::to_string(trace.numPrompts()) + " prompts, and the history starts after the measured prompt " +
                std::to_string(first - 1));
  if (trace.numExperts() != experts)
    throw Error("--history: the trace has " + std::to_string(trace.numExperts()) + " experts per layer, the model " +
                std::to_string(experts));
  ActivationCounts h;
  h.layers = layers;
  h.experts = experts;
  h.counts.assign(static_cast<size_t>(layers) * static_cast<size_t>(experts), 0);
  h.steps.assign(static_cast<size_t>(layers), 0);
  const std::vector<int>& active = trace.activeLayers();
  for (int p = first; p < first + settings.historyPrompts; ++p)
    for (int l = 0; l < layers; ++l) {
      const auto row = trace.counts(p, active[static_cast<size_t>(l) % active.size()]);
      for (int e = 0; e < experts; ++e) h.counts[static_cast<size_t>(l * experts + e)] += row[static_cast<size_t>(e)];
      h.steps[static_cast<size_t>(l)] += static_cast<uint64_t>(trace.tokens(p));
    }
  return h;
}

}  // namespace

namespace {
// RunSettings::traceDir: the run's operations since the warm-up, as Chrome trace JSON.
void writeRunTrace(const std::filesystem::path& dir, const std::string& system, uint64_t budgetBytes, ExpertRuntime& rt) {
  std::vector<TraceEvent> events;
  rt.drainTrace(events);
  std::string name = system;
  std::replace_if(name.begin(), name.end(), [](char c) { return c == ':' || c == '/' || c == '+'; }, '_');
  const std::filesystem::path path = dir / (name + "-" + std::to_string(budgetBytes >> 20) + "MiB.json");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("trace directory " + dir.string() + ": " + ec.message());
  writeChromeTraceFile(path.string(), events, rt.lanes());
  std::fprintf(stderr, "zipmoe: wrote %zu trace events (%llu dropped) to %s\n", events.size(),
               static_cast<unsigned long long>(rt.stats().droppedTraceEvents), path.c_str());
}
}  // namespace

RunResult BenchWorkload::run(const BenchSystem& system, uint64_t budgetBytes, const RunSettings& settings) {
  Impl& d = *impl_;
  RunResult result;
  result.budgetBytes = budgetBytes;
  if (system.resident) {
    // Loaded per measurement and dropped after it: it holds every expert in BF16, which the
    // offloading systems must not find taking the machine's memory. From the checkpoint when there
    // is one (a plain read), else from the store (decoded).
    const bool hasCheckpoint = std::filesystem::exists(spec_.hf / "config.json");
    d.experts->setResident(makeResidentExperts(hasCheckpoint ? spec_.hf : spec_.store));
    struct Unplug {
      SwitchableExperts& experts;
      ~Unplug() { experts.setResident(nullptr); }
    } unplug{*d.experts};
    d.model->setPrefetch({});
    decodeRounds(settings, result, [] {});
    return result;
  }
  RuntimeOptions o = system.options;
  o.budget = MemoryBudget::bytes(budgetBytes);
  // Every runtime starts from the operation costs the earlier runs of this workload observed (the
  // warm-up pass's first): as a user's would, after a first chat on the machine.
  if (observed_.any()) o.observed = observed_;
  if (settings.historyPrompts > 0 && d.trace && (o.mode == OffloadMode::ZipMoE || settings.warmStart))
    o.history = traceHistory(*d.trace, settings, d.store->manifest().numLayers(), d.store->manifest().numExperts);
  std::shared_ptr<ExpertRuntime> rt;
  try {
    rt = ExpertRuntime::open(d.store, o, profile_);
  } catch (const Error& e) {
    result.skipped = true;
    result.skipReason = e.what();
    return result;
  }
  d.experts->set(rt);
  PrefetchOptions prefetch;
  if (system.prefetch) {
    prefetch.predictor = d.routing ? PrefetchPredictor::Oracle : PrefetchPredictor::NextRouter;
    prefetch.oracleAccuracy = system.oracleAccuracy >= 0 ? system.oracleAccuracy : kMeasuredPrefetchRecall;
  }
  d.model->setPrefetch(prefetch);
  if (settings.warmStart) {
    const WarmUpResult warm = rt->warmUp();
    result.warmStartMs = warm.seconds * 1e3;
    result.warmStartExperts = warm.experts;
    result.warmStartBytes = warm.bytesRead;
    result.warmStartPrepared = warm.prepared;
  }
  RuntimeStats atWarm = rt->stats();
  decodeRounds(settings, result, [&] {
    atWarm = rt->stats();
    if (settings.recordLayers) d.experts->record(&result.layerRatios);
    if (!settings.traceDir.empty()) {
      std::vector<TraceEvent> warmUp;
      rt->drainTrace(warmUp);  // the warm-up's operations are not written
    }
  });
  if (!settings.traceDir.empty()) writeRunTrace(settings.traceDir, system.name, budgetBytes, *rt);
  const int batch = std::max(1, settings.batch);
  const int decodeSteps = result.decodeSteps;
  d.experts->noteLastLayer();
  const RuntimeStats st = rt->stats();
  observed_ = st.observed;
  d.experts->set(nullptr);
  if (settings.measureReplan && o.mode == OffloadMode::ZipMoE) {
    // Replanning latency, as a budget slider causes it.
    const int moves = 10;
    for (int i = 0; i < moves; ++i) {
      rt->setBudget(MemoryBudget::bytes(budgetBytes - budgetBytes / 20 * static_cast<uint64_t>(i % 2)));
      rt->waitForPlan();
      const double ms = rt->stats().lastReplanSeconds * 1e3;
      result.replanMeanMs += ms / moves;
      result.replanMaxMs = std::max(result.replanMaxMs, ms);
    }
  }

  const double acts = static_cast<double>(std::max<uint64_t>(1, st.activations - atWarm.activations));
  for (size_t p = 0; p < 4; ++p) result.hitPercent[p] = 100.0 * static_cast<double>(st.hits[p] - atWarm.hits[p]) / acts;
  result.missPercent = 100.0 * static_cast<double>(st.misses - atWarm.misses) / acts;
  // C hits read in place, as a share of activations (each counts its tensors: whole experts).
  result.inPlacePercent = 100.0 * static_cast<double>(st.inPlaceTensors - atWarm.inPlaceTensors) /
                          std::max(1, d.store->manifest().numKinds()) / acts;
  result.indexedOnDemand = st.indexedOnDemand - atWarm.indexedOnDemand;
  result.mibReadPerToken = static_cast<double>(st.bytesRead - atWarm.bytesRead) / (1 << 20) /
                           std::max(1.0, static_cast<double>(decodeSteps) * batch);
  if (st.layers > atWarm.layers)
    result.layerMs = (st.measuredMakespan - atWarm.measuredMakespan) / static_cast<double>(st.layers - atWarm.layers) * 1e3;
  if (st.lowerBound > atWarm.lowerBound)
    result.makespanOverBound = (st.measuredMakespan - atWarm.measuredMakespan) / (st.lowerBound - atWarm.lowerBound);
  for (size_t p = 0; p < 4; ++p) {
    result.poolRatio[p] = st.pools[p].ratio;
    result.poolCapacityBytes[p] = st.pools[p].capacityBytes;
  }
  result.workingSetBytes = st.workingSetBytes;
  result.stallSeconds = st.stallSeconds;
  if (st.steps > atWarm.steps)
    result.denseMsPerStep = (st.denseSeconds - atWarm.denseSeconds) / static_cast<double>(st.steps - atWarm.steps) * 1e3;
  if (system.prefetch) {
    result.prefetch = true;
    const PrefetchAccuracy a = d.model->prefetchAccuracy();
    result.prefetchRecall = a.recall();
    result.prefetchExact = a.exactShare();
    const double useful = static_cast<double>(st.prefetchUsefulBytes - atWarm.prefetchUsefulBytes);
    const double demand = useful + static_cast<double>(st.bytesRead - atWarm.bytesRead);
    result.prefetchCoverage = demand > 0 ? useful / demand : 0;
    result.prefetchWastedMiBPerToken = static_cast<double>(st.prefetchWastedBytes - atWarm.prefetchWastedBytes) / (1 << 20) /
                                       std::max(1.0, static_cast<double>(decodeSteps) * batch);
    const double dense = st.denseSeconds - atWarm.denseSeconds;
    result.prefetchDenseBusy = dense > 0 ? (st.prefetchDenseSeconds - atWarm.prefetchDenseSeconds) / dense : 0;
  }
  d.model->setPrefetch({});
  return result;
}

void BenchWorkload::decodeRounds(const RunSettings& settings, RunResult& result, const std::function<void()>& atWarmUp) {
  Impl& d = *impl_;
  // Rounds: with a batch of one, every prompt is a request of its own, one after the other on the
  // same runtime (its cache carries over, as in a chat); with a batch of B, one round of B requests
  // decoded together, request r replaying prompt r mod |prompts|.
  const int batch = std::max(1, settings.batch);
  std::vector<std::vector<int>> rounds;
  if (batch == 1) {
    for (int p : settings.prompts) rounds.push_back({p});
  } else {
    rounds.emplace_back();
    for (int r = 0; r < batch; ++r) rounds.back().push_back(settings.prompts[static_cast<size_t>(r) % settings.prompts.size()]);
  }
  const int64_t vocab = d.model->config().vocabSize;
  auto argmax = [](const std::vector<float>& l) {
    return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  };
  double decodeSeconds = 0, prefillSum = 0, weightBytes = 0;
  int decodeSteps = 0, requests = 0;
  for (size_t round = 0; round < rounds.size(); ++round) {
    const std::vector<int>& prompts = rounds[round];
    if (d.routing) d.routing->setRequests(prompts, settings.traceContinuation);
    std::vector<MoeModel::SequenceId> seqs;
    std::vector<int32_t> next(prompts.size());
    std::vector<double> prefill(prompts.size());
    for (size_t r = 0; r < prompts.size(); ++r) {
      seqs.push_back(d.model->addSequence());
      std::vector<int32_t> ids;
      for (int i = 0; i < settings.promptTokens; ++i)
        ids.push_back(static_cast<int32_t>((1009 * (i + 1) + 7919 * static_cast<int64_t>(prompts[r]) + 31 * static_cast<int64_t>(r)) % vocab));
      if (d.routing) {
        std::vector<int64_t> seg(prompts.size(), 0);
        seg[r] = settings.promptTokens;
        d.routing->setSegments(seg);
      }
      const auto t0 = Clock::now();
      const auto logits = d.model->forward({{seqs.back(), ids}});
      prefill[r] = since(t0);
      prefillSum += prefill[r];
      next[r] = argmax(logits[0]);
    }
    if (d.routing) d.routing->setSegments(std::vector<int64_t>(prompts.size(), 1));
    const size_t firstRow = result.latencyMs.size();
    result.latencyMs.resize(firstRow + prompts.size());
    double elapsed = 0;
    for (int step = 0; step < settings.tokens; ++step) {
      if (round == 0 && step == settings.warmup) atWarmUp();
      std::vector<MoeModel::Step> steps;
      for (size_t r = 0; r < prompts.size(); ++r) steps.push_back({seqs[r], {next[r]}});
      const auto t0 = Clock::now();
      const auto logits = d.model->forward(steps);
      const double s = since(t0);
      elapsed += s;
      for (size_t r = 0; r < prompts.size(); ++r) {
        next[r] = argmax(logits[r]);
        result.latencyMs[firstRow + r].push_back((prefill[r] + elapsed) * 1e3);
      }
      if (step >= settings.warmup) {
        decodeSeconds += s;
        weightBytes += static_cast<double>(d.model->lastForwardWeightBytes());
        ++decodeSteps;
      }
    }
    for (auto seq : seqs) d.model->removeSequence(seq);
    requests += static_cast<int>(prompts.size());
  }
  result.ttftMs = prefillSum / std::max(1, requests) * 1e3;
  result.tpotMs = decodeSteps ? decodeSeconds / decodeSteps * 1e3 : 0;
  result.throughput = decodeSeconds > 0 ? static_cast<double>(batch) * decodeSteps / decodeSeconds : 0;
  result.weightBytesPerStep = decodeSteps ? weightBytes / decodeSteps : 0;
  result.decodeSteps = decodeSteps;
}

std::vector<std::filesystem::path> BenchWorkload::filesRead(const std::vector<BenchSystem>& systems) const {
  bool zip = false, full = false;
  for (const auto& s : systems) {
    (s.options.mode == OffloadMode::FullTensor ? full : zip) = true;
    if (!s.options.checkpointDir.empty()) full = true;  // ZipMoE's raw misses read the checkpoint too
  }
  std::vector<std::filesystem::path> files;
  const auto collect = [&files](const std::filesystem::path& dir, const std::string& prefix, const std::string& extension) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && name.rfind(prefix, 0) == 0 && e.path().extension() == extension) files.push_back(e.path());
    }
  };
  if (zip) collect(spec_.store, "experts", ".bin");
  if (full) collect(spec_.hf, "", ".safetensors");
  std::sort(files.begin(), files.end());
  return files;
}

uint64_t BenchWorkload::prime(const BenchSystem& system) {
  uint64_t bytes = 0;
  for (const auto& f : filesRead({system})) bytes += primeFile(f, spec_.readMode);
  return bytes;
}

double BenchWorkload::warmUp(const std::vector<BenchSystem>& systems, uint64_t budgetBytes, const RunSettings& settings) {
  const auto t0 = Clock::now();
  const BenchSystem *zip = nullptr, *full = nullptr;
  for (const auto& s : systems) {
    const BenchSystem*& first = s.options.mode == OffloadMode::FullTensor ? full : zip;
    if (!first) first = &s;
  }
  const std::vector<std::filesystem::path> files = filesRead(systems);
  uint64_t bytes = 0;
  for (const auto& f : files) bytes += primeFile(f, spec_.readMode);
  const double readSeconds = since(t0);

  RunSettings pass = settings;  // full length: a pass of a few tokens left the next run still slow
  pass.recordLayers = false;
  pass.measureReplan = false;
  for (const BenchSystem* s : {zip, full})
    if (s) run(*s, budgetBytes, pass);
  const double seconds = since(t0);
  std::fprintf(stderr, "bench: warm-up: read %zu files (%.2f GB) in %.1f s, one unmeasured pass of%s%s in %.1f s\n", files.size(),
               static_cast<double>(bytes) / 1e9, readSeconds, zip ? (" " + zip->name).c_str() : "",
               full ? (" " + full->name).c_str() : "", seconds - readSeconds);
  const auto ms = [](const ObservedCost& c, double profiled) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3f (%.3f)", c.seconds * 1e3, profiled * 1e3);
    return c.count ? std::string(text) : std::string("-");
  };
  std::fprintf(stderr,
               "bench: observed ms per operation (profiled): tensor read %s, full read %s, E-chunk read %s, SM read %s, "
               "decompress %s, recover %s; layer makespan / estimate: with CPU work %.2f (%llu layers), reads only %.2f (%llu)\n",
               ms(observed_.tensorRead, profile_.tensorRead).c_str(), ms(observed_.fullRead, profile_.fullRead).c_str(),
               ms(observed_.eRead, profile_.eRead).c_str(), ms(observed_.smRead, profile_.smRead).c_str(),
               ms(observed_.decompress, profile_.decompress).c_str(), ms(observed_.recover, profile_.recover).c_str(),
               observed_.cpuLayer.seconds, static_cast<unsigned long long>(observed_.cpuLayer.count), observed_.readLayer.seconds,
               static_cast<unsigned long long>(observed_.readLayer.count));
  return seconds;
}

}  // namespace zipmoe::cli
