// BF16 split/merge kernels. The scalar loop is the reference; the AVX2 and AVX-512BW kernels process
// 32 / 64 words per step with the same formulas, and fall back to the scalar loop for the tail.
// Functions carry __attribute__((target)) so the file builds for any x86-64 and the right kernel is
// chosen at run time from CPUID.
#include "zipmoe/format/bf16_split.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

#include "zipmoe/base/error.h"
#include "zipmoe/experts/expert_provider.h"

namespace zipmoe::bf16 {
namespace {

void splitScalar(const uint16_t* w, size_t n, uint8_t* e, uint8_t* sm) {
  for (size_t i = 0; i < n; ++i) {
    e[i] = exponentOf(w[i]);
    sm[i] = signMantissaOf(w[i]);
  }
}

void mergeScalar(const uint8_t* e, const uint8_t* sm, size_t n, uint16_t* w) {
  for (size_t i = 0; i < n; ++i) w[i] = mergeWord(e[i], sm[i]);
}

__attribute__((target("avx2"))) void splitAvx2(const uint16_t* w, size_t n, uint8_t* e, uint8_t* sm) {
  const __m256i lowByte = _mm256_set1_epi16(0xFF);
  const __m256i mant = _mm256_set1_epi16(0x7F);
  const __m256i sign = _mm256_set1_epi16(0x80);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i + 16));
    const __m256i ea = _mm256_and_si256(_mm256_srli_epi16(a, 7), lowByte);
    const __m256i eb = _mm256_and_si256(_mm256_srli_epi16(b, 7), lowByte);
    const __m256i sa = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 8), sign), _mm256_and_si256(a, mant));
    const __m256i sb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 8), sign), _mm256_and_si256(b, mant));
    // packus interleaves 128-bit lanes: (a.lo, b.lo, a.hi, b.hi) -> fix with a qword permute.
    const __m256i ep = _mm256_permute4x64_epi64(_mm256_packus_epi16(ea, eb), 0xD8);
    const __m256i sp = _mm256_permute4x64_epi64(_mm256_packus_epi16(sa, sb), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(e + i), ep);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sm + i), sp);
  }
  splitScalar(w + i, n - i, e + i, sm + i);
}

__attribute__((target("avx2"))) void mergeAvx2(const uint8_t* e, const uint8_t* sm, size_t n, uint16_t* w) {
  const __m256i mant = _mm256_set1_epi16(0x7F);
  const __m256i sign = _mm256_set1_epi16(0x80);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i ev = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e + i)));
    const __m256i sv = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sm + i)));
    const __m256i r = _mm256_or_si256(
        _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(sv, sign), 8), _mm256_slli_epi16(ev, 7)),
        _mm256_and_si256(sv, mant));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + i), r);
  }
  mergeScalar(e + i, sm + i, n - i, w + i);
}

__attribute__((target("avx512f,avx512bw"))) void splitAvx512(const uint16_t* w, size_t n, uint8_t* e,
                                                             uint8_t* sm) {
  const __m512i lowByte = _mm512_set1_epi16(0xFF);
  const __m512i mant = _mm512_set1_epi16(0x7F);
  const __m512i sign = _mm512_set1_epi16(0x80);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i a = _mm512_loadu_si512(w + i);
    const __m512i ea = _mm512_and_si512(_mm512_srli_epi16(a, 7), lowByte);
    const __m512i sa = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 8), sign), _mm512_and_si512(a, mant));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(e + i), _mm512_maskz_cvtepi16_epi8(~__mmask32{0}, ea));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sm + i), _mm512_maskz_cvtepi16_epi8(~__mmask32{0}, sa));
  }
  splitScalar(w + i, n - i, e + i, sm + i);
}

__attribute__((target("avx512f,avx512bw"))) void mergeAvx512(const uint8_t* e, const uint8_t* sm, size_t n,
                                                             uint16_t* w) {
  const __m512i mant = _mm512_set1_epi16(0x7F);
  const __m512i sign = _mm512_set1_epi16(0x80);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i ev = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(e + i)));
    const __m512i sv = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sm + i)));
    const __m512i r = _mm512_or_si512(
        _mm512_or_si512(_mm512_slli_epi16(_mm512_and_si512(sv, sign), 8), _mm512_slli_epi16(ev, 7)),
        _mm512_and_si512(sv, mant));
    _mm512_storeu_si512(w + i, r);
  }
  mergeScalar(e + i, sm + i, n - i, w + i);
}

bool cpuSupports(SimdLevel level) {
  switch (level) {
    case SimdLevel::Scalar: return true;
    case SimdLevel::Avx2: return __builtin_cpu_supports("avx2");
    case SimdLevel::Avx512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }
  return false;
}

void requireSupported(SimdLevel level) {
  if (!cpuSupports(level))
    throw Error(std::string("bf16 split/merge: this CPU does not support the ") + simdLevelName(level) + " kernel");
}

}  // namespace

SimdLevel detectedSimdLevel() {
  static const SimdLevel level = cpuSupports(SimdLevel::Avx512) ? SimdLevel::Avx512
                                 : cpuSupports(SimdLevel::Avx2) ? SimdLevel::Avx2
                                                                : SimdLevel::Scalar;
  return level;
}

SimdLevel mergeSimdLevel() {
  static const SimdLevel level = [] {
    const std::vector<SimdLevel> levels = supportedSimdLevels();
    if (levels.size() <= 2) return levels.back();  // scalar, or scalar and one SIMD level
    // Recovery's working size: a few MiB, as one expert tensor's shard. The order of the timed runs
    // alternates so that neither level always runs on a warmer cache.
    constexpr size_t n = size_t{1} << 20;
    std::vector<uint8_t> e(n), sm(n);
    for (size_t i = 0; i < n; ++i) {
      e[i] = static_cast<uint8_t>(0x70 + (i * 7) % 24);
      sm[i] = static_cast<uint8_t>(i * 131);
    }
    std::vector<uint16_t> w(n);
    SimdLevel best = levels.back();
    double bestSeconds = 1e300;
    std::vector<double> seconds(levels.size(), 1e300);
    for (int round = 0; round < 6; ++round)
      for (size_t k = 1; k < levels.size(); ++k) {
        const size_t i = round % 2 == 0 ? k : levels.size() - k;
        const auto t0 = std::chrono::steady_clock::now();
        merge(levels[i], e.data(), sm.data(), n, w.data());
        seconds[i] = std::min(seconds[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    for (size_t i = 1; i < levels.size(); ++i)
      if (seconds[i] < bestSeconds) {
        bestSeconds = seconds[i];
        best = levels[i];
      }
    return best;
  }();
  return level;
}

std::vector<SimdLevel> supportedSimdLevels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel l : {SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512})
    if (cpuSupports(l)) levels.push_back(l);
  return levels;
}

const char* simdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::Scalar: return "scalar";
    case SimdLevel::Avx2: return "avx2";
    case SimdLevel::Avx512: return "avx512";
  }
  return "?";
}

void split(SimdLevel level, const uint16_t* words, size_t n, uint8_t* exponents, uint8_t* signMantissa) {
  requireSupported(level);
  switch (level) {
    case SimdLevel::Avx512: return splitAvx512(words, n, exponents, signMantissa);
    case SimdLevel::Avx2: return splitAvx2(words, n, exponents, signMantissa);
    case SimdLevel::Scalar: return splitScalar(words, n, exponents, signMantissa);
  }
}

void merge(SimdLevel level, const uint8_t* exponents, const uint8_t* signMantissa, size_t n, uint16_t* words) {
  requireSupported(level);
  switch (level) {
    case SimdLevel::Avx512: return mergeAvx512(exponents, signMantissa, n, words);
    case SimdLevel::Avx2: return mergeAvx2(exponents, signMantissa, n, words);
    case SimdLevel::Scalar: return mergeScalar(exponents, signMantissa, n, words);
  }
}

void split(const uint16_t* words, size_t n, uint8_t* exponents, uint8_t* signMantissa) {
  split(detectedSimdLevel(), words, n, exponents, signMantissa);
}

void merge(const uint8_t* exponents, const uint8_t* signMantissa, size_t n, uint16_t* words) {
  merge(mergeSimdLevel(), exponents, signMantissa, n, words);
}

}  // namespace zipmoe::bf16

namespace zipmoe {

const uint16_t* bf16Words(const ReadyExpert& ready, size_t kind, size_t numel, std::vector<uint16_t>& scratch) {
  if (kind < ready.tensors.size() && ready.tensors[kind]) return ready.tensors[kind];
  if (kind >= ready.exponents.size() || kind >= ready.signMantissa.size() || !ready.exponents[kind] ||
      !ready.signMantissa[kind])
    throw Error("expert " + std::to_string(ready.expert) + " tensor " + std::to_string(kind) +
                ": the provider handed neither BF16 words nor split planes");
  if (scratch.size() < numel) scratch.resize(numel);
  bf16::merge(ready.exponents[kind], ready.signMantissa[kind], numel, scratch.data());
  return scratch.data();
}

}  // namespace zipmoe
