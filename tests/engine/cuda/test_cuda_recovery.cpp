// test_cuda_recovery: the CUDA recovery kernel against zipmoe::bf16::merge, bit for bit.
//
// Plain C++ (no Qt), so that it builds on a GPU machine without Qt. Exits 77 (CTest's skip code here)
// when there is no CUDA device, 1 on any mismatch or error, 0 otherwise. Checks:
//  - every one of the 65,536 (E, SM) pairs;
//  - sizes 0, 1, 15, 16, 17, 4095 and 2^20 + 3 at every byte misalignment 0..15 of each input plane,
//    every 2-byte misalignment of the output, and equal element offsets into all three (the vector path
//    with a head), with guard bytes around the output that must stay untouched;
//  - a caller's stream, and the argument checks.
// Then measures (never asserts) the kernel's bandwidth on a 256 MiB BF16 tensor.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_recovery.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"

namespace {

constexpr int kSkipped = 77;
constexpr size_t kGuardBytes = 64;        // untouched bytes before and after each output
constexpr size_t kMaxOffset = 16;         // offsets 0..15 bytes
constexpr unsigned char kSentinel = 0xA5;

int failures = 0;

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw zipmoe::Error(std::string(call) + " failed: " + cudaGetErrorString(status));
}

void fail(const std::string& what) {
  ++failures;
  if (failures <= 20) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) { check(cudaMalloc(&data_, bytes), "cudaMalloc"); }
  ~DeviceBytes() { cudaFree(data_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(data_); }

 private:
  void* data_ = nullptr;
};

std::vector<uint8_t> randomBytes(size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t r = rng();
    std::memcpy(bytes.data() + i, &r, std::min<size_t>(8, n - i));
  }
  return bytes;
}

// Device buffers large enough for the biggest case at any offset, reused by every case.
struct Workspace {
  explicit Workspace(size_t maxCount)
      : e(maxCount + kMaxOffset),
        sm(maxCount + kMaxOffset),
        out(2 * kGuardBytes + kMaxOffset + maxCount * sizeof(uint16_t)),
        outBytes(2 * kGuardBytes + kMaxOffset + maxCount * sizeof(uint16_t)) {}
  DeviceBytes e;
  DeviceBytes sm;
  DeviceBytes out;
  size_t outBytes;
};

// One case: the planes at byte offsets eOffset / smOffset, the output at outOffset bytes after a guard.
void checkCase(Workspace& ws, const std::vector<uint8_t>& e, const std::vector<uint8_t>& sm, size_t eOffset,
               size_t smOffset, size_t outOffset, void* stream) {
  const size_t count = e.size();
  const std::string name = "count " + std::to_string(count) + ", offsets e " + std::to_string(eOffset) + " sm " +
                           std::to_string(smOffset) + " out " + std::to_string(outOffset);
  std::vector<uint16_t> expected(count);
  zipmoe::bf16::merge(e.data(), sm.data(), count, expected.data());

  if (count > 0) {
    check(cudaMemcpy(ws.e.get() + eOffset, e.data(), count, cudaMemcpyHostToDevice), "cudaMemcpy e");
    check(cudaMemcpy(ws.sm.get() + smOffset, sm.data(), count, cudaMemcpyHostToDevice), "cudaMemcpy sm");
  }
  check(cudaMemset(ws.out.get(), kSentinel, ws.outBytes), "cudaMemset out");
  unsigned char* out = ws.out.get() + kGuardBytes + outOffset;
  zipmoe::cuda::recover(ws.e.get() + eOffset, ws.sm.get() + smOffset, reinterpret_cast<uint16_t*>(out), count,
                        stream);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after recover");

  std::vector<unsigned char> result(ws.outBytes);
  check(cudaMemcpy(result.data(), ws.out.get(), ws.outBytes, cudaMemcpyDeviceToHost), "cudaMemcpy out");
  const size_t begin = kGuardBytes + outOffset;
  const size_t end = begin + count * sizeof(uint16_t);
  for (size_t i = 0; i < count; ++i) {
    uint16_t got = 0;
    std::memcpy(&got, result.data() + begin + 2 * i, sizeof got);
    if (got != expected[i]) {
      char detail[160];
      std::snprintf(detail, sizeof detail, ": word %zu is 0x%04x, expected 0x%04x (E 0x%02x, SM 0x%02x)", i, got,
                    expected[i], e[i], sm[i]);
      fail(name + detail);
      return;
    }
  }
  for (size_t i = 0; i < result.size(); ++i) {
    if ((i < begin || i >= end) && result[i] != kSentinel) {
      fail(name + ": wrote outside the output at byte " + std::to_string(i) + " (output is bytes " +
           std::to_string(begin) + ".." + std::to_string(end) + ")");
      return;
    }
  }
}

void checkAllWords() {
  std::vector<uint8_t> e(65536);
  std::vector<uint8_t> sm(65536);
  for (size_t i = 0; i < 65536; ++i) {
    e[i] = static_cast<uint8_t>(i >> 8);
    sm[i] = static_cast<uint8_t>(i & 0xFF);
  }
  std::vector<uint16_t> expected(65536);
  zipmoe::bf16::merge(e.data(), sm.data(), expected.size(), expected.data());
  std::vector<uint16_t> got(65536);
  zipmoe::cuda::recoverHost(e.data(), sm.data(), got.data(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) {
      fail("all 65536 words: word " + std::to_string(i) + " differs");
      return;
    }
  }
  // The split of every word must come back as that word.
  std::vector<uint16_t> words(65536);
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint16_t>(i);
  zipmoe::bf16::split(words.data(), words.size(), e.data(), sm.data());
  zipmoe::cuda::recoverHost(e.data(), sm.data(), got.data(), got.size());
  if (got != words) fail("all 65536 words: split then CUDA recovery is not the identity");
  std::printf("all 65536 words: checked\n");
}

void checkSizesAndOffsets() {
  const std::vector<size_t> sizes = {0, 1, 15, 16, 17, 4095, (size_t{1} << 20) + 3};
  Workspace ws(sizes.back());
  std::mt19937_64 rng(20240607);
  int cases = 0;
  for (size_t count : sizes) {
    const std::vector<uint8_t> e = randomBytes(count, rng);
    const std::vector<uint8_t> sm = randomBytes(count, rng);
    for (size_t offset = 0; offset < kMaxOffset; ++offset) {
      checkCase(ws, e, sm, offset, 0, 0, nullptr);
      checkCase(ws, e, sm, 0, offset, 0, nullptr);
      if (offset % 2 == 0) checkCase(ws, e, sm, 0, 0, offset, nullptr);
      // The same element offset into all three buffers: the vector path with a head.
      checkCase(ws, e, sm, offset, offset, 2 * offset % kMaxOffset, nullptr);
      // Unrelated misalignments of all three.
      checkCase(ws, e, sm, offset, (offset * 7 + 3) % kMaxOffset, (offset * 6 + 2) % kMaxOffset, nullptr);
      cases += offset % 2 == 0 ? 5 : 4;
    }
  }
  std::printf("sizes x offsets: %d cases checked\n", cases);

  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  const std::vector<uint8_t> e = randomBytes(100003, rng);
  const std::vector<uint8_t> sm = randomBytes(100003, rng);
  checkCase(ws, e, sm, 0, 0, 0, stream);
  checkCase(ws, e, sm, 3, 3, 6, stream);
  checkCase(ws, e, sm, 5, 2, 4, stream);
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  std::printf("caller's stream: checked\n");
}

void checkArgumentErrors() {
  DeviceBytes buffer(64);
  const auto* planes = buffer.get();
  auto* words = reinterpret_cast<uint16_t*>(buffer.get() + 32);
  const auto throws = [](auto&& call) {
    try {
      call();
    } catch (const zipmoe::Error&) {
      return true;
    }
    return false;
  };
  if (!throws([&] { zipmoe::cuda::recover(nullptr, planes, words, 1, nullptr); }))
    fail("a null exponent pointer was accepted");
  if (!throws([&] { zipmoe::cuda::recover(planes, planes, reinterpret_cast<uint16_t*>(buffer.get() + 33), 1, nullptr); }))
    fail("an odd output pointer was accepted");
  if (throws([&] { zipmoe::cuda::recover(nullptr, nullptr, nullptr, 0, nullptr); }))
    fail("zero words with null pointers threw");
  std::printf("argument checks: checked\n");
}

void measureBandwidth() {
  const size_t count = (size_t{256} << 20) / sizeof(uint16_t);  // a 256 MiB BF16 tensor
  std::mt19937_64 rng(7);
  const std::vector<uint8_t> e = randomBytes(count, rng);
  const std::vector<uint8_t> sm = randomBytes(count, rng);
  DeviceBytes de(count);
  DeviceBytes dsm(count);
  DeviceBytes dout(count * sizeof(uint16_t));
  check(cudaMemcpy(de.get(), e.data(), count, cudaMemcpyHostToDevice), "cudaMemcpy e");
  check(cudaMemcpy(dsm.get(), sm.data(), count, cudaMemcpyHostToDevice), "cudaMemcpy sm");
  auto* out = reinterpret_cast<uint16_t*>(dout.get());

  zipmoe::cuda::recover(de.get(), dsm.get(), out, count, nullptr);  // warm-up
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  constexpr int kRepeats = 20;
  check(cudaEventRecord(start, nullptr), "cudaEventRecord");
  for (int r = 0; r < kRepeats; ++r) zipmoe::cuda::recover(de.get(), dsm.get(), out, count, nullptr);
  check(cudaEventRecord(stop, nullptr), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);

  std::vector<uint16_t> got(count);
  check(cudaMemcpy(got.data(), out, count * sizeof(uint16_t), cudaMemcpyDeviceToHost), "cudaMemcpy out");
  std::vector<uint16_t> expected(count);
  zipmoe::bf16::merge(e.data(), sm.data(), count, expected.data());
  if (got != expected) fail("256 MiB tensor: recovered words differ from bf16::merge");

  const double seconds = double(ms) / 1e3 / kRepeats;
  const double bytesMoved = 4.0 * double(count);  // 2 bytes read + 2 bytes written per word
  cudaDeviceProp prop{};
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::printf("bandwidth on %s: 256 MiB BF16 tensor in %.3f ms = %.1f GB/s (reads + writes), %.1f G words/s\n",
              prop.name, seconds * 1e3, bytesMoved / seconds / 1e9, double(count) / seconds / 1e9);
}

}  // namespace

int main() {
  std::string reason;
  if (!zipmoe::cuda::available(&reason)) {
    std::printf("no CUDA device: skipped\n(%s)\n", reason.c_str());
    return kSkipped;
  }
  try {
    checkAllWords();
    checkSizesAndOffsets();
    checkArgumentErrors();
    measureBandwidth();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "FAIL: %s\n", error.what());
    return 1;
  }
  if (failures > 0) {
    std::fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  std::printf("all CUDA recovery checks passed\n");
  return 0;
}
