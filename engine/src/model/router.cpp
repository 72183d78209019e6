// Router (see router.h). Thread-safety: immutable. Cost: one [N, hidden] × [hidden, experts] product.
#include "model/router.h"

#include "model/linear.h"
#include "model/weights.h"

namespace zipmoe {

Router::Router(const ModelConfig& config, const WeightLoader& weights, const std::string& gateName,
               at::ScalarType dtype)
    : c_(config), rule_(forwardPass(config.family).router) {
  const bool fp32 = rule_ == RouterRule::ScaledGroupLimitedTopK;
  gate_ = weights.load(gateName, {config.numExperts, config.hiddenSize}, fp32 ? at::kFloat : dtype);
}

at::Tensor Router::scores(const at::Tensor& x) const {
  if (rule_ != RouterRule::ScaledGroupLimitedTopK) return at::softmax(project(x, gate_), -1, at::kFloat);
  return at::softmax(project(x.to(at::kFloat), gate_), -1, at::kFloat);
}

at::Tensor Router::normalise(at::Tensor topWeights) const {
  if (rule_ != RouterRule::ScaledGroupLimitedTopK) {
    if (c_.normTopkProb) topWeights = topWeights / topWeights.sum(-1, true);
    return topWeights;
  }
  if (c_.numExpertsPerTok > 1 && c_.normTopkProb) topWeights = topWeights / (topWeights.sum(-1, true) + 1e-20);
  return topWeights * c_.routedScalingFactor;
}

at::Tensor Router::finalDtype(at::Tensor weights, at::ScalarType dtype) const {
  // SoftmaxTopK casts the weights to the compute dtype; the other rules keep them in fp32, so that
  // weight × expert output is formed in fp32 before the cast (transformers).
  const bool keepFp32 = rule_ != RouterRule::SoftmaxTopK;
  return weights.to(keepFp32 ? at::kFloat : dtype);
}

Routing Router::route(const at::Tensor& x) const {
  const int64_t k = c_.numExpertsPerTok;
  const at::Tensor probs = scores(x);
  at::Tensor topWeights, topExperts;
  if (rule_ == RouterRule::ScaledGroupLimitedTopK && c_.topkMethod == "group_limited_greedy") {
    const int64_t n = probs.size(0), perGroup = c_.numExperts / c_.nGroup;
    const at::Tensor groupScores = std::get<0>(probs.view({n, c_.nGroup, perGroup}).max(-1));
    const at::Tensor groups = std::get<1>(at::topk(groupScores, c_.topkGroup, -1));
    const at::Tensor groupMask = at::zeros_like(groupScores).scatter_(1, groups, 1.0);
    const at::Tensor expertMask = groupMask.unsqueeze(-1).expand({n, c_.nGroup, perGroup}).reshape({n, -1});
    std::tie(topWeights, topExperts) = at::topk(probs.masked_fill(expertMask == 0, 0.0), k, -1);
  } else {
    std::tie(topWeights, topExperts) = at::topk(probs, k, -1);
  }
  topWeights = normalise(topWeights);
  auto [sortedExperts, order] = at::sort(topExperts, -1);
  return Routing{sortedExperts, finalDtype(topWeights.gather(-1, order), x.scalar_type())};
}

Routing Router::weigh(const at::Tensor& x, const at::Tensor& experts) const {
  return Routing{experts, finalDtype(normalise(scores(x).gather(-1, experts)), x.scalar_type())};
}

}  // namespace zipmoe
