// The expert runtime (see zipmoe/expert_runtime.h): what the ZipMoE runtime and the full-tensor
// baseline share. Per acquire (the model's thread): count the activations, let the strategy build
// the layer's job (zipmoe_strategy.h, full_tensor_strategy.h) and hand it to the executor. When the
// batch ends: commit the kept parts to the cache, fit the cache into capacities a plan may have
// shrunk meanwhile, and add the layer's measured makespan, its lower bound (Lemma B.3, from the
// measured operation times) and the predicted makespan to the stats. Budget moves, pool changes
// and growing history replan on the Replanner's thread; a plan is applied as soon as it is ready.
#include "zipmoe/expert_runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "cache/expert_cache.h"
#include "experts/expert_sizes.h"
#include "experts/full_tensor_strategy.h"
#include "experts/planner_inputs.h"
#include "experts/replanner.h"
#include "experts/zipmoe_strategy.h"
#include "io/page_reserve.h"
#include "sched/executor.h"
#include "zipmoe/error.h"

#include <nlohmann/json.hpp>

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

// Adds one layer's operation times to the observed costs (a task's times are per tensor).
void observe(const sched::LayerJob& job, ObservedCosts& observed) {
  for (const sched::JobTask& t : job.tasks) {
    if (t.fullRead) {
      observed.fullRead.add(t.readSMSeconds);
      continue;
    }
    const double chunks = t.entry ? static_cast<double>(std::max<size_t>(1, t.entry->eChunks.size())) : 1.0;
    if (t.wholeRead) {
      observed.tensorRead.add(t.readESeconds + t.readSMSeconds);
    } else {
      if (t.readESeconds > 0) observed.eRead.add(t.readESeconds / chunks);
      if (t.readSMSeconds > 0) observed.smRead.add(t.readSMSeconds);
    }
    if (t.decompressSeconds > 0) observed.decompress.add(t.decompressSeconds / chunks);
    if (t.recoverSeconds > 0) observed.recover.add(t.recoverSeconds);
  }
}

// A decoding layer's costs: with fused recovery no tensor is recovered (as the strategy prices them).
plan::CostModel decodingCost(plan::CostModel cost, const RuntimeOptions& options, const Store& store) {
  if (options.fuseRecovery) cost.recover = 0;
  cost.cInPlace = experts::readsCodesInPlace(options, store);
  return cost;
}

RuntimeOptions resolved(RuntimeOptions o, const Store& store) {
  if (o.prefetchSlots == -1 && o.mode == OffloadMode::ZipMoE)
    o.prefetchSlots = 2 * std::max(1, static_cast<int>(store.manifest().config->value("num_experts_per_tok", 1)));
  if (o.prefetchSlots == -1) o.prefetchSlots = 0;
  if (o.mode == OffloadMode::FullTensor && o.eviction == EvictionPolicy::LeastFrequent) o.eviction = EvictionPolicy::Lru;
  if (o.decompressWorkers <= 0) o.decompressWorkers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (o.outputSlots == -1) o.outputSlots = needsOutputSlots(o) ? 3 : 0;
  if (o.outputSlots < 0) throw Error("expert runtime: outputSlots = " + std::to_string(o.outputSlots) + ", expected ≥ 0 (or −1: as needed)");
  if (o.outputSlots == 0 && needsOutputSlots(o))
    throw Error("expert runtime: outputSlots = 0 needs ZipMoE mode with fused recovery and no raw misses (the "
                "full-tensor baseline's reads, raw misses and unfused recovery land in output slots)");
  if (o.stagingSlots < 1) throw Error("expert runtime: stagingSlots must be at least 1");
  if (o.prefetchSlots < -1) throw Error("expert runtime: prefetchSlots must be ≥ 0 (or −1: twice the model's top-k)");
  if (o.prefetchSlots > 0 && o.mode != OffloadMode::ZipMoE)
    throw Error("expert runtime: prefetchSlots needs ZipMoE mode (the full-tensor baseline does not prefetch)");
  if (o.tolerance < 0) throw Error("expert runtime: tolerance δ must be ≥ 0");
  for (const auto& [name, tokens] : {std::pair{"sessionPriorTokens", o.sessionPriorTokens},
                                     std::pair{"smoothingTokens", o.smoothingTokens}})
    if (!std::isfinite(tokens) || tokens < 0 || tokens > 1e6)
      throw Error(std::string("expert runtime: ") + name + " = " + std::to_string(tokens) +
                  ", expected 0 … 1000000 tokens");
  if (o.pools == 0 || o.pools > kAllPools) throw Error("expert runtime: the pool subset must enable at least one of F, C, S, E");
  if (!o.budget.isSet()) throw Error("expert runtime: no memory budget given (RuntimeOptions::budget)");
  if (o.observed) checkObserved(*o.observed, "expert runtime: RuntimeOptions::observed");
  return o;
}

class Runtime final : public ExpertRuntime {
 public:
  Runtime(std::shared_ptr<const Store> store, const RuntimeOptions& options, const CostProfile& profile)
      : store_(std::move(store)), options_(resolved(options, *store_)), epoch_(Clock::now()), sizes_(*store_),
        layerCost_(decodingCost(experts::costModel(profile, options_.decompressWorkers, sizes_.shards(),
                                                   sizes_.kinds(), options_.coalesceReads, true),
                                options_, *store_)) {
    if (options_.mode == OffloadMode::ZipMoE)
      strategy_ = std::make_unique<experts::ZipMoeStrategy>(*store_, sizes_, options_, profile);
    else
      strategy_ = std::make_unique<experts::FullTensorStrategy>(*store_, sizes_, options_);
    const sched::SlotLayout staging = strategy_->stagingLayout(), output = strategy_->outputLayout();
    workingSet_ = static_cast<uint64_t>(staging.count) * staging.slotBytes +
                  static_cast<uint64_t>(output.count) * output.slotBytes +
                  static_cast<uint64_t>(options_.prefetchSlots) * sizes_.prefetchSlotBytes();
    slots_.resize(static_cast<size_t>(options_.prefetchSlots));  // resolved: −1 became 2 × top-k
    for (PrefetchSlot& slot : slots_) {
      slot.e.resize(static_cast<size_t>(sizes_.kinds()));
      slot.sm.resize(static_cast<size_t>(sizes_.kinds()));
    }
    const uint64_t budget = options_.budget.resolve(workingSet_, sizes_.expertBytes());
    if (options_.traceCapacity > 0) trace_ = std::make_unique<TraceBuffer>(options_.traceCapacity);
    cache_ = std::make_unique<cache::ExpertCache>(sizes_.layers(), sizes_.experts(), options_.eviction,
                                                  strategy_->sharedCache(), 0x5eed,
                                                  options_.keepSurplus && options_.mode == OffloadMode::ZipMoE,
                                                  options_.lendRoom);
    if (options_.history) cache_->setActivationCounts(checkedShape(*options_.history));
    if (options_.mode == OffloadMode::ZipMoE && options_.planning)
      cache_->setSessionBlend(experts::sessionBlend(sizes_.topK(), options_.planFromPrompt, options_.sessionPriorTokens));
    if (options_.recyclePages) pages_ = io::PagePool::create();
    stats_.observed = options_.observed ? *options_.observed : profile.observed;
    applyPlan(computePlan(budget, options_.pools, cache_->activationCounts()));
    executor_ = std::make_unique<sched::Executor>(store_.get(), strategy_->decompressWorkers(), options_.readMode,
                                                  trace_.get(), epoch_, staging, output);
    executor_->setPagePool(pages_);
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
    startPageReserve();  // before the replanner, whose plans wake it
    replanner_ = std::make_unique<experts::Replanner>(std::move(callbacks));
  }

  ~Runtime() override {
    replanner_.reset();  // no plan is applied after this (nor wakes the reserve)
    reserve_.reset();
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
    for (const ExpertRequest& r : requests) {
      if (options_.outputSlots == 0 && !r.acceptsSplit && !r.mergesSplit)
        throw Error("expert runtime: expert " + std::to_string(r.expert) + " of MoE layer " + std::to_string(layer) +
                    " was requested as BF16 words only (ExpertRequest::acceptsSplit and mergesSplit both false), and "
                    "this runtime has no output slots to recover it into (RuntimeOptions::outputSlots = 0; give it "
                    "1 or more for such a consumer)");
    }
    if (!demanded_.exchange(true)) {
      // The first demand ends a warm start for good; it waits for the layer batch one is running.
      std::lock_guard warm(warmMutex_);
    }
    const auto now = Clock::now();
    std::lock_guard lock(cacheMutex_);
    if (layer == 0 && started_) ++token_;
    started_ = true;
    if (lastBatchEnd_) {
      std::lock_guard statsLock(statsMutex_);
      stats_.denseSeconds += seconds(now - *lastBatchEnd_);
    }
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
    std::vector<int> ids, tokens;
    for (const ExpertRequest& r : requests) {
      ids.push_back(r.expert);
      tokens.push_back(r.tokens);
    }
    const bool waitsForPrompt = layerWaitsForPrompt(layer);
    cache_->recordActivations(layer, ids, tokens);
    if (waitsForPrompt) planLayerFromPrompt(layer);
    if (layer == 0) maybeScheduleReplan();
    ++useClock_;

    auto job = std::make_shared<sched::LayerJob>();
    job->layer = layer;
    job->token = static_cast<int>(token_);
    job->start = now;
    auto kept = std::make_shared<std::vector<Keep>>();
    experts::JobCounts counts;
    std::vector<experts::PrefetchedParts> prefetched = takePrefetched(layer, requests);
    const experts::LayerRequest request{layer, requests, prefetched, plan_.pools, useClock_};
    const double predicted = strategy_->buildJob(*cache_, request, *job, *kept, counts);
    {
      std::lock_guard statsLock(statsMutex_);
      for (const experts::PrefetchedParts& p : prefetched) {
        stats_.prefetchUsefulBytes += p.usedBytes;
        stats_.prefetchWastedBytes += slots_[static_cast<size_t>(slotOf(layer, p.expert))].doneBytes - p.usedBytes;
        if (p.usedBytes > 0) ++stats_.prefetchHitExperts;
      }
      stats_.activations += counts.activations;
      for (size_t p = 0; p < kNumPools; ++p) stats_.hits[p] += counts.hits[p];
      stats_.misses += counts.misses;
      stats_.inPlaceTensors += counts.inPlaceTensors;
      stats_.indexedOnDemand += counts.indexedExperts;
    }
    return executor_->run(job, [this, kept, predicted, counts](sched::LayerJob& done) { endJob(done, *kept, predicted, counts); });
  }

  void prefetch(int layer, std::span<const int> experts) override {
    if (slots_.empty()) return;
    if (layer < 0 || layer >= sizes_.layers())
      throw Error("expert runtime: prefetch hint for MoE layer " + std::to_string(layer) + " out of range (0.." +
                  std::to_string(sizes_.layers() - 1) + ")");
    for (int e : experts)
      if (e < 0 || e >= sizes_.experts())
        throw Error("expert runtime: prefetch hint for expert " + std::to_string(e) + " out of range (0.." +
                    std::to_string(sizes_.experts() - 1) + ")");
    std::lock_guard lock(cacheMutex_);
    {
      std::lock_guard statsLock(statsMutex_);
      stats_.prefetchHintedExperts += experts.size();
    }
    hint_.layer = layer;
    hint_.experts.assign(experts.begin(), experts.end());
    hint_.consumed = false;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const PrefetchSlot& slot = slots_[i];
      if (slot.state == SlotState::Assigned &&
          (slot.layer != layer || std::find(experts.begin(), experts.end(), slot.expert) == experts.end()))
        releaseSlot(static_cast<int>(i));
    }
    assignSlots();
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
    s.lentBytes = cache_->lentBytes();
    if (pages_) {
      const io::PagePoolStats ps = pages_->stats();
      s.pooledPageBytes = ps.pooledBytes;
      s.reusedPageBytes = ps.reusedBytes;
      s.freshPageBytes = ps.freshBytes;
      s.reservedPageBytes = ps.reservedBytes;
      s.heldBytes += ps.pooledBytes;
    }
    s.droppedTraceEvents = trace_ ? trace_->dropped() : 0;
    const sched::PrefetchCounters pc = executor_->prefetchCounters();
    s.prefetchedBytes = pc.bytesRead;
    s.prefetchFailedReads = pc.failures;
    s.prefetchDenseSeconds = pc.secondsOutsideJobs;
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

  WarmUpResult warmUp(const std::atomic<bool>* stop) override {
    WarmUpResult result;
    const auto start = Clock::now();
    for (int layer = 0; layer < sizes_.layers(); ++layer) {
      std::lock_guard warm(warmMutex_);  // held for the layer's batch: acquire() waits for it
      if (demanded_.load() || (stop && stop->load())) {
        result.stopped = true;
        break;
      }
      std::vector<ExpertRequest> requests;
      std::unique_ptr<ExpertBatch> batch;
      {
        std::lock_guard lock(cacheMutex_);
        for (int e : strategy_->warmSet(*cache_, plan_, layer))
          requests.push_back(ExpertRequest{.expert = e, .tokens = 1, .acceptsSplit = true, .mergesSplit = true});
        if (!requests.empty()) {
          auto job = std::make_shared<sched::LayerJob>();
          job->layer = layer;
          job->token = static_cast<int>(token_);
          job->traced = false;  // no step of the model's: the schedule's lanes would show it as token 0's
          job->start = Clock::now();
          auto kept = std::make_shared<std::vector<Keep>>();
          experts::JobCounts counts;  // not counted: a warm start is no demand
          const experts::LayerRequest request{layer, requests, {}, plan_.pools, useClock_};
          strategy_->buildJob(*cache_, request, *job, *kept, counts);
          batch = executor_->run(job, [this, kept, &result](sched::LayerJob& done) {
            std::lock_guard batchLock(cacheMutex_);
            result.experts += finishBatch(done, *kept);
            result.bytesRead += done.bytesRead;
          });
        }
      }
      if (batch) {
        while (batch->next()) {
        }
        batch.reset();  // commits what the layer keeps
      }
      // What the layer now keeps, readied for its first use while the model does not wait (a C
      // member's codes indexed for reading in place: about as long as reading them from memory once).
      // A demand stops it between experts; an expert not reached is readied at its first use.
      for (const ExpertRequest& r : requests) {
        if (demanded_.load()) break;
        std::lock_guard lock(cacheMutex_);
        if (strategy_->prepareWarm(*cache_, layer, r.expert)) ++result.prepared;
      }
      ++result.layers;
    }
    result.seconds = seconds(Clock::now() - start);
    std::lock_guard statsLock(statsMutex_);
    stats_.warmLayers += result.layers;
    stats_.warmExperts += result.experts;
    stats_.warmBytes += result.bytesRead;
    stats_.warmPrepared += result.prepared;
    stats_.warmSeconds += result.seconds;
    return result;
  }

  void waitForPlan() override { replanner_->waitForPlan(); }
  void waitForPrefetch() override { executor_->waitForPrefetch(); }
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
    ObservedCosts observed;
    {
      std::lock_guard lock(statsMutex_);
      observed = stats_.observed;
    }
    Plan plan = strategy_->plan(budget - workingSet_, pools, counts, observed);
    plan.budget = budget;
    return plan;
  }

  // The plan's capacities into the cache, evictions down to them, free pages trimmed, and where its
  // layers' frequencies came from into the stats. REQUIRES: cacheMutex_ held (or construction).
  void install(const Plan& plan) {
    strategy_->applyPlan(*cache_, plan, plan.budget - workingSet_);
    cache_->enforceCapacities();
    trimPages(plan.budget);
    std::lock_guard lock(statsMutex_);
    stats_.layersPlannedFromHistory = plan.historyLayers;
    stats_.layersPlannedFromSession = plan.sessionLayers;
    stats_.layersPlannedFromPrompt = plan.promptLayers;
  }

  // REQUIRES: cacheMutex_ held (or construction).
  void applyPlan(Plan plan) {
    install(plan);
    {
      std::lock_guard lock(statsMutex_);
      stats_.lastReplanSeconds = plan.seconds;
      ++stats_.replans;
    }
    plan_ = std::move(plan);
    if (reserve_) reserve_->wake();  // a larger budget leaves room to fault in
  }

  // The pooled free pages down to what the budget leaves beside the pools and the working set (a
  // smaller budget, or pools that shrank). REQUIRES: cacheMutex_ held (or construction).
  void trimPages(uint64_t budget) {
    if (!pages_) return;
    const uint64_t used = workingSet_ + cache_->totalUsedBytes();
    pages_->trim(budget > used ? budget - used : 0);
  }

  // The page reserve's room check: whether one more faulted run fits beside what is held, both in the
  // budget and in what the plan's pools can hold (a budget above the model's needs is not faulted in).
  // REQUIRES: cacheMutex_ held.
  bool reserveFits() const {
    const uint64_t kept = cache_->totalUsedBytes() + pages_->pooledBytes() + io::PageReserve::kRunBytes;
    return workingSet_ + kept <= plan_.budget && kept <= cache_->totalCapacityBytes();
  }
  void startPageReserve() {
    if (!pages_ || !options_.reservePages) return;
    reserve_ = std::make_unique<io::PageReserve>(
        [this] {
          std::lock_guard lock(cacheMutex_);
          return reserveFits();
        },
        [this](const io::PagePool::Run& run) {
          std::lock_guard lock(cacheMutex_);  // the budget may have shrunk meanwhile
          return reserveFits() && pages_->adopt(run);
        });
  }

  // Whether the layer still plans from the prior but may plan from a prompt, or from its history
  // alone but may blend in the session's tokens (planFromPrompt): the check comes before a step is
  // recorded. It costs a look at the layer's steps and token sum, and a copy of the counts only
  // while a layer has fewer than kMinHistorySteps steps.
  // REQUIRES: cacheMutex_ held.
  bool layerWaitsForPrompt(int layer) const {
    if (!options_.planFromPrompt || !options_.planning || options_.mode != OffloadMode::ZipMoE) return false;
    if (cache_->steps(layer) >= experts::kMinHistorySteps) return cache_->blendWeight(layer) <= 0;
    return experts::frequencySource(cache_->activationCounts(), layer, sizes_.experts(), sizes_.topK(), true) ==
           experts::FrequencySource::Prior;
  }

  // The step just recorded may have brought the layer a prompt's worth of tokens: the layer is
  // re-planned from them now, on the model's thread, before its experts are placed (one layer's
  // Algorithm 4: well under a millisecond). A failure leaves the plan in force, as a replan's does.
  // REQUIRES: cacheMutex_ held.
  void planLayerFromPrompt(int layer) {
    ObservedCosts observed;
    {
      std::lock_guard lock(statsMutex_);
      observed = stats_.observed;
    }
    try {
      if (!strategy_->replanLayerFromPrompt(plan_, layer, plan_.budget - workingSet_, cache_->activationCounts(),
                                            observed))
        return;
    } catch (const Error& e) {
      std::lock_guard lock(statsMutex_);
      ++stats_.planFailures;
      stats_.lastPlanError = e.what();
      return;
    }
    install(plan_);
  }

  // Growing history is worth a new plan now and then. REQUIRES: cacheMutex_ held.
  void maybeScheduleReplan() {
    if (options_.replanEverySteps <= 0 || options_.mode == OffloadMode::FullTensor || !options_.planning) return;
    // Layer 0 counts a step before the other layers do: at kMinHistorySteps + 1 steps of layer 0,
    // every layer has kMinHistorySteps and plans from its own history instead of the prior.
    const uint64_t steps = cache_->steps(0);
    if (steps == experts::kMinHistorySteps + 1 ||
        (steps > 0 && steps % static_cast<uint64_t>(options_.replanEverySteps) == 0))
      replanner_->request(std::nullopt, std::nullopt);
  }

  // The model's thread, in the batch's destructor: commit kept parts and account the layer.
  void endJob(sched::LayerJob& job, std::vector<Keep>& kept, double predicted, const experts::JobCounts& counts) {
    std::lock_guard lock(cacheMutex_);
    const int layer = job.layer;
    finishBatch(job, kept);
    lastBatchEnd_ = job.lastRelease;
    for (PrefetchSlot& slot : slots_)  // the job no longer reads them (or they moved into the cache)
      if (slot.state == SlotState::InUse) slot.state = SlotState::Free;
    assignSlots();

    const double bound = measuredLowerBound(job, sizes_.shards(), options_.decompressWorkers);
    std::lock_guard statsLock(statsMutex_);
    if (job.error.empty()) {
      observe(job, stats_.observed);
      observeLayer(job, counts, seconds(job.lastRelease - job.start), stats_.observed);
      stats_.layers += 1;
      stats_.measuredMakespan += seconds(job.lastRelease - job.start);
      stats_.lowerBound += bound;
      stats_.predictedMakespan += predicted;
    }
    stats_.bytesRead += job.bytesRead;
    stats_.stallSeconds += job.stallSeconds;
    for (const sched::JobTask& t : job.tasks) {
      stats_.splitTensors += t.split && t.recovered && !t.indexed ? 1 : 0;
      stats_.indexedMissTensors += t.recovered && t.indexed ? 1 : 0;
    }
    if (layer == 0) stats_.steps += 1;
  }

  // A batch's end, demand or warm start: commits the parts it keeps (unless it failed), unpins its
  // experts and fits the cache into the capacities in force. Returns the experts committed.
  // REQUIRES: cacheMutex_ held.
  uint64_t finishBatch(const sched::LayerJob& job, std::vector<Keep>& kept) {
    const int layer = job.layer;
    uint64_t committed = 0;
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
        adoptIndexedCodes(job, layer, k.expert);
        ++committed;
      }
    }
    for (const auto& e : job.experts) cache_->entry(layer, e.expert).pinned = false;
    cache_->enforceCapacities();  // a plan applied while this layer ran may have shrunk the pools
    trimPages(plan_.budget);
    return committed;
  }

  // A C member committed from a miss whose every tensor a worker indexed (sched::JobTask::indexCodes):
  // its entry takes the shards, which point into the buffers it now holds, so its next hit is read in
  // place without indexing it again. REQUIRES: cacheMutex_ held.
  void adoptIndexedCodes(const sched::LayerJob& job, int layer, int expert) {
    cache::Entry& entry = cache_->entry(layer, expert);
    if (entry.pool != poolIndex(Pool::C)) return;
    std::vector<std::vector<NibbleShard>> shards(static_cast<size_t>(sizes_.kinds()));
    int indexed = 0;
    for (const sched::JobTask& t : job.tasks)
      if (t.key.expert == expert && t.indexed && t.recovered) {
        shards[static_cast<size_t>(t.kind)] = t.nibble;
        ++indexed;
      }
    if (indexed != sizes_.kinds()) return;
    entry.nibble = std::move(shards);
    entry.nibbleState = 1;
  }

  // The layer's measured makespan over the planner's estimate for its hit pattern, priced with the
  // costs observed so far, into the observed layer quotients (ObservedCosts::cpuLayer, readLayer).
  void observeLayer(const sched::LayerJob& job, const experts::JobCounts& counts, double measured,
                    ObservedCosts& observed) const {
    bool cpu = false, raw = false;
    for (const sched::JobTask& t : job.tasks) {
      cpu = cpu || t.decompressSeconds > 0 || t.recoverSeconds > 0;
      raw = raw || t.fullRead;
    }
    const int k = static_cast<int>(job.experts.size());
    if (k < 1 || (raw && !(layerCost_.fullRead > 0))) return;
    std::array<int, kNumPools> hits{};
    int total = 0;
    for (size_t p = 0; p < kNumPools; ++p) total += hits[p] = static_cast<int>(counts.hits[p]);
    if (total > k) return;
    plan::CostModel cost = experts::observedCostModel(layerCost_, observed);
    cost.cpuLayerFactor = 0;
    try {
      const double estimate = plan::estimateMakespan(k, hits, cost, raw);
      if (estimate > 0) (cpu ? observed.cpuLayer : observed.readLayer).add(measured / estimate);
    } catch (const Error&) {
      // A layer the estimate has no figures for (none of the validated inputs gives one): not observed.
    }
  }

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

  int slotOf(int layer, int expert) const {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].state != SlotState::Free && slots_[i].layer == layer && slots_[i].expert == expert) return static_cast<int>(i);
    return -1;
  }

  void releaseSlot(int index) {
    PrefetchSlot& slot = slots_[static_cast<size_t>(index)];
    uint64_t wasted = 0;
    for (const sched::PrefetchRead& r : executor_->settlePrefetch(index)) wasted += r.bytes;
    slot.state = SlotState::Free;
    std::lock_guard statsLock(statsMutex_);
    stats_.prefetchWastedBytes += wasted;
  }

  // Queues reads for the standing hint's experts into free slots, most likely first: the tensor
  // parts the expert's pool does not hold (nothing for F and C).
  void assignSlots() {
    if (slots_.empty() || hint_.consumed) return;
    std::vector<sched::PrefetchRead> reads;
    for (int expert : hint_.experts) {
      if (slotOf(hint_.layer, expert) >= 0) continue;
      const cache::Entry& entry = cache_->entry(hint_.layer, expert);
      const bool resident = entry.pool != cache::kNoPool;
      const bool needE = !resident || !keepsExponents(static_cast<Pool>(entry.pool));
      const bool needSM = !resident || !keepsSignMantissa(static_cast<Pool>(entry.pool));
      if (entry.pool == poolIndex(Pool::F) || (!needE && !needSM)) continue;
      const auto free = std::find_if(slots_.begin(), slots_.end(), [](const PrefetchSlot& s) { return s.state == SlotState::Free; });
      if (free == slots_.end()) break;
      free->state = SlotState::Assigned;
      free->layer = hint_.layer;
      free->expert = expert;
      free->doneBytes = 0;
      const int index = static_cast<int>(free - slots_.begin());
      for (int kind = 0; kind < sizes_.kinds(); ++kind)
        for (const bool sm : {false, true}) {
          if (sm ? !needSM : !needE) continue;
          sched::PrefetchRead r;
          r.slot = index;
          r.layer = hint_.layer;
          r.expert = expert;
          r.kind = kind;
          r.token = static_cast<int>(token_);
          r.sm = sm;
          r.dst = sm ? &free->sm[static_cast<size_t>(kind)] : &free->e[static_cast<size_t>(kind)];
          r.bytes = sm ? sizes_.smBytes(hint_.layer, expert, kind) : sizes_.eBytes(hint_.layer, expert, kind);
          reads.push_back(r);
        }
    }
    if (!reads.empty()) executor_->addPrefetch(std::move(reads));
  }

  // At acquire: the completed prefetch reads of the requested experts (their slots become InUse);
  // every other slot that is not prefetching for the standing hint is freed.
  std::vector<experts::PrefetchedParts> takePrefetched(int layer, std::span<const ExpertRequest> requests) {
    std::vector<experts::PrefetchedParts> parts;
    if (slots_.empty()) return parts;
    if (hint_.layer == layer) hint_.consumed = true;
    for (size_t i = 0; i < slots_.size(); ++i) {
      PrefetchSlot& slot = slots_[i];
      if (slot.state != SlotState::Assigned) continue;
      const bool requested = slot.layer == layer && std::any_of(requests.begin(), requests.end(), [&](const ExpertRequest& r) {
                               return r.expert == slot.expert;
                             });
      if (!requested) {  // a wrong guess, unless it is for the standing hint's (later) layer
        if (hint_.consumed || slot.layer != hint_.layer) releaseSlot(static_cast<int>(i));
        continue;
      }
      experts::PrefetchedParts p;
      p.expert = slot.expert;
      p.e.assign(static_cast<size_t>(sizes_.kinds()), nullptr);
      p.sm.assign(static_cast<size_t>(sizes_.kinds()), nullptr);
      slot.doneBytes = 0;
      for (const sched::PrefetchRead& r : executor_->settlePrefetch(static_cast<int>(i))) {
        (r.sm ? p.sm : p.e)[static_cast<size_t>(r.kind)] = r.dst;
        slot.doneBytes += r.bytes;
      }
      slot.state = SlotState::InUse;
      parts.push_back(std::move(p));
    }
    return parts;
  }

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

}  // namespace

std::shared_ptr<ExpertRuntime> ExpertRuntime::open(std::shared_ptr<const Store> store, const RuntimeOptions& options,
                                                   const CostProfile& profile) {
  if (!store) throw Error("expert runtime: no store");
  checkProfile(profile, *store, options.readMode, "cost profile");
  checkObserved(profile.observed, "cost profile");
  return std::make_shared<Runtime>(std::move(store), options, profile);
}

}  // namespace zipmoe
