// Rope — rotary position embeddings: the inverse frequencies (default, linear, YaRN) and the rotation.
//
// Internal to the forward pass. Follows transformers' rope initialisation functions: the default
// 1 / base^(2i/d) table, linear scaling (frequencies ÷ factor) and YaRN (the blend of interpolated
// and extrapolated frequencies over the correction range of beta_fast / beta_slow, and the attention
// factor get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) that scales cos and sin).
// Two layouts: Half (Llama's rotate_half over the two halves, computed in the activations' dtype with
// cos/sin cast to it, as HF does) and Interleaved (DeepSeek-V2's complex rotation of (even, odd)
// pairs, computed in fp32 and cast back).
// Thread-safety: immutable after construction. Cost: O(tokens × dim) per call.
#pragma once

#include <ATen/ATen.h>

#include "zipmoe/hf/model_config.h"

namespace zipmoe {

// transformers' yarn_get_mscale: 0.1 · mscale · ln(scale) + 1 for scale > 1, else 1.
double yarnGetMscale(double scale, double mscale);

class Rope {
 public:
  enum class Layout { Half, Interleaved };
  Rope(const ModelConfig& config, int rotaryDim, Layout layout);

  // cos and sin for the positions (int64 [n]): fp32 [n, rotaryDim / 2], already × attentionScaling().
  struct Tables {
    at::Tensor cos, sin;
  };
  Tables tables(const at::Tensor& positions) const;
  // x: [n, heads, rotaryDim] → rotated, same dtype.
  at::Tensor apply(const at::Tensor& x, const Tables& t) const;
  double attentionScaling() const { return attentionScaling_; }
  const at::Tensor& invFreq() const { return invFreq_; }

 private:
  at::Tensor invFreq_;  // fp32 [rotaryDim / 2]
  double attentionScaling_ = 1.0;
  Layout layout_;
};

}  // namespace zipmoe
