// Planner inputs from the runtime's knowledge (see planner_inputs.h).
#include "experts/planner_inputs.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <span>

namespace zipmoe::experts {

plan::CostModel costModel(const CostProfile& profile, int workers, int shards, int tensorsPerExpert, bool coalesced,
                          bool rawMisses) {
  plan::CostModel cost;
  cost.u = profile.smRead;
  cost.v = profile.eRead;
  cost.c = profile.decompress;
  cost.recover = profile.recover;
  cost.threads = workers;
  cost.shards = shards;
  cost.tensorsPerExpert = tensorsPerExpert;
  if (coalesced) cost.missRead = profile.tensorRead;
  if (rawMisses) cost.fullRead = profile.fullRead;
  if (profile.hasContention() && profile.computeBusy[0] > 0) {
    const auto w = static_cast<size_t>(std::clamp(workers, 0, profile.contentionWorkers));
    cost.compute = profile.computeBusy[0];
    cost.computeSlowdown = std::max(1.0, profile.computeBusy[w] / profile.computeBusy[0]);
    cost.decodeSlowdown = profile.decompressSlowdown();
    cost.ioSlowdown = profile.readSlowdown();
  }
  return cost;
}

namespace {

struct PricedCost {
  double& field;  // the cost model's figure (0: not priced by this model)
  const ObservedCost& seen;
};

// See observedCostModel. Returns whether the group was calibrated.
bool calibrate(std::initializer_list<PricedCost> group) {
  double observed = 0, profiled = 0;
  for (const PricedCost& f : group)
    if (f.field > 0 && f.seen.count >= kMinObservedOps) {
      observed += static_cast<double>(f.seen.count) * f.seen.seconds;
      profiled += static_cast<double>(f.seen.count) * f.field;
    }
  if (profiled <= 0 || observed <= 0) return false;
  const double ratio = observed / profiled;
  for (const PricedCost& f : group)
    if (f.field > 0) f.field = f.seen.count >= kMinObservedOps ? f.seen.seconds : f.field * ratio;
  return true;
}

}  // namespace

plan::CostModel observedCostModel(plan::CostModel cost, const ObservedCosts& observed) {
  if (calibrate({{cost.u, observed.smRead}, {cost.v, observed.eRead}, {cost.missRead, observed.tensorRead},
                 {cost.fullRead, observed.fullRead}}))
    cost.ioSlowdown = 1;
  if (calibrate({{cost.c, observed.decompress}, {cost.recover, observed.recover}})) cost.decodeSlowdown = 1;
  if (observed.cpuLayer.count >= kMinObservedOps && observed.readLayer.count >= kMinObservedOps &&
      observed.readLayer.seconds > 0)
    cost.cpuLayerFactor = observed.cpuLayer.seconds / observed.readLayer.seconds;
  return cost;
}

std::vector<double> normaliseFrequencies(std::vector<double> f, int k) {
  for (int round = 0; round < 64; ++round) {
    double fixed = 0, free = 0;
    for (double x : f) (x >= 1.0 ? fixed : free) += std::min(x, 1.0);
    if (free <= 0) break;
    const double scale = (k - fixed) / free;
    bool capped = false;
    for (double& x : f)
      if (x < 1.0) {
        x *= scale;
        if (x > 1.0) {
          x = 1.0;
          capped = true;
        }
      }
    if (!capped) break;
  }
  return f;
}

namespace {

std::span<const uint64_t> layerRow(const std::vector<uint64_t>& perExpert, int layer, int experts) {
  return {perExpert.data() + static_cast<size_t>(layer) * static_cast<size_t>(experts), static_cast<size_t>(experts)};
}

// Σ tokens of the layer's experts (0 when the counts carry no tokens).
uint64_t layerTokenSum(const ActivationCounts& counts, int layer, int experts) {
  if (counts.tokens.size() != counts.counts.size()) return 0;
  const auto row = layerRow(counts.tokens, layer, experts);
  return std::accumulate(row.begin(), row.end(), uint64_t{0});
}

// Tokens routed through the layer: each token is routed to topK experts.
uint64_t layerTokens(const ActivationCounts& counts, int layer, int experts, int topK) {
  return layerTokenSum(counts, layer, experts) / static_cast<uint64_t>(std::max(topK, 1));
}

// Rescaled to Σ f = the layer's own k (its expected selections per step, at least topK: batches
// select more).
std::vector<double> normaliseToOwnK(std::vector<double> f, int experts, int topK) {
  const double mean = std::accumulate(f.begin(), f.end(), 0.0);
  const int k = std::clamp(static_cast<int>(std::lround(mean)), 1, experts);
  return normaliseFrequencies(std::move(f), std::max(k, topK));
}

}  // namespace

cache::SessionBlend sessionBlend(int topK, bool fromPrompt, double priorTokens) {
  cache::SessionBlend blend;
  blend.topK = fromPrompt ? topK : 0;
  blend.minSteps = kMinHistorySteps;
  blend.minTokens = kMinPromptTokens;
  blend.priorTokens = priorTokens;
  blend.windowTokens = kSessionWindowTokens;
  return blend;
}

FrequencySource frequencySource(const ActivationCounts& counts, int layer, int experts, int topK, bool fromPrompt) {
  const uint64_t steps = counts.steps[static_cast<size_t>(layer)];
  if (steps >= kMinHistorySteps)
    return sessionBlend(topK, fromPrompt).weight(steps, layerTokenSum(counts, layer, experts)) > 0
               ? FrequencySource::Session
               : FrequencySource::History;
  if (fromPrompt && counts.tokens.size() == counts.counts.size() &&
      layerTokens(counts, layer, experts, topK) >= kMinPromptTokens)
    return FrequencySource::Prompt;
  return FrequencySource::Prior;
}

std::vector<double> smoothTowardUniform(std::vector<double> f, double evidence, double tau) {
  if (tau <= 0 || f.empty()) return f;
  const double n = std::max(evidence, 0.0);
  const double even = tau * std::accumulate(f.begin(), f.end(), 0.0) / static_cast<double>(f.size());
  for (double& x : f) x = (n * x + even) / (n + tau);
  return f;
}

std::vector<double> layerFrequency(const ActivationCounts& counts, int layer, int experts, int topK, bool fromPrompt,
                                   double sessionPriorTokens, double smoothingTokens) {
  const uint64_t steps = counts.steps[static_cast<size_t>(layer)];
  switch (frequencySource(counts, layer, experts, topK, fromPrompt)) {
    case FrequencySource::Prior: return plan::priorRankFrequency(experts, topK);
    case FrequencySource::Prompt: {
      // The share of the tokens each expert serves: a token selects topK experts, so Σ f = topK.
      const uint64_t tokens = layerTokens(counts, layer, experts, topK);
      return smoothTowardUniform(
          normaliseFrequencies(plan::rankFrequency(layerRow(counts.tokens, layer, experts), tokens, topK), topK),
          static_cast<double>(tokens), smoothingTokens);
    }
    case FrequencySource::Session: {
      const cache::SessionBlend blend = sessionBlend(topK, true, sessionPriorTokens);
      const uint64_t sum = layerTokenSum(counts, layer, experts);
      const double w = blend.weight(steps, sum);
      const auto c = layerRow(counts.counts, layer, experts), t = layerRow(counts.tokens, layer, experts);
      std::vector<double> f;
      for (size_t e = 0; e < c.size(); ++e) f.push_back(std::min(1.0, blend.value({c[e], t[e]}, steps, sum, w)));
      std::sort(f.begin(), f.end(), std::greater<>());
      const double evidence = static_cast<double>(std::max(steps, sum / static_cast<uint64_t>(std::max(topK, 1))));
      return smoothTowardUniform(normaliseToOwnK(std::move(f), experts, topK), evidence, smoothingTokens);
    }
    case FrequencySource::History:
      // Layers may see different k (batches): each is planned with its own Σ f.
      return smoothTowardUniform(
          normaliseToOwnK(plan::rankFrequency(layerRow(counts.counts, layer, experts), steps, topK), experts, topK),
          static_cast<double>(steps), smoothingTokens);
  }
  return {};
}

std::vector<std::vector<double>> layerFrequencies(const ActivationCounts& counts, int layers, int experts, int topK,
                                                  bool fromPrompt, double sessionPriorTokens, double smoothingTokens) {
  std::vector<std::vector<double>> frequencies;
  for (int l = 0; l < layers; ++l)
    frequencies.push_back(layerFrequency(counts, l, experts, topK, fromPrompt, sessionPriorTokens, smoothingTokens));
  return frequencies;
}

std::vector<plan::LayerPlan> planPools(const PoolPlanInputs& in, double poolBytes, PoolMask pools,
                                       const ActivationCounts& counts) {
  return plan::planModel(
      layerFrequencies(counts, in.layers, in.experts, in.topK, in.fromPrompt, in.sessionPriorTokens, in.smoothingTokens),
      0, pools, in.cost, in.bytesPerExpert, poolBytes, in.gridStep);
}

plan::LayerPlan planPoolsOfLayer(const PoolPlanInputs& in, double poolBytes, PoolMask pools,
                                 const ActivationCounts& counts, int layer) {
  return plan::planModelLayer(
      layerFrequency(counts, layer, in.experts, in.topK, in.fromPrompt, in.sessionPriorTokens, in.smoothingTokens), layer,
      in.layers, 0, pools, in.cost, in.bytesPerExpert, poolBytes, in.gridStep);
}

std::vector<plan::LayerPlan> fixedRatioPlan(const PoolPlanInputs& in, double poolBytes, PoolMask pools,
                                            const std::array<double, kNumPools>& ratios) {
  const double layerBudget = poolBytes / in.layers;
  double total = 0;
  for (Pool p : kPools)
    if (hasPool(pools, p)) total += ratios[static_cast<size_t>(poolIndex(p))];
  plan::LayerPlan lp;
  int sum = 0;
  for (Pool p : kPools) {
    const auto i = static_cast<size_t>(poolIndex(p));
    if (!hasPool(pools, p) || total <= 0) continue;
    lp.ratio[i] = ratios[i] / total;
    lp.capacity[i] = static_cast<int>(std::min(static_cast<double>(in.experts - sum),
                                               std::floor(lp.ratio[i] * layerBudget / in.bytesPerExpert[i])));
    sum += lp.capacity[i];
  }
  return std::vector<plan::LayerPlan>(static_cast<size_t>(in.layers), lp);
}

}  // namespace zipmoe::experts
