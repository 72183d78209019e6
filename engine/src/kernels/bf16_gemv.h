// BF16 matrix–vector products for batch-1 (and small-batch) decoding: y = x · Wᵀ with W row-major
// [rows × cols] in BF16, x [batch × cols] in BF16, accumulation and y in fp32.
//
// Decoding one token reads every weight once and does two flops per weight: it is bound by memory
// bandwidth, not arithmetic. The kernels therefore stream each weight row once for the whole batch:
// four rows at a time, the batch's rows of x re-read from L1, never a packed copy of W.
//   Avx512Bf16  vdpbf16ps: 32 products per instruction, accumulated in fp32 (each pair of products
//               is summed, then added; inputs' denormals read as zero, as the instruction defines);
//               with AVX512-VBMI too, for the byte permutes that spread nibble codes (every CPU
//               with AVX512-BF16 has it but Cooper Lake, which runs the AVX2 level)
//   Avx2        BF16 widened to fp32 by a shift, FMA, 8 lanes
//   Scalar      the reference: fp32 multiply-add in column order
// The levels differ only in the order (and, for vdpbf16ps, the pairing) of fp32 additions: their
// results agree to fp32 rounding of the sum, which is what the tests check against a double sum.
// Thread-safety: pure functions; callers split [rowBegin, rowEnd) between threads.
// Cost: rows × cols × 2 bytes of W read once per call (1.5 from nibble codes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "zipmoe/format/nibble_shard.h"

namespace zipmoe::kernels {

enum class GemvLevel : uint8_t { Scalar, Avx2, Avx512Bf16 };

const char* gemvLevelName(GemvLevel level);  // "scalar", "avx2", "avx512-bf16"
bool gemvLevelSupported(GemvLevel level);    // this CPU has the instructions
std::vector<GemvLevel> supportedGemvLevels();
GemvLevel bestGemvLevel();  // the widest supported level (the fastest: see `zipmoe bench kernels`)

// For r in [rowBegin, rowEnd) and b in [0, batch): y[b · ldy + r] = Σ_c w[r · cols + c] · x[b · cols + c].
// REQUIRES: the level is supported; rowEnd ≤ the rows of w; ldy ≥ rowEnd.
void gemvBf16(GemvLevel level, const uint16_t* w, size_t cols, size_t rowBegin, size_t rowEnd, const uint16_t* x,
              size_t batch, float* y, size_t ldy);

// The same product with W given as its lossless split (zipmoe/format/bf16_split.h): an exponent plane and a
// sign-mantissa plane, one byte per weight each, row-major [rows × cols]. The words are merged in
// registers as they are loaded — no recovered tensor is written — and the result is bit-identical
// to gemvBf16 at the same level on the merged words (the same fp32 operations in the same order).
// This is tensor recovery fused into decoding's compute: it reads the same 2 bytes per weight.
void gemvSplitBf16(GemvLevel level, const uint8_t* exponents, const uint8_t* signMantissa, size_t cols,
                   size_t rowBegin, size_t rowEnd, const uint16_t* x, size_t batch, float* y, size_t ldy);

// The same product with W's exponents as `nibble` codes read in place (zipmoe/format/nibble_shard.h): each
// shard codes a contiguous range of rows; each block of 32 codes (8 for AVX2) is looked up in the
// shard's dictionary with a byte shuffle and merged with the sign-mantissa plane in registers, a block
// holding an escape through its shard's escape positions. Bit-identical to gemvBf16 at the same level
// on the merged words. It reads 1.5 bytes per weight where the words and the planes read 2, and
// decodes no plane: a compressed expert costs decoding's product no more memory traffic than a whole one.
// REQUIRES: cols is even; every row of [rowBegin, rowEnd) lies in one shard; every shard came from
// indexNibbleChunk (so holds no invalid code). Rows no shard holds are not written.
void gemvNibbleBf16(GemvLevel level, std::span<const NibbleShard> shards, const uint8_t* signMantissa, size_t cols,
                    size_t rowBegin, size_t rowEnd, const uint16_t* x, size_t batch, float* y, size_t ldy);

// The words of rows [rowBegin, rowEnd) of the same W, from its nibble codes and sign-mantissa plane,
// written row-major to out (row r at out + r · cols): bf16::merge of the decoded planes in one pass,
// with no exponent plane (a product of many rows then runs on the words). Every level writes the
// same words. Rows no shard holds are not written. With outRow0, row r goes to out + (r − outRow0) · cols
// (a block of rows in a buffer of its own). REQUIRES: as gemvNibbleBf16; outRow0 ≤ rowBegin.
void nibbleToBf16(GemvLevel level, std::span<const NibbleShard> shards, const uint8_t* signMantissa, size_t cols,
                  size_t rowBegin, size_t rowEnd, uint16_t* out, size_t outRow0 = 0);

// BF16 ↔ fp32 as the hardware does it: widening is exact; narrowing rounds to nearest even (NaN stays NaN).
inline float bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
// A value as a BF16 tensor holds it: rounded to BF16 and widened back.
inline float roundedToBf16(float f) { return bf16ToFloat(floatToBf16(f)); }

}  // namespace zipmoe::kernels
