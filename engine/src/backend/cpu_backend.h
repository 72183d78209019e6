// CpuBackend — the CPU as a ComputeBackend (backend/compute_backend.h): today's code behind the
// interface, delegated to, not copied. Memory and recovery are HostMemory's (io::AlignedBuffer,
// bf16::merge); project is model/linear.h's project() — its GEMV kernels (kernels/bf16_gemv.h) on
// the compute pool when decoding, at::linear otherwise — with projectSplit / projectNibble for the
// split and nibble forms (recovery fused into the product); the gated MLP is gatedMlpGemv when
// decoding and the unfused composition of moe_model_ops.h's gatedMlp otherwise. So its results are
// the free functions' results, bit for bit, under the calling thread's MatmulScope.
// Thread-safety: stateless; the free functions' per-thread state (the matmul kernel, the weight-byte
// count) is the calling thread's. Cost: as the functions it calls; project copies y once out of the
// libtorch result (n × rows words).
#pragma once

#include "backend/compute_backend.h"

namespace zipmoe::backend {

class CpuBackend final : public ComputeBackend {
 public:
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  std::string name() const override { return "cpu"; }
  io::AlignedBuffer allocate(size_t bytes, Placement where) const override;
  void recover(const uint8_t* exponents, const uint8_t* signMantissa, size_t count, uint16_t* words) const override;
  std::shared_ptr<io::PagePool> recyclingPool() const override;  // HostMemory's
  void project(const uint16_t* x, int64_t n, const Weight& w, uint16_t* y) const override;
  void gatedMlp(const uint16_t* x, int64_t n, const Weight& gate, const Weight& up, const Weight& down,
                const float* scale, uint16_t* const* out) const override;
};

}  // namespace zipmoe::backend
