// BF16 GEMV kernels (see bf16_gemv.h). Each SIMD kernel carries __attribute__((target)) so the file
// builds for any x86-64; the level is chosen at run time from CPUID. Rows are taken four at a time:
// four independent accumulators hide the multiply-add latency, and the four weight rows (a few KiB
// to a few hundred KiB) stay in L1/L2 while every row of x in the batch is multiplied with them.
// Every kernel is a template over where its weight words come from (BF16 words, or the split planes
// merged in registers), so both sources run the same fp32 operations in the same order.
#include "kernels/bf16_gemv.h"

#include <immintrin.h>

#include "zipmoe/bf16_split.h"
#include "zipmoe/error.h"

namespace zipmoe::kernels {
namespace {

// Where a kernel's weights come from. Both sources hand the kernel the same BF16 words in the same
// order, so a kernel instantiated for either does the same fp32 operations in the same order: the
// split planes give results bit-identical to the merged words.
struct WordRows {  // BF16 words, row-major
  const uint16_t* w;
  size_t cols;
  uint16_t word(size_t r, size_t c) const { return w[r * cols + c]; }
};
struct SplitRows {  // the lossless split: an exponent plane and a sign-mantissa plane, row-major
  const uint8_t* e;
  const uint8_t* sm;
  size_t cols;
  uint16_t word(size_t r, size_t c) const { return bf16::mergeWord(e[r * cols + c], sm[r * cols + c]); }
};

template <class Rows>
void gemvScalar(const Rows& w, size_t r0, size_t r1, const uint16_t* x, size_t batch, float* y, size_t ldy) {
  const size_t cols = w.cols;
  for (size_t r = r0; r < r1; ++r) {
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      float acc = 0;
      for (size_t c = 0; c < cols; ++c) acc += bf16ToFloat(w.word(r, c)) * bf16ToFloat(xb[c]);
      y[b * ldy + r] = acc;
    }
  }
}

// --- AVX2 + FMA: 8 lanes, BF16 widened by a 16-bit shift ------------------------------------------

__attribute__((target("avx2,fma"))) inline __m256 widen8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
__attribute__((target("avx2,fma"))) inline __m256 widen8(const WordRows& w, size_t r, size_t c) {
  return widen8(w.w + r * w.cols + c);
}
// fp32 bits of the merged word: sign << 31 | exponent << 23 | mantissa << 16.
__attribute__((target("avx2,fma"))) inline __m256 widen8(const SplitRows& w, size_t r, size_t c) {
  const size_t at = r * w.cols + c;
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.e + at)));
  const __m256i sm = _mm256_slli_epi32(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.sm + at))), 16);
  const __m256i mantissa = _mm256_and_si256(sm, _mm256_set1_epi32(0x007F0000));
  const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(sm, 8), _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm256_castsi256_ps(_mm256_or_si256(_mm256_or_si256(sign, mantissa), _mm256_slli_epi32(e, 23)));
}

__attribute__((target("avx2,fma"))) inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class Rows>
__attribute__((target("avx2,fma"))) void gemvAvx2(const Rows& w, size_t r0, size_t r1, const uint16_t* x,
                                                 size_t batch, float* y, size_t ldy) {
  const size_t cols = w.cols;
  const size_t full = cols / 8 * 8;
  size_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
      for (size_t c = 0; c < full; c += 8) {
        const __m256 xv = widen8(xb + c);
        a0 = _mm256_fmadd_ps(widen8(w, r, c), xv, a0);
        a1 = _mm256_fmadd_ps(widen8(w, r + 1, c), xv, a1);
        a2 = _mm256_fmadd_ps(widen8(w, r + 2, c), xv, a2);
        a3 = _mm256_fmadd_ps(widen8(w, r + 3, c), xv, a3);
      }
      float s[4] = {sum8(a0), sum8(a1), sum8(a2), sum8(a3)};
      for (size_t c = full; c < cols; ++c)
        for (size_t i = 0; i < 4; ++i) s[i] += bf16ToFloat(w.word(r + i, c)) * bf16ToFloat(xb[c]);
      for (size_t i = 0; i < 4; ++i) y[b * ldy + r + i] = s[i];
    }
  }
  for (; r < r1; ++r) {
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      __m256 a = _mm256_setzero_ps();
      for (size_t c = 0; c < full; c += 8) a = _mm256_fmadd_ps(widen8(w, r, c), widen8(xb + c), a);
      float s = sum8(a);
      for (size_t c = full; c < cols; ++c) s += bf16ToFloat(w.word(r, c)) * bf16ToFloat(xb[c]);
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

#define ZIPMOE_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

ZIPMOE_AVX512BF16 inline __m512bh load32(const uint16_t* p) {
  return __builtin_bit_cast(__m512bh, _mm512_loadu_si512(p));
}
ZIPMOE_AVX512BF16 inline __m512bh load32(const uint16_t* p, __mmask32 m) {
  return __builtin_bit_cast(__m512bh, _mm512_maskz_loadu_epi16(m, p));
}
ZIPMOE_AVX512BF16 inline __m512bh load32(const WordRows& w, size_t r, size_t c) { return load32(w.w + r * w.cols + c); }
ZIPMOE_AVX512BF16 inline __m512bh load32(const WordRows& w, size_t r, size_t c, __mmask32 m) {
  return load32(w.w + r * w.cols + c, m);
}
// The merged words: exponent << 7 in bits 7–14; bits 0–6 (mantissa) and 15 (sign) from sm | sm << 8.
ZIPMOE_AVX512BF16 inline __m512bh mergeWords(__m256i e8, __m256i sm8) {
  const __m512i e = _mm512_slli_epi16(_mm512_cvtepu8_epi16(e8), 7);
  const __m512i sm = _mm512_cvtepu8_epi16(sm8);
  const __m512i both = _mm512_or_si512(sm, _mm512_slli_epi16(sm, 8));
  // Bit select (imm 0xCA: A ? B : C) with A = the mask of sign and mantissa bits.
  return __builtin_bit_cast(__m512bh, _mm512_ternarylogic_epi32(_mm512_set1_epi16(static_cast<short>(0x807F)), both, e, 0xCA));
}
ZIPMOE_AVX512BF16 inline __m512bh load32(const SplitRows& w, size_t r, size_t c) {
  const size_t at = r * w.cols + c;
  return mergeWords(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.e + at)),
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.sm + at)));
}
ZIPMOE_AVX512BF16 inline __m512bh load32(const SplitRows& w, size_t r, size_t c, __mmask32 m) {
  const size_t at = r * w.cols + c;  // masked lanes read as zero bytes: the word +0.0, as above
  return mergeWords(_mm256_maskz_loadu_epi8(m, w.e + at), _mm256_maskz_loadu_epi8(m, w.sm + at));
}

template <class Rows>
ZIPMOE_AVX512BF16 void gemvAvx512Bf16(const Rows& w, size_t r0, size_t r1, const uint16_t* x, size_t batch, float* y,
                                     size_t ldy) {
  const size_t cols = w.cols;
  const size_t full = cols / 32 * 32;
  // Lanes past the end read as zero (masked loads never touch memory outside the mask).
  const __mmask32 tail = static_cast<__mmask32>((uint64_t{1} << (cols - full)) - 1);
  size_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
      for (size_t c = 0; c < full; c += 32) {
        const __m512bh xv = load32(xb + c);
        a0 = _mm512_dpbf16_ps(a0, load32(w, r, c), xv);
        a1 = _mm512_dpbf16_ps(a1, load32(w, r + 1, c), xv);
        a2 = _mm512_dpbf16_ps(a2, load32(w, r + 2, c), xv);
        a3 = _mm512_dpbf16_ps(a3, load32(w, r + 3, c), xv);
      }
      if (tail != 0) {
        const __m512bh xv = load32(xb + full, tail);
        a0 = _mm512_dpbf16_ps(a0, load32(w, r, full, tail), xv);
        a1 = _mm512_dpbf16_ps(a1, load32(w, r + 1, full, tail), xv);
        a2 = _mm512_dpbf16_ps(a2, load32(w, r + 2, full, tail), xv);
        a3 = _mm512_dpbf16_ps(a3, load32(w, r + 3, full, tail), xv);
      }
      float* out = y + b * ldy + r;
      out[0] = _mm512_reduce_add_ps(a0);
      out[1] = _mm512_reduce_add_ps(a1);
      out[2] = _mm512_reduce_add_ps(a2);
      out[3] = _mm512_reduce_add_ps(a3);
    }
  }
  for (; r < r1; ++r) {
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      __m512 a = _mm512_setzero_ps();
      for (size_t c = 0; c < full; c += 32) a = _mm512_dpbf16_ps(a, load32(w, r, c), load32(xb + c));
      if (tail != 0) a = _mm512_dpbf16_ps(a, load32(w, r, full, tail), load32(xb + full, tail));
      y[b * ldy + r] = _mm512_reduce_add_ps(a);
    }
  }
}

#undef ZIPMOE_AVX512BF16

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

template <class Rows>
void dispatch(GemvLevel level, const Rows& w, size_t rowBegin, size_t rowEnd, const uint16_t* x, size_t batch,
              float* y, size_t ldy) {
  if (!gemvLevelSupported(level))
    throw Error(std::string("BF16 GEMV level ") + gemvLevelName(level) + " is not supported by this CPU");
  if (rowBegin >= rowEnd || batch == 0) return;
  switch (level) {
    case GemvLevel::Scalar: return gemvScalar(w, rowBegin, rowEnd, x, batch, y, ldy);
    case GemvLevel::Avx2: return gemvAvx2(w, rowBegin, rowEnd, x, batch, y, ldy);
    case GemvLevel::Avx512Bf16: return gemvAvx512Bf16(w, rowBegin, rowEnd, x, batch, y, ldy);
  }
}

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
                                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
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
  dispatch(level, WordRows{w, cols}, rowBegin, rowEnd, x, batch, y, ldy);
}

void gemvSplitBf16(GemvLevel level, const uint8_t* exponents, const uint8_t* signMantissa, size_t cols,
                   size_t rowBegin, size_t rowEnd, const uint16_t* x, size_t batch, float* y, size_t ldy) {
  dispatch(level, SplitRows{exponents, signMantissa, cols}, rowBegin, rowEnd, x, batch, y, ldy);
}

}  // namespace zipmoe::kernels
