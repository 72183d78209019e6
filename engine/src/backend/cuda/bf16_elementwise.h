// The element-wise BF16 steps of the CUDA backend's gated MLP, as kernel launches callable from plain
// C++ (no CUDA types; the stream is a cudaStream_t):
//   siluTimesUp:  h[i] = bf16(float(bf16(silu(g[i]))) · float(u[i])), silu(v) = v / (1 + e^−v) in fp32
//                 — the roundings of CpuBackend's gated MLP (model/linear.h, gatedMlpGemv). expf on
//                 the device may differ from the host's by an ulp of fp32, which can move h by one
//                 BF16 step.
//   scaleRows:    out[r · cols + c] = bf16(float(in[r · cols + c]) · scale[r]) (scale in device memory).
// Thread-safety: re-entrant; they only enqueue. Cost: memory-bandwidth bound.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zipmoe::cuda {

// REQUIRES: device-accessible pointers to `count` words each; h may alias neither input.
void siluTimesUp(const uint16_t* g, const uint16_t* u, uint16_t* h, size_t count, void* stream);
// REQUIRES: device-accessible in and out of rows × cols words, scale of rows floats.
void scaleRows(const uint16_t* in, const float* scale, uint16_t* out, size_t rows, size_t cols, void* stream);

}  // namespace zipmoe::cuda
