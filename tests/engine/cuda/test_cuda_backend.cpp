// test_cuda_backend: the CUDA compute backend against the CPU backend (backend/compute_backend.h).
//
// Plain C++ (no Qt), so that it builds on a GPU machine without Qt. Exits 77 (CTest's skip code here)
// when there is no CUDA device, 1 on any mismatch or error, 0 otherwise. Checks:
//  - allocate: Host buffers 4 KiB-aligned (O_DIRECT) and written and read by the host; Device buffers
//    256-byte aligned; both freed through the buffer;
//  - recover: bit-exact with the CPU backend (bf16::merge), on the backend's pinned buffers (in place)
//    and on ordinary host memory (copied through scratch);
//  - project from BF16 words and from split planes, and the gated MLP with and without routing
//    weights: within a BF16 tolerance of the CPU backend. cuBLAS sums in another order than the CPU's
//    GEMV and at::linear (blocked, split-k), so the fp32 sums differ in their last bits and a value
//    can round to the neighbouring BF16 step: for project |cuda − cpu| ≤ 2⁻⁷·|cpu| + 2⁻⁸·mean|cpu|
//    (one BF16 step of the value, plus one of the typical magnitude for sums that cancel); the gated
//    MLP compounds three products and silu (the device's expf within an ulp of the host's), so
//    ≤ 2⁻⁶·|cpu| + 2⁻⁶·mean|cpu|;
//  - split weights give the same CUDA products as their words, bit for bit (recovery is lossless);
//  - nibble-coded weights are refused with an error that says so.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_registry.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_recovery.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"

using namespace zipmoe;
using backend::Weight;

namespace {

constexpr int kSkipped = 77;
int failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  ++failures;
}

uint16_t toBf16(float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest even (no NaN here)
  return static_cast<uint16_t>(bits >> 16);
}

float fromBf16(uint16_t w) {
  const uint32_t bits = uint32_t{w} << 16;
  float v = 0;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

std::vector<uint16_t> gaussianBf16(size_t n, float sigma, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<uint16_t> words(n);
  for (uint16_t& w : words) w = toBf16(normal(rng));
  return words;
}

// A weight's words and its split planes.
struct Matrix {
  std::vector<uint16_t> words;
  std::vector<uint8_t> exponents, signMantissa;
  int64_t rows = 0, cols = 0;
  Weight asWords() const { return Weight{words.data(), nullptr, nullptr, {}, rows, cols}; }
  Weight asSplit() const { return Weight{nullptr, exponents.data(), signMantissa.data(), {}, rows, cols}; }
};

Matrix randomMatrix(int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  const auto n = static_cast<size_t>(rows * cols);
  m.words = gaussianBf16(n, 0.05f, rng);
  m.exponents.resize(n);
  m.signMantissa.resize(n);
  bf16::split(m.words.data(), n, m.exponents.data(), m.signMantissa.data());
  return m;
}

void compareWithin(const std::vector<uint16_t>& cuda, const std::vector<uint16_t>& cpu, double relative,
                   double typical, const std::string& what) {
  double meanAbs = 0;
  for (const uint16_t w : cpu) meanAbs += std::fabs(fromBf16(w));
  meanAbs /= static_cast<double>(cpu.size());
  size_t worst = 0;
  double worstExcess = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double a = fromBf16(cuda[i]), b = fromBf16(cpu[i]);
    const double excess = std::fabs(a - b) - (relative * std::fabs(b) + typical * meanAbs);
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
  }
  if (worstExcess > 0)
    fail(what + ": value " + std::to_string(worst) + " is " + std::to_string(fromBf16(cuda[worst])) + " on CUDA, " +
         std::to_string(fromBf16(cpu[worst])) + " on the CPU (beyond the tolerance by " + std::to_string(worstExcess) + ")");
}

void checkAllocate(const backend::ComputeBackend& cuda) {
  io::AlignedBuffer host = cuda.allocate(5000, backend::Placement::Host);
  if (host.size() < 5000 || reinterpret_cast<uintptr_t>(host.data()) % 4096 != 0 || host.alignment() != 4096)
    fail("allocate(Host): " + std::to_string(host.size()) + " bytes, not 4 KiB-aligned or too small");
  std::memset(host.data(), 0x5A, host.size());
  if (host.data()[host.size() - 1] != 0x5A) fail("allocate(Host): the host cannot write and read the buffer");
  io::AlignedBuffer device = cuda.allocate(1 << 20, backend::Placement::Device);
  if (device.size() < (1 << 20) || reinterpret_cast<uintptr_t>(device.data()) % 256 != 0)
    fail("allocate(Device): too small or not 256-byte aligned");
}

void checkRecover(const backend::ComputeBackend& cuda, const backend::ComputeBackend& cpu, std::mt19937& rng) {
  const size_t count = (size_t{1} << 20) + 7;
  std::uniform_int_distribution<int> byte(0, 255);
  io::AlignedBuffer e = cuda.allocate(count, backend::Placement::Host);
  io::AlignedBuffer sm = cuda.allocate(count, backend::Placement::Host);
  io::AlignedBuffer words = cuda.allocate(count * 2, backend::Placement::Host);
  for (size_t i = 0; i < count; ++i) {
    e.data()[i] = static_cast<uint8_t>(byte(rng));
    sm.data()[i] = static_cast<uint8_t>(byte(rng));
  }
  std::vector<uint16_t> expected(count);
  cpu.recover(e.data(), sm.data(), count, expected.data());
  auto* pinnedWords = reinterpret_cast<uint16_t*>(words.data());
  cuda.recover(e.data(), sm.data(), count, pinnedWords);
  if (std::memcmp(pinnedWords, expected.data(), count * 2) != 0) fail("recover on pinned buffers differs from the CPU");
  const std::vector<uint8_t> eCopy(e.data(), e.data() + count), smCopy(sm.data(), sm.data() + count);
  std::vector<uint16_t> got(count);
  cuda.recover(eCopy.data(), smCopy.data(), count, got.data());
  if (got != expected) fail("recover on ordinary host memory differs from the CPU");
}

void checkProject(const backend::ComputeBackend& cuda, const backend::ComputeBackend& cpu, std::mt19937& rng) {
  const Matrix w = randomMatrix(301, 517, rng);
  for (const int64_t n : {1, 3, 8, 33}) {
    const std::vector<uint16_t> x = gaussianBf16(static_cast<size_t>(n * w.cols), 1.0f, rng);
    const auto outputs = static_cast<size_t>(n * w.rows);
    std::vector<uint16_t> onCpu(outputs), onCuda(outputs), onCudaSplit(outputs);
    cpu.project(x.data(), n, w.asWords(), onCpu.data());
    cuda.project(x.data(), n, w.asWords(), onCuda.data());
    cuda.project(x.data(), n, w.asSplit(), onCudaSplit.data());
    const std::string what = "project, n = " + std::to_string(n);
    compareWithin(onCuda, onCpu, 1.0 / 128, 1.0 / 256, what);
    if (onCudaSplit != onCuda) fail(what + ": split planes and words give different CUDA products");
  }
}

void checkGatedMlp(const backend::ComputeBackend& cuda, const backend::ComputeBackend& cpu, std::mt19937& rng) {
  const int64_t cols = 96, width = 200;
  const Matrix gate = randomMatrix(width, cols, rng), up = randomMatrix(width, cols, rng),
               down = randomMatrix(cols, width, rng);
  for (const int64_t n : {1, 5, 8, 20}) {
    const std::vector<uint16_t> x = gaussianBf16(static_cast<size_t>(n * cols), 1.0f, rng);
    std::vector<float> scale(static_cast<size_t>(n));
    for (float& s : scale) s = std::uniform_real_distribution<float>(0.05f, 1.0f)(rng);
    for (const bool scaled : {false, true}) {
      const auto outputs = static_cast<size_t>(n * cols);
      std::vector<uint16_t> onCpu(outputs), onCuda(outputs), onCudaSplit(outputs);
      const auto rowsOf = [&](std::vector<uint16_t>& out) {
        std::vector<uint16_t*> rows(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = out.data() + i * cols;
        return rows;
      };
      const float* s = scaled ? scale.data() : nullptr;
      cpu.gatedMlp(x.data(), n, gate.asWords(), up.asWords(), down.asWords(), s, rowsOf(onCpu).data());
      cuda.gatedMlp(x.data(), n, gate.asWords(), up.asWords(), down.asWords(), s, rowsOf(onCuda).data());
      cuda.gatedMlp(x.data(), n, gate.asSplit(), up.asSplit(), down.asSplit(), s, rowsOf(onCudaSplit).data());
      const std::string what = "gated MLP, n = " + std::to_string(n) + (scaled ? ", scaled" : "");
      compareWithin(onCuda, onCpu, 1.0 / 64, 1.0 / 64, what);
      if (onCudaSplit != onCuda) fail(what + ": split planes and words give different CUDA outputs");
    }
  }
}

void checkNibbleRefused(const backend::ComputeBackend& cuda) {
  const NibbleShard shard{};
  const std::vector<uint8_t> sm(16);
  const std::vector<uint16_t> x(4);
  std::vector<uint16_t> y(4);
  Weight w;
  w.nibble = std::span<const NibbleShard>(&shard, 1);
  w.signMantissa = sm.data();
  w.rows = 4;
  w.cols = 4;
  try {
    cuda.project(x.data(), 1, w, y.data());
    fail("a nibble-coded weight was not refused");
  } catch (const Error& error) {
    if (std::string(error.what()).find("nibble") == std::string::npos)
      fail(std::string("the nibble refusal does not say why: ") + error.what());
  }
}

}  // namespace

int main() {
  std::string reason;
  if (!cuda::available(&reason)) {
    std::printf("no CUDA device: skipped\n(%s)\n", reason.c_str());
    return kSkipped;
  }
  try {
    const backend::ComputeBackend& cpu = backend::backendNamed("cpu");
    const backend::ComputeBackend& cuda = backend::backendNamed("cuda");
    std::printf("comparing %s with %s\n", cuda.name().c_str(), cpu.name().c_str());
    std::mt19937 rng(44);
    checkAllocate(cuda);
    checkRecover(cuda, cpu, rng);
    checkProject(cuda, cpu, rng);
    checkGatedMlp(cuda, cpu, rng);
    checkNibbleRefused(cuda);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "FAIL: %s\n", error.what());
    return 1;
  }
  if (failures > 0) {
    std::fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  std::printf("all CUDA backend checks passed\n");
  return 0;
}
