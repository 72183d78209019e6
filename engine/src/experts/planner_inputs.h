// Internal: what the ZipMoE runtime gives Algorithm 4 (plan/planner.h), from what it knows — each
// layer's rank frequencies from its activation counts (a Zipf-like prior until the layer has
// kMinHistorySteps steps of history; rescaled so that Σ f = k, the experts a step selects), the cost
// model from the measured profile, and the bytes an expert takes in each pool — and the plan that
// needs no search: fixed ratios over the enabled pools.
// Thread-safety: pure functions. Cost: planPools is Algorithm 4's (docs/RUNTIME.md).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "zipmoe/pool_planner.h"
#include "zipmoe/cost_profile.h"
#include "zipmoe/pools.h"
#include "zipmoe/runtime_options.h"

namespace zipmoe::experts {

// A layer plans from the prior until it has this many steps of history.
inline constexpr uint64_t kMinHistorySteps = 16;

struct PoolPlanInputs {
  int layers = 0, experts = 0, topK = 1;
  std::array<double, kNumPools> bytesPerExpert{};
  plan::CostModel cost;
  double gridStep = 0.05;
};

// The cost model of Algorithm 3 from a measured profile (u, v, c, recovery), with L workers, K
// shards and n tensors per expert; with `coalesced` reads, a miss's read is the measured one-request
// tensor read (when the profile has it); with `rawMisses`, the whole-tensor read prices a raw miss;
// the contention figures (when measured) for L busy workers (the nearest measured count).
plan::CostModel costModel(const CostProfile& profile, int workers, int shards, int tensorsPerExpert,
                          bool coalesced = false, bool rawMisses = false);
// An observed figure prices plans once it covers this many operations.
inline constexpr uint64_t kMinObservedOps = 8;
// The cost model with the operations' costs as observed in the runtime's layers (ObservedCosts)
// instead of the profile's: each figure observed over kMinObservedOps operations or more is the
// observed mean; each one not (yet) observed is the profile's, scaled by how its group's observed
// figures compare with theirs in the profile (reads: the disk and the host's cache; CPU work:
// decompression and recovery, sharing the cores with the model). The contention factors of a
// calibrated group become 1: its observed times already include the contention.
plan::CostModel observedCostModel(plan::CostModel cost, const ObservedCosts& observed);
// Rescales f (non-increasing, each ≤ 1) so that Σ f = k, keeping every value ≤ 1.
std::vector<double> normaliseFrequencies(std::vector<double> f, int k);
// Each layer's rank frequencies from the counts (the prior for a layer with too little history).
std::vector<std::vector<double>> layerFrequencies(const ActivationCounts& counts, int layers, int experts, int topK);

// Algorithm 4 for every layer, each layer getting an equal share of `poolBytes`.
std::vector<plan::LayerPlan> planPools(const PoolPlanInputs& in, double poolBytes, PoolMask pools,
                                       const ActivationCounts& counts);
// The same split for every layer: `ratios` normalised over the enabled pools, capacities filling
// the layer's share of `poolBytes` pool by pool.
std::vector<plan::LayerPlan> fixedRatioPlan(const PoolPlanInputs& in, double poolBytes, PoolMask pools,
                                            const std::array<double, kNumPools>& ratios);

}  // namespace zipmoe::experts
