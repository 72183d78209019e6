// Runtime options for the CLI (see runtime_options.h).
#include "runtime_options.h"

#include <cmath>
#include <cstdio>

#include "distributed_options.h"
#include "zipmoe/base/error.h"

namespace zipmoe::cli {

uint64_t budgetBytes(double percent, uint64_t expertBytes) { return MemoryBudget::shareBytes(percent / 100.0, expertBytes); }

namespace {

double checkedPercent(const std::string& option, const std::string& given, const std::string& number) {
  double v = 0;
  try {
    v = parseNumberIn(option, number, 0, 100);
  } catch (const Error&) {
    throw Error("option " + option + ": '" + given + "' is not a percentage in (0, 100] of the expert bytes");
  }
  if (!(v > 0)) throw Error("option " + option + ": '" + given + "' is not a percentage in (0, 100] of the expert bytes");
  return v;
}

}  // namespace

double parseBudgetPercent(const std::string& option, const std::string& text) {
  const std::string number = !text.empty() && text.back() == '%' ? text.substr(0, text.size() - 1) : text;
  return checkedPercent(option, text, number);
}

MemoryBudget parseBudget(const std::string& option, const std::string& text) {
  try {
    return MemoryBudget::parse(text);
  } catch (const Error& e) {
    throw Error("option " + option + ": " + e.what());
  }
}

uint64_t parseByteSize(const std::string& option, const std::string& text) {
  const std::optional<uint64_t> bytes = parseBudget(option, text).fixedBytes();
  if (!bytes) throw Error("option " + option + " takes bytes (K/M/G suffix), not a percentage: '" + text + "'");
  return *bytes;
}

const std::vector<OptionSpec>& runtimeOptionSpecs() {
  static const std::vector<OptionSpec> specs = {
      {"--budget", "SIZE|PCT%|auto", "run the experts through the runtime under this memory budget: bytes (K/M/G suffix) or PCT% (0-100) of the expert bytes, working set included; auto: follow the machine's free memory, leaving --free-margin to other programs"},
      {"--free-margin", "SIZE", "with --budget auto: the memory left available to other programs (default the larger of 512M and 1/16 of the machine's)"},
      {"--no-history", "", "neither plan from the activation statistics earlier runs kept for this store nor add this run's to them"},
      {"--pools", "FCSE", "the ZipMoE pools to use (any of F, C, S, E)"},
      {"--offload", "zipmoe|full", "ZipMoE (default) or full-tensor offloading (needs --checkpoint)"},
      {"--checkpoint", "HF_DIR", "the BF16 checkpoint the full-tensor baseline reads"},
      {"--eviction", "zipmoe|lru|fifo|lfu|marking|usage", "the cache's eviction policy (usage: CoServe's usage probability)"},
      {"--no-plan", "", "a fixed equal split of the pools instead of the planner's"},
      {"--fifo-schedule", "", "request order instead of Algorithm 1"},
      {"--unfused-recovery", "", "recover every tensor before the model computes it (by default decoding computes from the split planes)"},
      {"--decoded-planes", "", "decode a C hit's nibble codes into a plane before computing it (by default decoding reads them in place)"},
      {"--fresh-buffers", "", "allocate every buffer the cache keeps in fresh memory (by default freed buffers' pages are reused)"},
      {"--no-page-reserve", "", "do not fault in the budget's free room ahead of need (by default a lowest-priority thread does)"},
      {"--evict-on-shrink", "", "evict a pool a new plan shrinks at once (by default its members stay while the layer's memory holds them)"},
      {"--no-prompt-plan", "", "plan a layer from the prior until it has 16 steps (by default a prompt of 16+ tokens plans it at prefill)"},
      {"--own-shares", "", "keep each layer within its own share of the budget (by default room a layer leaves unused is lent to the others)"},
      {"--workers", "L", "decompression workers (1-256)"},
      {"--buffered", "", "page-cache reads instead of O_DIRECT"},
      {"--warm-start", "", "wait until the pools hold the experts the history ranks highest before the first prompt (by default they fill in the background until the first prompt comes)"},
      {"--no-warm-start", "", "do not fill the pools before the first prompt"},
      {"--profile", "FILE", "the cost profile (default STORE/profile.json)"},
      {"--prefetch", "PREDICTOR", "speculative expert prefetch: router, previous, table (with --prefetch-table), oracle[:ACCURACY] (with --replay-trace) or off"},
      {"--prefetch-slots", "N", "experts read ahead at once (0-4096; default 2 × top-k with --prefetch), inside the budget"},
      {"--prefetch-table", "FILE", "the expert token table of --prefetch table (written by bench prefetch-accuracy)"},
      {"--replay-trace", "TSV", "force each token's routing from an activation trace"},
      {"--trace-prompt", "N", "the trace's prompt to replay (default 0)"},
  };
  static const std::vector<OptionSpec> all = [] {
    std::vector<OptionSpec> v = specs;
    v.insert(v.end(), distributedOptionSpecs().begin(), distributedOptionSpecs().end());
    return v;
  }();
  return all;
}

OptionSpec contextOverflowOptionSpec() {
  return {"--context-overflow", "drop-oldest|error",
          "a conversation longer than the context: leave out its oldest turns (default) or refuse it"};
}

ContextOverflow parseContextOverflowOption(const CommandLine& line) {
  const auto v = line.text("--context-overflow");
  if (!v) return ContextOverflow::DropOldest;
  try {
    return parseContextOverflow(*v);
  } catch (const Error& e) {
    throw Error(std::string("option --context-overflow: ") + e.what());
  }
}

std::optional<std::string> parseRuntimeOptions(const CommandLine& line, EngineOptions& engine) {
  RuntimeOptions r;
  const std::optional<std::string> budget = line.text("--budget");
  bool any = false;
  if (budget && *budget == "auto") {
    FollowPolicy follow;
    if (line.has("--free-margin")) follow.marginBytes = parseByteSize("--free-margin", *line.text("--free-margin"));
    engine.followFreeMemory = follow;
    r.budget = MemoryBudget::bytes(1).clamped();  // the engine moves it to the free memory at once
  } else if (budget) {
    r.budget = parseBudget("--budget", *budget);
  }
  if (line.has("--free-margin") && !engine.followFreeMemory)
    throw Error("option --free-margin is for --budget auto");
  if (const auto v = line.text("--pools")) {
    r.pools = parsePoolMask(*v, "option --pools");
    any = true;
  }
  if (const auto v = line.text("--offload")) {
    if (*v == "zipmoe") r.mode = OffloadMode::ZipMoE;
    else if (*v == "full") r.mode = OffloadMode::FullTensor;
    else throw Error("option --offload must be zipmoe or full, got '" + *v + "'");
    any = true;
  }
  if (const auto v = line.text("--checkpoint")) {
    r.checkpointDir = *v;
    any = true;
  }
  if (const auto v = line.text("--eviction")) {
    r.eviction = parseEvictionPolicy(*v);
    any = true;
  }
  if (line.has("--no-plan")) {
    r.planning = false;
    any = true;
  }
  if (line.has("--fifo-schedule")) {
    r.fifoSchedule = true;
    any = true;
  }
  if (line.has("--unfused-recovery")) {
    r.fuseRecovery = false;
    any = true;
  }
  if (line.has("--decoded-planes")) {
    r.readCodesInPlace = false;
    any = true;
  }
  if (line.has("--fresh-buffers")) {
    r.recyclePages = false;
    any = true;
  }
  if (line.has("--no-page-reserve")) {
    r.reservePages = false;
    any = true;
  }
  if (line.has("--evict-on-shrink")) {
    r.keepSurplus = false;
    any = true;
  }
  if (line.has("--no-prompt-plan")) {
    r.planFromPrompt = false;
    any = true;
  }
  if (line.has("--own-shares")) {
    r.lendRoom = false;
    any = true;
  }
  if (line.has("--workers")) {
    r.decompressWorkers = line.integer<int>("--workers", 1, 256, 0);
    any = true;
  }
  if (line.has("--buffered")) {
    r.readMode = ReadMode::Buffered;
    any = true;
  }
  if (line.has("--warm-start") && line.has("--no-warm-start"))
    throw Error("options --warm-start and --no-warm-start contradict each other: give one");
  if (line.has("--warm-start")) any = true;
  if (line.has("--no-warm-start")) engine.warmStart = false;
  if (line.has("--no-history")) engine.persistHistory = false;
  if (const auto v = line.text("--prefetch")) {
    PrefetchOptions& p = engine.model.prefetch;
    const size_t colon = v->find(':');
    p.predictor = parsePrefetchPredictor(v->substr(0, colon));
    if (colon != std::string::npos) {
      if (p.predictor != PrefetchPredictor::Oracle)
        throw Error("option --prefetch " + *v + ": only oracle takes an accuracy (oracle:0.5)");
      p.oracleAccuracy = parseNumberIn("--prefetch " + *v + " (the oracle's accuracy)", v->substr(colon + 1), 0, 1);
    }
    if (p.predictor == PrefetchPredictor::Oracle && !line.has("--replay-trace"))
      throw Error("option --prefetch oracle knows the routing only from a replayed trace: give --replay-trace TSV");
    if (p.predictor == PrefetchPredictor::TokenTable) {
      const auto table = line.text("--prefetch-table");
      if (!table) throw Error("option --prefetch table needs --prefetch-table FILE");
      p.table = ExpertTokenTable::load(*table);
    }
    if (p.predictor != PrefetchPredictor::Off) r.prefetchSlots = -1;  // auto, when a runtime runs
  }
  if (line.has("--prefetch-table") && engine.model.prefetch.predictor != PrefetchPredictor::TokenTable)
    throw Error("option --prefetch-table is for --prefetch table");
  if (line.has("--prefetch-slots")) {
    r.prefetchSlots = line.integer<int>("--prefetch-slots", 0, 4096, 0);
    any = true;
  }
  if (r.mode == OffloadMode::FullTensor && r.prefetchSlots != 0) {
    if (line.has("--prefetch-slots")) throw Error("option --prefetch-slots: the full-tensor baseline does not prefetch");
    r.prefetchSlots = 0;  // the predictor still runs (its accuracy is printed)
  }
  if (const auto v = line.text("--profile")) engine.profilePath = *v;
  if (const auto v = line.text("--replay-trace")) engine.replayTrace = *v;
  if (line.has("--trace-prompt")) {
    if (!line.has("--replay-trace")) throw Error("option --trace-prompt picks a prompt of --replay-trace TSV: give that too");
    engine.replayPrompt = line.integer<int>("--trace-prompt", 0, 1 << 30, 0);
  }
  if (!engine.replayTrace.empty() && !std::filesystem::is_regular_file(engine.replayTrace))
    throw Error("option --replay-trace: " + engine.replayTrace.string() + " is not a file");
  if (!r.checkpointDir.empty() && !std::filesystem::exists(r.checkpointDir / "config.json"))
    throw Error("option --checkpoint: " + r.checkpointDir.string() + " is not an HF checkpoint (no config.json)");
  if (any && !budget) throw Error("runtime options need --budget SIZE|PCT% (without it every expert is resident)");
  parseDistributedOptions(line, engine);
  if (r.mode == OffloadMode::FullTensor && r.checkpointDir.empty())
    throw Error("--offload full reads whole BF16 tensors from the HF checkpoint: give --checkpoint HF_DIR");
  if (budget) engine.runtime = r;
  return budget;
}

std::unique_ptr<Engine> openEngine(const std::filesystem::path& dir, EngineOptions options,
                                   const std::optional<std::string>& budget, bool awaitWarmStart) {
  if (!options.onStatus) options.onStatus = [](const std::string& s) { std::fprintf(stderr, "zipmoe: %s\n", s.c_str()); };
  std::unique_ptr<Engine> engine;
  try {
    engine = Engine::open(dir, options);
  } catch (const Error& e) {
    if (budget && std::string(e.what()).find("below the minimum") != std::string::npos)
      throw Error("--budget " + *budget + ": " + e.what());
    throw;
  }
  if (BudgetFollower* follower = engine->budgetFollower()) {
    const auto reading = follower->lastReading();
    std::fprintf(stderr,
                 "zipmoe: --budget auto: %.0f MiB now (%.0f MiB available, %.0f MiB left to other programs); it follows "
                 "free memory between %.0f and %.0f MiB\n",
                 static_cast<double>(follower->budget()) / (1 << 20),
                 reading ? static_cast<double>(reading->availableBytes) / (1 << 20) : 0.0,
                 reading ? static_cast<double>(follower->policy().margin(reading->totalBytes)) / (1 << 20) : 0.0,
                 static_cast<double>(follower->policy().floorBytes) / (1 << 20),
                 static_cast<double>(follower->policy().ceilingBytes) / (1 << 20));
    follower->setOnMove([](const BudgetMove& m) {
      std::fprintf(stderr, "zipmoe: [%.2f s] budget %.0f -> %.0f MiB: %s\n", m.seconds,
                   static_cast<double>(m.fromBytes) / (1 << 20), static_cast<double>(m.toBytes) / (1 << 20), m.reason.c_str());
    });
  } else if (const ExpertRuntime* rt = engine->runtime(); rt && budget)
    std::fprintf(stderr, "zipmoe: --budget %s: %llu bytes of %llu bytes of experts (BF16); its working set, %llu bytes, is part of it\n",
                 budget->c_str(), static_cast<unsigned long long>(rt->stats().budgetBytes),
                 static_cast<unsigned long long>(rt->expertBytes()), static_cast<unsigned long long>(rt->minimumBudget()));
  if (const auto& h = engine->historyPath(); !h.empty() && std::filesystem::exists(h))
    std::fprintf(stderr, "zipmoe: planning from the activation history of earlier runs (%s; --no-history: without)\n",
                 h.c_str());
  if (!awaitWarmStart) return engine;
  if (const auto warm = engine->waitForWarmUp())
    std::fprintf(stderr,
                 "zipmoe: --warm-start: %llu experts (%.1f MiB read) kept in the pools over %d MoE layers, %llu of them "
                 "readied for their first use, in %.2f s%s\n",
                 static_cast<unsigned long long>(warm->experts), static_cast<double>(warm->bytesRead) / (1 << 20), warm->layers,
                 static_cast<unsigned long long>(warm->prepared), warm->seconds, warm->stopped ? " (stopped)" : "");
  return engine;
}

std::string describePrefetchAccuracy(const MoeModel& model, PrefetchPredictor predictor) {
  const PrefetchAccuracy a = model.prefetchAccuracy();
  uint64_t n = 0;
  for (const auto& l : a.layers) n += l.predictions;
  if (n == 0) return {};
  char buf[256];
  std::snprintf(buf, sizeof buf, "[prefetch predictor %s: exact %.1f%%, recall %.1f%%, precision %.1f%% over %llu predictions]",
                prefetchPredictorName(predictor), 100.0 * a.exactShare(), 100.0 * a.recall(), 100.0 * a.precision(),
                static_cast<unsigned long long>(n));
  return buf;
}

std::string describeRuntime(const ExpertRuntime& rt) {
  const RuntimeStats s = rt.stats();
  const auto mib = [](uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  char buf[1024];
  std::string out;
  const bool full = rt.options().mode == OffloadMode::FullTensor;
  std::snprintf(buf, sizeof buf, "[%s: budget %.1f MiB (%.1f%% of %.1f MiB of experts), working set %.1f MiB, held %.1f MiB",
                full ? (std::string("full-tensor ") + evictionPolicyName(rt.options().eviction)).c_str() : "zipmoe",
                mib(s.budgetBytes), 100.0 * static_cast<double>(s.budgetBytes) / static_cast<double>(rt.expertBytes()),
                mib(rt.expertBytes()), mib(s.workingSetBytes), mib(s.heldBytes));
  out += buf;
  if (!full && rt.options().lendRoom && rt.options().keepSurplus) {
    std::snprintf(buf, sizeof buf, " (lent between layers %.1f MiB)", mib(s.lentBytes));
    out += buf;
  }
  const double acts = static_cast<double>(std::max<uint64_t>(1, s.activations));
  if (full) {
    std::snprintf(buf, sizeof buf, "; cache %.1f MiB, hit rate %.1f%%", mib(s.pools[0].capacityBytes),
                  100.0 * static_cast<double>(s.hits[0]) / acts);
    out += buf;
  } else {
    out += "; pools";
    for (int p = 0; p < 4; ++p) {
      std::snprintf(buf, sizeof buf, " %c %.0f%% %.1f MiB hit %.1f%%", poolLetter(static_cast<Pool>(p)), 100.0 * s.pools[static_cast<size_t>(p)].ratio,
                    mib(s.pools[static_cast<size_t>(p)].capacityBytes), 100.0 * static_cast<double>(s.hits[static_cast<size_t>(p)]) / acts);
      out += buf;
    }
  }
  std::snprintf(buf, sizeof buf, "; miss %.1f%%; read %.1f MiB; stall %.1f ms; layer makespan %.2f ms measured",
                100.0 * static_cast<double>(s.misses) / acts, mib(s.bytesRead), s.stallSeconds * 1e3,
                s.layers ? s.measuredMakespan / static_cast<double>(s.layers) * 1e3 : 0.0);
  out += buf;
  if (!full && s.layers) {
    std::snprintf(buf, sizeof buf, ", %.2f ms predicted, %.2f ms lower bound (ratio %.2f)",
                  s.predictedMakespan / static_cast<double>(s.layers) * 1e3, s.lowerBound / static_cast<double>(s.layers) * 1e3,
                  s.lowerBound > 0 ? s.measuredMakespan / s.lowerBound : 0.0);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "; %llu replans, last %.2f ms", static_cast<unsigned long long>(s.replans),
                s.lastReplanSeconds * 1e3);
  out += buf;
  if (!full && rt.options().planning) {  // where the plan in force got each layer's frequencies
    const int layers = static_cast<int>(rt.activationCounts().steps.size());
    std::snprintf(buf, sizeof buf, " (layers from history %d (with the session's tokens %d), prompt %d, prior %d)",
                  s.layersPlannedFromHistory, s.layersPlannedFromSession, s.layersPlannedFromPrompt,
                  layers - s.layersPlannedFromHistory - s.layersPlannedFromPrompt);
    out += buf;
  }
  if (rt.options().prefetchSlots != 0) {
    const double demand = static_cast<double>(s.prefetchUsefulBytes + s.bytesRead);
    std::snprintf(buf, sizeof buf,
                  "; prefetch: %llu experts hinted, %.1f MiB read ahead, %.1f MiB used (%.1f%% of the reads a layer needed), "
                  "%.1f MiB wasted, I/O busy %.0f%% of the dense time",
                  static_cast<unsigned long long>(s.prefetchHintedExperts), mib(s.prefetchedBytes), mib(s.prefetchUsefulBytes),
                  demand > 0 ? 100.0 * static_cast<double>(s.prefetchUsefulBytes) / demand : 0.0, mib(s.prefetchWastedBytes),
                  s.denseSeconds > 0 ? 100.0 * s.prefetchDenseSeconds / s.denseSeconds : 0.0);
    out += buf;
  }
  if (s.planFailures)
    out += "; " + std::to_string(s.planFailures) + " replans failed (the previous plan stayed), last: " + s.lastPlanError;
  return out + "]";
}

}  // namespace zipmoe::cli
