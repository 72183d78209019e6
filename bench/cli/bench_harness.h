// The benchmarks' common ground: one model loaded once with its dense weights, routing replayed from
// a real activation trace (or the model's own router), and a fresh expert runtime plugged in for
// every system and budget compared, so that every system runs on the same store, the same prompts,
// the same routing and the same budget in one process.
//
// BenchWorkload::open prepares the store (generating a checkpoint of a preset's shapes and
// converting it when asked), loads or measures the cost profile, and loads the model once. run()
// generates greedy continuations of synthetic prompts for a batch of requests (each request
// replays its own trace prompt) through the product's generation core (ServeScheduler: what
// `zipmoe generate`, the app and `zipmoe serve` run), and reports TTFT (prefill), TPOT (decode steps after a warm-up),
// throughput, per-request end-to-end latency at every output length, the runtime's hit rates and
// bytes, and each MoE layer's measured makespan against its lower bound (Lemma B.3).
// Thread-safety: one thread. Cost: the model's.
#pragma once

#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <functional>
#include <vector>

#include "zipmoe/trace/activation_trace.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/model/model.h"

namespace zipmoe::cli {

// A compared system: a name and the runtime options it stands for.
//   zipmoe, zipmoe:POOLS (e.g. zipmoe:FS), zipmoe-raw[:POOLS] (misses may be raw reads of the HF
//   checkpoint, per layer as planned), zipmoe-raw-always, zipmoe-noplan, zipmoe-fifo-schedule, zipmoe-lru,
//   zipmoe-fifo, zipmoe-marking, zipmoe-workers:L, full-lru, full-fifo, full-lfu, full-marking
struct BenchSystem {
  std::string name;
  RuntimeOptions options;
  // `resident`: the all-resident reference, every expert in memory (BF16) before the first token;
  // its TPOT is what the other systems' expert stall is measured against (stall = TPOT - resident).
  bool resident = false;
  // zipmoe-prefetch: the model's predictor for this system (the others run with it off). With a
  // trace, the oracle at `oracleAccuracy` (zipmoe-prefetch:ACC; the default is the best real
  // predictor's recall measured on the demo model); on the model's own router, the next-layer router.
  bool prefetch = false;
  double oracleAccuracy = -1;
};
// The best real predictor's recall (the per-token table: 0.760 over MoE layers 1-3, the layers an
// oracle predicts) on the demo model's held-out text (docs/runtime/prefetch-accuracy.json): what
// zipmoe-prefetch assumes on trace replay. Re-set it when that file is re-measured.
inline constexpr double kMeasuredPrefetchRecall = 0.76;
BenchSystem parseBenchSystem(const std::string& text, const RuntimeOptions& base, const std::filesystem::path& hf);
std::vector<std::string> splitList(const std::string& text);

// The p-quantile of v (0 ≤ p ≤ 1) with linear interpolation between neighbours: p = 0.5 is the true
// median (the mean of the two middle values for an even count). 0 for an empty v.
double percentile(std::vector<double> v, double p);

// This process's resident memory from /proc/self/status, in bytes: `field` "VmRSS:" (now) or
// "VmHWM:" (the peak since the process started or since resetPeakRss()); 0 without /proc.
uint64_t processMemory(const char* field);
// Starts a new peak (Linux: "5" written to /proc/self/clear_refs); false when the kernel refuses.
bool resetPeakRss();

struct WorkloadSpec {
  std::string label;                  // names the workload in results and figures
  std::filesystem::path hf;           // the HF checkpoint (the full-tensor baselines read it)
  std::filesystem::path store;        // the ZipMoE store
  std::filesystem::path traceFile;    // empty: the model's own router
  std::string generateFamily, generatePreset;  // when hf has no config.json: generate it (then convert)
  int generateLayers = 0;
  ReadMode readMode = ReadMode::Direct;
  int threads = 0;                    // libtorch intra-op threads; 0 = default
};

struct RunSettings {
  std::vector<int> prompts = {0};  // trace prompts, one per request of a batch (cycled)
  int batch = 1;                   // requests decoded together
  int promptTokens = 16;
  int tokens = 24;                 // decode steps after the prefill
  int warmup = 4;                  // decode steps left out of TPOT
  bool recordLayers = false;       // per-layer makespan / lower bound
  bool measureReplan = false;      // ZipMoE: after the run, time 10 budget moves as a slider makes them
  // ZipMoE systems start planning from the activation counts of this many trace prompts, the ones
  // after the highest measured prompt (never a measured one): as the app starts from the statistics
  // of earlier chats it keeps in SQLite. 0: from the prior, as a first session does.
  int historyPrompts = 0;
  // Every offloading system fills its pools before the first prompt (ExpertRuntime::warmUp), from
  // the history above, which the full-tensor baselines then get too (to rank what they keep; their
  // LRU/FIFO eviction does not look at it). The wait is not part of TTFT; the result reports it.
  bool warmStart = false;
  // Trace replay: once a prompt's counts are replayed, later tokens come from a Pólya urn with this
  // many tokens of the layer's counts as prior (TraceRouting::setContinuation); 0: the counts again.
  double traceContinuation = 0;
  // When set, every offloading run writes the runtime's operations over its measured steps (after
  // the warm-up) as Chrome trace JSON to <traceDir>/<system>-<budget MiB>MiB.json (a repeat
  // overwrites the file; events past the runtime's trace capacity are dropped and counted).
  std::filesystem::path traceDir;
};

struct RunResult {
  bool skipped = false;
  std::string skipReason;
  double ttftMs = 0;                // mean prefill time per request
  double tpotMs = 0;                // mean decode step after the warm-up (one token per request)
  double throughput = 0;            // generated tokens per second over the decode steps after warm-up
  std::vector<std::vector<double>> latencyMs;  // [request][n]: prefill + n+1 decode steps (n = 0..tokens-1)
  std::array<double, 4> hitPercent{};
  double missPercent = 0;
  double inPlacePercent = 0;  // activations that were C hits read in place (RuntimeStats::inPlaceTensors)
  // C members whose codes were indexed at a hit, on the model's thread, after the warm-up
  // (RuntimeStats::indexedOnDemand): each cost the step about 0.6 ms (docs/RUNTIME.md).
  uint64_t indexedOnDemand = 0;
  double mibReadPerToken = 0;
  double layerMs = 0;               // mean measured layer makespan
  double makespanOverBound = 0;     // Σ measured / Σ lower bound after the warm-up
  std::vector<double> layerRatios;  // per recorded layer: measured / lower bound (recordLayers)
  std::array<double, 4> poolRatio{};
  std::array<uint64_t, 4> poolCapacityBytes{};
  uint64_t workingSetBytes = 0;
  double stallSeconds = 0;
  double replanMeanMs = 0, replanMaxMs = 0;  // measureReplan
  uint64_t budgetBytes = 0;
  // Prefetch (zipmoe-prefetch) after the warm-up: the predictor's recall and exact share, the
  // share of the demand's read bytes that prefetch supplied, what it read in vain per token, and
  // the share of the dense windows the I/O thread spent prefetching.
  bool prefetch = false;
  double prefetchRecall = 0, prefetchExact = 0, prefetchCoverage = 0, prefetchWastedMiBPerToken = 0, prefetchDenseBusy = 0;
  // Weight bytes a decode step read after the warm-up (dense weights + the experts it computed),
  // mean per step: with the read bandwidth, the step's memory-bandwidth floor.
  double weightBytesPerStep = 0;
  int decodeSteps = 0;  // measured decode steps (after the warm-up)
  // The runtime's time between expert batches (attention, router, shared experts, sampling) per
  // forward step after the warm-up: the dense part of a step, as the app measures it (0: resident).
  double denseMsPerStep = 0;
  // RunSettings::warmStart: what the warm start did before the first prompt.
  double warmStartMs = 0;
  uint64_t warmStartExperts = 0, warmStartBytes = 0, warmStartPrepared = 0;
};

class BenchWorkload {
 public:
  static std::unique_ptr<BenchWorkload> open(const WorkloadSpec& spec);
  ~BenchWorkload();

  const WorkloadSpec& spec() const { return spec_; }
  uint64_t expertBytes() const { return expertBytes_; }
  const CostProfile& profile() const { return profile_; }
  int numLayers() const;
  std::string describe() const;  // "qwen2_moe, 8 MoE layers × 60 experts (top-4), 6.1 GiB of experts"
  int tracePrompts() const;      // prompts in the trace (0 without one)
  // The operation costs the runs so far observed: what the next runtime opens with.
  const ObservedCosts& observed() const { return observed_; }

  // Runs `system` at `budgetBytes`; a budget the runtime refuses gives a skipped result.
  RunResult run(const BenchSystem& system, uint64_t budgetBytes, const RunSettings& settings);

  // Puts every system about to be compared on the same footing before the first is measured: reads
  // once, in the workload's read mode, every file those systems read (the store's expert files for
  // ZipMoE systems, the checkpoint's safetensors for full-tensor ones), then runs the first system
  // of each kind once, unmeasured, with the same settings as the measurements. Without it the first
  // system measured in a process pays for what later ones find warm: the VM host's cache under
  // O_DIRECT reads (here a first read ran at 0.74 GB/s and the same read again at 1.4 GB/s), the
  // first touch of the dense weights, the allocator and the thread pools. A shorter pass (6 tokens
  // of one prompt) was not enough: the first measurement after it still read up to 1.9× slow in
  // some suites, the later ones not. Returns the seconds it took.
  double warmUp(const std::vector<BenchSystem>& systems, uint64_t budgetBytes, const RunSettings& settings);

  // Reads, in the workload's read mode, every file `system` will read, and returns the bytes read.
  // Just before a measurement it leaves the same state behind whichever system ran before: the
  // VM host's cache holds this system's files as recently as it can, not the previous system's.
  uint64_t prime(const BenchSystem& system);

  // The files `systems` read: the store's expert files (ZipMoE), the checkpoint's safetensors (full tensor).
  std::vector<std::filesystem::path> filesRead(const std::vector<BenchSystem>& systems) const;

 private:
  BenchWorkload() = default;
  // Serves the requests `settings` describe through a generation core (ServeScheduler) of its own on
  // the model, with whatever its experts are now (`runtime`: the plugged-in runtime, null for the
  // resident reference), and computes the timings from the core's step reports; calls atWarmUp once,
  // on the engine thread, before the first measured decode forward of the first round.
  void decodeRounds(const RunSettings& settings, RunResult& result, ExpertRuntime* runtime,
                    const std::function<void()>& atWarmUp);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  WorkloadSpec spec_;
  uint64_t expertBytes_ = 0;
  CostProfile profile_;
  ObservedCosts observed_;  // the operations' costs the runs so far observed (RuntimeStats::observed)
};

}  // namespace zipmoe::cli
