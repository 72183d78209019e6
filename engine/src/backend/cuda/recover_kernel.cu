// The CUDA recovery kernels and their launch. Two kernels:
//  - recoverVectorised: a grid-stride loop over 16-word groups. Each step is one 16-byte load of each
//    plane, the bit assembly of 16 words in registers (two words per 32-bit lane operation), and two
//    16-byte stores. The < 16 words before the first aligned group (the head) and after the last (the
//    tail) are done one word per thread by the first threads of the grid.
//  - recoverScalar: a grid-stride loop, one word per thread, for pointers whose alignments cannot be
//    reconciled by a common element offset.
// The grid is sized from the device (multiprocessors × resident blocks per multiprocessor) and never
// larger than the work, so that the grid-stride loop, not the launch, carries large tensors.
#include "backend/cuda/cuda_recovery.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"

namespace zipmoe::cuda {
namespace {

constexpr int kThreadsPerBlock = 256;
constexpr size_t kWordsPerGroup = 16;  // one uint4 of each plane; two uint4 of output
constexpr uintptr_t kVectorAlignment = 16;

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA recovery: ") + call + " failed: " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ")");
}

// Two words from bytes (selector 0x4140: bytes 0 and 1; 0x4342: bytes 2 and 3) of four exponents and
// four sign-mantissas. __byte_perm spreads the two chosen bytes into the low bytes of two 16-bit lanes
// (zero above), and then the merge formula works on both lanes at once:
//   w = ((SM >> 7) << 15) | (E << 7) | (SM & 0x7F)  ==  ((SM & 0x80) << 8) | (E << 7) | (SM & 0x7F).
__device__ __forceinline__ uint32_t mergeTwoWords(uint32_t exponents, uint32_t signMantissas, uint32_t selector) {
  const uint32_t e = __byte_perm(exponents, 0u, selector);
  const uint32_t sm = __byte_perm(signMantissas, 0u, selector);
  return ((sm & 0x00800080u) << 8) | (e << 7) | (sm & 0x007F007Fu);
}

__device__ __forceinline__ void mergeFourWords(uint32_t exponents, uint32_t signMantissas, uint32_t& low,
                                               uint32_t& high) {
  low = mergeTwoWords(exponents, signMantissas, 0x4140u);
  high = mergeTwoWords(exponents, signMantissas, 0x4342u);
}

// REQUIRES: e + head, sm + head and out + head are 16-byte aligned; head + 16 * groups + tail == count;
//           head < 16, tail < 16.
__global__ void __launch_bounds__(kThreadsPerBlock)
    recoverVectorised(const uint8_t* __restrict__ e, const uint8_t* __restrict__ sm, uint16_t* __restrict__ out,
                      size_t head, size_t groups, size_t tail) {
  const size_t thread = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const size_t stride = size_t{gridDim.x} * blockDim.x;

  if (thread < head + tail) {
    const size_t i = thread < head ? thread : head + groups * kWordsPerGroup + (thread - head);
    out[i] = bf16::mergeWord(e[i], sm[i]);
  }

  const uint4* e16 = reinterpret_cast<const uint4*>(e + head);
  const uint4* sm16 = reinterpret_cast<const uint4*>(sm + head);
  uint4* out16 = reinterpret_cast<uint4*>(out + head);
  for (size_t g = thread; g < groups; g += stride) {
    // The planes are read once: stream them past the caches (evict-first) and keep L2 for the words.
    const uint4 ev = __ldcs(e16 + g);
    const uint4 sv = __ldcs(sm16 + g);
    uint4 lo;
    uint4 hi;
    mergeFourWords(ev.x, sv.x, lo.x, lo.y);
    mergeFourWords(ev.y, sv.y, lo.z, lo.w);
    mergeFourWords(ev.z, sv.z, hi.x, hi.y);
    mergeFourWords(ev.w, sv.w, hi.z, hi.w);
    out16[2 * g] = lo;
    out16[2 * g + 1] = hi;
  }
}

__global__ void __launch_bounds__(kThreadsPerBlock)
    recoverScalar(const uint8_t* __restrict__ e, const uint8_t* __restrict__ sm, uint16_t* __restrict__ out,
                  size_t count) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = bf16::mergeWord(e[i], sm[i]);
}

// Enough blocks to fill every multiprocessor of the current device, and no more than `work` needs.
unsigned blocksFor(size_t work) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  int multiprocessors = 0;
  check(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)");
  int threadsPerMultiprocessor = 0;
  check(cudaDeviceGetAttribute(&threadsPerMultiprocessor, cudaDevAttrMaxThreadsPerMultiProcessor, device),
        "cudaDeviceGetAttribute(cudaDevAttrMaxThreadsPerMultiProcessor)");
  const size_t resident = size_t(multiprocessors) * size_t(std::max(1, threadsPerMultiprocessor / kThreadsPerBlock));
  const size_t needed = (work + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return unsigned(std::max<size_t>(1, std::min(resident, needed)));
}

uintptr_t misalignment(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorAlignment; }

// Frees a cudaMalloc'ed buffer when it leaves scope; a failed free has nowhere to go from a destructor
// and is left to the next CUDA call to report.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) {
    check(cudaMalloc(&data_, bytes), ("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str());
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }

 private:
  void* data_ = nullptr;
};

}  // namespace

bool available(std::string* reason) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess) {
    if (reason) *reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
    cudaGetLastError();  // the query's failure is the answer; do not leave it for the next call to report
    return false;
  }
  if (devices == 0) {
    if (reason) *reason = "cudaGetDeviceCount found no device";
    return false;
  }
  return true;
}

void recover(const uint8_t* exponentsDevice, const uint8_t* signMantissaDevice, uint16_t* outDevice, size_t count,
             void* stream) {
  if (count == 0) return;
  if (!exponentsDevice || !signMantissaDevice || !outDevice)
    throw Error("CUDA recovery: null " +
                std::string(!exponentsDevice ? "exponent" : !signMantissaDevice ? "sign-mantissa" : "output") +
                " pointer for " + std::to_string(count) + " words");
  if (reinterpret_cast<uintptr_t>(outDevice) % alignof(uint16_t) != 0)
    throw Error("CUDA recovery: output pointer is not 2-byte aligned");

  const auto cudaStream = static_cast<cudaStream_t>(stream);
  // The element offset that aligns the exponent plane must align the other two as well.
  const size_t head = std::min<size_t>(count, (kVectorAlignment - misalignment(exponentsDevice)) % kVectorAlignment);
  const bool vectorisable = misalignment(signMantissaDevice) == misalignment(exponentsDevice) &&
                            misalignment(outDevice + head) == 0;
  if (vectorisable) {
    const size_t groups = (count - head) / kWordsPerGroup;
    const size_t tail = count - head - groups * kWordsPerGroup;
    recoverVectorised<<<blocksFor(std::max(groups, head + tail)), kThreadsPerBlock, 0, cudaStream>>>(
        exponentsDevice, signMantissaDevice, outDevice, head, groups, tail);
  } else {
    recoverScalar<<<blocksFor(count), kThreadsPerBlock, 0, cudaStream>>>(exponentsDevice, signMantissaDevice,
                                                                         outDevice, count);
  }
  check(cudaGetLastError(), vectorisable ? "launch of recoverVectorised" : "launch of recoverScalar");
}

void recoverHost(const uint8_t* exponents, const uint8_t* signMantissa, uint16_t* out, size_t count) {
  if (count == 0) return;
  if (!exponents || !signMantissa || !out)
    throw Error("CUDA recovery: null host pointer for " + std::to_string(count) + " words");
  const DeviceBuffer e(count);
  const DeviceBuffer sm(count);
  const DeviceBuffer words(count * sizeof(uint16_t));
  check(cudaMemcpy(e.get(), exponents, count, cudaMemcpyHostToDevice), "cudaMemcpy(exponents, host to device)");
  check(cudaMemcpy(sm.get(), signMantissa, count, cudaMemcpyHostToDevice),
        "cudaMemcpy(sign-mantissas, host to device)");
  recover(static_cast<const uint8_t*>(e.get()), static_cast<const uint8_t*>(sm.get()),
          static_cast<uint16_t*>(words.get()), count, nullptr);
  // cudaMemcpy waits for the kernel on the legacy default stream and reports its errors as well.
  check(cudaMemcpy(out, words.get(), count * sizeof(uint16_t), cudaMemcpyDeviceToHost),
        "cudaMemcpy(words, device to host)");
}

}  // namespace zipmoe::cuda
