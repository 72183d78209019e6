// BF16 bit-field split and merge — the lossless transform under the whole store.
//
// A BF16 word w is split into an exponent byte and a sign-mantissa byte (docs/ARCHITECTURE.md, "The
// lossless split"):
//     E  = (w >> 7) & 0xFF
//     SM = ((w >> 15) << 7) | (w & 0x7F)
// and merged back with  w = ((SM >> 7) << 15) | (E << 7) | (SM & 0x7F).  The pair is a bijection, so
// the round trip is bit-exact for every one of the 65536 words (NaN payloads and -0 included).
//
// The default split dispatches once, at first use, to the widest kernel the CPU supports
// (AVX-512BW, AVX2, scalar); the default merge — tensor recovery, on every expert load — to the
// fastest one measured at first use (on some CPUs the AVX-512 merge is slower than the AVX2 one). The level-specific entry points exist for tests and benchmarks; calling
// one the CPU does not support is a programming error (checked: throws zipmoe::Error).
// Thread-safety: all functions are re-entrant. Cost: memory-bandwidth bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zipmoe::bf16 {

enum class SimdLevel { Scalar, Avx2, Avx512 };

// The widest level this CPU supports (cached after the first call).
SimdLevel detectedSimdLevel();
// The level the default merge uses: each supported SIMD level timed once on a few MiB (best of a
// few runs, about a millisecond in all), the fastest kept for the process.
SimdLevel mergeSimdLevel();
// Every level this CPU can run, scalar first.
std::vector<SimdLevel> supportedSimdLevels();
const char* simdLevelName(SimdLevel level);

// Splits n words into n exponent bytes and n sign-mantissa bytes. Buffers must not overlap.
void split(const uint16_t* words, size_t n, uint8_t* exponents, uint8_t* signMantissa);
// Merges n exponent bytes and n sign-mantissa bytes into n words. Buffers must not overlap.
void merge(const uint8_t* exponents, const uint8_t* signMantissa, size_t n, uint16_t* words);

void split(SimdLevel level, const uint16_t* words, size_t n, uint8_t* exponents, uint8_t* signMantissa);
void merge(SimdLevel level, const uint8_t* exponents, const uint8_t* signMantissa, size_t n, uint16_t* words);

// Scalar reference forms of the two formulas above, for one word.
constexpr uint8_t exponentOf(uint16_t w) { return static_cast<uint8_t>((w >> 7) & 0xFF); }
constexpr uint8_t signMantissaOf(uint16_t w) {
  return static_cast<uint8_t>(((w >> 15) << 7) | (w & 0x7F));
}
constexpr uint16_t mergeWord(uint8_t e, uint8_t sm) {
  return static_cast<uint16_t>(((sm >> 7) << 15) | (e << 7) | (sm & 0x7F));
}

}  // namespace zipmoe::bf16
