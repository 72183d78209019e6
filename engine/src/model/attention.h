// Attention layers of the forward pass (internal): the common interface, causal attention over a
// sequence's cache, and grouped-query attention for mixtral / qwen2_moe / qwen3_moe / olmoe.
//
// A layer processes the tokens of a whole forward at once: x is [N, hidden] for every step of the
// batch concatenated; projections run on all N rows together, rotary embeddings per row (each row
// has its own position), and attention itself per segment (one sequence's new tokens against its
// own cache). Following transformers' eager attention: scores = q·kᵀ × scale in the compute dtype,
// causal masking, softmax in fp32 cast back, then × v. GQA follows repeat_kv's grouping (query head
// h uses key/value head h / (heads / kv_heads)). Family details: qwen2_moe q/k/v biases; qwen3_moe
// per-head RMSNorm of q and k before RoPE; olmoe RMSNorm over the whole q / k projections, then
// clip_qkv clamping of q, k and v.
// Thread-safety: a layer is immutable; forward writes only the segments' caches. Cost: projections
// O(N × hidden × width); attention O(n × T × heads × head_dim) per segment.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "model/attention_bounds.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "zipmoe/hf/model_config.h"

namespace zipmoe {

class WeightLoader;

struct AttentionSegment {
  int64_t offset = 0;  // first row in x
  int64_t count = 0;   // rows (new tokens)
  int64_t past = 0;    // tokens already cached
  GrowingTensor* first = nullptr;
  GrowingTensor* second = nullptr;
};

class AttentionLayer {
 public:
  virtual ~AttentionLayer() = default;
  // x: [N, hidden]; positions: int64 [N]. Returns [N, hidden].
  virtual at::Tensor forward(const at::Tensor& x, const at::Tensor& positions,
                             const std::vector<AttentionSegment>& segments) const = 0;
  // Empty cache tensors of the right shapes for one sequence.
  virtual std::pair<GrowingTensor, GrowingTensor> makeCache() const = 0;
};

// The causal mask of n queries at positions T - n .. T - 1 against T keys: bool [n, T], true where
// the key lies after the query (masked).
at::Tensor futureKeys(int64_t n, int64_t total);

// q: [heads, n, d]; k: [heads or kvHeads, T, d]; v: [.., T, dv]; the n queries sit at positions
// T - n .. T - 1, in chunks of kAttentionQueryChunk. Returns [n, heads × dv].
at::Tensor causalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale);

// Whether a sequence's step of `queries` tokens attends query by query, each query against the keys
// up to its own position as a one-token decode step there would: a decoding step (2 … kMaxGemvRows
// tokens: a prompt's chunk, whose cut a batch's step budget decides). Then a token's attention does
// not depend on how its prompt was chunked, nor its products (the GEMV's rows are independent):
// the batch-invariance of linear.h. A longer step attends at once, as its sequence alone would.
bool attendsQueryByQuery(int64_t queries);

std::unique_ptr<AttentionLayer> makeGqaAttention(const ModelConfig& config, const WeightLoader& weights,
                                                 const std::string& prefix, at::ScalarType dtype);

}  // namespace zipmoe
