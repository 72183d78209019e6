// Internal: OffloadingRuntime — the expert runtime (see zipmoe/experts/expert_runtime.h): what the ZipMoE
// runtime and the full-tensor baseline share. Per acquire (the model's thread): count the
// activations, let the strategy build the layer's job (zipmoe_strategy.h, full_tensor_strategy.h)
// and hand it to the executor. When the batch ends: commit the kept parts to the cache, fit the
// cache into capacities a plan may have shrunk meanwhile, and add the layer's measured makespan, its
// lower bound (Lemma B.3, from the measured operation times) and the predicted makespan to the
// stats. Budget moves, pool changes and growing history replan on the Replanner's thread; a plan is
// applied as soon as it is ready. ExpertRuntime::open makes one.
// Its members are defined by concern:
//   expert_runtime.cpp                  opening: the options resolved, construction and teardown
//   offloading_runtime_batches.cpp      a layer's batch: acquire, and the batch's end (commit, stats)
//   offloading_runtime_prefetch.cpp     prefetch hints and the prefetch slots
//   offloading_runtime_planning.cpp     plans: budget and pool moves, history, prompts, free pages
//   offloading_runtime_warm_start.cpp   warmUp
//   offloading_runtime_stats.cpp        stats() and the trace
// Thread-safety: as ExpertRuntime's (zipmoe/experts/expert_runtime.h). cacheMutex_ guards the cache, the
// plan, the token counters and the prefetch slots, statsMutex_ the stats; one that takes both takes
// cacheMutex_ first, and warmMutex_ comes before either. Cost: see docs/RUNTIME.md.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cache/expert_cache.h"
#include "experts/expert_sizes.h"
#include "experts/offload_strategy.h"
#include "experts/replanner.h"
#include "io/page_pool.h"
#include "io/page_reserve.h"
#include "sched/executor.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/experts/runtime_options.h"
#include "zipmoe/format/store.h"
#include "zipmoe/trace/trace_events.h"

namespace zipmoe::experts {

class OffloadingRuntime final : public ExpertRuntime {
 public:
  using Clock = sched::Clock;

  OffloadingRuntime(std::shared_ptr<const Store> store, const RuntimeOptions& options, const CostProfile& profile);
  ~OffloadingRuntime() override;

  // ExpertProvider ------------------------------------------------------------------------------
  int numLayers() const override { return sizes_.layers(); }
  int numExperts() const override { return sizes_.experts(); }
  std::pair<int64_t, int64_t> tensorShape(int kind) const override { return sizes_.shape(kind); }
  std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) override;
  void prefetch(int layer, std::span<const int> experts) override;

  // ExpertRuntime -------------------------------------------------------------------------------
  uint64_t minimumBudget() const override { return workingSet_; }
  uint64_t expertBytes() const override { return sizes_.expertBytes(); }
  uint64_t setBudget(const MemoryBudget& budget) override;
  void setPools(PoolMask pools) override;
  RuntimeStats stats() const override;
  size_t drainTrace(std::vector<TraceEvent>& out) override;
  TraceLanes lanes() const override { return TraceLanes{strategy_->decompressWorkers()}; }
  ActivationCounts activationCounts() const override;
  void loadActivationCounts(const ActivationCounts& counts) override;
  WarmUpResult warmUp(const std::atomic<bool>* stop) override;
  void waitForPlan() override { replanner_->waitForPlan(); }
  void waitForPrefetch() override { executor_->waitForPrefetch(); }
  const RuntimeOptions& options() const override { return options_; }

 private:
  int64_t ns(Clock::time_point t) const { return std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch_).count(); }

  const ActivationCounts& checkedShape(const ActivationCounts& counts) const;

  // Planning (offloading_runtime_planning.cpp) --------------------------------------------------
  // Any thread: the plan for `budget` (which the caller has checked against the minimum).
  Plan computePlan(uint64_t budget, PoolMask pools, const ActivationCounts& counts) const;
  // The plan's capacities into the cache, evictions down to them, free pages trimmed, and where its
  // layers' frequencies came from into the stats. REQUIRES: cacheMutex_ held (or construction).
  void install(const Plan& plan);
  // REQUIRES: cacheMutex_ held (or construction).
  void applyPlan(Plan plan);
  // The pooled free pages down to what the budget leaves beside the pools and the working set (a
  // smaller budget, or pools that shrank). REQUIRES: cacheMutex_ held (or construction).
  void trimPages(uint64_t budget);
  // The page reserve's room check: whether one more faulted run fits beside what is held, both in the
  // budget and in what the plan's pools can hold (a budget above the model's needs is not faulted in).
  // REQUIRES: cacheMutex_ held.
  bool reserveFits() const;
  void startPageReserve();
  // Whether the layer still plans from the prior but may plan from a prompt, or from its history
  // alone but may blend in the session's tokens (planFromPrompt): the check comes before a step is
  // recorded. It costs a look at the layer's steps and token sum, and a copy of the counts only
  // while a layer has fewer than kMinHistorySteps steps.
  // REQUIRES: cacheMutex_ held.
  bool layerWaitsForPrompt(int layer) const;
  // The step just recorded may have brought the layer a prompt's worth of tokens: the layer is
  // re-planned from them now, on the model's thread, before its experts are placed (one layer's
  // Algorithm 4: well under a millisecond). A failure leaves the plan in force, as a replan's does.
  // REQUIRES: cacheMutex_ held.
  void planLayerFromPrompt(int layer);
  // Growing history is worth a new plan now and then. REQUIRES: cacheMutex_ held.
  void maybeScheduleReplan();

  // A batch's end (offloading_runtime_batches.cpp) ----------------------------------------------
  // The model's thread, in the batch's destructor: commit kept parts and account the layer.
  void endJob(sched::LayerJob& job, std::vector<Keep>& kept, double predicted, const JobCounts& counts);
  // A batch's end, demand or warm start: commits the parts it keeps (unless it failed), unpins its
  // experts and fits the cache into the capacities in force. Returns the experts committed.
  // REQUIRES: cacheMutex_ held.
  uint64_t finishBatch(const sched::LayerJob& job, std::vector<Keep>& kept);
  // A C member committed from a miss whose every tensor a worker indexed (sched::JobTask::indexCodes):
  // its entry takes the shards, which point into the buffers it now holds, so its next hit is read in
  // place without indexing it again. REQUIRES: cacheMutex_ held.
  void adoptIndexedCodes(const sched::LayerJob& job, int layer, int expert);
  // The layer's measured makespan over the planner's estimate for its hit pattern, priced with the
  // costs observed so far, into the observed layer quotients (ObservedCosts::cpuLayer, readLayer).
  void observeLayer(const sched::LayerJob& job, const JobCounts& counts, double measured,
                    ObservedCosts& observed) const;

  // Prefetch (offloading_runtime_prefetch.cpp) --------------------------------------------------
  // Prefetch slots. Free → Assigned (reads queued for a hinted expert) → InUse (its layer's job uses
  // what completed) → Free when the job ends; an Assigned slot whose guess the model drops (a new
  // hint, or its layer came without it) is settled and freed, its bytes counted as wasted.
  // REQUIRES (all below): cacheMutex_ held.
  enum class SlotState : uint8_t { Free, Assigned, InUse };
  struct PrefetchSlot {
    SlotState state = SlotState::Free;
    int layer = -1, expert = -1;
    std::vector<io::AlignedBuffer> e, sm;  // per tensor kind; a buffer the cache keeps moves there
    uint64_t doneBytes = 0;                // completed reads, once settled
  };
  struct Hint {
    int layer = -1;
    std::vector<int> experts;
    bool consumed = true;  // its layer has been acquired since
  };

  int slotOf(int layer, int expert) const;
  void releaseSlot(int index);
  // Queues reads for the standing hint's experts into free slots, most likely first: the tensor
  // parts the expert's pool does not hold (nothing for F and C).
  void assignSlots();
  // At acquire: the completed prefetch reads of the requested experts (their slots become InUse);
  // every other slot that is not prefetching for the standing hint is freed.
  std::vector<PrefetchedParts> takePrefetched(int layer, std::span<const ExpertRequest> requests);

  std::shared_ptr<const Store> store_;
  const RuntimeOptions options_;
  Clock::time_point epoch_;
  const experts::ExpertSizes sizes_;
  const plan::CostModel layerCost_;  // the profile's, raw reads priced: estimates observed layers
  std::unique_ptr<experts::OffloadStrategy> strategy_;
  uint64_t workingSet_ = 0;
  std::unique_ptr<TraceBuffer> trace_;
  std::mutex drainMutex_;

  mutable std::mutex cacheMutex_;  // cache_, plan_, token counters
  std::unique_ptr<cache::ExpertCache> cache_;
  Plan plan_;
  uint64_t token_ = 0, useClock_ = 0;
  bool started_ = false;
  std::optional<Clock::time_point> lastBatchEnd_;
  std::vector<PrefetchSlot> slots_;  // never resized after construction: reads point into it
  Hint hint_;

  mutable std::mutex statsMutex_;
  RuntimeStats stats_;

  // Warm start: held by warmUp for each layer's batch; the first acquire() sets demanded_, then
  // takes it once, so it never runs beside a warm batch, and no warm batch starts after it.
  std::mutex warmMutex_;
  std::atomic<bool> demanded_{false};

  std::shared_ptr<io::PagePool> pages_;  // RuntimeOptions::recyclePages (kept buffers hold it too)
  std::unique_ptr<sched::Executor> executor_;
  std::unique_ptr<experts::Replanner> replanner_;  // its thread calls into everything above
  std::unique_ptr<io::PageReserve> reserve_;       // RuntimeOptions::reservePages; goes first (its thread too)
};

}  // namespace zipmoe::experts
