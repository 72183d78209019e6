// OffloadingRuntime (experts/offloading_runtime.h): plans. Budget and pool moves and loaded or grown
// activation history ask the Replanner for a plan, computed on its thread and applied under the cache
// lock as soon as it is ready; a layer that has just seen a prompt's worth of tokens is re-planned on
// the model's thread. Applying a plan sets the cache's capacities and trims the free pages; the page
// reserve faults pages in while the budget leaves room.
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "experts/offloading_runtime.h"
#include "experts/planner_inputs.h"
#include "zipmoe/base/error.h"

namespace zipmoe::experts {

uint64_t OffloadingRuntime::setBudget(const MemoryBudget& budget) {
  const uint64_t bytes = budget.resolve(workingSet_, sizes_.expertBytes());
  replanner_->request(bytes, std::nullopt);
  return bytes;
}

void OffloadingRuntime::setPools(PoolMask pools) {
  if (pools == 0 || pools > kAllPools) throw Error("expert runtime: the pool subset must enable at least one of F, C, S, E");
  replanner_->request(std::nullopt, pools);
}

ActivationCounts OffloadingRuntime::activationCounts() const {
  std::lock_guard lock(cacheMutex_);
  return cache_->activationCounts();
}

void OffloadingRuntime::loadActivationCounts(const ActivationCounts& counts) {
  {
    std::lock_guard lock(cacheMutex_);
    cache_->setActivationCounts(checkedShape(counts));
  }
  replanner_->request(std::nullopt, std::nullopt);
}

Plan OffloadingRuntime::computePlan(uint64_t budget, PoolMask pools, const ActivationCounts& counts) const {
  ObservedCosts observed;
  {
    std::lock_guard lock(statsMutex_);
    observed = stats_.observed;
  }
  Plan plan = strategy_->plan(budget - workingSet_, pools, counts, observed);
  plan.budget = budget;
  return plan;
}

void OffloadingRuntime::install(const Plan& plan) {
  strategy_->applyPlan(*cache_, plan, plan.budget - workingSet_);
  cache_->enforceCapacities();
  trimPages(plan.budget);
  std::lock_guard lock(statsMutex_);
  stats_.layersPlannedFromHistory = plan.historyLayers;
  stats_.layersPlannedFromSession = plan.sessionLayers;
  stats_.layersPlannedFromPrompt = plan.promptLayers;
}

void OffloadingRuntime::applyPlan(Plan plan) {
  install(plan);
  {
    std::lock_guard lock(statsMutex_);
    stats_.lastReplanSeconds = plan.seconds;
    ++stats_.replans;
  }
  plan_ = std::move(plan);
  if (reserve_) reserve_->wake();  // a larger budget leaves room to fault in
}

void OffloadingRuntime::trimPages(uint64_t budget) {
  if (!pages_) return;
  const uint64_t used = workingSet_ + cache_->totalUsedBytes();
  pages_->trim(budget > used ? budget - used : 0);
}

bool OffloadingRuntime::reserveFits() const {
  const uint64_t kept = cache_->totalUsedBytes() + pages_->pooledBytes() + io::PageReserve::kRunBytes;
  return workingSet_ + kept <= plan_.budget && kept <= cache_->totalCapacityBytes();
}

void OffloadingRuntime::startPageReserve() {
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

bool OffloadingRuntime::layerWaitsForPrompt(int layer) const {
  if (!options_.planFromPrompt || !options_.planning || options_.mode != OffloadMode::ZipMoE) return false;
  if (cache_->steps(layer) >= experts::kMinHistorySteps) return cache_->blendWeight(layer) <= 0;
  return experts::frequencySource(cache_->activationCounts(), layer, sizes_.experts(), sizes_.topK(), true) ==
         experts::FrequencySource::Prior;
}

void OffloadingRuntime::planLayerFromPrompt(int layer) {
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

void OffloadingRuntime::maybeScheduleReplan() {
  if (options_.replanEverySteps <= 0 || options_.mode == OffloadMode::FullTensor || !options_.planning) return;
  // Layer 0 counts a step before the other layers do: at kMinHistorySteps + 1 steps of layer 0,
  // every layer has kMinHistorySteps and plans from its own history instead of the prior.
  const uint64_t steps = cache_->steps(0);
  if (steps == experts::kMinHistorySteps + 1 ||
      (steps > 0 && steps % static_cast<uint64_t>(options_.replanEverySteps) == 0))
    replanner_->request(std::nullopt, std::nullopt);
}

}  // namespace zipmoe::experts
