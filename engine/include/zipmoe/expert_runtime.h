// ExpertRuntime — the ZipMoE expert runtime and the offloading baselines behind one ExpertProvider.
//
// ZipMoE mode: experts stay on the SSD in the store (E-chunks compressed, SM-chunks raw). A memory
// budget is split between four cache pools — F (full BF16 tensors), C (E-chunks + SM-chunk),
// S (SM-chunks), E (E-chunks) — per MoE layer, as planned by Algorithm 4 from activation history and
// measured costs. For each layer the runtime dispatches the requested experts by rank (τ thresholds
// with tolerance δ), builds the DAG of every tensor from its residency, orders the operations with
// Algorithm 1 and runs them on one I/O thread (O_DIRECT reads by default), L decompression workers
// and one recovery stream; each expert is handed to the model as soon as its own tensors are
// recovered. setMemoryBudget replans on a background thread and applies the new pool sizes as soon
// as the plan is ready, also in the middle of generation: shrinking evicts at once every expert the
// running layer does not use (those go when the layer ends), growing fills on demand.
// FullTensor mode: the baseline — whole BF16 expert tensors read from the HF checkpoint's
// safetensors on the same I/O thread into one cache of full experts managed by LRU, FIFO, LFU or
// Marking (what Accelerate / MoE-Infinity-style offloading does).
// Every byte the runtime holds for experts counts against the budget: pools, staging buffers and
// the output slots the model reads from. Expert tensors are bit-identical to the store's.
// Thread-safety: acquire() and the batch from one thread (the model's); setMemoryBudget, stats,
// drainTrace and the activation-count functions from any thread. Cost: see docs/RUNTIME.md.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zipmoe/cost_profile.h"
#include "zipmoe/expert_provider.h"
#include "zipmoe/store.h"
#include "zipmoe/trace_events.h"

namespace zipmoe {

enum class OffloadMode { ZipMoE, FullTensor };
// ZipMoE's own rule evicts the least frequently activated member of a pool; the others replace it.
enum class EvictionPolicy { LeastFrequent, Lru, Fifo, Lfu, Marking };
const char* evictionPolicyName(EvictionPolicy p);
EvictionPolicy parseEvictionPolicy(const std::string& text);  // "zipmoe"/"lfreq", "lru", "fifo", "lfu", "marking"

struct RuntimeOptions {
  OffloadMode mode = OffloadMode::ZipMoE;
  uint64_t budgetBytes = 0;  // everything the runtime holds for routed experts
  unsigned pools = 0xF;      // ZipMoE: enabled pools, bit 0 = F, 1 = C, 2 = S, 3 = E
  EvictionPolicy eviction = EvictionPolicy::LeastFrequent;  // FullTensor: LRU by default (see factory)
  bool planning = true;               // false: fixedRatios (over the enabled pools)
  std::array<double, 4> fixedRatios{0.25, 0.25, 0.25, 0.25};
  int tolerance = 1;                  // δ of the dispatch thresholds
  int decompressWorkers = 0;          // L; 0 = number of cores
  ReadMode readMode = ReadMode::Direct;
  bool fifoSchedule = false;          // plain request order instead of Algorithm 1 (for comparison)
  // One request per tensor for its K E-chunks (and its SM-chunk too when the tensor is a plain miss)
  // instead of one per chunk: they are contiguous in the store. Fewer, larger reads.
  bool coalesceReads = true;
  int outputSlots = 3;                // recovered experts waiting for / used by the model
  int stagingSlots = 3;               // experts whose chunks are in flight at once
  int replanEverySteps = 64;          // re-plan from the growing history; 0 = only on budget changes
  double gridStep = 0.05;             // δ of Algorithm 4
  size_t traceCapacity = 1 << 18;     // events; 0 = no tracing
  std::filesystem::path checkpointDir;  // FullTensor: the HF directory with the BF16 safetensors
  // Called on the planner thread before each replan (not for the plan the runtime opens with).
  // Tests use it to inject a planner failure; whatever it throws is handled like a failed plan.
  std::function<void()> beforeReplan;
};

struct PoolState {
  uint64_t capacityBytes = 0, usedBytes = 0;
  int residentExperts = 0;  // over all layers
  double ratio = 0;         // mean planned share of the pool budget over layers
};

struct RuntimeStats {
  uint64_t steps = 0;                 // forward steps (acquire of MoE layer 0)
  uint64_t activations = 0;           // experts requested, all layers
  std::array<uint64_t, 4> hits{};     // found in F, C, S, E (FullTensor: hits[0] = cache hits)
  uint64_t misses = 0;
  uint64_t bytesRead = 0;
  double stallSeconds = 0;            // the model thread waiting in next()
  double predictedMakespan = 0;       // Σ over layers of the scheduler's simulated makespan
  double measuredMakespan = 0;        // Σ over layers of acquire → last expert released
  double lowerBound = 0;              // Σ over layers of max{I, C/L, P, Z} from measured durations
  uint64_t layers = 0;
  uint64_t replans = 0;
  double lastReplanSeconds = 0;
  std::array<PoolState, 4> pools{};   // FullTensor: pools[0] is its cache
  uint64_t workingSetBytes = 0;       // staging + output slots
  uint64_t budgetBytes = 0;
  uint64_t heldBytes = 0;             // pools + working set right now: ≤ budget whenever no layer
                                      // runs (a running layer's experts may exceed a budget that
                                      // shrank meanwhile until the layer ends)
  uint64_t droppedTraceEvents = 0;
  // Replans that failed (the planner threw): the previous plan stays in force. lastPlanError is
  // the latest failure's message, empty when none failed.
  uint64_t planFailures = 0;
  std::string lastPlanError;
};

// Activation counts per (layer, expert), plus how many steps they were counted over per layer.
struct ActivationCounts {
  int layers = 0, experts = 0;
  std::vector<uint64_t> counts;  // [layer * experts + expert]
  std::vector<uint64_t> steps;   // [layer]
};

class ExpertRuntime : public ExpertProvider {
 public:
  // ZipMoE mode: `store` is the ZipMoE store; FullTensor mode also needs options.checkpointDir.
  // Throws zipmoe::Error for a budget below minimumBudget() (the message says the minimum), a profile
  // measured on another machine or store, or bad options.
  static std::shared_ptr<ExpertRuntime> open(std::shared_ptr<const Store> store, const RuntimeOptions& options,
                                             const CostProfile& profile);

  // The least budget that can run the model: the working set (staging and output slots).
  virtual uint64_t minimumBudget() const = 0;
  virtual uint64_t expertBytes() const = 0;  // all routed experts in BF16
  // Replans off the critical path; the new split applies as soon as it is computed (experts the
  // running layer uses are evicted, if they must be, when it ends).
  // Throws zipmoe::Error (naming the minimum) for a budget below minimumBudget().
  virtual void setMemoryBudget(uint64_t bytes) = 0;
  virtual void setPools(unsigned poolMask) = 0;  // ZipMoE mode; replans like a budget change
  virtual RuntimeStats stats() const = 0;
  virtual size_t drainTrace(std::vector<TraceEvent>& out) = 0;
  virtual TraceLanes lanes() const = 0;
  virtual ActivationCounts activationCounts() const = 0;
  // Seeds the runtime's frequencies (e.g. from the app's database); replans. Throws for a shape
  // different from the model's.
  virtual void loadActivationCounts(const ActivationCounts& counts) = 0;
  // Blocks until a pending replan has been computed (tests, benchmarks).
  virtual void waitForPlan() = 0;
  virtual const RuntimeOptions& options() const = 0;
};

}  // namespace zipmoe
