// BudgetAdvisor — what the ZipMoE runtime's planner predicts for a memory budget *before* the budget
// is moved: per MoE layer the expected makespan of the plan it would choose (Algorithm 4 over the
// rank frequencies, priced by Algorithm 3), and from them the time per output token (TPOT) and the
// time to the first token (TTFT) of a prompt. The app's budget advisor draws these as a curve over
// the budget range; `zipmoe plan` prints them.
//
// It runs the runtime's own planning path without opening a runtime: the same ExpertSizes (bytes
// per expert in each pool, the working set of staging and output slots), the same cost model
// (experts::costModel from the profile, repriced with the costs observed in earlier runs, as
// ZipMoeStrategy::plan does), the same rank frequencies from the activation counts (the Zipf prior
// for a layer with too little history) and planPools. What the planner does not know is the dense
// part of the model (attention, router, shared experts): the caller gives it, measured
// (BudgetAdvisorInputs::denseSecondsPerToken; the app measures it from the runtime's statistics of
// its replies), and the prediction is the expert path alone when it is 0.
//
// Per layer and decode step (one token, k experts): layer = max(E[makespan] + p, k·p), with
// E[makespan] the plan's expected makespan (Algorithm 3: reads, decompression and recovery) and p one
// expert's FFN for one token as the planner prices it (or as observed) — the last expert computes after its tensors
// are ready, and the compute lane runs k FFNs in any case. TPOT = dense + Σ layers.
// Calibrated: once the runtime has observed how its layers' measured makespans compare with
// Algorithm 3's estimate (ObservedCosts::cpuLayer, measured ÷ estimate over the layers with CPU
// work), layer = max(E[makespan] × that ratio, k·p) instead — the measured makespan holds the FFNs.
// Both are reported (tpotSeconds is the calibrated one when there is a calibration).
// Prefill of P tokens: each rank r is selected by at least one token with probability
// 1 − (1 − f_r)^P; the expected distinct experts per pool (the plan's rank intervals) give a hit
// pattern priced by Algorithm 3, the FFNs take Σ_r that probability · a + b·P·k; TTFT = P · dense
// prefill per token + Σ layers max(makespan + p, FFNs).
// Thread-safety: an advisor is immutable after construction; predict() may run on any number of
// threads at once. Cost: construction reads the manifest's expert table; predict() is one planModel
// (tens of milliseconds for 24 layers × 60 experts, docs/RUNTIME.md).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/pools.h"
#include "zipmoe/experts/runtime_options.h"
#include "zipmoe/format/store.h"

namespace zipmoe {

struct BudgetAdvisorInputs {
  CostProfile profile;                      // the store's (its `observed` figures are used unless `observed` is set)
  std::optional<ObservedCosts> observed;    // a live runtime's RuntimeStats::observed
  std::optional<ActivationCounts> counts;   // none: every layer plans from the prior
  int decompressWorkers = 0;                // L; 0 = one per core (as the runtime resolves it)
  PoolMask pools = kAllPools;
  bool coalesceReads = true;
  // The runtime's slots as it resolves them (RuntimeOptions; fused recovery without raw misses has no output slots).
  int stagingSlots = 3, outputSlots = 0, prefetchSlots = 0;
  double gridStep = 0.05;
  double denseSecondsPerToken = 0;          // the model outside the expert batches, per decode step
  double densePrefillSecondsPerToken = 0;   // the same during prefill, per prompt token
  int promptTokens = 64;                    // P of the TTFT prediction
  // One expert's FFN for one token as the runtime's trace measured it (e.g. the median of its
  // recent ExpertCompute events); 0 = the profile's. Replaces p below (and the prefill's per-expert
  // base a = p − b): a profile measured on a busy machine can be far off (docs/APP.md).
  double observedExpertSeconds = 0;
};

struct BudgetPrediction {
  uint64_t budgetBytes = 0;
  double shareOfExperts = 0;                // budgetBytes / expert bytes in BF16
  bool feasible = false;                    // false below the working set: no other field is set
  std::array<double, kNumPools> ratio{};    // the planned split, mean over layers
  double expectedHitRate = 0;               // Σ_pools Σ_ranks in the pool f_r / k, mean over layers
  std::vector<double> layerMakespanSeconds; // E[makespan] of each layer's plan (Algorithm 4's cost)
  std::vector<double> layerSeconds;         // each layer's decode step with its expert FFNs
  double expertSecondsPerToken = 0;         // Σ layerSeconds
  double tpotSeconds = 0;                   // dense + expert path
  double uncalibratedTpotSeconds = 0;       // the same without the observed estimate error
  double uncalibratedExpertSecondsPerToken = 0;
  double calibration = 0;                   // the ratio applied to E[makespan]; 0 = none observed
  double ttftSeconds = 0;                   // prefill of promptTokens
};

class BudgetAdvisor {
 public:
  // Throws zipmoe::Error for a store whose experts the runtime could not hold (as ExpertSizes), an
  // activation history of another shape (naming both shapes), or inputs out of range (naming them).
  BudgetAdvisor(const Store& store, const BudgetAdvisorInputs& inputs);

  uint64_t expertBytes() const { return expertBytes_; }    // every routed expert in BF16
  uint64_t minimumBudget() const { return workingSet_; }   // the runtime's working set
  int layers() const { return layers_; }
  int topK() const { return topK_; }

  // The prediction at `budgetBytes` (the whole budget, working set included, as the runtime takes it).
  BudgetPrediction predict(uint64_t budgetBytes) const;
  // `points` budgets spread evenly from the minimum to the working set plus every expert (≥ 2).
  std::vector<BudgetPrediction> curve(int points) const;

  // The knee of a curve sorted by budget: the smallest feasible budget from which the TPOT can still
  // fall by less than `gain` (a fraction, e.g. 0.05) of itself up to the curve's largest budget.
  // Returns its index, or -1 when no point is feasible.
  static int knee(const std::vector<BudgetPrediction>& curve, double gain = 0.05);

 private:
  int layers_ = 0, experts_ = 0, topK_ = 1, shards_ = 1, kinds_ = 1;
  std::array<double, kNumPools> bytesPerExpert_{};
  uint64_t expertBytes_ = 0, workingSet_ = 0;
  BudgetAdvisorInputs inputs_;
  std::vector<std::vector<double>> frequencies_;  // per layer, non-increasing, Σ = that layer's k
};

}  // namespace zipmoe
