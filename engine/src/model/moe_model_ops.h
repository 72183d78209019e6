// Small tensor helpers shared by the forward pass's modules (internal).
//
// rmsNorm follows transformers' RMSNorm exactly: the mean of squares and the rescale in fp32, the
// result cast back to the input's dtype and then multiplied by the weight (in the weight's dtype);
// decoding's few BF16 rows take rmsNormRows, the same steps without libtorch's per-operator cost.
// Both go piece by piece as the forward's sequences cut the rows (productByRows): decoding steps
// always take rmsNormRows, a longer step what it takes alone, so a row's result does not depend on
// the batch (linear.h, "Batch invariance").
// Thread-safety: pure functions. Cost: O(elements).
#pragma once

#include <optional>
#include <utility>

#include <ATen/ATen.h>

#include "model/linear.h"

namespace zipmoe {

// rmsNorm of a few BF16 rows (decoding) in one pass, with no libtorch operator: the same steps and
// roundings, with the sum of squares taken in double (libtorch's fp32 sum runs in its own order, so
// the two can differ in the last fp32 bit of the mean and, rarely, by one BF16 step of the result).
// nullopt unless x and weight are BF16, x's last dimension is weight's and x has at most
// kMaxNormElements elements or its rows (dim 0) are decoding steps (decodingRows).
constexpr int64_t kMaxNormElements = int64_t{1} << 16;
std::optional<at::Tensor> rmsNormRows(const at::Tensor& x, const at::Tensor& weight, double eps);

inline at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return productByRows(x, [&](const at::Tensor& rows) {
    if (std::optional<at::Tensor> fast = rmsNormRows(rows, weight, eps)) return *std::move(fast);
    const at::Tensor h = rows.to(at::kFloat);
    const at::Tensor normed = h * at::rsqrt(h.pow(2).mean(-1, true) + eps);
    return weight * normed.to(rows.scalar_type());
  });
}

// silu as PyTorch ≥ 2 (transformers' reference) computes it for BF16: in fp32, rounded once.
// libtorch 1.13's own BF16 silu rounds each of its steps to BF16, a few BF16 steps off.
inline at::Tensor fp32Silu(const at::Tensor& x) {
  return x.scalar_type() == at::kBFloat16 ? at::silu(x.to(at::kFloat)).to(at::kBFloat16) : at::silu(x);
}

// SwiGLU MLP: down(silu(gate(x)) · up(x)); fused when decoding (gatedMlpProject, the same roundings);
// piece by piece as the forward's sequences cut the rows (productByRows).
inline at::Tensor gatedMlp(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down) {
  return productByRows(x, [&](const at::Tensor& rows) {
    if (std::optional<at::Tensor> fused = gatedMlpProject(rows, gate, up, down)) return *std::move(fused);
    return project(fp32Silu(project(rows, gate)) * project(rows, up), down);
  });
}

}  // namespace zipmoe
