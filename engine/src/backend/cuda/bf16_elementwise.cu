// The gated MLP's element-wise kernels (see bf16_elementwise.h): grid-stride loops over BF16 words,
// converted with the round-to-nearest-even intrinsics, as the CPU rounds.
#include "backend/cuda/bf16_elementwise.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "zipmoe/base/error.h"

namespace zipmoe::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 4096;  // the grid-stride loop carries larger tensors

__device__ __forceinline__ float wordToFloat(uint16_t w) { return __bfloat162float(__ushort_as_bfloat16(w)); }
__device__ __forceinline__ uint16_t floatToWord(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }

__global__ void siluTimesUpKernel(const uint16_t* __restrict__ g, const uint16_t* __restrict__ u,
                                  uint16_t* __restrict__ h, size_t count) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float v = wordToFloat(g[i]);
    const float silu = wordToFloat(floatToWord(v / (1.0f + expf(-v))));
    h[i] = floatToWord(silu * wordToFloat(u[i]));
  }
}

__global__ void scaleRowsKernel(const uint16_t* __restrict__ in, const float* __restrict__ scale,
                                uint16_t* __restrict__ out, size_t rows, size_t cols) {
  const size_t stride = size_t{gridDim.x} * blockDim.x, count = rows * cols;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = floatToWord(wordToFloat(in[i]) * scale[i / cols]);
}

unsigned blocksFor(size_t count) {
  return unsigned(std::clamp<size_t>((count + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

void checkLaunch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw Error(std::string("CUDA backend: launch of ") + kernel + " failed: " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ")");
}

}  // namespace

void siluTimesUp(const uint16_t* g, const uint16_t* u, uint16_t* h, size_t count, void* stream) {
  if (count == 0) return;
  siluTimesUpKernel<<<blocksFor(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(g, u, h, count);
  checkLaunch("siluTimesUp");
}

void scaleRows(const uint16_t* in, const float* scale, uint16_t* out, size_t rows, size_t cols, void* stream) {
  if (rows == 0 || cols == 0) return;
  scaleRowsKernel<<<blocksFor(rows * cols), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(in, scale, out, rows,
                                                                                             cols);
  checkLaunch("scaleRows");
}

}  // namespace zipmoe::cuda
