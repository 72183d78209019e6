// The feed-forward half of a decoder layer (internal): a dense SwiGLU MLP, or the MoE block.
//
// The MoE block routes (router.h), asks the ExpertProvider for exactly the experts chosen, with the
// number of tokens each serves, and computes each expert as soon as ExpertBatch::next() returns it:
// the BF16 buffers are wrapped with at::from_blob (zero copy; converted on the fly only when the
// compute dtype is fp32), the expert's tokens are gathered with index_select, and its weighted
// output rows are stored into a per-(token, slot) buffer with index_copy_. Summation is deferred
// until every expert has arrived and then runs over each token's slots in ascending expert id, which
// is the order transformers' loop over experts adds them in. Because no contribution is ever added
// to another before that fixed-order sum, the result is bit-identical whatever order the provider
// delivers experts in. qwen2_moe adds its shared expert × sigmoid(shared_expert_gate(x));
// deepseek_v2 adds its (ungated) shared experts. With a RoutingOverride the experts come from it
// (checked: k distinct ids per token, ascending) and the router only weighs them (Router::weigh).
// Thread-safety: immutable layers, one forward at a time (the provider's contract).
// Cost: O(N × k × hidden × moe_intermediate) plus a [N × k, hidden] buffer.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <ATen/ATen.h>

#include "model/router.h"
#include "zipmoe/experts/expert_provider.h"
#include "zipmoe/hf/model_config.h"
#include "zipmoe/model/routing_override.h"

namespace zipmoe {

class WeightLoader;
class ExpertPredictor;

class FeedForward {
 public:
  virtual ~FeedForward() = default;
  // x: the post-attention-normed hidden states [N, hidden]. Returns [N, hidden].
  virtual at::Tensor forward(const at::Tensor& x) const = 0;
};

std::unique_ptr<FeedForward> makeDenseMlp(const ModelConfig& config, const WeightLoader& weights,
                                          const std::string& prefix, at::ScalarType dtype);
// `moeLayer` is the provider's layer index; `experts` and `routing` (null = the router chooses) must
// outlive the block.
// `predictor` (null = no prefetch hints) gets the block's router and is called after each acquire.
std::unique_ptr<FeedForward> makeMoeBlock(const ModelConfig& config, const WeightLoader& weights,
                                          const std::string& prefix, at::ScalarType dtype, int moeLayer,
                                          ExpertProvider& experts, RoutingOverride* routing,
                                          ExpertPredictor* predictor = nullptr);

}  // namespace zipmoe
