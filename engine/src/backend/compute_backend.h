// zipmoe::backend — what a compute device does for the engine, behind one interface: the device's
// memory for expert planes and weights, tensor recovery (exponent and sign-mantissa planes → BF16
// words), and the expert's products — y = x · Wᵀ from BF16 words or fused with recovery from the
// split planes or nibble codes, and the gated (SwiGLU) MLP of an expert. The model and the expert
// runtime call a backend, not the kernels, so that a device is one more implementation of this file
// (as llama.cpp's devices are backends behind one interface): CpuBackend (backend/cpu_backend.h,
// today's GEMV kernels, libtorch and SIMD merge) and CudaBackend (backend/cuda/cuda_backend.h,
// the recovery kernel and cuBLAS).
//
// Two layers, because the expert runtime (zipmoe_core) has no libtorch: DeviceMemory is what the
// runtime needs from a device (buffers and recovery); ComputeBackend adds the products the model
// needs. Every ComputeBackend is a DeviceMemory, and the process-wide choice (backend/backend_registry.h)
// sets both at once.
//
// Attention stays in the model for now: it is libtorch code bound to the KV cache (model/attention.h,
// model/mla_attention.h, model/kv_cache.h), and a device's attention needs the KV cache in that
// device's memory first — a larger seam than this one (issue #44, point 4 names it "where it applies").
//
// Types: raw pointers and shapes, no libtorch, so that this header can go anywhere. BF16 values are
// their 16-bit words (uint16_t). Every matrix is row-major and contiguous.
// Thread-safety: every method may be called from any thread; an implementation serialises what its
// device cannot run concurrently (CudaBackend: one stream) and says so. Cost: per method below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "io/file_io.h"

namespace zipmoe::io {
class PagePool;
}  // namespace zipmoe::io
#include "zipmoe/format/nibble_shard.h"

namespace zipmoe::backend {

enum class DeviceKind { Cpu, Cuda };

// Where a buffer lives.
//   Host:   host memory whose start and size are multiples of 4 KiB, so that O_DIRECT reads land in
//           it: expert planes read from the SSD. On CPU io::AlignedBuffer's own memory (transparent
//           huge pages from 2 MiB); on CUDA page-locked (cudaMallocHost), which the device copies at
//           full PCIe speed and its kernels may read in place.
//   Device: memory the device computes from (recovered words, weights). On CPU the same as Host;
//           on CUDA cudaMalloc'ed memory whose data() the host must not dereference.
enum class Placement { Host, Device };

// One weight matrix [rows × cols] in one of the forms the expert runtime hands over (exactly one of):
//   words                      BF16 words;
//   exponents + signMantissa   the lossless split planes (zipmoe/format/bf16_split.h);
//   nibble + signMantissa      nibble codes read in place (zipmoe/format/nibble_shard.h: one shard per
//                              contiguous range of rows, together covering [0, rows)).
// Every form gives the same products, bit for bit (the recovery is lossless). The model's GEMV
// kernels take the same type (GemvWeight, model/linear.h).
struct Weight {
  const uint16_t* words = nullptr;
  const uint8_t* exponents = nullptr;
  const uint8_t* signMantissa = nullptr;
  std::span<const NibbleShard> nibble{};
  int64_t rows = 0, cols = 0;
};

// The memory and the recovery of a device: what the expert runtime needs of it.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  virtual DeviceKind kind() const = 0;
  // A short name for logs and errors: "cpu", "cuda:0 (NVIDIA H200)".
  virtual std::string name() const = 0;

  // `bytes` (rounded up to the buffer's alignment) at `where`; zero-filled on CPU, unspecified on
  // CUDA. buffer.alignment() says the start's alignment: 4096 for Host on every backend. A buffer
  // adopted from another allocator cannot grow (io::AlignedBuffer::reserve throws): allocate anew.
  // Throws zipmoe::Error naming the size and the failed call when the memory is not there.
  // Cost: an allocation (CUDA's pinned memory is slow to allocate: keep buffers, do not churn them).
  virtual io::AlignedBuffer allocate(size_t bytes, Placement where) const = 0;

  // words[i] = ((SM >> 7) << 15) | (E << 7) | (SM & 0x7F) for i < count, bit-exact with
  // zipmoe::bf16::merge. Returns when the words are written.
  // REQUIRES: the three ranges are readable (writable for words) by this device: any host memory on
  // CPU; on CUDA memory from this backend's allocate (either placement). words overlaps neither plane.
  // Cost: memory-bandwidth bound, 4 bytes of traffic per word.
  virtual void recover(const uint8_t* exponents, const uint8_t* signMantissa, size_t count, uint16_t* words) const = 0;

  // A pool that recycles this device's Host pages between the expert runtime's buffers
  // (RuntimeOptions::recyclePages: the expert caches' buffers then come from it, the others from
  // allocate), or null when the device's host memory cannot be recycled page by page (CUDA's
  // page-locked memory): the runtime then allocates every buffer with allocate(). A fresh pool per
  // call (one per runtime). Cost: nothing until the pool allocates.
  virtual std::shared_ptr<io::PagePool> recyclingPool() const = 0;
};

// Throws zipmoe::Error naming `backend` ("CPU backend") and the three shapes unless gate and up are
// [width × cols] and down [cols × width]: the gated MLP's shapes, checked alike by every backend.
void requireGatedMlpShapes(const char* backend, const Weight& gate, const Weight& up, const Weight& down);

// The products of an expert on a device. n is the number of activation rows (tokens).
class ComputeBackend : public DeviceMemory {
 public:
  // y[n × w.rows] = x[n × w.cols] · Wᵀ, each value rounded to BF16 once from an fp32 sum, for W in
  // any form (a split or nibble W is recovered inside the product: the fused recover+project).
  // Returns when y is written. Throws zipmoe::Error when the shapes or the shards do not fit, or the
  // device cannot take the form (see the implementation).
  // REQUIRES: x, y and W's data readable (y writable) by this device; y does not overlap x.
  // Cost: n × rows × cols MACs; W read once (bandwidth-bound when n is small).
  virtual void project(const uint16_t* x, int64_t n, const Weight& w, uint16_t* y) const = 0;

  // The SwiGLU MLP of an expert for n rows of x [n × cols]:
  //   h      = bf16(silu(bf16(gate · x)) · bf16(up · x)),  silu(v) = bf16(v / (1 + e^−v)) in fp32
  //   out[i] = bf16(float(bf16(down · h)) · scale[i])      (scale null: bf16(down · h))
  // gate and up are [width × cols], down [cols × width]; out[i] (a host array of n row pointers)
  // has room for cols values and overlaps no input; scale (host, n values) may be null.
  // Returns when every out row is written. Throws zipmoe::Error when the shapes do not fit.
  // Cost: 3 × n × width × cols MACs; each weight read once.
  virtual void gatedMlp(const uint16_t* x, int64_t n, const Weight& gate, const Weight& up, const Weight& down,
                        const float* scale, uint16_t* const* out) const = 0;
};

}  // namespace zipmoe::backend
