// The expert runtime (see zipmoe/expert_runtime.h): what the ZipMoE runtime and the full-tensor
// baseline share. Per acquire (the model's thread): count the activations, let the strategy build
// the layer's job (zipmoe_strategy.h, full_tensor_strategy.h) and hand it to the executor. When the
// batch ends: commit the kept parts to the cache, fit the cache into capacities a plan may have
// shrunk meanwhile, and add the layer's measured makespan, its lower bound (Lemma B.3, from the
// measured operation times) and the predicted makespan to the stats. Budget moves, pool changes
// and growing history replan on the Replanner's thread; a plan is applied as soon as it is ready.
#include "zipmoe/expert_runtime.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "cache/expert_cache.h"
#include "experts/expert_sizes.h"
#include "experts/full_tensor_strategy.h"
#include "experts/replanner.h"
#include "experts/zipmoe_strategy.h"
#include "sched/executor.h"
#include "zipmoe/error.h"

namespace zipmoe {
namespace {

using experts::Keep;
using experts::Plan;
using sched::Clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Lemma B.3's lower bound max{I, C/L, P, Z} (and the recovery stream's total) from the measured
// durations of one layer's operations: what no schedule of these operations could beat.
double measuredLowerBound(const sched::LayerJob& job, int shards, int workers) {
  double io = 0, dec = 0, rec = 0, compute = 0, z = 0;
  const int L = std::max(1, workers);
  std::vector<double> expertCompute(job.experts.size(), 0.0);
  for (size_t i = 0; i < job.experts.size(); ++i) {
    expertCompute[i] = job.experts[i].computeSeconds;
    compute += expertCompute[i];
    z = std::max(z, expertCompute[i]);
  }
  for (const auto& t : job.tasks) {
    io += t.readESeconds + t.readSMSeconds;
    dec += t.decompressSeconds;
    rec += t.recoverSeconds;
    const double path = t.readESeconds + std::max(t.decompressSeconds / std::min(shards, L), t.readSMSeconds) +
                        t.recoverSeconds + expertCompute[static_cast<size_t>(t.expertIndex)];
    z = std::max(z, path);
  }
  return std::max({io, dec / L, compute, z, rec});
}

RuntimeOptions resolved(RuntimeOptions o) {
  if (o.mode == OffloadMode::FullTensor && o.eviction == EvictionPolicy::LeastFrequent) o.eviction = EvictionPolicy::Lru;
  if (o.decompressWorkers <= 0) o.decompressWorkers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (o.outputSlots < 1) throw Error("expert runtime: outputSlots must be at least 1");
  if (o.stagingSlots < 1) throw Error("expert runtime: stagingSlots must be at least 1");
  if (o.tolerance < 0) throw Error("expert runtime: tolerance δ must be ≥ 0");
  if (o.pools == 0 || o.pools > kAllPools) throw Error("expert runtime: the pool subset must enable at least one of F, C, S, E");
  if (!o.budget.isSet()) throw Error("expert runtime: no memory budget given (RuntimeOptions::budget)");
  return o;
}

class Runtime final : public ExpertRuntime {
 public:
  Runtime(std::shared_ptr<const Store> store, const RuntimeOptions& options, const CostProfile& profile)
      : store_(std::move(store)), options_(resolved(options)), epoch_(Clock::now()), sizes_(*store_) {
    if (options_.mode == OffloadMode::ZipMoE)
      strategy_ = std::make_unique<experts::ZipMoeStrategy>(*store_, sizes_, options_, profile);
    else
      strategy_ = std::make_unique<experts::FullTensorStrategy>(*store_, sizes_, options_);
    const sched::SlotLayout staging = strategy_->stagingLayout(), output = strategy_->outputLayout();
    workingSet_ = static_cast<uint64_t>(staging.count) * staging.slotBytes +
                  static_cast<uint64_t>(output.count) * output.slotBytes;
    const uint64_t budget = options_.budget.resolve(workingSet_, sizes_.expertBytes());
    if (options_.traceCapacity > 0) trace_ = std::make_unique<TraceBuffer>(options_.traceCapacity);
    cache_ = std::make_unique<cache::ExpertCache>(sizes_.layers(), sizes_.experts(), options_.eviction,
                                                  strategy_->sharedCache());
    if (options_.history) cache_->setActivationCounts(checkedShape(*options_.history));
    applyPlan(computePlan(budget, options_.pools, cache_->activationCounts()));
    executor_ = std::make_unique<sched::Executor>(store_.get(), strategy_->decompressWorkers(), options_.readMode,
                                                  trace_.get(), epoch_, staging, output);
    experts::Replanner::Callbacks callbacks;
    callbacks.snapshot = [this] {
      std::lock_guard lock(cacheMutex_);
      return experts::Replanner::Snapshot{cache_->activationCounts(), plan_.budget, plan_.pools};
    };
    callbacks.compute = [this](uint64_t b, PoolMask pools, const ActivationCounts& counts) {
      return computePlan(b, pools, counts);
    };
    callbacks.apply = [this](Plan plan) {
      // Applied at once, also while a layer runs: the experts it uses are pinned and never evicted,
      // and what it keeps is fitted into the new capacities when it ends (endJob).
      std::lock_guard lock(cacheMutex_);
      applyPlan(std::move(plan));
    };
    callbacks.onFailure = [this](const std::string& error) {
      std::lock_guard lock(statsMutex_);
      ++stats_.planFailures;
      stats_.lastPlanError = error;
    };
    callbacks.beforeReplan = options_.beforeReplan;
    replanner_ = std::make_unique<experts::Replanner>(std::move(callbacks));
  }

  ~Runtime() override {
    replanner_.reset();  // no plan is applied after this
    executor_.reset();
  }

  // ExpertProvider ------------------------------------------------------------------------------
  int numLayers() const override { return sizes_.layers(); }
  int numExperts() const override { return sizes_.experts(); }
  std::pair<int64_t, int64_t> tensorShape(int kind) const override { return sizes_.shape(kind); }

  std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) override {
    if (layer < 0 || layer >= sizes_.layers())
      throw Error("expert runtime: MoE layer " + std::to_string(layer) + " out of range (0.." +
                  std::to_string(sizes_.layers() - 1) + ")");
    std::vector<char> seen(static_cast<size_t>(sizes_.experts()), 0);
    for (const ExpertRequest& r : requests) {
      if (r.expert < 0 || r.expert >= sizes_.experts())
        throw Error("expert runtime: expert " + std::to_string(r.expert) + " out of range (0.." +
                    std::to_string(sizes_.experts() - 1) + ")");
      if (seen[static_cast<size_t>(r.expert)]++)
        throw Error("expert runtime: expert " + std::to_string(r.expert) + " requested twice");
    }
    const auto now = Clock::now();
    std::lock_guard lock(cacheMutex_);
    if (layer == 0 && started_) ++token_;
    started_ = true;
    if (lastBatchEnd_ && trace_) {  // the model's dense work between the last layer and this one
      TraceEvent ev;
      ev.startNs = ns(*lastBatchEnd_);
      ev.endNs = ns(now);
      ev.token = static_cast<int32_t>(token_);
      ev.layer = static_cast<int16_t>(layer);
      ev.op = TraceOp::Dense;
      ev.lane = static_cast<uint8_t>(lanes().compute());
      trace_->record(ev);
    }
    std::vector<int> ids;
    for (const ExpertRequest& r : requests) ids.push_back(r.expert);
    cache_->recordActivations(layer, ids);
    if (layer == 0) maybeScheduleReplan();
    ++useClock_;

    auto job = std::make_shared<sched::LayerJob>();
    job->layer = layer;
    job->token = static_cast<int>(token_);
    job->start = now;
    auto kept = std::make_shared<std::vector<Keep>>();
    experts::JobCounts counts;
    const experts::LayerRequest request{layer, requests, plan_.pools, useClock_};
    const double predicted = strategy_->buildJob(*cache_, request, *job, *kept, counts);
    {
      std::lock_guard statsLock(statsMutex_);
      stats_.activations += counts.activations;
      for (size_t p = 0; p < kNumPools; ++p) stats_.hits[p] += counts.hits[p];
      stats_.misses += counts.misses;
    }
    return executor_->run(job, [this, kept, predicted](sched::LayerJob& done) { endJob(done, *kept, predicted); });
  }

  // ExpertRuntime -------------------------------------------------------------------------------
  uint64_t minimumBudget() const override { return workingSet_; }
  uint64_t expertBytes() const override { return sizes_.expertBytes(); }

  uint64_t setBudget(const MemoryBudget& budget) override {
    const uint64_t bytes = budget.resolve(workingSet_, sizes_.expertBytes());
    replanner_->request(bytes, std::nullopt);
    return bytes;
  }

  void setPools(PoolMask pools) override {
    if (pools == 0 || pools > kAllPools) throw Error("expert runtime: the pool subset must enable at least one of F, C, S, E");
    replanner_->request(std::nullopt, pools);
  }

  RuntimeStats stats() const override {
    RuntimeStats s;
    {
      std::lock_guard lock(statsMutex_);
      s = stats_;
    }
    std::lock_guard lock(cacheMutex_);
    const auto used = cache_->usedBytesPerPool();
    const auto resident = cache_->residentPerPool();
    for (size_t p = 0; p < kNumPools; ++p) {
      s.pools[p].usedBytes = used[p];
      s.pools[p].residentExperts = resident[p];
    }
    strategy_->poolStats(*cache_, plan_, s);
    s.poolMask = plan_.pools;
    s.workingSetBytes = workingSet_;
    s.budgetBytes = plan_.budget;
    s.heldBytes = workingSet_ + cache_->totalUsedBytes();
    s.droppedTraceEvents = trace_ ? trace_->dropped() : 0;
    return s;
  }

  size_t drainTrace(std::vector<TraceEvent>& out) override {
    if (!trace_) return 0;
    std::lock_guard lock(drainMutex_);
    return trace_->drain(out);
  }
  TraceLanes lanes() const override { return TraceLanes{strategy_->decompressWorkers()}; }

  ActivationCounts activationCounts() const override {
    std::lock_guard lock(cacheMutex_);
    return cache_->activationCounts();
  }
  void loadActivationCounts(const ActivationCounts& counts) override {
    {
      std::lock_guard lock(cacheMutex_);
      cache_->setActivationCounts(checkedShape(counts));
    }
    replanner_->request(std::nullopt, std::nullopt);
  }

  void waitForPlan() override { replanner_->waitForPlan(); }
  const RuntimeOptions& options() const override { return options_; }

 private:
  int64_t ns(Clock::time_point t) const { return std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch_).count(); }

  const ActivationCounts& checkedShape(const ActivationCounts& counts) const {
    if (counts.layers != sizes_.layers() || counts.experts != sizes_.experts())
      throw Error("activation counts for " + std::to_string(counts.layers) + " layers × " + std::to_string(counts.experts) +
                  " experts do not fit this model (" + std::to_string(sizes_.layers()) + " layers × " +
                  std::to_string(sizes_.experts()) + " experts)");
    return counts;
  }

  // Any thread: the plan for `budget` (which the caller has checked against the minimum).
  Plan computePlan(uint64_t budget, PoolMask pools, const ActivationCounts& counts) const {
    Plan plan = strategy_->plan(budget - workingSet_, pools, counts);
    plan.budget = budget;
    return plan;
  }

  // REQUIRES: cacheMutex_ held (or construction).
  void applyPlan(Plan plan) {
    strategy_->applyPlan(*cache_, plan, plan.budget - workingSet_);
    cache_->enforceCapacities();
    {
      std::lock_guard lock(statsMutex_);
      stats_.lastReplanSeconds = plan.seconds;
      ++stats_.replans;
    }
    plan_ = std::move(plan);
  }

  // Growing history is worth a new plan now and then. REQUIRES: cacheMutex_ held.
  void maybeScheduleReplan() {
    if (options_.replanEverySteps <= 0 || options_.mode == OffloadMode::FullTensor || !options_.planning) return;
    const uint64_t steps = cache_->steps(0);
    if (steps == experts::kMinHistorySteps || (steps > 0 && steps % static_cast<uint64_t>(options_.replanEverySteps) == 0))
      replanner_->request(std::nullopt, std::nullopt);
  }

  // The model's thread, in the batch's destructor: commit kept parts and account the layer.
  void endJob(sched::LayerJob& job, std::vector<Keep>& kept, double predicted) {
    std::lock_guard lock(cacheMutex_);
    const int layer = job.layer;
    if (job.error.empty()) {
      for (Keep& k : kept) {
        if (k.pool == cache::kNoPool) continue;
        cache::Entry& old = cache_->entry(layer, k.expert);
        for (int kind = 0; kind < sizes_.kinds() && old.pool != cache::kNoPool; ++kind) {
          // Parts the expert already had and keeps in its new pool move over (C → from E or S).
          cache::TensorParts& from = old.tensors[static_cast<size_t>(kind)];
          cache::TensorParts& to = k.parts[static_cast<size_t>(kind)];
          if (keepsExponents(static_cast<Pool>(k.pool)) && to.e.size() == 0) to.e = std::move(from.e);
          if (keepsSignMantissa(static_cast<Pool>(k.pool)) && to.sm.size() == 0) to.sm = std::move(from.sm);
        }
        cache_->insert(layer, k.expert, k.pool, std::move(k.parts), useClock_);
      }
    }
    for (const auto& e : job.experts) cache_->entry(layer, e.expert).pinned = false;
    cache_->enforceCapacities();  // a plan applied while this layer ran may have shrunk the pools
    lastBatchEnd_ = job.lastRelease;

    const double bound = measuredLowerBound(job, sizes_.shards(), options_.decompressWorkers);
    std::lock_guard statsLock(statsMutex_);
    if (job.error.empty()) {
      stats_.layers += 1;
      stats_.measuredMakespan += seconds(job.lastRelease - job.start);
      stats_.lowerBound += bound;
      stats_.predictedMakespan += predicted;
    }
    stats_.bytesRead += job.bytesRead;
    stats_.stallSeconds += job.stallSeconds;
    if (layer == 0) stats_.steps += 1;
  }

  std::shared_ptr<const Store> store_;
  const RuntimeOptions options_;
  Clock::time_point epoch_;
  const experts::ExpertSizes sizes_;
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

  mutable std::mutex statsMutex_;
  RuntimeStats stats_;

  std::unique_ptr<sched::Executor> executor_;
  std::unique_ptr<experts::Replanner> replanner_;  // last: its thread calls into everything above
};

}  // namespace

std::shared_ptr<ExpertRuntime> ExpertRuntime::open(std::shared_ptr<const Store> store, const RuntimeOptions& options,
                                                   const CostProfile& profile) {
  if (!store) throw Error("expert runtime: no store");
  checkProfile(profile, *store, options.readMode, "cost profile");
  return std::make_shared<Runtime>(std::move(store), options, profile);
}

}  // namespace zipmoe
