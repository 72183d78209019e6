// CudaBackend (see cuda_backend.h): plain C++ on the CUDA runtime and cuBLAS; the kernels are in
// recover_kernel.cu and bf16_elementwise.cu. Every operation: lock, make the device current on this
// thread, bring operands the device cannot read in place into scratch, enqueue on the backend's
// stream, copy results the device could not write in place back, wait for the stream.
#include "backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/bf16_elementwise.h"
#include "backend/cuda/cuda_recovery.h"
#include "zipmoe/base/error.h"

namespace zipmoe::backend {
namespace {

void check(cudaError_t status, const std::string& call) {
  if (status != cudaSuccess)
    throw Error("CUDA backend: " + call + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                ")");
}

void checkBlas(cublasStatus_t status, const std::string& call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error("CUDA backend: " + call + " failed: " + cublasGetStatusName(status) + " (" +
                cublasGetStatusString(status) + ")");
}

// Release functions for io::AlignedBuffer (a destructor has nowhere to report a failed free: the
// next CUDA call reports a broken context).
void freePinned(uint8_t* p) { cudaFreeHost(p); }
void freeDevice(uint8_t* p) { cudaFree(p); }

int asInt(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) throw Error(std::string("CUDA backend: ") + what + " " + std::to_string(v) + " exceeds cuBLAS's int");
  return static_cast<int>(v);
}

// The device scratch of one operand, grown to the largest call and kept.
class Scratch {
 public:
  Scratch() = default;
  ~Scratch() { cudaFree(data_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* reserve(size_t bytes) {
    if (bytes <= bytes_) return data_;
    cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
    check(cudaMalloc(&data_, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes of scratch)");
    bytes_ = bytes;
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// What one operation uses scratch for; each its own buffer, since one call may hold several at once.
enum Slot { kX, kGateWords, kUpWords, kDownWords, kExponents, kSignMantissa, kG, kU, kH, kD, kScaled, kScale, kSlots };

}  // namespace

struct CudaBackend::State {
  std::mutex mutex;
  int device = 0;
  std::string name;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  std::array<Scratch, kSlots> scratch;

  // Whether the device reads (or writes) p in place: device memory, or host memory CUDA knows
  // (page-locked, mapped or managed).
  static bool deviceAccessible(const void* p) {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
      cudaGetLastError();  // an unknown pointer is an answer, not an error to leave for the next call
      return false;
    }
    return attributes.type != cudaMemoryTypeUnregistered;
  }

  // p where the device can read it: p itself, or a copy in the slot's scratch.
  const void* readable(const void* p, size_t bytes, Slot slot) {
    if (deviceAccessible(p)) return p;
    void* copy = scratch[slot].reserve(bytes);
    check(cudaMemcpyAsync(copy, p, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync(" + std::to_string(bytes) + " bytes to the device)");
    return copy;
  }

  // W's BF16 words on the device: its own, or recovered from its split planes into the slot.
  const uint16_t* weightWords(const Weight& w, Slot slot, const char* what) {
    if (w.rows <= 0 || w.cols <= 0)
      throw Error(std::string("CUDA backend: ") + what + ": empty weight " + std::to_string(w.rows) + " × " + std::to_string(w.cols));
    const auto numel = static_cast<size_t>(w.rows * w.cols);
    if (w.words) return static_cast<const uint16_t*>(readable(w.words, numel * 2, slot));
    if (!w.nibble.empty())
      throw Error(std::string("CUDA backend: ") + what + ": nibble-coded weights are not supported on CUDA yet; "
                  "hand the backend BF16 words or the split planes");
    if (!w.exponents || !w.signMantissa)
      throw Error(std::string("CUDA backend: ") + what + ": a weight with neither words nor both split planes");
    const auto* e = static_cast<const uint8_t*>(readable(w.exponents, numel, kExponents));
    const auto* sm = static_cast<const uint8_t*>(readable(w.signMantissa, numel, kSignMantissa));
    auto* words = static_cast<uint16_t*>(scratch[slot].reserve(numel * 2));
    cuda::recover(e, sm, words, numel, stream);
    return words;
  }

  // y[n × rows] = x[n × cols] · Wᵀ in column-major terms: yᵀ (rows × n) = W (stored cols × rows,
  // transposed) · xᵀ (cols × n). BF16 in and out, fp32 accumulation.
  void gemm(const uint16_t* x, int64_t n, const uint16_t* w, int64_t rows, int64_t cols, uint16_t* y) {
    const float one = 1.0f, zero = 0.0f;
    checkBlas(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, asInt(rows, "rows"), asInt(n, "n"), asInt(cols, "cols"),
                           &one, w, CUDA_R_16BF, asInt(cols, "cols"), x, CUDA_R_16BF, asInt(cols, "cols"), &zero, y,
                           CUDA_R_16BF, asInt(rows, "rows"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx(" + std::to_string(n) + " × " + std::to_string(cols) + " by " + std::to_string(rows) +
                  " × " + std::to_string(cols) + "ᵀ, BF16, fp32 accumulation)");
  }

  void wait(const char* what) { check(cudaStreamSynchronize(stream), std::string("cudaStreamSynchronize after ") + what); }
};

CudaBackend::CudaBackend() : state_(std::make_unique<State>()) {
  std::string reason;
  if (!cuda::available(&reason)) throw Error("CUDA backend: no usable device (" + reason + ")");
  check(cudaGetDevice(&state_->device), "cudaGetDevice");
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, state_->device), "cudaGetDeviceProperties");
  state_->name = "cuda:" + std::to_string(state_->device) + " (" + properties.name + ")";
  check(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  try {
    checkBlas(cublasCreate(&state_->blas), "cublasCreate");
    checkBlas(cublasSetStream(state_->blas, state_->stream), "cublasSetStream");
  } catch (...) {
    if (state_->blas) cublasDestroy(state_->blas);
    cudaStreamDestroy(state_->stream);
    throw;
  }
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(state_->device);
  cublasDestroy(state_->blas);
  cudaStreamDestroy(state_->stream);
}

std::string CudaBackend::name() const { return state_->name; }

io::AlignedBuffer CudaBackend::allocate(size_t bytes, Placement where) const {
  constexpr size_t kHostAlignment = 4096, kDeviceAlignment = 256;
  const size_t rounded = static_cast<size_t>(io::alignUp(bytes == 0 ? 1 : bytes, kHostAlignment));
  std::lock_guard lock(state_->mutex);
  check(cudaSetDevice(state_->device), "cudaSetDevice");
  void* p = nullptr;
  if (where == Placement::Host) {
    check(cudaMallocHost(&p, rounded), "cudaMallocHost(" + std::to_string(rounded) + " bytes)");
    if (reinterpret_cast<uintptr_t>(p) % kHostAlignment != 0) {
      cudaFreeHost(p);
      throw Error("CUDA backend: cudaMallocHost(" + std::to_string(rounded) +
                  " bytes) returned memory that is not 4 KiB-aligned, which O_DIRECT reads need");
    }
    return io::AlignedBuffer(static_cast<uint8_t*>(p), rounded, kHostAlignment, freePinned);
  }
  check(cudaMalloc(&p, rounded), "cudaMalloc(" + std::to_string(rounded) + " bytes)");
  return io::AlignedBuffer(static_cast<uint8_t*>(p), rounded, kDeviceAlignment, freeDevice);
}

void CudaBackend::recover(const uint8_t* exponents, const uint8_t* signMantissa, size_t count, uint16_t* words) const {
  if (count == 0) return;
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  check(cudaSetDevice(s.device), "cudaSetDevice");
  const auto* e = static_cast<const uint8_t*>(s.readable(exponents, count, kExponents));
  const auto* sm = static_cast<const uint8_t*>(s.readable(signMantissa, count, kSignMantissa));
  const bool inPlace = State::deviceAccessible(words);
  uint16_t* out = inPlace ? words : static_cast<uint16_t*>(s.scratch[kD].reserve(count * 2));
  cuda::recover(e, sm, out, count, s.stream);
  if (!inPlace)
    check(cudaMemcpyAsync(words, out, count * 2, cudaMemcpyDefault, s.stream), "cudaMemcpyAsync(recovered words to the host)");
  s.wait("recover");
}

void CudaBackend::project(const uint16_t* x, int64_t n, const Weight& w, uint16_t* y) const {
  if (n <= 0) return;
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  check(cudaSetDevice(s.device), "cudaSetDevice");
  const uint16_t* words = s.weightWords(w, kGateWords, "project");
  const auto* xs = static_cast<const uint16_t*>(s.readable(x, static_cast<size_t>(n * w.cols) * 2, kX));
  const size_t yBytes = static_cast<size_t>(n * w.rows) * 2;
  const bool inPlace = State::deviceAccessible(y);
  auto* out = inPlace ? y : static_cast<uint16_t*>(s.scratch[kD].reserve(yBytes));
  s.gemm(xs, n, words, w.rows, w.cols, out);
  if (!inPlace) check(cudaMemcpyAsync(y, out, yBytes, cudaMemcpyDefault, s.stream), "cudaMemcpyAsync(y to the host)");
  s.wait("project");
}

void CudaBackend::gatedMlp(const uint16_t* x, int64_t n, const Weight& gate, const Weight& up, const Weight& down,
                           const float* scale, uint16_t* const* out) const {
  requireGatedMlpShapes("CUDA backend", gate, up, down);
  const int64_t cols = gate.cols, width = gate.rows;
  if (n <= 0) return;
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  check(cudaSetDevice(s.device), "cudaSetDevice");
  const uint16_t* g = s.weightWords(gate, kGateWords, "gated MLP (gate)");
  const uint16_t* u = s.weightWords(up, kUpWords, "gated MLP (up)");
  const uint16_t* d = s.weightWords(down, kDownWords, "gated MLP (down)");
  const auto* xs = static_cast<const uint16_t*>(s.readable(x, static_cast<size_t>(n * cols) * 2, kX));
  const size_t hidden = static_cast<size_t>(n * width), outputs = static_cast<size_t>(n * cols);
  auto* gx = static_cast<uint16_t*>(s.scratch[kG].reserve(hidden * 2));
  auto* ux = static_cast<uint16_t*>(s.scratch[kU].reserve(hidden * 2));
  auto* h = static_cast<uint16_t*>(s.scratch[kH].reserve(hidden * 2));
  auto* dh = static_cast<uint16_t*>(s.scratch[kD].reserve(outputs * 2));
  s.gemm(xs, n, g, width, cols, gx);
  s.gemm(xs, n, u, width, cols, ux);
  cuda::siluTimesUp(gx, ux, h, hidden, s.stream);
  s.gemm(h, n, d, cols, width, dh);
  const uint16_t* result = dh;
  if (scale) {
    auto* scales = static_cast<float*>(s.scratch[kScale].reserve(static_cast<size_t>(n) * sizeof(float)));
    check(cudaMemcpyAsync(scales, scale, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDefault, s.stream),
          "cudaMemcpyAsync(routing weights to the device)");
    auto* scaled = static_cast<uint16_t*>(s.scratch[kScaled].reserve(outputs * 2));
    cuda::scaleRows(dh, scales, scaled, static_cast<size_t>(n), static_cast<size_t>(cols), s.stream);
    result = scaled;
  }
  // cudaMemcpyDefault: a row may be device memory or any host memory.
  for (int64_t i = 0; i < n; ++i)
    check(cudaMemcpyAsync(out[i], result + i * cols, static_cast<size_t>(cols) * 2, cudaMemcpyDefault, s.stream),
          "cudaMemcpyAsync(output row " + std::to_string(i) + ")");
  s.wait("gated MLP");
}

}  // namespace zipmoe::backend
