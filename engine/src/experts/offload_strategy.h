// Internal: what differs between the ZipMoE runtime and the full-tensor baseline, behind the one
// interface the expert runtime (offloading_runtime.h) drives — the working set's slot layouts, the
// plan for a budget and how it sets the cache's capacities, one layer's job (what each requested
// expert needs, and what the cache keeps of it afterwards), and the pools' figures for the stats.
// Everything else is the runtime's and the same for both: counting activations, running jobs on the
// executor, committing kept parts, the layer's lower bound, replanning and the budget.
//   ZipMoeStrategy      zipmoe_strategy.h       four pools per layer, dispatch by rank, Algorithm 1
//   FullTensorStrategy  full_tensor_strategy.h  one cache of whole BF16 experts, whole-tensor reads
// Thread-safety: the runtime calls plan() on its planner thread (it reads only immutable state) and
// everything else under its cache lock. Cost: see each implementation.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "cache/expert_cache.h"
#include "zipmoe/plan/pool_planner.h"
#include "sched/executor.h"
#include "zipmoe/experts/expert_provider.h"
#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/base/pools.h"

namespace zipmoe::experts {

class FullTensorSource;

// A plan in force: per layer the pools' ratios and capacities (the baseline: one entry), and the
// budget and pool subset it was made for.
struct Plan {
  std::vector<plan::LayerPlan> layers;
  uint64_t budget = 0;
  PoolMask pools = kAllPools;
  double seconds = 0;  // time to compute it
  int historyLayers = 0;  // layers planned from their own history
  int sessionLayers = 0;  // layers planned from their history blended with the session's tokens
  int promptLayers = 0;   // layers planned from a prompt's tokens (the rest from the prior)
};

// Parts of one requested expert that the cache keeps when its layer's batch ends.
struct Keep {
  int expert = 0;
  int pool = cache::kNoPool;
  std::vector<cache::TensorParts> parts;  // per tensor kind
};

// The stats one layer's job adds (counted while it is built).
struct JobCounts {
  uint64_t activations = 0;
  std::array<uint64_t, kNumPools> hits{};
  uint64_t misses = 0;
  uint64_t inPlaceTensors = 0;  // C hits' tensors handed as nibble codes (RuntimeStats::inPlaceTensors)
  uint64_t indexedExperts = 0;  // of those hits' experts, the ones indexed now (RuntimeStats::indexedOnDemand)
};

// Tensor parts of a requested expert that completed prefetch reads brought in, per tensor kind
// (null where nothing was prefetched). The strategy uses them as resident inputs, moves a part the
// cache keeps into the kept parts, and adds the bytes it used to `usedBytes`.
struct PrefetchedParts {
  int expert = -1;
  std::vector<io::AlignedBuffer*> e, sm;
  uint64_t usedBytes = 0;
};

struct LayerRequest {
  int layer = 0;
  std::span<const ExpertRequest> requests;
  std::span<PrefetchedParts> prefetched;
  PoolMask activePools = kAllPools;
  uint64_t useClock = 0;  // the runtime's use counter (LRU times)
};

class OffloadStrategy {
 public:
  virtual ~OffloadStrategy() = default;
  virtual sched::SlotLayout stagingLayout() const = 0;
  virtual sched::SlotLayout outputLayout() const = 0;
  virtual int decompressWorkers() const = 0;  // the executor's L; 0 = no decompression
  virtual bool sharedCache() const = 0;       // one pool shared by all layers (the baseline)
  // The plan for `poolBytes` (the budget less the working set) from this activation history, with
  // the operations' costs observed so far.
  virtual Plan plan(uint64_t poolBytes, PoolMask pools, const ActivationCounts& counts,
                    const ObservedCosts& observed) const = 0;
  // Re-plans one layer of `plan` in place when the counts now give that layer a prompt to plan
  // from (RuntimeOptions::planFromPrompt) and it had none, or the session's tokens to blend into its
  // history; returns whether it did. The default: never.
  virtual bool replanLayerFromPrompt(Plan& /*plan*/, int /*layer*/, uint64_t /*poolBytes*/,
                                     const ActivationCounts& /*counts*/, const ObservedCosts& /*observed*/) const {
    return false;
  }
  // Sets the cache's capacities to the plan's. REQUIRES: the cache lock.
  virtual void applyPlan(cache::ExpertCache& cache, const Plan& plan, uint64_t poolBytes) const = 0;
  // Fills `job` and `kept` for one layer's requests and returns the makespan the scheduler predicts
  // for it (0 when the strategy does not predict). REQUIRES: the cache lock.
  virtual double buildJob(cache::ExpertCache& cache, const LayerRequest& request, sched::LayerJob& job,
                          std::vector<Keep>& kept, JobCounts& counts) const = 0;
  // Warm start (ExpertRuntime::warmUp): the experts of `layer` the plan would keep and the cache does
  // not yet keep where it would, most used first (by the cache's counts). REQUIRES: the cache lock.
  virtual std::vector<int> warmSet(const cache::ExpertCache& cache, const Plan& plan, int layer) const = 0;
  // Warm start, after a layer's batch is in: readies a kept expert of `layer` for its first use in
  // idle time, so that the model's thread does not do it then (ZipMoE: indexes a C member's nibble
  // codes for reading in place). Returns whether it did anything. The default: nothing to do.
  // REQUIRES: the cache lock.
  virtual bool prepareWarm(cache::ExpertCache& /*cache*/, int /*layer*/, int /*expert*/) const { return false; }
  // The pools' capacity and planned ratio, into stats.pools (used bytes and residents are set by
  // the runtime). REQUIRES: the cache lock.
  virtual void poolStats(const cache::ExpertCache& cache, const Plan& plan, RuntimeStats& stats) const = 0;
};

// The job entry of a requested expert (its tensors filled once ready); counts the activation.
sched::JobExpert startExpert(const ExpertRequest& request, int kinds, JobCounts& counts);
// Pins every requested expert: its resident parts are in use until the batch ends.
void pinRequested(cache::ExpertCache& cache, int layer, std::span<const ExpertRequest> requests);
// The ReadFull task of one expert tensor from the HF checkpoint (the baseline's read, and a ZipMoE
// raw miss's). With `keep`, the read goes into its kept F part (an evicted buffer reused when one fits).
sched::JobTask fullReadTask(const Store& store, const FullTensorSource& source, int layer, int expert, int kind,
                            int expertIndex, Keep* keep, std::vector<cache::TensorParts>& recycled);
// Moves into `dst` a buffer of about `bytes` (not more than 1/8 larger) from the evicted experts'
// buffers, when there is one: the next layer reuses what the last one evicted.
void reuseBuffer(std::vector<cache::TensorParts>& recycled, io::AlignedBuffer& dst, uint64_t bytes);

}  // namespace zipmoe::experts
