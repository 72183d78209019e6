// ExpertRuntime::open and the OffloadingRuntime's opening (experts/offloading_runtime.h): the options
// resolved and checked, the strategy chosen by mode, the working set sized, the cache, the first plan,
// the executor, the page reserve and the replanner started; and the order they stop in.
#include "zipmoe/experts/expert_runtime.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "backend/host_memory.h"
#include "experts/full_tensor_strategy.h"
#include "experts/offloading_runtime.h"
#include "experts/planner_inputs.h"
#include "experts/zipmoe_strategy.h"
#include "zipmoe/base/error.h"

#include <nlohmann/json.hpp>

namespace zipmoe {
namespace experts {
namespace {

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

}  // namespace

OffloadingRuntime::OffloadingRuntime(std::shared_ptr<const Store> store, const RuntimeOptions& options,
                                     const CostProfile& profile)
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
  // The expert caches' buffers come from the device's memory: its recycled pages where it has them.
  if (options_.recyclePages) pages_ = backend::defaultMemory().recyclingPool();
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

OffloadingRuntime::~OffloadingRuntime() {
  replanner_.reset();  // no plan is applied after this (nor wakes the reserve)
  reserve_.reset();
  executor_.reset();
}

const ActivationCounts& OffloadingRuntime::checkedShape(const ActivationCounts& counts) const {
  if (counts.layers != sizes_.layers() || counts.experts != sizes_.experts())
    throw Error("activation counts for " + std::to_string(counts.layers) + " layers × " + std::to_string(counts.experts) +
                " experts do not fit this model (" + std::to_string(sizes_.layers()) + " layers × " +
                std::to_string(sizes_.experts()) + " experts)");
  return counts;
}

}  // namespace experts

std::shared_ptr<ExpertRuntime> ExpertRuntime::open(std::shared_ptr<const Store> store, const RuntimeOptions& options,
                                                   const CostProfile& profile) {
  if (!store) throw Error("expert runtime: no store");
  checkProfile(profile, *store, options.readMode, "cost profile");
  checkObserved(profile.observed, "cost profile");
  return std::make_shared<experts::OffloadingRuntime>(std::move(store), options, profile);
}

}  // namespace zipmoe
