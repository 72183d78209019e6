// BF16 GEMV kernels (see bf16_gemv.h). Each SIMD kernel carries __attribute__((target)) so the file
// builds for any x86-64; the level is chosen at run time from CPUID. Rows are taken four at a time:
// four independent accumulators hide the multiply-add latency, and the four weight rows (a few KiB
// to a few hundred KiB) stay in L1/L2 while every row of x in the batch is multiplied with them.
#include "kernels/bf16_gemv.h"

#include <immintrin.h>

#include "zipmoe/error.h"

namespace zipmoe::kernels {
namespace {

void gemvScalar(const uint16_t* w, size_t cols, size_t r0, size_t r1, const uint16_t* x, size_t batch, float* y,
                size_t ldy) {
  for (size_t r = r0; r < r1; ++r) {
    const uint16_t* row = w + r * cols;
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      float acc = 0;
      for (size_t c = 0; c < cols; ++c) acc += bf16ToFloat(row[c]) * bf16ToFloat(xb[c]);
      y[b * ldy + r] = acc;
    }
  }
}

// --- AVX2 + FMA: 8 lanes, BF16 widened by a 16-bit shift ------------------------------------------

__attribute__((target("avx2,fma"))) inline __m256 widen8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx2,fma"))) inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) void gemvAvx2(const uint16_t* w, size_t cols, size_t r0, size_t r1,
                                                 const uint16_t* x, size_t batch, float* y, size_t ldy) {
  const size_t full = cols / 8 * 8;
  size_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint16_t* w0 = w + r * cols;
    const uint16_t* w1 = w0 + cols;
    const uint16_t* w2 = w1 + cols;
    const uint16_t* w3 = w2 + cols;
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
      for (size_t c = 0; c < full; c += 8) {
        const __m256 xv = widen8(xb + c);
        a0 = _mm256_fmadd_ps(widen8(w0 + c), xv, a0);
        a1 = _mm256_fmadd_ps(widen8(w1 + c), xv, a1);
        a2 = _mm256_fmadd_ps(widen8(w2 + c), xv, a2);
        a3 = _mm256_fmadd_ps(widen8(w3 + c), xv, a3);
      }
      float s[4] = {sum8(a0), sum8(a1), sum8(a2), sum8(a3)};
      const uint16_t* rows[4] = {w0, w1, w2, w3};
      for (size_t c = full; c < cols; ++c)
        for (int i = 0; i < 4; ++i) s[i] += bf16ToFloat(rows[i][c]) * bf16ToFloat(xb[c]);
      for (size_t i = 0; i < 4; ++i) y[b * ldy + r + i] = s[i];
    }
  }
  for (; r < r1; ++r) {
    const uint16_t* row = w + r * cols;
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      __m256 a = _mm256_setzero_ps();
      for (size_t c = 0; c < full; c += 8) a = _mm256_fmadd_ps(widen8(row + c), widen8(xb + c), a);
      float s = sum8(a);
      for (size_t c = full; c < cols; ++c) s += bf16ToFloat(row[c]) * bf16ToFloat(xb[c]);
      y[b * ldy + r] = s;
    }
  }
}

// --- AVX-512 BF16: vdpbf16ps, 32 products per instruction ----------------------------------------

// GCC 12's AVX-512 extract intrinsics (used by _mm512_reduce_add_ps) start from an "undefined"
// vector that -Wmaybe-uninitialized reports; the value is never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512bh load32(const uint16_t* p) {
  return __builtin_bit_cast(__m512bh, _mm512_loadu_si512(p));
}
__attribute__((target("avx512f,avx512bw,avx512bf16"))) inline __m512bh load32(const uint16_t* p, __mmask32 m) {
  return __builtin_bit_cast(__m512bh, _mm512_maskz_loadu_epi16(m, p));
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void gemvAvx512Bf16(const uint16_t* w, size_t cols, size_t r0,
                                                                        size_t r1, const uint16_t* x, size_t batch,
                                                                        float* y, size_t ldy) {
  const size_t full = cols / 32 * 32;
  // Lanes past the end read as zero (masked loads never touch memory outside the mask).
  const __mmask32 tail = static_cast<__mmask32>((uint64_t{1} << (cols - full)) - 1);
  size_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint16_t* w0 = w + r * cols;
    const uint16_t* w1 = w0 + cols;
    const uint16_t* w2 = w1 + cols;
    const uint16_t* w3 = w2 + cols;
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
      for (size_t c = 0; c < full; c += 32) {
        const __m512bh xv = load32(xb + c);
        a0 = _mm512_dpbf16_ps(a0, load32(w0 + c), xv);
        a1 = _mm512_dpbf16_ps(a1, load32(w1 + c), xv);
        a2 = _mm512_dpbf16_ps(a2, load32(w2 + c), xv);
        a3 = _mm512_dpbf16_ps(a3, load32(w3 + c), xv);
      }
      if (tail != 0) {
        const __m512bh xv = load32(xb + full, tail);
        a0 = _mm512_dpbf16_ps(a0, load32(w0 + full, tail), xv);
        a1 = _mm512_dpbf16_ps(a1, load32(w1 + full, tail), xv);
        a2 = _mm512_dpbf16_ps(a2, load32(w2 + full, tail), xv);
        a3 = _mm512_dpbf16_ps(a3, load32(w3 + full, tail), xv);
      }
      float* out = y + b * ldy + r;
      out[0] = _mm512_reduce_add_ps(a0);
      out[1] = _mm512_reduce_add_ps(a1);
      out[2] = _mm512_reduce_add_ps(a2);
      out[3] = _mm512_reduce_add_ps(a3);
    }
  }
  for (; r < r1; ++r) {
    const uint16_t* row = w + r * cols;
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      __m512 a = _mm512_setzero_ps();
      for (size_t c = 0; c < full; c += 32) a = _mm512_dpbf16_ps(a, load32(row + c), load32(xb + c));
      if (tail != 0) a = _mm512_dpbf16_ps(a, load32(row + full, tail), load32(xb + full, tail));
      y[b * ldy + r] = _mm512_reduce_add_ps(a);
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

const char* gemvLevelName(GemvLevel level) {
  switch (level) {
    case GemvLevel::Scalar: return "scalar";
    case GemvLevel::Avx2: return "avx2";
    case GemvLevel::Avx512Bf16: return "avx512-bf16";
  }
  return "?";
}

bool gemvLevelSupported(GemvLevel level) {
  // CPUID once per process: gemvBf16 checks the level on every call, on decoding's hot path.
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool avx512Bf16 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                 __builtin_cpu_supports("avx512bf16");
  switch (level) {
    case GemvLevel::Scalar: return true;
    case GemvLevel::Avx2: return avx2;
    case GemvLevel::Avx512Bf16: return avx512Bf16;
  }
  return false;
}

std::vector<GemvLevel> supportedGemvLevels() {
  std::vector<GemvLevel> out;
  for (GemvLevel l : {GemvLevel::Scalar, GemvLevel::Avx2, GemvLevel::Avx512Bf16})
    if (gemvLevelSupported(l)) out.push_back(l);
  return out;
}

GemvLevel bestGemvLevel() {
  static const GemvLevel best = supportedGemvLevels().back();
  return best;
}

void gemvBf16(GemvLevel level, const uint16_t* w, size_t cols, size_t rowBegin, size_t rowEnd, const uint16_t* x,
              size_t batch, float* y, size_t ldy) {
  if (!gemvLevelSupported(level))
    throw Error(std::string("BF16 GEMV level ") + gemvLevelName(level) + " is not supported by this CPU");
  if (rowBegin >= rowEnd || batch == 0) return;
  switch (level) {
    case GemvLevel::Scalar: return gemvScalar(w, cols, rowBegin, rowEnd, x, batch, y, ldy);
    case GemvLevel::Avx2: return gemvAvx2(w, cols, rowBegin, rowEnd, x, batch, y, ldy);
    case GemvLevel::Avx512Bf16: return gemvAvx512Bf16(w, cols, rowBegin, rowEnd, x, batch, y, ldy);
  }
}

}  // namespace zipmoe::kernels
