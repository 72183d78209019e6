// BF16 GEMV kernels (see bf16_gemv.h). Each SIMD kernel carries __attribute__((target)) so the file
// builds for any x86-64; the level is chosen at run time from CPUID. Four independent accumulators
// hide the multiply-add latency: the AVX2 kernel takes four rows side by side, the AVX-512 one
// four column blocks of one row (one sequential stream: see gemvAvx512Bf16). The weight rows in use
// stay in L1/L2 while every row of x in the batch is multiplied with them.
// Every kernel is a template over where its weight words come from (BF16 words, or the split planes
// merged in registers), so both sources run the same fp32 operations in the same order.
#include "kernels/bf16_gemv.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"

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

// The exponents as nibble codes of one shard (zipmoe/format/nibble_shard.h) and the sign-mantissa plane.
struct NibbleRows {
  const NibbleShard* s;
  const uint8_t* sm;
  size_t cols;
  alignas(16) std::array<uint8_t, 16> dictionary;
  alignas(16) std::array<uint8_t, 16> special;  // 0xFF for a code the dictionary does not hold (15: escape)
  alignas(64) std::array<uint16_t, 32> shifted;  // dictionary[c] << 7: the exponent's bits in a BF16 word
  NibbleRows(const NibbleShard& shard, const uint8_t* signMantissa, size_t columns)
      : s(&shard), sm(signMantissa), cols(columns), dictionary(shard.dictionary), special{}, shifted{} {
    for (size_t c = shard.size; c < 16; ++c) special[c] = 0xFF;
    for (size_t c = 0; c < 16; ++c) shifted[c] = static_cast<uint16_t>(shard.dictionary[c] << 7);
  }
  size_t symbol(size_t r, size_t c) const { return (r - s->rowBegin) * cols + c; }  // in the shard
  uint8_t exponent(size_t p) const {
    const unsigned code = (s->codes[p >> 1] >> (4 * (p & 1))) & 0xF;
    if (code < s->size) return s->dictionary[code];
    // An escape (indexNibbleChunk left no other code ≥ size): the escaped exponent at its position.
    const uint32_t* end = s->escapePositions + s->escapeCount;
    return s->escapes[std::lower_bound(s->escapePositions, end, static_cast<uint32_t>(p)) - s->escapePositions];
  }
  // count exponents from symbol p, one at a time (a block holding an escape).
  void exponents(size_t p, size_t count, uint8_t* out) const {
    for (size_t j = 0; j < count; ++j) out[j] = exponent(p + j);
  }
  uint16_t word(size_t r, size_t c) const { return bf16::mergeWord(exponent(symbol(r, c)), sm[r * cols + c]); }
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
// fp32 bits of the merged word: sign << 31 | exponent << 23 | mantissa << 16, from 8 exponent bytes
// (the low 8 of e8) and the 8 sign-mantissa bytes at sm.
__attribute__((target("avx2,fma"))) inline __m256 mergeWiden8(__m128i e8, const uint8_t* smBytes) {
  const __m256i e = _mm256_cvtepu8_epi32(e8);
  const __m256i sm = _mm256_slli_epi32(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(smBytes))), 16);
  const __m256i mantissa = _mm256_and_si256(sm, _mm256_set1_epi32(0x007F0000));
  const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(sm, 8), _mm256_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm256_castsi256_ps(_mm256_or_si256(_mm256_or_si256(sign, mantissa), _mm256_slli_epi32(e, 23)));
}
__attribute__((target("avx2,fma"))) inline __m256 widen8(const SplitRows& w, size_t r, size_t c) {
  const size_t at = r * w.cols + c;
  return mergeWiden8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.e + at)), w.sm + at);
}
// Eight codes from symbol p (four bytes; p is even, so the block starts on a byte) looked up in the
// dictionary: the exponents in the low 8 bytes.
__attribute__((target("avx2,fma"))) inline __m128i nibbleExponents8(const NibbleRows& w, size_t p) {
  uint32_t four;
  std::memcpy(&four, w.s->codes + p / 2, sizeof four);
  const __m128i in = _mm_cvtsi32_si128(static_cast<int>(four));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(in, low4), hi = _mm_and_si128(_mm_srli_epi16(in, 4), low4);
  const __m128i special = _mm_load_si128(reinterpret_cast<const __m128i*>(w.special.data()));
  const __m128i bad = _mm_or_si128(_mm_shuffle_epi8(special, lo), _mm_shuffle_epi8(special, hi));
  if (_mm_testz_si128(bad, bad)) {  // the bytes past the four are code 0, never special
    const __m128i dict = _mm_load_si128(reinterpret_cast<const __m128i*>(w.dictionary.data()));
    return _mm_unpacklo_epi8(_mm_shuffle_epi8(dict, lo), _mm_shuffle_epi8(dict, hi));
  }
  alignas(16) uint8_t bytes[16] = {};
  w.exponents(p, 8, bytes);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(bytes));
}
__attribute__((target("avx2,fma"))) inline __m256 widen8(const NibbleRows& w, size_t r, size_t c) {
  return mergeWiden8(nibbleExponents8(w, w.symbol(r, c)), w.sm + r * w.cols + c);
}

// Eight exponents of a nibble row (as widen8 finds them) merged with their sign-mantissa bytes into
// eight BF16 words: exponent << 7, sign at bit 15, mantissa in bits 0–6 (bf16::mergeWord).
__attribute__((target("avx2,fma"))) inline __m128i nibbleWords8(const NibbleRows& w, size_t r, size_t c) {
  const __m128i e = _mm_slli_epi16(_mm_cvtepu8_epi16(nibbleExponents8(w, w.symbol(r, c))), 7);
  const __m128i sm = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.sm + r * w.cols + c)));
  const __m128i both = _mm_or_si128(sm, _mm_slli_epi16(sm, 8));
  const __m128i keep = _mm_set1_epi16(static_cast<short>(0x807F));
  return _mm_or_si128(_mm_and_si128(keep, both), _mm_andnot_si128(keep, e));
}

__attribute__((target("avx2,fma"))) void wordsAvx2(const NibbleRows& w, size_t r0, size_t r1, uint16_t* out, size_t outRow0) {
  const size_t cols = w.cols, full = cols / 8 * 8;
  for (size_t r = r0; r < r1; ++r) {
    uint16_t* row = out + (r - outRow0) * cols;
    size_t c = 0;
    for (; c < full; c += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(row + c), nibbleWords8(w, r, c));
    for (; c < cols; ++c) row[c] = w.word(r, c);
  }
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

// GCC 12's AVX-512 extract intrinsics (used by _mm512_reduce_add_ps) and byte permutes start from an
// "undefined" vector that -Wmaybe-uninitialized (and at -O2 -Wuninitialized) reports; the value is
// never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // the same "undefined" start in the VBMI permutes (-O2)
#endif

#define ZIPMOE_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vbmi")))

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

// 32 weights from 16 code bytes and 32 sign-mantissa bytes, in words, with two byte permutes
// (AVX512-VBMI), a word permute and one bit select: the codes' bytes are spread so that word j holds
// code byte j/2 twice, shifted right by 4 for odd j and masked to its nibble; the word permute looks
// that code up in a table of dictionary[c] << 7; the sign-mantissa bytes are spread so that word j
// holds byte j twice (sign at bit 15, mantissa in bits 0–6), and the bit select takes sign and
// mantissa from there, the exponent from the table. A block holding an escape (a code ≥ the
// dictionary's size) takes its exponents one at a time (NibbleRows::exponents) and merges them as
// the split planes are merged: the same words.
ZIPMOE_AVX512BF16 inline __m512bh nibbleWords32(const NibbleRows& w, __m128i codeBytes, __m256i smBytes, size_t p,
                                               size_t count) {
  const __m512i twice = _mm512_set_epi64(0x1F1F1E1E1D1D1C1Cll, 0x1B1B1A1A19191818ll, 0x1717161615151414ll,
                                         0x1313121211111010ll, 0x0F0F0E0E0D0D0C0Cll, 0x0B0B0A0A09090808ll,
                                         0x0707060605050404ll, 0x0303020201010000ll);  // byte i ← i / 2
  const __m512i quarter = _mm512_srli_epi16(_mm512_and_si512(twice, _mm512_set1_epi8(0x1E)), 1);  // byte i ← i / 4
  const __m512i pairs = _mm512_permutexvar_epi8(quarter, _mm512_castsi128_si512(codeBytes));
  const __m512i code = _mm512_and_si512(_mm512_srlv_epi16(pairs, _mm512_set1_epi32(0x00040000)), _mm512_set1_epi16(0x0F));
  const __m512i sm = _mm512_permutexvar_epi8(twice, _mm512_castsi256_si512(smBytes));
  if (_mm512_cmpge_epu16_mask(code, _mm512_set1_epi16(static_cast<short>(w.s->size))) != 0) {
    alignas(32) uint8_t bytes[32] = {};
    w.exponents(p, count, bytes);
    return mergeWords(_mm256_load_si256(reinterpret_cast<const __m256i*>(bytes)), smBytes);
  }
  const __m512i exponent = _mm512_permutexvar_epi16(code, _mm512_load_si512(w.shifted.data()));
  return __builtin_bit_cast(
      __m512bh, _mm512_ternarylogic_epi32(_mm512_set1_epi16(static_cast<short>(0x807F)), sm, exponent, 0xCA));
}
ZIPMOE_AVX512BF16 inline __m512bh load32(const NibbleRows& w, size_t r, size_t c) {
  const size_t p = w.symbol(r, c);
  return nibbleWords32(w, _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.s->codes + p / 2)),
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.sm + r * w.cols + c)), p, 32);
}
ZIPMOE_AVX512BF16 inline __m512bh load32(const NibbleRows& w, size_t r, size_t c, __mmask32 m) {
  const size_t p = w.symbol(r, c);
  const auto lanes = static_cast<size_t>(__builtin_popcount(m));  // even: cols is
  // Codes past the row read as 0 (never an escape); those lanes end as the word +0.0, as the other
  // sources' masked loads.
  const __m128i codes = _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << (lanes / 2)) - 1), w.s->codes + p / 2);
  const __m512bh words = nibbleWords32(w, codes, _mm256_maskz_loadu_epi8(m, w.sm + r * w.cols + c), p, lanes);
  return __builtin_bit_cast(__m512bh, _mm512_maskz_mov_epi16(m, __builtin_bit_cast(__m512i, words)));
}

// Rows [r0, r1) of the words, 32 at a time; the row's tail through the masked load (its lanes past
// the row are +0.0 and not stored).
ZIPMOE_AVX512BF16 void wordsAvx512(const NibbleRows& w, size_t r0, size_t r1, uint16_t* out, size_t outRow0) {
  const size_t cols = w.cols, full = cols / 32 * 32;
  const __mmask32 tail = static_cast<__mmask32>((uint64_t{1} << (cols - full)) - 1);
  for (size_t r = r0; r < r1; ++r) {
    uint16_t* row = out + (r - outRow0) * cols;
    for (size_t c = 0; c < full; c += 32) _mm512_storeu_si512(row + c, __builtin_bit_cast(__m512i, load32(w, r, c)));
    if (tail != 0) _mm512_mask_storeu_epi16(row + full, tail, __builtin_bit_cast(__m512i, load32(w, r, full, tail)));
  }
}

// One row at a time, four accumulators over its columns (128 per step), every batch row of x against
// the row while it is in L1. A thread's item is then one sequential stream, which the hardware
// prefetchers follow from the item's first lines; four rows side by side (the AVX2 kernel's order)
// are four short streams that each start cold: on this machine (Zen 4) a 4096 × 512 product read 20.1
// GB/s that way against 34.2 (docs/MODEL.md, "One stream per item").
template <class Rows>
ZIPMOE_AVX512BF16 void gemvAvx512Bf16(const Rows& w, size_t r0, size_t r1, const uint16_t* x, size_t batch, float* y,
                                     size_t ldy) {
  const size_t cols = w.cols;
  const size_t wide = cols / 128 * 128, full = cols / 32 * 32;
  // Lanes past the end read as zero (masked loads never touch memory outside the mask).
  const __mmask32 tail = static_cast<__mmask32>((uint64_t{1} << (cols - full)) - 1);
  for (size_t r = r0; r < r1; ++r) {
    for (size_t b = 0; b < batch; ++b) {
      const uint16_t* xb = x + b * cols;
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
      size_t c = 0;
      for (; c < wide; c += 128) {
        a0 = _mm512_dpbf16_ps(a0, load32(w, r, c), load32(xb + c));
        a1 = _mm512_dpbf16_ps(a1, load32(w, r, c + 32), load32(xb + c + 32));
        a2 = _mm512_dpbf16_ps(a2, load32(w, r, c + 64), load32(xb + c + 64));
        a3 = _mm512_dpbf16_ps(a3, load32(w, r, c + 96), load32(xb + c + 96));
      }
      for (; c < full; c += 32) a0 = _mm512_dpbf16_ps(a0, load32(w, r, c), load32(xb + c));
      if (tail != 0) a1 = _mm512_dpbf16_ps(a1, load32(w, r, full, tail), load32(xb + full, tail));
      y[b * ldy + r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
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
                                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16") &&
                                 __builtin_cpu_supports("avx512vbmi");
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

void gemvNibbleBf16(GemvLevel level, std::span<const NibbleShard> shards, const uint8_t* signMantissa, size_t cols,
                    size_t rowBegin, size_t rowEnd, const uint16_t* x, size_t batch, float* y, size_t ldy) {
  if (cols % 2 != 0)
    throw Error("nibble GEMV: " + std::to_string(cols) + " columns; the codes of a row start on a byte only when even");
  for (const NibbleShard& shard : shards) {
    const size_t begin = std::max(rowBegin, shard.rowBegin), end = std::min(rowEnd, shard.rowEnd);
    if (begin < end) dispatch(level, NibbleRows(shard, signMantissa, cols), begin, end, x, batch, y, ldy);
  }
}

void nibbleToBf16(GemvLevel level, std::span<const NibbleShard> shards, const uint8_t* signMantissa, size_t cols,
                  size_t rowBegin, size_t rowEnd, uint16_t* out, size_t outRow0) {
  if (!gemvLevelSupported(level))
    throw Error(std::string("BF16 GEMV level ") + gemvLevelName(level) + " is not supported by this CPU");
  if (cols % 2 != 0)
    throw Error("nibble words: " + std::to_string(cols) + " columns; the codes of a row start on a byte only when even");
  for (const NibbleShard& shard : shards) {
    const size_t begin = std::max(rowBegin, shard.rowBegin), end = std::min(rowEnd, shard.rowEnd);
    if (begin >= end) continue;
    const NibbleRows w(shard, signMantissa, cols);
    switch (level) {
      case GemvLevel::Scalar:
        for (size_t r = begin; r < end; ++r)
          for (size_t c = 0; c < cols; ++c) out[(r - outRow0) * cols + c] = w.word(r, c);
        break;
      case GemvLevel::Avx2: wordsAvx2(w, begin, end, out, outRow0); break;
      case GemvLevel::Avx512Bf16: wordsAvx512(w, begin, end, out, outRow0); break;
    }
  }
}

}  // namespace zipmoe::kernels
