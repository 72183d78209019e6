// Router — the top-k expert choice of one MoE layer, by its family's RouterRule (internal to the
// forward pass; hf/family_description.h says which family follows which rule).
//
// SoftmaxTopK, SoftmaxTopKFp32Weights: softmax (fp32) over all experts → top-k → renormalise with
// norm_topk_prob (mixtral's config always sets it). The router logits come from the gate in the
// compute dtype, as in transformers. ScaledGroupLimitedTopK: logits in fp32, softmax scores, greedy
// top-k or group-limited top-k (best topk_group of n_group groups by their maximum score), then
// (with norm_topk_prob and k > 1) division by the sum of the top-k weights, then
// × routed_scaling_factor. transformers 5's DeepseekV2 ignores norm_topk_prob (every published V2
// checkpoint has it false, where all implementations agree). The chosen
// experts of each token are returned sorted by expert id, which fixes the order in which their
// contributions are summed (see moe_model_ffn.h). weigh() takes the experts from elsewhere (a
// RoutingOverride) and applies the same rule to the router's scores of exactly those experts:
// the softmax over all experts is gathered at the chosen ones and then normalised and scaled as above.
// Thread-safety: immutable. Cost: O(N × experts × hidden) for the logits.
#pragma once

#include <string>

#include <ATen/ATen.h>

#include "hf/family_description.h"
#include "zipmoe/hf/model_config.h"

namespace zipmoe {

class WeightLoader;

struct Routing {
  at::Tensor experts;  // int64 [N, k], ascending within each row
  at::Tensor weights;  // [N, k] matching `experts`: the compute dtype under SoftmaxTopK, fp32 otherwise
};

class Router {
 public:
  Router(const ModelConfig& config, const WeightLoader& weights, const std::string& gateName, at::ScalarType dtype);
  Routing route(const at::Tensor& x) const;
  // `experts`: int64 [N, k], k distinct ids per row, ascending; returned as Routing::experts.
  Routing weigh(const at::Tensor& x, const at::Tensor& experts) const;
  // The fp32 softmax over all experts, [N, experts].
  at::Tensor scores(const at::Tensor& x) const;

 private:
  // The family's rule for the gathered [N, k] scores: normalisation, routed_scaling_factor.
  at::Tensor normalise(at::Tensor topWeights) const;
  // The compute dtype `dtype` for SoftmaxTopK, fp32 otherwise.
  at::Tensor finalDtype(at::Tensor weights, at::ScalarType dtype) const;

  const ModelConfig& c_;
  RouterRule rule_;
  at::Tensor gate_;  // [experts, hidden]: compute dtype, or fp32 for ScaledGroupLimitedTopK
};

}  // namespace zipmoe
