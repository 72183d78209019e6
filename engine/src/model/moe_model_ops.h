// Small tensor helpers shared by the forward pass's modules (internal).
//
// rmsNorm follows transformers' RMSNorm exactly: the mean of squares and the rescale in fp32, the
// result cast back to the input's dtype and then multiplied by the weight (in the weight's dtype).
// Thread-safety: pure functions. Cost: O(elements).
#pragma once

#include <optional>

#include <ATen/ATen.h>

#include "model/linear.h"

namespace zipmoe {

inline at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor h = x.to(at::kFloat);
  const at::Tensor normed = h * at::rsqrt(h.pow(2).mean(-1, true) + eps);
  return weight * normed.to(x.scalar_type());
}

// SwiGLU MLP: down(silu(gate(x)) · up(x)).
inline at::Tensor gatedMlp(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down) {
  return project(at::silu(project(x, gate)) * project(x, up), down);
}

}  // namespace zipmoe
