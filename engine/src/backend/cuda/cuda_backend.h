// CudaBackend — one CUDA device (the current one at construction, device 0 unless the process set
// another) as a ComputeBackend (backend/compute_backend.h):
//   memory    Host: cudaMallocHost (page-locked, 4 KiB-aligned: O_DIRECT reads land in it and the
//             kernels read it in place over the bus); Device: cudaMalloc (256-byte aligned).
//   recover   the recovery kernel (backend/cuda/cuda_recovery.h), bit-exact with bf16::merge.
//   project   cublasGemmEx, BF16 in and out, fp32 accumulation (CUBLAS_COMPUTE_32F), rounded to BF16
//             once; a split weight is recovered into device scratch first (recover, then GEMM).
//   gatedMlp  two GEMMs, a kernel for bf16(bf16(silu(g)) · u), the down GEMM, a kernel for the
//             routing weight's scaling — the roundings CpuBackend states.
// cuBLAS sums in its own order (blocked, split-k), so products agree with the CPU backend to a BF16
// rounding step or two, not bit for bit; recovery is bit-exact. Nibble-coded weights are not taken
// yet (Error): the expert runtime hands the CUDA backend words or split planes.
// Pointers: memory from allocate (either placement) is used in place; any other host memory is
// copied through device scratch (correct, slower), found with cudaPointerGetAttributes.
// A plain C++ header (no CUDA types), so that code compiled without nvcc includes it.
// Thread-safety: every operation takes one mutex (one stream, one cuBLAS handle, one scratch) and
// returns when its results are written. Cost: construction creates the CUDA context (up to seconds);
// the scratch grows to the largest call and is kept.
#pragma once

#include <memory>
#include <string>

#include "backend/compute_backend.h"

namespace zipmoe::backend {

class CudaBackend final : public ComputeBackend {
 public:
  // Throws zipmoe::Error naming the CUDA call when there is no usable device (no driver, no GPU).
  CudaBackend();
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  DeviceKind kind() const override { return DeviceKind::Cuda; }
  std::string name() const override;
  io::AlignedBuffer allocate(size_t bytes, Placement where) const override;
  // None: page-locked memory is not recycled page by page; every buffer comes from allocate.
  std::shared_ptr<io::PagePool> recyclingPool() const override { return nullptr; }
  void recover(const uint8_t* exponents, const uint8_t* signMantissa, size_t count, uint16_t* words) const override;
  void project(const uint16_t* x, int64_t n, const Weight& w, uint16_t* y) const override;
  void gatedMlp(const uint16_t* x, int64_t n, const Weight& gate, const Weight& up, const Weight& down,
                const float* scale, uint16_t* const* out) const override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace zipmoe::backend
