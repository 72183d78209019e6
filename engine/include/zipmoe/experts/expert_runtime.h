// ExpertRuntime — the ZipMoE expert runtime and the offloading baselines behind one ExpertProvider.
//
// ZipMoE: experts stay on the SSD in the store (E-chunks compressed, SM-chunks raw). A memory budget
// is split between four cache pools (zipmoe/base/pools.h) per MoE layer, as planned by Algorithm 4 from
// activation history and measured costs. For each layer the runtime dispatches the requested
// experts by rank, builds the DAG of every tensor from its residency, orders the operations with
// Algorithm 1 and runs them on one I/O thread (O_DIRECT reads by default), L decompression workers
// and one recovery stream; each expert is handed to the model as soon as its own tensors are
// recovered. setBudget replans on a background thread and applies the new pool sizes as soon as
// the plan is ready, also in the middle of generation: shrinking evicts at once every expert the
// running layer does not use (those go when the layer ends), growing fills on demand.
// FullTensor: the baseline — whole BF16 expert tensors read from the HF checkpoint's safetensors
// on the same I/O thread into one cache of full experts managed by LRU, FIFO, LFU or Marking (what
// Accelerate / MoE-Infinity-style offloading does).
// Every byte the runtime holds for experts counts against the budget: pools, staging buffers and
// the output slots the model reads from. Expert tensors are bit-identical to the store's.
// How it is opened: zipmoe/experts/runtime_options.h. How it works inside: docs/ARCHITECTURE.md and
// docs/RUNTIME.md.
// Thread-safety: acquire() and the batch from one thread (the model's); setBudget, setPools, stats,
// drainTrace, warmUp and the activation-count functions from any thread. Cost: see docs/RUNTIME.md.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/experts/expert_provider.h"
#include "zipmoe/base/pools.h"
#include "zipmoe/experts/runtime_options.h"
#include "zipmoe/format/store.h"
#include "zipmoe/trace/trace_events.h"

namespace zipmoe {

struct PoolState {
  uint64_t capacityBytes = 0, usedBytes = 0;
  int residentExperts = 0;  // over all layers
  double ratio = 0;         // mean planned share of the pool budget over layers
};

struct RuntimeStats {
  uint64_t steps = 0;                 // forward steps (acquire of MoE layer 0)
  uint64_t activations = 0;           // experts requested, all layers
  std::array<uint64_t, kNumPools> hits{};  // found in F, C, S, E (FullTensor: hits[0] = cache hits)
  uint64_t misses = 0;
  uint64_t bytesRead = 0;
  double stallSeconds = 0;            // the model thread waiting in next()
  double predictedMakespan = 0;       // Σ over layers of the scheduler's simulated makespan
  double measuredMakespan = 0;        // Σ over layers of acquire → last expert released
  double lowerBound = 0;              // Σ over layers of max{I, C/L, P, Z} from measured durations
  uint64_t layers = 0;
  uint64_t replans = 0;
  double lastReplanSeconds = 0;
  // Layers the plan in force planned from their own activation history (16 steps or more).
  int layersPlannedFromHistory = 0;
  // Layers it planned from the tokens of a prompt (RuntimeOptions::planFromPrompt).
  int layersPlannedFromPrompt = 0;
  // Of the layers planned from history, those that blend in the session's tokens (16 or more routed
  // through the layer since the counts were set; RuntimeOptions::planFromPrompt).
  int layersPlannedFromSession = 0;
  std::array<PoolState, kNumPools> pools{};  // FullTensor: pools[0] is its cache
  PoolMask poolMask = kAllPools;      // the pools of the plan in force
  uint64_t workingSetBytes = 0;       // staging + output slots
  uint64_t budgetBytes = 0;
  uint64_t heldBytes = 0;             // pools + working set right now: ≤ budget whenever no layer
                                      // runs (a running layer's experts may exceed a budget that
                                      // shrank meanwhile until the layer ends)
  // RuntimeOptions::lendRoom: what the layers hold beyond their own shares right now (inside heldBytes).
  uint64_t lentBytes = 0;
  uint64_t droppedTraceEvents = 0;
  // RuntimeOptions::recyclePages: free pages held for reuse now (inside heldBytes), and of all the
  // bytes of kept buffers, those built from reused pages and those freshly mapped.
  uint64_t pooledPageBytes = 0, reusedPageBytes = 0, freshPageBytes = 0;
  // RuntimeOptions::reservePages: pages faulted in ahead of need and added to the free pages, in all.
  uint64_t reservedPageBytes = 0;
  // Tensors handed to the model as split planes (RuntimeOptions::fuseRecovery): no recovery pass.
  uint64_t splitTensors = 0;
  // Tensors of C hits handed to the model as nibble codes read in place (RuntimeOptions::
  // readCodesInPlace): nothing decoded. indexedOnDemand: of their experts, those whose codes were
  // indexed for it at that hit, on the model's thread (once per C member: see warmPrepared).
  uint64_t inPlaceTensors = 0;
  uint64_t indexedOnDemand = 0;
  // Tensors of a prefill's misses that C keeps whose codes a worker indexed instead of decoding
  // them: handed to the model as nibble codes (not counted in splitTensors).
  uint64_t indexedMissTensors = 0;
  // Speculative prefetch (RuntimeOptions::prefetchSlots > 0). Hinted: experts the model named;
  // prefetched: bytes the prefetch reads brought in; useful: of those, bytes a layer then used
  // instead of reading them; wasted: bytes of guesses no layer used. Coverage of the demand =
  // useful / (useful + bytesRead). prefetchHitExperts: requested experts that found at least one
  // tensor part prefetched. denseSeconds: the model's time between expert batches;
  // prefetchDenseSeconds: the I/O thread's prefetch reading while no batch ran (busy share of the
  // dense windows = prefetchDenseSeconds / denseSeconds). Activation counts, hits and misses are
  // the same with prefetch on and off (a prefetched expert still counts as the miss it was).
  uint64_t prefetchHintedExperts = 0, prefetchHitExperts = 0;
  uint64_t prefetchedBytes = 0, prefetchUsefulBytes = 0, prefetchWastedBytes = 0, prefetchFailedReads = 0;
  double denseSeconds = 0, prefetchDenseSeconds = 0;
  // Replans that failed (the planner threw): the previous plan stays in force. lastPlanError is
  // the latest failure's message, empty when none failed.
  uint64_t planFailures = 0;
  std::string lastPlanError;
  // Warm start (ExpertRuntime::warmUp): layers warmed, experts kept in the pools and bytes read for
  // them, and the seconds it took; warmPrepared: kept experts readied for their first use then
  // (WarmUpResult::prepared). None of it counts as an activation, hit, miss, byte read or stall.
  int warmLayers = 0;
  uint64_t warmExperts = 0, warmBytes = 0, warmPrepared = 0;
  double warmSeconds = 0;
  // The operations' costs as observed in this runtime's layers (seeded by RuntimeOptions::observed):
  // what ZipMoE's plans are priced with (docs/RUNTIME.md).
  ObservedCosts observed;
};

// What ExpertRuntime::warmUp did.
struct WarmUpResult {
  int layers = 0;          // MoE layers whose planned experts were all read in
  uint64_t experts = 0;    // experts now kept in the pools that were not before
  uint64_t bytesRead = 0;
  // Of the experts it read, those it readied for their first use, so that the model's thread does
  // not then: ZipMoE's C members from a `nibble` store, their codes indexed for reading in place.
  uint64_t prepared = 0;
  double seconds = 0;
  bool stopped = false;    // a demand (the first acquire) or the caller's stop came first
};

class ExpertRuntime : public ExpertProvider {
 public:
  // ZipMoE mode: `store` is the ZipMoE store; FullTensor mode also needs options.checkpointDir.
  // Throws zipmoe::Error for a budget below minimumBudget() (the message names the minimum in bytes
  // and as a share of the expert bytes), a profile measured on another machine or store, history of
  // another shape, or bad options.
  static std::shared_ptr<ExpertRuntime> open(std::shared_ptr<const Store> store, const RuntimeOptions& options,
                                             const CostProfile& profile);

  // The least budget that can run the model: the working set (staging and output slots).
  virtual uint64_t minimumBudget() const = 0;
  virtual uint64_t expertBytes() const = 0;  // all routed experts in BF16
  // The one way to move the budget. Replans off the critical path; the new split applies as soon as
  // it is computed (experts the running layer uses are evicted, if they must be, when it ends).
  // Returns the bytes the budget resolved to. Throws zipmoe::Error (naming the minimum) for a
  // budget below minimumBudget() that is not clamped; nothing changes then.
  virtual uint64_t setBudget(const MemoryBudget& budget) = 0;
  virtual void setPools(PoolMask pools) = 0;  // ZipMoE mode; replans like a budget change
  virtual RuntimeStats stats() const = 0;
  virtual size_t drainTrace(std::vector<TraceEvent>& out) = 0;
  virtual TraceLanes lanes() const = 0;
  virtual ActivationCounts activationCounts() const = 0;
  // Seeds the runtime's frequencies (e.g. from the app's database); replans. Throws for a shape
  // different from the model's.
  virtual void loadActivationCounts(const ActivationCounts& counts) = 0;
  // Warm start: fills the pools with what the plan in force would keep before the first prompt
  // needs it, so that a first prefill finds them in memory instead of reading them all. Layer by
  // layer from the first, the experts this runtime's activation counts rank highest (its history:
  // RuntimeOptions::history or loadActivationCounts) are read — and decoded and recovered where
  // their pool keeps BF16 — as a miss would be, into the pool dispatch sends them to; the full-tensor
  // baseline fills its one cache with the most used experts over all layers (at equal use, expert
  // ids in turn across layers). After each layer's batch, what it kept is readied for its first use
  // (WarmUpResult::prepared), so that the first prefill's thread does not do it either. Without
  // history the ranks fall back to expert ids: a guess that
  // costs only idle I/O. Nothing counts as an activation, hit, miss, read byte or stall, so the
  // planner's statistics are the same with and without it (RuntimeStats::warm* count it apart).
  // Runs on the caller's thread, one layer's batch at a time, and stops for good before the next
  // layer once the model's first acquire() comes (which waits for the running layer's batch) or
  // `stop` turns true. Any thread, at most one call at a time; a call after the first acquire
  // returns at once. Throws zipmoe::Error as a layer's batch would (an unreadable store).
  virtual WarmUpResult warmUp(const std::atomic<bool>* stop = nullptr) = 0;
  // Blocks until a pending replan has been computed (tests, benchmarks).
  virtual void waitForPlan() = 0;
  // Blocks until every prefetch read queued so far has finished (tests, benchmarks).
  virtual void waitForPrefetch() = 0;
  virtual const RuntimeOptions& options() const = 0;
};

}  // namespace zipmoe
