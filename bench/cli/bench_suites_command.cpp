// `zipmoe bench suite NAME`: the paper's evaluation (ZipMoE §5, Fig. 7–10, Table 1) on this machine.
// Every suite runs all its compared systems in one process, on one store, with the same prompts,
// the same trace-replayed routing and the same budget, writes its results as JSON and each figure
// as a figure spec that zipmoe-plot renders to PNG (next to this executable, when built with Qt).
//
//   budget     TPOT and TTFT against the memory budget (Fig. 7)
//   batch      decode throughput against the batch size (Fig. 8)
//   length     end-to-end latency against the output length, mean and 10th–90th percentiles (Fig. 9)
//   ablation   eviction policies, planning, pool subsets (Fig. 10 / Table 1)
//   scheduler  measured layer makespan over its lower bound, Algorithm 1 vs FIFO order
//   threads    TPOT against the number of decompression workers L
//   all        every suite above, one after the other
//
// Workloads: --workload qwen (Qwen1.5-MoE-A2.7B shapes, routing replayed from
// ../shared/data/traces/qwen1.5-moe.tsv), deepseek (DeepSeek-V2-Lite shapes, deepseek-v2-lite.tsv),
// demo (the demo model with its own router); or --hf/--store/--trace-file/--label for any other.
// Generated checkpoints and stores are made once under --workdir.
//
// Fair order: a process's first measurement pays for cold caches (the VM host's, under O_DIRECT)
// and first touches, so (1) a warm-up reads every file and runs one unmeasured pass per kind of
// system, (2) each measurement is preceded by reading that system's own files (--no-prime skips),
// and (3) the systems of a sweep are measured point by point, in an order that rotates with the
// point and the round (--repeat N measures each N times and reports the median).
//
// Every suite also measures, once per run shape (batch, prompt and decode lengths), the all-resident
// reference (every expert in memory before the first token; two runs) and, between its two runs,
// this machine's read bandwidth: its JSON gives each result's resident TPOT and stall (TPOT -
// resident TPOT), and under "reference" the resident runs with the bytes a step reads and the
// bandwidth floor (bytes / bandwidth).
#include <algorithm>
#include <random>
#include <cmath>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench_harness.h"
#include "command_line.h"
#include "commands.h"
#include "runtime_options.h"
#include "zipmoe/base/error.h"
#include "bench/kernels/kernel_bench.h"

namespace zipmoe::cli {
namespace {

using nlohmann::json;

struct SuiteOptions {
  std::filesystem::path out = "out/bench/suites";
  std::vector<double> budgets = {5, 10, 25, 50, 75};
  double budget = 25;
  std::vector<std::string> systems;  // empty: the suite's own
  std::vector<int> batches = {1, 4, 16};
  std::vector<int> lengths = {32, 64, 128, 256, 512};
  std::vector<int> workers = {1, 2, 4};
  RunSettings run;
  bool plot = true;
  bool warmUp = true;  // read the files and run one unmeasured pass before the first measurement
  bool prime = true;   // read a system's files again just before each of its measurements
  int repeat = 1;      // measurements of every system at every point (their median is reported)
  std::optional<uint64_t> promptSeed;  // the measured prompts were drawn with it (--prompt-seed)
  bool resident = true;  // measure the all-resident reference for every run shape (stall = TPOT - resident)
};

// One system's figures at one point: the median over its repeats, and every repeat as measured.
struct Measured {
  RunResult result;
  struct Sample {
    double tpotMs, ttftMs, throughput;
    int position;  // where this system ran in that round's order (0 = first)
  };
  std::vector<Sample> samples;
  double residentTpotMs = -1, residentTtftMs = -1;  // the all-resident reference for the same run shape
};

// The figure's subtitle: the machine and the settings every number depends on.
std::string settingsLine(const BenchWorkload& w, const SuiteOptions& o, const std::string& extra) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s; %s reads; prompts of %d tokens; %s", w.describe().c_str(),
                w.spec().readMode == ReadMode::Direct ? "O_DIRECT" : "buffered", o.run.promptTokens, extra.c_str());
  return buf;
}

json resultJson(const std::string& system, const Measured& m) {
  const RunResult& r = m.result;
  json j = {{"system", system},
            {"budget_bytes", r.budgetBytes},
            {"skipped", r.skipped}};
  if (r.skipped) {
    j["skip_reason"] = r.skipReason;
    return j;
  }
  j.update({{"tpot_ms", r.tpotMs},
            {"ttft_ms", r.ttftMs},
            {"throughput_tokens_per_s", r.throughput},
            {"hit_percent", r.hitPercent},
            {"miss_percent", r.missPercent},
            {"in_place_percent", r.inPlacePercent},
            {"indexed_on_demand", r.indexedOnDemand},
            {"mib_read_per_token", r.mibReadPerToken},
            {"layer_makespan_ms", r.layerMs},
            {"makespan_over_lower_bound", r.makespanOverBound},
            {"pool_ratio", r.poolRatio},
            {"working_set_bytes", r.workingSetBytes}});
  if (m.residentTpotMs >= 0)
    j.update({{"resident_tpot_ms", m.residentTpotMs},
              {"stall_ms_per_token", r.tpotMs - m.residentTpotMs},
              {"resident_ttft_ms", m.residentTtftMs}});
  if (r.warmStartExperts > 0 || r.warmStartMs > 0)
    j["warm_start"] = {{"ms", r.warmStartMs}, {"experts", r.warmStartExperts}, {"bytes", r.warmStartBytes},
                       {"prepared", r.warmStartPrepared}};
  if (r.prefetch)
    j["prefetch"] = {{"recall", r.prefetchRecall}, {"exact", r.prefetchExact}, {"coverage", r.prefetchCoverage},
                     {"wasted_mib_per_token", r.prefetchWastedMiBPerToken}, {"dense_io_busy", r.prefetchDenseBusy}};
  if (m.samples.size() > 1) {
    j["samples"] = json::array();
    for (const auto& x : m.samples)
      j["samples"].push_back({{"tpot_ms", x.tpotMs}, {"ttft_ms", x.ttftMs}, {"throughput_tokens_per_s", x.throughput},
                              {"position", x.position}});
  }
  return j;
}

// The median of every timing over the repeats; what does not depend on timing (hits, bytes, pools)
// from the repeat with the median TPOT; per-request latencies and per-layer ratios pooled.
RunResult medianOf(const std::vector<RunResult>& runs) {
  for (const auto& r : runs)
    if (r.skipped) return r;
  if (runs.size() == 1) return runs.front();
  std::vector<size_t> byTpot(runs.size());
  std::iota(byTpot.begin(), byTpot.end(), size_t{0});
  std::sort(byTpot.begin(), byTpot.end(), [&runs](size_t a, size_t b) { return runs[a].tpotMs < runs[b].tpotMs; });
  RunResult out = runs[byTpot[(runs.size() - 1) / 2]];
  const auto median = [&runs](double RunResult::*field) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.*field);
    return percentile(v, 0.5);
  };
  for (double RunResult::*field : {&RunResult::tpotMs, &RunResult::ttftMs, &RunResult::throughput, &RunResult::layerMs,
                                   &RunResult::makespanOverBound, &RunResult::stallSeconds, &RunResult::replanMeanMs,
                                   &RunResult::replanMaxMs})
    out.*field = median(field);
  out.latencyMs.clear();
  out.layerRatios.clear();
  for (const auto& r : runs) {
    out.latencyMs.insert(out.latencyMs.end(), r.latencyMs.begin(), r.latencyMs.end());
    out.layerRatios.insert(out.layerRatios.end(), r.layerRatios.begin(), r.layerRatios.end());
  }
  return out;
}

class SuiteRunner {
 public:
  SuiteRunner(BenchWorkload& w, SuiteOptions o) : w_(w), o_(std::move(o)) {
    base_.readMode = w.spec().readMode;
  }

  void run(const std::string& suite) {
    std::printf("\n== suite %s on %s\n", suite.c_str(), w_.spec().label.c_str());
    json doc = {{"suite", suite},
                {"workload", {{"label", w_.spec().label}, {"model", w_.describe()}, {"hf", w_.spec().hf.string()},
                              {"store", w_.spec().store.string()}, {"trace_file", w_.spec().traceFile.string()}}},
                {"host", w_.profile().host},
                {"read_mode", w_.spec().readMode == ReadMode::Direct ? "direct" : "buffered"},
                {"settings", {{"prompts", o_.run.prompts}, {"prompt_tokens", o_.run.promptTokens}, {"tokens", o_.run.tokens},
                              {"warmup", o_.run.warmup}}}};
    doc["settings"]["warm_up"] = o_.warmUp;
    doc["settings"]["prime"] = o_.prime;
    doc["settings"]["repeat"] = o_.repeat;
    doc["settings"]["history_prompts"] = o_.run.historyPrompts;
    doc["settings"]["warm_start"] = o_.run.warmStart;
    doc["settings"]["trace_continuation_tokens"] = o_.run.traceContinuation;
    doc["settings"]["order"] = "rotated";
    if (o_.promptSeed) doc["settings"]["prompt_seed"] = *o_.promptSeed;
    if (o_.warmUp && !warmedUp_) {
      RunSettings unmeasured = o_.run;
      unmeasured.traceDir.clear();  // --schedule-trace: measured runs only
      w_.warmUp(systems({"zipmoe", "full-lru"}), bytesAt(o_.budget), unmeasured);
      warmedUp_ = true;
    }
    figures_ = json::array();
    usedReferences_.clear();
    if (suite == "budget") budget(doc);
    else if (suite == "prefetch") prefetch(doc);
    else if (suite == "batch") batch(doc);
    else if (suite == "length") length(doc);
    else if (suite == "ablation") ablation(doc);
    else if (suite == "scheduler") scheduler(doc);
    else if (suite == "threads") threads(doc);
    else throw Error("unknown suite '" + suite + "' (budget, batch, length, ablation, scheduler, threads, all)");
    doc["figures"] = figures_;
    if (o_.resident) {
      json refs = json::array();
      for (const auto& key : usedReferences_) refs.push_back(references_.at(key).second);
      // The suite-level bandwidth is its first reference's (each reference has its own).
      const json& first = refs.empty() ? json::object() : refs.front();
      doc["reference"] = {{"read_bandwidth_gb_per_s", first.value("read_bandwidth_gb_per_s", 0.0)},
                          {"read_bandwidth_statistic", "median of 9 passes between two resident runs"},
                          {"read_bandwidth_best_pass_gb_per_s", first.value("read_bandwidth_best_pass_gb_per_s", 0.0)},
                          {"bandwidth_threads", first.value("bandwidth_threads", 0)},
                          {"bandwidth_buffer_mib", first.value("bandwidth_buffer_mib", 0.0)},
                          {"resident", refs}};
    }
    const auto path = o_.out / (suite + "-" + w_.spec().label + ".json");
    write(path, doc);
    std::printf("wrote %s\n", path.string().c_str());
    if (o_.prime)
      std::fprintf(stderr, "bench: %s: read %.2f GB in %.1f s to prime %d measurements\n", suite.c_str(),
                   static_cast<double>(primedBytes_) / 1e9, primeSeconds_, primed_);
    primedBytes_ = 0;
    primeSeconds_ = 0;
    primed_ = 0;
  }

  std::vector<std::filesystem::path> figureFiles;

 private:
  bool warmedUp_ = false;  // once per process: the suites after the first find it warm
  // The all-resident reference per run shape: its result and its JSON (the step's floor included).
  std::map<std::string, std::pair<RunResult, json>> references_;
  std::vector<std::string> usedReferences_;  // the shapes this suite used, in first-use order

  // The all-resident reference for `run`'s shape, measured once per process: every expert in memory
  // before the first token, the same prompts, routing and settings. Its TPOT is the step's time
  // without expert stall; with the bytes a step reads and the machine's read bandwidth it also
  // gives the memory-bandwidth floor.
  // The bandwidth is measured between two resident runs, and the reference is their mean: on this
  // VM the memory's speed changes from one minute to the next (a sitting read 60 GB/s in every pass
  // where the others read 32-35, docs/BENCHMARKS.md run 26), so a floor taken apart from the run
  // it judges may belong to another state of the machine. Both runs are kept in the JSON.
  const RunResult& resident(const RunSettings& run) {
    const std::string key = "batch " + std::to_string(run.batch) + ", " + std::to_string(run.promptTokens) +
                            "-token prompts, " + std::to_string(run.tokens) + " decode steps";
    if (std::find(usedReferences_.begin(), usedReferences_.end(), key) == usedReferences_.end()) usedReferences_.push_back(key);
    if (const auto it = references_.find(key); it != references_.end()) return it->second.first;
    RunSettings plain = run;
    plain.recordLayers = false;
    plain.measureReplan = false;
    const BenchSystem system = parseBenchSystem("resident", base_, w_.spec().hf);
    const RunResult first = w_.run(system, 0, plain);
    // A buffer as large as what a step reads (64 MiB to 2 GiB): a step of a large model streams
    // from DRAM, and this VM reports a 480 MiB L3 (a fixed 512 MiB buffer read 24.5-30.9 GB/s from
    // run to run, partly from that cache); a small model's step may really run from cache.
    // The floor is the median of 9 passes; the best pass is kept beside it.
    const auto bytes = static_cast<size_t>(std::clamp(first.weightBytesPerStep, 64.0 * (1 << 20), 2048.0 * (1 << 20)));
    const int threads = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
    const BandwidthFigure b = measureReadBandwidth(bytes, threads, 9);
    const RunResult second = w_.run(system, 0, plain);
    std::printf("  read bandwidth: %.1f GB/s (median of 9 passes over %.0f MiB, %d threads; best %.1f, slowest %.1f)\n",
                b.medianGbPerSecond, static_cast<double>(bytes) / (1 << 20), threads, b.gbPerSecond,
                b.worstGbPerSecond);
    RunResult r = first;
    r.tpotMs = (first.tpotMs + second.tpotMs) / 2;
    r.ttftMs = (first.ttftMs + second.ttftMs) / 2;
    r.throughput = (first.throughput + second.throughput) / 2;
    const double floorMs = r.weightBytesPerStep / (b.medianGbPerSecond * 1e9) * 1e3;
    const double bestFloorMs = r.weightBytesPerStep / (b.gbPerSecond * 1e9) * 1e3;
    std::printf("  %-22s %-12s TPOT %8.1f ms  TTFT %8.1f ms  %7.2f tok/s  floor %.1f ms "
                "(%.0f MB a step; runs %.1f / %.1f ms)\n",
                "resident", key.substr(0, key.find(',')).c_str(), r.tpotMs, r.ttftMs, r.throughput, floorMs,
                r.weightBytesPerStep / 1e6, first.tpotMs, second.tpotMs);
    json j = {{"shape", key}, {"batch", run.batch}, {"prompt_tokens", run.promptTokens}, {"tokens", run.tokens},
              {"warmup", run.warmup}, {"tpot_ms", r.tpotMs}, {"ttft_ms", r.ttftMs}, {"throughput_tokens_per_s", r.throughput},
              {"weight_mb_per_step", r.weightBytesPerStep / 1e6}, {"floor_ms", floorMs},
              {"tpot_over_floor", floorMs > 0 ? r.tpotMs / floorMs : 0.0}, {"best_pass_floor_ms", bestFloorMs},
              {"tpot_over_best_pass_floor", bestFloorMs > 0 ? r.tpotMs / bestFloorMs : 0.0},
              {"read_bandwidth_gb_per_s", b.medianGbPerSecond}, {"read_bandwidth_best_pass_gb_per_s", b.gbPerSecond},
              {"read_bandwidth_slowest_pass_gb_per_s", b.worstGbPerSecond}, {"bandwidth_threads", threads},
              {"bandwidth_buffer_mib", static_cast<double>(bytes) / (1 << 20)},
              {"run_tpot_ms", {first.tpotMs, second.tpotMs}}, {"run_ttft_ms", {first.ttftMs, second.ttftMs}},
              {"runs", 2}};
    return references_.emplace(key, std::make_pair(r, std::move(j))).first->second.first;
  }
  uint64_t primedBytes_ = 0;
  double primeSeconds_ = 0;
  int primed_ = 0;

  // Measures every system at one point (`point` counts the points of a sweep), --repeat times. The
  // order rotates with the point and the round, so that no system always runs first or after the
  // same neighbour; with priming, each measurement starts right after its own files were read.
  std::vector<Measured> measure(const std::vector<BenchSystem>& systems, size_t point, uint64_t budgetBytes,
                                const RunSettings& run, const std::string& at) {
    const size_t n = systems.size();
    std::vector<std::vector<RunResult>> runs(n);
    std::vector<Measured> out(n);
    for (int round = 0; round < o_.repeat; ++round) {
      const size_t first = (point + static_cast<size_t>(round)) % n;
      for (size_t k = 0; k < n; ++k) {
        const size_t i = (first + k) % n;
        if (o_.prime) {
          const auto t0 = std::chrono::steady_clock::now();
          primedBytes_ += w_.prime(systems[i]);
          primeSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          ++primed_;
        }
        RunResult r = w_.run(systems[i], budgetBytes, run);
        line(systems[i].name.c_str(), r, o_.repeat > 1 ? at + " #" + std::to_string(round + 1) : at);
        out[i].samples.push_back({r.tpotMs, r.ttftMs, r.throughput, static_cast<int>(k)});
        runs[i].push_back(std::move(r));
      }
    }
    for (size_t i = 0; i < n; ++i) {
      out[i].result = medianOf(runs[i]);
      if (o_.repeat > 1) line(systems[i].name.c_str(), out[i].result, at + " median");
    }
    if (o_.resident) {
      const RunResult& ref = resident(run);
      for (auto& m : out) m.residentTpotMs = ref.tpotMs, m.residentTtftMs = ref.ttftMs;
    }
    return out;
  }
  uint64_t bytesAt(double percent) const { return budgetBytes(percent, w_.expertBytes()); }
  std::vector<BenchSystem> systems(const std::vector<std::string>& defaults) const {
    std::vector<BenchSystem> out;
    for (const auto& s : o_.systems.empty() ? defaults : o_.systems) out.push_back(parseBenchSystem(s, base_, w_.spec().hf));
    return out;
  }
  static void write(const std::filesystem::path& path, const json& doc) {
    std::ofstream f(path);
    f << doc.dump(2) << "\n";
    if (!f) throw Error("cannot write " + path.string());
  }
  void figure(const std::string& suite, const std::string& name, json spec) {
    const auto path = o_.out / (suite + "-" + w_.spec().label + "-" + name + ".json");
    write(path, spec);
    figureFiles.push_back(path);
    figures_.push_back(path.filename().string());
  }
  void line(const char* system, const RunResult& r, const std::string& at) {
    if (r.skipped) {
      std::printf("  %-22s %-12s skipped: %s\n", system, at.c_str(), r.skipReason.c_str());
    } else {
      std::printf("  %-22s %-12s TPOT %8.1f ms  TTFT %8.1f ms  %7.2f tok/s  miss %5.1f %%  %7.1f MiB/token  meas/LB %.2f\n",
                  system, at.c_str(), r.tpotMs, r.ttftMs, r.throughput, r.missPercent, r.mibReadPerToken, r.makespanOverBound);
    }
    std::fflush(stdout);
  }

  void budget(json& doc) { budgetSweep(doc, "budget", systems({"zipmoe", "zipmoe-prefetch", "zipmoe-noplan", "full-lru"})); }

  // Prefetch: what speculative reads are worth at each budget — with the model's own router, the
  // next-layer router predictor; on a trace, the oracle at accuracy 0, 0.5, the measured recall and 1.
  void prefetch(json& doc) {
    const bool trace = !w_.spec().traceFile.empty();
    budgetSweep(doc, "prefetch",
                systems(trace ? std::vector<std::string>{"zipmoe", "zipmoe-prefetch:0", "zipmoe-prefetch:0.5", "zipmoe-prefetch",
                                                         "zipmoe-prefetch:1", "full-lru"}
                              : std::vector<std::string>{"zipmoe", "zipmoe-prefetch", "full-lru"}));
  }

  void budgetSweep(json& doc, const std::string& suite, const std::vector<BenchSystem>& compared) {
    json results = json::array();
    json tpot = json::array(), ttft = json::array();
    std::vector<std::vector<Measured>> at;  // [budget][system]
    for (size_t i = 0; i < o_.budgets.size(); ++i)
      at.push_back(measure(compared, i, bytesAt(o_.budgets[i]), o_.run, percentText(o_.budgets[i])));
    for (size_t k = 0; k < compared.size(); ++k) {
      const BenchSystem& s = compared[k];
      json tp = {{"name", s.name}, {"points", json::array()}}, tt = tp;
      for (size_t i = 0; i < o_.budgets.size(); ++i) {
        const double b = o_.budgets[i];
        const RunResult& r = at[i][k].result;
        json j = resultJson(s.name, at[i][k]);
        j["budget_percent"] = b;
        results.push_back(j);
        tp["points"].push_back({b, r.skipped ? json(nullptr) : json(r.tpotMs)});
        tt["points"].push_back({b, r.skipped ? json(nullptr) : json(r.ttftMs)});
      }
      tpot.push_back(tp);
      ttft.push_back(tt);
    }
    doc["results"] = results;
    const std::string sub = settingsLine(w_, o_, std::to_string(o_.run.tokens) + " tokens, TPOT after " +
                                                     std::to_string(o_.run.warmup) + " warm-up steps");
    figure(suite, "tpot", {{"kind", "line"}, {"title", "Time per output token vs memory budget — " + w_.spec().label},
                              {"subtitle", sub}, {"x", {{"label", "Memory budget"}, {"unit", "% of expert bytes"}}},
                              {"y", {{"label", "Time per output token"}, {"unit", "ms"}, {"from_zero", true}}}, {"series", tpot}});
    figure(suite, "ttft", {{"kind", "line"}, {"title", "Time to first token vs memory budget — " + w_.spec().label},
                              {"subtitle", sub}, {"x", {{"label", "Memory budget"}, {"unit", "% of expert bytes"}}},
                              {"y", {{"label", "Time to first token (prefill)"}, {"unit", "ms"}, {"from_zero", true}}},
                              {"series", ttft}});
  }

  void batch(json& doc) {
    json results = json::array(), series = json::array(), tpotSeries = json::array();
    const auto compared = systems({"zipmoe", "zipmoe-prefetch", "zipmoe-noplan", "full-lru"});
    std::vector<std::vector<Measured>> at;  // [batch][system]
    for (size_t i = 0; i < o_.batches.size(); ++i) {
      RunSettings run = o_.run;
      run.batch = o_.batches[i];
      at.push_back(measure(compared, i, bytesAt(o_.budget), run, "batch " + std::to_string(run.batch)));
    }
    for (size_t k = 0; k < compared.size(); ++k) {
      const BenchSystem& s = compared[k];
      json th = {{"name", s.name}, {"points", json::array()}}, tp = th;
      for (size_t i = 0; i < o_.batches.size(); ++i) {
        const int b = o_.batches[i];
        const RunResult& r = at[i][k].result;
        json j = resultJson(s.name, at[i][k]);
        j["batch"] = b;
        results.push_back(j);
        th["points"].push_back({b, r.skipped ? json(nullptr) : json(r.throughput)});
        tp["points"].push_back({b, r.skipped ? json(nullptr) : json(r.tpotMs)});
      }
      series.push_back(th);
      tpotSeries.push_back(tp);
    }
    doc["results"] = results;
    doc["budget_percent"] = o_.budget;
    const std::string sub = settingsLine(w_, o_, "budget " + percentText(o_.budget) + " of expert bytes; " +
                                                     std::to_string(o_.run.tokens) + " decode steps");
    figure("batch", "throughput", {{"kind", "line"}, {"title", "Decode throughput vs batch size — " + w_.spec().label},
                                   {"subtitle", sub}, {"x", {{"label", "Batch size"}, {"unit", "requests"}, {"log", true}, {"log_base", 2}}},
                                   {"y", {{"label", "Throughput"}, {"unit", "tokens/s"}, {"from_zero", true}}}, {"series", series}});
    figure("batch", "step", {{"kind", "line"}, {"title", "Decode step time vs batch size — " + w_.spec().label},
                             {"subtitle", sub}, {"x", {{"label", "Batch size"}, {"unit", "requests"}, {"log", true}, {"log_base", 2}}},
                             {"y", {{"label", "Time per decode step"}, {"unit", "ms"}, {"from_zero", true}}}, {"series", tpotSeries}});
  }

  void length(json& doc) {
    json results = json::array(), series = json::array();
    const int longest = *std::max_element(o_.lengths.begin(), o_.lengths.end());
    RunSettings run = o_.run;
    run.tokens = longest;
    run.warmup = std::min(run.warmup, longest - 1);
    const auto compared = systems({"zipmoe", "zipmoe-prefetch", "full-lru"});
    const auto measured = measure(compared, 0, bytesAt(o_.budget), run, std::to_string(longest) + " tokens");
    for (size_t k = 0; k < compared.size(); ++k) {
      const BenchSystem& s = compared[k];
      const RunResult& r = measured[k].result;
      json j = resultJson(s.name, measured[k]);
      json sr = {{"name", s.name}, {"points", json::array()}, {"band", json::array()}};
      if (!r.skipped) {
        json perLength = json::array();
        for (int n : o_.lengths) {
          std::vector<double> at;
          for (const auto& request : r.latencyMs)
            if (static_cast<int>(request.size()) >= n) at.push_back(request[static_cast<size_t>(n - 1)]);
          double mean = 0;
          for (double x : at) mean += x / static_cast<double>(at.size());
          const double p10 = percentile(at, 0.1), p90 = percentile(at, 0.9);
          perLength.push_back({{"tokens", n}, {"mean_ms", mean}, {"p10_ms", p10}, {"p90_ms", p90}, {"requests", at.size()}});
          sr["points"].push_back({n, mean / 1e3});
          sr["band"].push_back({n, p10 / 1e3, p90 / 1e3});
          std::printf("    %-22s %4d tokens: mean %8.2f s  p10 %8.2f s  p90 %8.2f s\n", s.name.c_str(), n, mean / 1e3, p10 / 1e3, p90 / 1e3);
        }
        j["latency"] = perLength;
      }
      results.push_back(j);
      if (!r.skipped) series.push_back(sr);  // a skipped system (budget below its minimum) has no curve
    }
    doc["results"] = results;
    doc["budget_percent"] = o_.budget;
    figure("length", "latency",
           {{"kind", "line"}, {"title", "End-to-end latency vs output length — " + w_.spec().label},
            {"subtitle", settingsLine(w_, o_, "budget " + percentText(o_.budget) + "; mean over " +
                                                  std::to_string(o_.run.prompts.size() * static_cast<size_t>(o_.repeat)) +
                                                  " requests, band 10th–90th percentile")},
            {"x", {{"label", "Output length"}, {"unit", "tokens"}, {"log", true}, {"log_base", 2}}},
            {"y", {{"label", "End-to-end latency"}, {"unit", "s"}, {"from_zero", true}}},
            {"legend", "top-left"}, {"series", series}});
  }

  void ablation(json& doc) {
    json results = json::array(), categories = json::array(), tpot = json::array(), miss = json::array();
    const auto compared = systems({"zipmoe", "zipmoe-lru", "zipmoe-fifo", "zipmoe-marking", "zipmoe-noplan", "zipmoe:F",
                                   "zipmoe:FS", "full-lru"});
    const auto measured = measure(compared, 0, bytesAt(o_.budget), o_.run, percentText(o_.budget));
    for (size_t k = 0; k < compared.size(); ++k) {
      const BenchSystem& s = compared[k];
      const RunResult& r = measured[k].result;
      results.push_back(resultJson(s.name, measured[k]));
      categories.push_back(s.name);
      tpot.push_back(r.skipped ? json(nullptr) : json(r.tpotMs));
      miss.push_back(r.skipped ? json(nullptr) : json(r.missPercent));
    }
    doc["results"] = results;
    doc["budget_percent"] = o_.budget;
    const std::string sub = settingsLine(w_, o_, "budget " + percentText(o_.budget) + "; zipmoe = least-frequent eviction, "
                                                     "planned F+C+S+E; zipmoe:F / :FS = only those pools");
    figure("ablation", "tpot", {{"kind", "bar"}, {"title", "Cache policies, planning and pools: TPOT — " + w_.spec().label},
                                {"subtitle", sub}, {"y", {{"label", "Time per output token"}, {"unit", "ms"}, {"from_zero", true}}},
                                {"categories", categories}, {"series", json::array({{{"name", "TPOT"}, {"values", tpot}}})},
                                {"legend", "none"}});
    figure("ablation", "miss", {{"kind", "bar"}, {"title", "Cache policies, planning and pools: miss rate — " + w_.spec().label},
                                {"subtitle", sub}, {"y", {{"label", "Expert activations missing every pool"}, {"unit", "%"}, {"from_zero", true}}},
                                {"categories", categories}, {"series", json::array({{{"name", "miss rate"}, {"values", miss}}})},
                                {"legend", "none"}});
  }

  void scheduler(json& doc) {
    json results = json::array(), series = json::array();
    RunSettings run = o_.run;
    run.recordLayers = true;
    const auto compared = systems({"zipmoe", "zipmoe-fifo-schedule"});
    const auto measured = measure(compared, 0, bytesAt(o_.budget), run, percentText(o_.budget));
    for (size_t k = 0; k < compared.size(); ++k) {
      const BenchSystem& s = compared[k];
      const RunResult& r = measured[k].result;
      json j = resultJson(s.name, measured[k]);
      std::vector<double> ratios = r.layerRatios;
      std::sort(ratios.begin(), ratios.end());
      json sr = {{"name", s.name == "zipmoe" ? "Algorithm 1 (zipmoe)" : "FIFO order (" + s.name + ")"}, {"points", json::array()}};
      for (size_t i = 0; i < ratios.size(); ++i)
        sr["points"].push_back({100.0 * static_cast<double>(i + 1) / static_cast<double>(ratios.size()), ratios[i]});
      j["layers"] = ratios.size();
      j["ratio_mean"] = ratios.empty() ? 0.0 : std::accumulate(ratios.begin(), ratios.end(), 0.0) / static_cast<double>(ratios.size());
      j["ratio_median"] = percentile(ratios, 0.5);
      j["ratio_p90"] = percentile(ratios, 0.9);
      j["ratio_max"] = ratios.empty() ? 0.0 : ratios.back();
      std::printf("    %-22s %zu layers: makespan / lower bound mean %.3f, median %.3f, p90 %.3f, max %.3f\n", s.name.c_str(),
                  ratios.size(), j["ratio_mean"].get<double>(), j["ratio_median"].get<double>(), j["ratio_p90"].get<double>(),
                  j["ratio_max"].get<double>());
      results.push_back(j);
      series.push_back(sr);
    }
    doc["results"] = results;
    doc["budget_percent"] = o_.budget;
    figure("scheduler", "ratio",
           {{"kind", "line"}, {"title", "Measured layer makespan over its lower bound (Lemma B.3) — " + w_.spec().label},
            {"subtitle", settingsLine(w_, o_, "budget " + percentText(o_.budget) + "; every MoE layer after the warm-up, sorted")},
            {"x", {{"label", "Layers at or below"}, {"unit", "%"}}},
            {"y", {{"label", "Makespan / lower bound"}, {"unit", "ratio"}}},
            {"reference_lines", json::array({{{"y", 1.0}, {"label", "lower bound"}}})},
            {"legend", "top-left"}, {"series", series}});
  }

  void threads(json& doc) {
    json results = json::array(), zip = {{"name", "zipmoe"}, {"points", json::array()}};
    std::vector<BenchSystem> compared;
    for (int l : o_.workers) compared.push_back(parseBenchSystem("zipmoe-workers:" + std::to_string(l), base_, w_.spec().hf));
    compared.push_back(parseBenchSystem("full-lru", base_, w_.spec().hf));
    const auto measured = measure(compared, 0, bytesAt(o_.budget), o_.run, percentText(o_.budget));
    for (size_t k = 0; k < o_.workers.size(); ++k) {
      const RunResult& r = measured[k].result;
      json j = resultJson(compared[k].name, measured[k]);
      j["workers"] = o_.workers[k];
      results.push_back(j);
      zip["points"].push_back({o_.workers[k], r.skipped ? json(nullptr) : json(r.tpotMs)});
    }
    json refs = json::array();
    const RunResult& baseline = measured.back().result;
    results.push_back(resultJson("full-lru", measured.back()));
    if (!baseline.skipped) refs.push_back({{"y", baseline.tpotMs}, {"label", "full-tensor LRU"}});
    doc["results"] = results;
    doc["budget_percent"] = o_.budget;
    doc["cores"] = sysconf(_SC_NPROCESSORS_ONLN);
    figure("threads", "tpot", {{"kind", "line"}, {"title", "TPOT vs decompression workers L — " + w_.spec().label},
                               {"subtitle", settingsLine(w_, o_, "budget " + percentText(o_.budget) + "; " +
                                                                     std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores")},
                               {"x", {{"label", "Decompression workers L"}, {"unit", "threads"}, {"log", true}, {"log_base", 2}}},
                               {"y", {{"label", "Time per output token"}, {"unit", "ms"}, {"from_zero", true}}},
                               {"reference_lines", refs}, {"series", json::array({zip})}});
  }

  BenchWorkload& w_;
  SuiteOptions o_;
  RuntimeOptions base_;
  json figures_;
};

// zipmoe-plot beside this executable: installed, and in the build tree (tools/plot writes it to app/).
std::filesystem::path findPlotter() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(self.parent_path() / "zipmoe-plot")) return self.parent_path() / "zipmoe-plot";
  return {};
}

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

const std::vector<std::string> kSuites = {"budget", "batch", "length", "ablation", "scheduler", "threads", "prefetch"};

const CommandSpec& suiteSpec() {
  static const CommandSpec spec{
      "zipmoe bench suite NAME [OPTIONS]",
      "The paper's evaluation on this machine; NAME is budget (TPOT/TTFT vs budget, Fig. 7), batch (throughput vs\n"
      "batch size, Fig. 8), length (latency vs output length, Fig. 9), ablation (eviction, planning, pools, Fig. 10),\n"
      "scheduler (layer makespan over its lower bound), threads (TPOT vs decompression workers) or all. Writes\n"
      "JSON results and figure specs (PNG with zipmoe-plot) to --out; see docs/BENCHMARKS.md.",
      {{"--workload", "qwen|deepseek|demo", "the model: Qwen1.5-MoE or DeepSeek-V2-Lite shapes (generated), or the demo model"},
       {"--hf", "DIR", "an HF checkpoint instead of a workload (with --store and --label)"},
       {"--store", "DIR", "its ZipMoE store (converted when absent)"},
       {"--trace-file", "TSV", "activation trace to replay (default: the workload's)"},
       {"--label", "NAME", "names the workload in results and figures"},
       {"--workdir", "DIR", "where generated models and stores are kept (default out/bench)"},
       {"--layers", "N", "layers of a generated workload (2-64)"},
       {"--out", "DIR", "results and figures (default out/bench/suites)"},
       {"--budgets", "LIST", "budget and prefetch suites: budgets, each PCT or PCT% (0-100) of the expert bytes (default 5,10,25,50,75)"},
       {"--budget", "PCT", "the other suites' budget, PCT or PCT% (0-100) of the expert bytes (default 25)"},
       {"--systems", "LIST", "compared systems instead of the suite's own (see below)"},
       {"--batches", "LIST", "batch suite: batch sizes (1-1024, default 1,4,16)"},
       {"--lengths", "LIST", "length suite: output lengths (2-1048576, default 32,64,128,256,512)"},
       {"--workers-list", "LIST", "threads suite: decompression workers (1-256, default 1,2,4)"},
       {"--prompts", "LIST", "the trace's prompts, one request each (default 0)"},
       {"--prompt-tokens", "N", "prompt length (1-65536, default 16)"},
       {"--tokens", "N", "decode steps (2-1048576, default 24)"},
       {"--warmup", "N", "decode steps left out of TPOT (below --tokens, default 4)"},
       {"--threads", "N", "compute threads (0 = every CPU this process may use, up to 4096)"},
       {"--buffered", "", "page-cache reads instead of O_DIRECT"},
       {"--no-plot", "", "leave the figures as JSON specs"},
       {"--schedule-trace", "DIR", "write each offloading run's operations after the warm-up as Chrome trace JSON, DIR/SYSTEM-BUDGETMiB.json"},
       {"--no-warm-up", "", "skip the warm-up (reading every file, one unmeasured pass)"},
       {"--no-prime", "", "do not re-read a system's files before each measurement"},
       {"--no-resident", "", "skip the all-resident reference run (resident TPOT, stall and the bandwidth floor)"},
       {"--repeat", "N", "measurements of each system at each point, the median reported (1-100)"},
       {"--warm-start", "", "(the default) fill the offloading systems' pools before the first prompt; kept so that older commands run"},
       {"--no-warm-start", "", "offloading systems start with empty pools (by default, as every door of the product does, they fill them before the first prompt from the --history counts; the full-tensor baselines get them too, to rank what they keep)"},
       {"--history", "N", "the systems plan from the activation counts of N other trace prompts from the start, as the product does from the statistics its earlier runs kept (default 8; 0: the prior)"},
       {"--prompt-seed", "S", "draw the measured trace prompts (as many as --prompts lists, default one) at random with seed S (default 1 unless --prompts is given); the draw is printed and written to the results"},
       {"--trace-continuation", "TAU", "once a trace prompt's tokens are replayed, draw later tokens' experts from the prompt's counts so far plus TAU tokens of the layer's counts over all prompts (a Polya urn, 0-1000000; 0: replay the prompt's counts again). Default: the value fitted on the trace, 32 for qwen1.5-moe.tsv, 16 for deepseek-v2-lite.tsv (scripts/dev/fit_session_weight.py), 0 otherwise"}},
      1, 1,
      "A budget PCT is PCT % of the model's expert bytes in BF16, the whole budget (working set included), as in\n"
      "`generate --budget PCT%`; a system whose minimum is above it is reported as skipped.\n"
      "Systems: zipmoe, zipmoe-prefetch (speculative prefetch: the next-layer router, or on a trace the oracle at the best\n"
      "predictor's recall measured on the demo model, 0.76), zipmoe-prefetch:ACC (the oracle at accuracy ACC, on a trace), zipmoe:POOLS (e.g.\n"
      "zipmoe:FS), zipmoe-noplan, zipmoe-fifo-schedule, zipmoe-lru, zipmoe-fifo,\n"
      "zipmoe-marking, zipmoe-workers:L, full-lru, full-fifo, full-lfu, full-marking."};
  return spec;
}

}  // namespace

int runBenchSuite(const Args& arguments) {
  const CommandSpec& command = suiteSpec();
  const CommandLine line = CommandLine::parse(command, arguments);
  if (line.help()) return printUsage(command);
  const std::string suite = line.positional(0);
  if (suite != "all" && std::find(kSuites.begin(), kSuites.end(), suite) == kSuites.end())
    throw Error("unknown suite '" + suite + "' (budget, batch, length, ablation, scheduler, threads, all)");
  const std::string workload = line.text("--workload", "qwen"), workdir = line.text("--workdir", "out/bench"),
                    hf = line.text("--hf", ""), store = line.text("--store", ""), trace = line.text("--trace-file", ""),
                    label = line.text("--label", "");
  SuiteOptions o;
  if (const auto v = line.text("--out")) o.out = *v;
  o.warmUp = !line.has("--no-warm-up");
  o.prime = !line.has("--no-prime");
  o.resident = !line.has("--no-resident");
  o.repeat = line.integer<int>("--repeat", 1, 100, o.repeat);
  const int layers = line.integer<int>("--layers", 2, 64, 0);
  if (const auto v = line.text("--budgets")) {
    o.budgets.clear();
    for (const auto& b : splitList(*v)) o.budgets.push_back(parseBudgetPercent("--budgets", b));
    if (o.budgets.empty()) throw Error("option --budgets needs at least one percentage");
  }
  if (const auto v = line.text("--budget")) o.budget = parseBudgetPercent("--budget", *v);
  if (const auto v = line.text("--systems")) {
    o.systems = splitList(*v);
    if (o.systems.empty()) throw Error("option --systems needs at least one system");
  }
  if (const auto v = line.text("--batches")) o.batches = parseIntList("--batches", *v, 1, 1024);
  if (const auto v = line.text("--lengths")) o.lengths = parseIntList("--lengths", *v, 2, 1 << 20);
  if (const auto v = line.text("--workers-list")) o.workers = parseIntList("--workers-list", *v, 1, 256);
  if (const auto v = line.text("--prompts")) o.run.prompts = parseIntList("--prompts", *v, 0, 1 << 20);
  o.run.promptTokens = line.integer<int>("--prompt-tokens", 1, 1 << 16, o.run.promptTokens);
  o.run.tokens = line.integer<int>("--tokens", 2, 1 << 20, o.run.tokens);
  o.run.warmup = line.integer<int>("--warmup", 0, 1 << 20, o.run.warmup);
  // The product's defaults: statistics of earlier runs (here: other prompts of the trace) and a
  // warm start from them, as every door of the product has by default (EngineOptions).
  o.run.historyPrompts = line.integer<int>("--history", 0, 1 << 20, 8);
  if (line.has("--warm-start") && line.has("--no-warm-start"))
    throw Error("options --warm-start and --no-warm-start contradict each other: give one");
  o.run.warmStart = !line.has("--no-warm-start");
  const bool continuationGiven = line.has("--trace-continuation");
  const double continuation = line.number("--trace-continuation", 0, 1e6, 0);
  if (line.has("--prompt-seed") && line.has("--prompts"))
    throw Error("options --prompt-seed and --prompts both choose the measured prompts: give one");
  const std::optional<uint64_t> promptSeed =
      line.has("--prompts") ? std::nullopt
                            : std::optional<uint64_t>(line.integer<uint64_t>("--prompt-seed", 0, UINT64_MAX, 1));
  if (const auto v = line.text("--schedule-trace")) o.run.traceDir = *v;
  const int threads = line.integer<int>("--threads", 0, 4096, 0);
  const bool buffered = line.has("--buffered");
  o.plot = !line.has("--no-plot");
  if (o.run.warmup >= o.run.tokens) throw Error("option --warmup must be below --tokens");

  WorkloadSpec spec;
  spec.readMode = buffered ? ReadMode::Buffered : ReadMode::Direct;
  spec.threads = threads;
  const std::filesystem::path dir(workdir);
  if (!hf.empty() || !store.empty()) {
    if (hf.empty() || store.empty() || label.empty()) throw Error("--hf, --store and --label go together");
    spec.hf = hf;
    spec.store = store;
    spec.traceFile = trace;
    spec.label = label;
  } else if (workload == "qwen") {
    const int l = layers ? layers : 8;
    spec.label = "qwen" + std::to_string(l);
    spec.hf = dir / (spec.label + "-hf");
    spec.store = dir / (spec.label + "-store");
    spec.traceFile = trace.empty() ? "../shared/data/traces/qwen1.5-moe.tsv" : trace;
    spec.generateFamily = "qwen2_moe";
    spec.generatePreset = "qwen1.5-moe-a2.7b";
    spec.generateLayers = l;
  } else if (workload == "deepseek") {
    const int l = layers ? layers : 5;  // its first layer is dense: l - 1 MoE layers
    spec.label = "dsv2lite" + std::to_string(l);
    spec.hf = dir / (spec.label + "-hf");
    spec.store = dir / (spec.label + "-store");
    spec.traceFile = trace.empty() ? "../shared/data/traces/deepseek-v2-lite.tsv" : trace;
    spec.generateFamily = "deepseek_v2";
    spec.generatePreset = "deepseek-v2-lite";
    spec.generateLayers = l;
  } else if (workload == "demo") {
    spec.label = "demo";
    spec.hf = "resources/demo-model";
    spec.store = dir / "demo-store";
    spec.traceFile = trace;
  } else {
    throw Error("unknown --workload '" + workload + "' (qwen, deepseek, demo; or --hf/--store/--label)");
  }
  for (const auto& name : o.systems) parseBenchSystem(name, RuntimeOptions{}, spec.hf);  // named before any work
  if (!spec.traceFile.empty() && !std::filesystem::exists(spec.traceFile))
    throw Error("trace file " + spec.traceFile.string() + " not found (the traces are in ../shared/data/traces)");
  if (spec.generatePreset.empty() && !std::filesystem::exists(spec.hf / "config.json"))
    throw Error(spec.hf.string() + " has no config.json" +
                (workload == "demo" && hf.empty() ? std::string(" (run --workload demo from the source tree)") : std::string()));
  std::filesystem::create_directories(o.out);
  std::filesystem::create_directories(dir);

  auto w = BenchWorkload::open(spec);
  // The fitted values belong to the traces (scripts/dev/fit_session_weight.py), whichever store replays them.
  const std::string traceName = spec.traceFile.filename().string();
  o.run.traceContinuation = continuationGiven                                ? continuation
                            : traceName.rfind("qwen1.5-moe", 0) == 0        ? 32.0
                            : traceName.rfind("deepseek-v2-lite", 0) == 0   ? 16.0
                                                                            : 0.0;
  if (!line.has("--history") && w->tracePrompts() > 0)  // a short trace: the history it has room for
    o.run.historyPrompts = std::clamp(w->tracePrompts() - static_cast<int>(o.run.prompts.size()), 0, o.run.historyPrompts);
  if (promptSeed && w->tracePrompts() > 0) {
    // Prompts nobody picked: drawn by a seed, from those that leave room for the history after them.
    const int count = static_cast<int>(o.run.prompts.size());
    const int room = w->tracePrompts() - o.run.historyPrompts;
    if (room < count)
      throw Error("--history " + std::to_string(o.run.historyPrompts) + " leaves " + std::to_string(std::max(room, 0)) +
                  " of the trace's " + std::to_string(w->tracePrompts()) + " prompts to measure; " + std::to_string(count) +
                  " are needed");
    std::mt19937_64 rng(*promptSeed);
    std::vector<int> pool(static_cast<size_t>(room));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    o.run.prompts.assign(pool.begin(), pool.begin() + count);
    o.promptSeed = promptSeed;
    std::string list;
    for (int p : o.run.prompts) list += (list.empty() ? "" : ",") + std::to_string(p);
    std::printf("bench: measured trace prompts %s (drawn with --prompt-seed %llu; --prompts %s repeats them)\n", list.c_str(),
                static_cast<unsigned long long>(*promptSeed), list.c_str());
  }
  if (w->tracePrompts() > 0)
    std::printf("bench: history of %d trace prompts, warm start %s, trace continuation %g\n", o.run.historyPrompts,
                o.run.warmStart ? "on" : "off", o.run.traceContinuation);
  if (w->tracePrompts() > 0)
    for (int p : o.run.prompts)
      if (p >= w->tracePrompts())
        throw Error("option --prompts: " + std::to_string(p) + " is beyond the trace's " + std::to_string(w->tracePrompts()) + " prompts");
  SuiteRunner runner(*w, o);
  const std::vector<std::string> suites = suite == "all" ? kSuites : std::vector<std::string>{suite};
  for (const auto& s : suites) runner.run(s);

  if (o.plot) {
    const auto plotter = findPlotter();
    if (plotter.empty()) {
      std::fprintf(stderr, "bench: zipmoe-plot not found next to this executable (it is built with Qt): figures left as JSON\n");
    } else {
      for (const auto& f : runner.figureFiles) {
        auto png = f;
        png.replace_extension(".png");
        const std::string cmd = shellQuote(plotter.string()) + " " + shellQuote(f.string()) + " " + shellQuote(png.string());
        if (std::system(cmd.c_str()) != 0) throw Error("zipmoe-plot failed on " + f.string());
        std::printf("plotted %s\n", png.string().c_str());
      }
    }
  }
  return 0;
}

}  // namespace zipmoe::cli
