#include "bench_harness.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "runtime_options.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/engine.h"
#include "zipmoe/base/error.h"
#include "zipmoe/io/file_priming.h"
#include "zipmoe/hf/model_family.h"
#include "zipmoe/trace/request_routing.h"
#include "zipmoe/serve/serve_scheduler.h"
#include "zipmoe/text/tokenizer.h"
#include "tools/synthetic/synthetic_model.h"
#include "zipmoe/trace/trace_events.h"

namespace zipmoe::cli {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

uint64_t processMemory(const char* field) {
  std::ifstream in("/proc/self/status");
  const std::string name(field);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name, 0) == 0) return 1024 * std::strtoull(line.c_str() + name.size(), nullptr, 10);  // kB
  return 0;
}

bool resetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
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
  std::shared_ptr<RequestTraceRouting> routing;  // null: the model's router
  std::shared_ptr<const ActivationTrace> trace;
  std::unique_ptr<MoeModel> model;
  std::unique_ptr<Tokenizer> tokenizer;  // the generation core decodes the replies' text with it
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
    ConvertOptions convert;  // the product default: the codec measured for this machine
    convert.onCodecChosen = [](const CodecChoice& c) { std::fprintf(stderr, "bench: codec %s\n", c.reason.c_str()); };
    convertCheckpoint(spec.hf, spec.store, convert);
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
    // Each request its own seed (1 + its place in the run): two requests replaying the same prompt
    // still differ in detail.
    d.routing = std::make_shared<RequestTraceRouting>(d.trace, m.numLayers(), m.numExperts,
                                                      static_cast<int>(m.config->value("num_experts_per_tok", 1)), 1);
    mo.routing = d.routing;
  }
  // The generation core streams text: the store's tokenizer (the converter copies it), else the checkpoint's.
  std::filesystem::path tokenizerJson = spec.store / "tokenizer.json";
  if (!std::filesystem::exists(tokenizerJson)) tokenizerJson = spec.hf / "tokenizer.json";
  if (!std::filesystem::exists(tokenizerJson))
    throw Error("bench: neither " + spec.store.string() + " nor " + spec.hf.string() +
                " has a tokenizer.json (the generation core decodes the replies with it)");
  d.tokenizer = Tokenizer::fromFile(tokenizerJson);
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
    decodeRounds(settings, result, nullptr, [] {});
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
  // The warm start is the Engine's (EngineOptions::warmStart): the same ExpertRuntime::warmUp. The
  // Engine runs it on a thread of its own beside the first requests; here it is awaited before the
  // core takes the first one, so that the wait is not part of TTFT and every system starts full.
  if (settings.warmStart) {
    const WarmUpResult warm = rt->warmUp();
    result.warmStartMs = warm.seconds * 1e3;
    result.warmStartExperts = warm.experts;
    result.warmStartBytes = warm.bytesRead;
    result.warmStartPrepared = warm.prepared;
  }
  RuntimeStats atWarm = rt->stats();
  decodeRounds(settings, result, rt.get(), [&] {
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

void BenchWorkload::decodeRounds(const RunSettings& settings, RunResult& result, ExpertRuntime* runtime,
                                 const std::function<void()>& atWarmUp) {
  Impl& d = *impl_;
  // Requests, served by the generation core (ServeScheduler) as `zipmoe generate` and `serve` are:
  // with a batch of one, every prompt is a request of its own, submitted once the one before has
  // finished, on the same runtime (its cache carries over, as in a chat); with a batch of B, B
  // requests submitted together, request r replaying prompt r mod |prompts|. Each prompt is
  // prefilled in a forward of its own (separatePrefill); then `tokens` decode forwards follow, each
  // with one token of every request of the round: greedy, to exactly that length (ignoreEos).
  const int batch = std::max(1, settings.batch);
  const size_t requests = batch == 1 ? settings.prompts.size() : static_cast<size_t>(batch);
  const int64_t vocab = d.model->config().vocabSize;
  const auto request = [&](size_t n) {
    const int64_t prompt = settings.prompts[n % settings.prompts.size()];
    const int64_t place = batch == 1 ? 0 : static_cast<int64_t>(n);  // in its round
    std::vector<int32_t> ids;
    for (int i = 0; i < settings.promptTokens; ++i)
      ids.push_back(static_cast<int32_t>((1009 * (i + 1) + 7919 * prompt + 31 * place) % vocab));
    GenerationRequest g;
    g.endpoint = Endpoint::Completions;
    g.promptIds = std::move(ids);
    g.ignoreEos = true;
    g.sampling.temperature = 0;
    g.sampling.maxTokens = settings.tokens + 1;  // the prefill's token, then one per decode forward
    g.maxTokensGiven = true;
    return g;
  };
  if (d.routing) d.routing->setPlan({settings.prompts, settings.traceContinuation});

  // What the core's step reports add up to. Written on the engine thread only; read once the
  // scheduler has stopped (its thread joined).
  struct Row {
    double prefillSeconds = 0, decodeSeconds = 0;
    std::vector<double> latencyMs;  // prefill + n+1 decode forwards
  };
  std::map<uint64_t, Row> rows;  // by request id: submission order
  std::set<uint64_t> firstRound;
  double decodeSeconds = 0, weightBytes = 0;
  int decodeSteps = 0, firstRoundDecodes = 0;
  bool warmedUp = false;
  std::string broken;  // a forward that did not have the shape the measurement assumes
  ServeOptions o = ServeOptions::interactive();
  o.maxBatch = batch;
  o.maxQueued = std::max<int>(o.maxQueued, static_cast<int>(requests));
  o.cachedSequences = 0;
  o.separatePrefill = true;
  o.routing = d.routing;
  o.onStep = [&](const StepReport& rep) {
    const double s = rep.forwardMs / 1e3;
    int step = -1;  // the decode forward's index in its round
    bool prefill = false, inFirstRound = false;
    for (const StepReport::Member& m : rep.members) {
      Row& row = rows[m.request];
      if (m.prefill) {
        prefill = true;
        row.prefillSeconds += s;
        if (firstRound.size() < static_cast<size_t>(batch)) firstRound.insert(m.request);
        continue;
      }
      inFirstRound = inFirstRound || firstRound.count(m.request) > 0;
      row.decodeSeconds += s;
      const int n = static_cast<int>(row.latencyMs.size());
      if (step >= 0 && n != step) broken = "the requests of a round decoded out of step";
      step = n;
      row.latencyMs.push_back((row.prefillSeconds + row.decodeSeconds) * 1e3);
    }
    if (prefill && (step >= 0 || rep.members.size() > 1)) broken = "a prefill shared its forward";
    if (step >= settings.warmup) {
      decodeSeconds += s;
      weightBytes += static_cast<double>(rep.weightBytes);
      ++decodeSteps;
    }
    if (inFirstRound) ++firstRoundDecodes;
    // Before the first round's decode forward number `warmup`.
    if (!warmedUp && settings.warmup < settings.tokens && firstRound.size() == static_cast<size_t>(batch) &&
        firstRoundDecodes == settings.warmup) {
      warmedUp = true;
      atWarmUp();
    }
  };
  std::vector<std::string> failures;
  {
    ServeScheduler scheduler(*d.model, *d.tokenizer, nullptr, runtime, o);
    const auto await = [&failures](const std::shared_ptr<RequestTicket>& ticket) {
      std::vector<RequestTicket::Event> events;
      while (ticket->wait(events, std::chrono::milliseconds(1000))) {
      }
      for (const auto& e : events)
        if (e.kind == RequestTicket::Event::Kind::Failed)
          failures.push_back("request " + std::to_string(ticket->id()) + ": " + (e.error ? e.error->message() : "failed"));
    };
    if (batch == 1) {
      for (size_t n = 0; n < requests; ++n) await(scheduler.submit(request(n)));
    } else {
      std::vector<GenerationRequest> round;
      for (size_t n = 0; n < requests; ++n) round.push_back(request(n));
      for (const auto& ticket : scheduler.submitAll(std::move(round))) await(ticket);
    }
    scheduler.stop();
  }
  if (!failures.empty()) throw Error("bench: the generation core failed " + failures.front());
  if (!broken.empty()) throw Error("bench: " + broken + " (the measurement assumes prefills alone, then lockstep decoding)");
  double prefillSum = 0;
  for (auto& [id, row] : rows) {
    if (static_cast<int>(row.latencyMs.size()) != settings.tokens)
      throw Error("bench: request " + std::to_string(id) + " ran " + std::to_string(row.latencyMs.size()) +
                  " decode forwards, not " + std::to_string(settings.tokens) + " (the context window is " +
                  std::to_string(d.model->config().maxPositionEmbeddings) + " tokens)");
    prefillSum += row.prefillSeconds;
    result.latencyMs.push_back(std::move(row.latencyMs));
  }
  result.ttftMs = prefillSum / static_cast<double>(std::max<size_t>(1, rows.size())) * 1e3;
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
