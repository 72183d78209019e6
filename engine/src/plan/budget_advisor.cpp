// BudgetAdvisor (see zipmoe/plan/budget_advisor.h): the runtime's planning path, priced per token.
#include "zipmoe/plan/budget_advisor.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <thread>

#include "experts/expert_sizes.h"
#include "experts/planner_inputs.h"
#include "zipmoe/base/error.h"
#include "zipmoe/plan/pool_planner.h"

namespace zipmoe {

namespace {

void requireNonNegative(const char* name, double value) {
  if (!std::isfinite(value) || value < 0)
    throw Error(std::string("budget advisor: ") + name + " = " + std::to_string(value) + ", expected a finite value >= 0");
}

// Rank intervals of the plan's pools, packed in F, C, S, E order over the enabled ones.
std::array<std::pair<int, int>, kNumPools> rankIntervals(const plan::LayerPlan& lp, PoolMask pools, int experts) {
  std::array<std::pair<int, int>, kNumPools> intervals{};
  int start = 0;
  for (Pool p : kPools) {
    const auto i = static_cast<size_t>(poolIndex(p));
    const int size = hasPool(pools, p) ? std::clamp(lp.capacity[i], 0, experts - start) : 0;
    intervals[i] = {start, start + size};
    start += size;
  }
  return intervals;
}

}  // namespace

BudgetAdvisor::BudgetAdvisor(const Store& store, const BudgetAdvisorInputs& inputs) : inputs_(inputs) {
  const experts::ExpertSizes sizes(store);
  layers_ = sizes.layers();
  experts_ = sizes.experts();
  topK_ = sizes.topK();
  shards_ = sizes.shards();
  kinds_ = sizes.kinds();
  bytesPerExpert_ = sizes.bytesPerExpert();
  expertBytes_ = sizes.expertBytes();
  if (inputs_.decompressWorkers <= 0)
    inputs_.decompressWorkers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (inputs_.stagingSlots < 1 || inputs_.outputSlots < 0 || inputs_.prefetchSlots < 0)
    throw Error("budget advisor: staging slots must be at least 1, output and prefetch slots at least 0 (got " +
                std::to_string(inputs_.stagingSlots) + ", " + std::to_string(inputs_.outputSlots) + ", " +
                std::to_string(inputs_.prefetchSlots) + ")");
  if (inputs_.pools == 0 || inputs_.pools > kAllPools)
    throw Error("budget advisor: the pool subset must enable at least one of F, C, S, E");
  if (inputs_.promptTokens < 1) throw Error("budget advisor: promptTokens = " + std::to_string(inputs_.promptTokens) + ", expected >= 1");
  requireNonNegative("denseSecondsPerToken", inputs_.denseSecondsPerToken);
  requireNonNegative("densePrefillSecondsPerToken", inputs_.densePrefillSecondsPerToken);
  requireNonNegative("observedExpertSeconds", inputs_.observedExpertSeconds);
  // The runtime's working set (ZipMoE mode, no raw misses): staging, output and prefetch slots.
  const sched::SlotLayout staging = sizes.stagingLayout(inputs_.stagingSlots);
  const sched::SlotLayout output = sizes.outputLayout(inputs_.outputSlots);
  workingSet_ = static_cast<uint64_t>(staging.count) * staging.slotBytes +
                static_cast<uint64_t>(output.count) * output.slotBytes +
                static_cast<uint64_t>(inputs_.prefetchSlots) * sizes.prefetchSlotBytes();
  ActivationCounts counts;
  if (inputs_.counts) {
    counts = *inputs_.counts;
    if (counts.layers != layers_ || counts.experts != experts_ ||
        counts.counts.size() != static_cast<size_t>(layers_) * static_cast<size_t>(experts_) ||
        counts.steps.size() != static_cast<size_t>(layers_))
      throw Error("budget advisor: activation counts for " + std::to_string(counts.layers) + " layers x " +
                  std::to_string(counts.experts) + " experts (" + std::to_string(counts.counts.size()) + " counts, " +
                  std::to_string(counts.steps.size()) + " step totals), but the store has " + std::to_string(layers_) +
                  " x " + std::to_string(experts_));
  } else {
    counts.layers = layers_;
    counts.experts = experts_;
    counts.counts.assign(static_cast<size_t>(layers_) * static_cast<size_t>(experts_), 0);
    counts.steps.assign(static_cast<size_t>(layers_), 0);
  }
  frequencies_ = experts::layerFrequencies(counts, layers_, experts_, topK_);
}

BudgetPrediction BudgetAdvisor::predict(uint64_t budgetBytes) const {
  BudgetPrediction out;
  out.budgetBytes = budgetBytes;
  out.shareOfExperts = expertBytes_ ? static_cast<double>(budgetBytes) / static_cast<double>(expertBytes_) : 0.0;
  if (budgetBytes < workingSet_) return out;
  out.feasible = true;

  // The cost model exactly as ZipMoeStrategy builds it (no checkpoint: no raw misses), repriced
  // with the observed operation costs as ZipMoeStrategy::plan does.
  plan::CostModel cost = experts::costModel(inputs_.profile, inputs_.decompressWorkers, shards_, kinds_,
                                            inputs_.coalesceReads, false);
  cost = experts::observedCostModel(cost, inputs_.observed ? *inputs_.observed : inputs_.profile.observed);
  const double poolBytes = static_cast<double>(budgetBytes - workingSet_);
  const std::vector<plan::LayerPlan> plans =
      plan::planModel(frequencies_, 0, inputs_.pools, cost, bytesPerExpert_, poolBytes, inputs_.gridStep);

  // One expert's FFN as the planner prices it (the contention measurement's FFN alone when the
  // profile has one, else the a + b fit).
  const double p = inputs_.observedExpertSeconds > 0 ? inputs_.observedExpertSeconds
                   : cost.compute > 0                 ? cost.compute
                                                      : std::max(0.0, inputs_.profile.expertCompute(1));
  // The runtime's own measure of its estimate's error: measured layer makespan ÷ Algorithm 3's
  // estimate (without the CPU-layer factor), over the layers with CPU work it ran (ObservedCosts::
  // cpuLayer). Applied to the plan's expected makespan once observed, as the whole layer (its FFNs
  // are inside the measured makespan).
  const ObservedCosts& seen = inputs_.observed ? *inputs_.observed : inputs_.profile.observed;
  const bool calibrated = seen.cpuLayer.count >= experts::kMinObservedOps && seen.cpuLayer.seconds > 0;
  const double layerScale = calibrated ? seen.cpuLayer.seconds / std::max(1.0, cost.cpuLayerFactor) : 1.0;
  out.calibration = calibrated ? layerScale : 0.0;
  const double b = std::max(0.0, inputs_.profile.computePerToken);
  const double a = inputs_.observedExpertSeconds > 0 ? std::max(0.0, inputs_.observedExpertSeconds - b)
                                                     : std::max(0.0, inputs_.profile.computeBase);
  const double P = inputs_.promptTokens;
  double prefillExperts = 0;
  for (size_t l = 0; l < plans.size(); ++l) {
    const plan::LayerPlan& lp = plans[l];
    const std::vector<double>& f = frequencies_[l];
    const double kLayer = std::accumulate(f.begin(), f.end(), 0.0);
    const int k = std::max(1, static_cast<int>(std::lround(kLayer)));
    for (size_t i = 0; i < kNumPools; ++i) out.ratio[i] += lp.ratio[i] / static_cast<double>(plans.size());
    const auto intervals = rankIntervals(lp, inputs_.pools, experts_);

    // Decode step.
    double hits = 0;
    for (const auto& [from, to] : intervals)
      for (int r = from; r < to; ++r) hits += f[static_cast<size_t>(r)];
    out.expectedHitRate += hits / kLayer / static_cast<double>(plans.size());
    const double plain = std::max(lp.expectedMakespan + p, k * p);
    const double layer = calibrated ? std::max(lp.expectedMakespan * layerScale, k * p) : plain;
    out.layerMakespanSeconds.push_back(lp.expectedMakespan);
    out.layerSeconds.push_back(layer);
    out.expertSecondsPerToken += layer;
    out.uncalibratedExpertSecondsPerToken += plain;

    // Prefill: the expected distinct experts of P tokens, per pool.
    double distinct = 0;
    std::array<double, kNumPools> poolDistinct{};
    for (size_t i = 0; i < kNumPools; ++i)
      for (int r = intervals[i].first; r < intervals[i].second; ++r)
        poolDistinct[i] += 1.0 - std::pow(1.0 - std::min(1.0, f[static_cast<size_t>(r)]), P);
    for (double x : f) distinct += 1.0 - std::pow(1.0 - std::min(1.0, x), P);
    const int kPrefill = std::clamp(static_cast<int>(std::lround(distinct)), 1, experts_);
    std::array<int, kNumPools> prefillHits{};
    int used = 0;
    for (size_t i = 0; i < kNumPools; ++i) {
      prefillHits[i] = std::min(kPrefill - used, static_cast<int>(std::lround(poolDistinct[i])));
      used += prefillHits[i];
    }
    const double loading = plan::estimateMakespan(kPrefill, prefillHits, cost, false);
    const double ffns = distinct * a + b * P * kLayer;
    prefillExperts += calibrated ? std::max(loading * layerScale, ffns)
                                 : std::max(loading + a + b * P * kLayer / std::max(1.0, distinct), ffns);
  }
  out.tpotSeconds = inputs_.denseSecondsPerToken + out.expertSecondsPerToken;
  out.uncalibratedTpotSeconds = inputs_.denseSecondsPerToken + out.uncalibratedExpertSecondsPerToken;
  out.ttftSeconds = P * inputs_.densePrefillSecondsPerToken + prefillExperts;
  return out;
}

std::vector<BudgetPrediction> BudgetAdvisor::curve(int points) const {
  points = std::max(points, 2);
  std::vector<BudgetPrediction> out;
  const double lo = static_cast<double>(workingSet_), hi = static_cast<double>(workingSet_ + expertBytes_);
  for (int i = 0; i < points; ++i)
    out.push_back(predict(static_cast<uint64_t>(std::llround(lo + (hi - lo) * i / (points - 1)))));
  return out;
}

int BudgetAdvisor::knee(const std::vector<BudgetPrediction>& curve, double gain) {
  int last = -1;
  for (int i = static_cast<int>(curve.size()) - 1; i >= 0; --i)
    if (curve[static_cast<size_t>(i)].feasible) {
      last = i;
      break;
    }
  if (last < 0) return -1;
  const double best = curve[static_cast<size_t>(last)].tpotSeconds;
  for (int i = 0; i <= last; ++i) {
    const BudgetPrediction& point = curve[static_cast<size_t>(i)];
    if (point.feasible && point.tpotSeconds > 0 && (point.tpotSeconds - best) < gain * point.tpotSeconds) return i;
  }
  return last;
}

}  // namespace zipmoe
