// project(x, W[, b]) for the forward pass: y = x · Wᵀ (+ b), the one matrix product of every
// projection, router, expert and LM head.
//
// With BF16 activations and weights and at most kMaxGemvRows rows of x (decoding, a few sequences),
// the product runs on the project's own GEMV kernels (kernels/bf16_gemv.h): the weights are streamed
// once, split by rows between libtorch's intra-op threads, accumulated in fp32, the bias added in
// fp32 and the result rounded to BF16 once — as libtorch's BF16 linear rounds its fp32 result.
// Otherwise (prefill, fp32 compute, odd layouts) it is at::linear. Which kernel a thread uses is
// set for the duration of a forward by a MatmulScope (MoeModel sets it from ModelOptions::matmul).
// Thread-safety: the choice is per thread. Cost: rows × cols × 2 bytes of W read once.
#pragma once

#include <optional>

#include <ATen/ATen.h>

#include "zipmoe/model.h"

namespace zipmoe {

constexpr int64_t kMaxGemvRows = 8;

at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias = {});

// The CPUs this process may run on (sched_getaffinity), at least 1: the default intra-op thread count.
int availableCpus();
// Sets libtorch's intra-op threads: `requested` when > 0, else availableCpus().
void setComputeThreads(int requested);

// The weight bytes project() has read on this thread since the last call (and resets the count).
uint64_t takeWeightBytesRead();

// Sets the calling thread's matmul kernel until destroyed (scopes nest).
class MatmulScope {
 public:
  explicit MatmulScope(MatmulKernel kernel);
  ~MatmulScope();
  MatmulScope(const MatmulScope&) = delete;
  MatmulScope& operator=(const MatmulScope&) = delete;

 private:
  MatmulKernel previous_;
};

}  // namespace zipmoe
