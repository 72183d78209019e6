// NibbleShard — one shard of a tensor's exponent plane as the `nibble` codec stores it (a 4-bit code
// per exponent over a dictionary of at most 15, code 15 escaping to a list; format/nibble_codec.cpp),
// described so that decoding's GEMV kernels read the codes in place (kernels/bf16_gemv.h,
// gemvNibbleBf16): a compressed expert is computed without decoding its exponents into a plane first.
//
// The kernels look up 32 codes at a time in the dictionary with one byte shuffle. A block of 32 that
// holds an escape finds its escaped exponents through `escapePositions` (the index of each escaped
// symbol in the shard, ascending), which the stored chunk does not carry: indexNibbleChunk builds it
// in one pass over the codes, checking every code as decoding does, so that a kernel never meets an
// invalid code. The runtime writes the positions into the padding after the chunk in its own buffer
// (every chunk is padded to 4 KiB), so that indexing costs no memory the budget does not already count.
// Thread-safety: plain data; indexNibbleChunk is re-entrant. Cost: indexing reads the codes once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "zipmoe/format/exponent_codec.h"

namespace zipmoe {

struct NibbleShard {
  size_t rowBegin = 0, rowEnd = 0;       // the tensor rows it codes: symbols rowBegin · cols … rowEnd · cols
  const uint8_t* codes = nullptr;        // symbol 2j in the low nibble of byte j
  std::array<uint8_t, 16> dictionary{};  // code c < size → dictionary[c]; entries size … 15 are 0
  uint8_t size = 0;                      // the dictionary's size, 1 … 15
  const uint8_t* escapes = nullptr;      // the escaped exponents, in symbol order
  const uint32_t* escapePositions = nullptr;  // the shard-relative symbol index of each, ascending
  size_t escapeCount = 0;
};

// Indexes the E-chunk src[0, srcSize) of n symbols: checks it like decoding (throws zipmoe::Error
// naming the field, with the same messages) and, when it is a nibble-mode chunk whose escapes fit in
// `capacity` positions, writes their positions to `positions` and returns the shard (rows left 0 for
// the caller). Returns nullopt for a raw- or run-mode chunk (no codes to read in place) or when the
// positions do not fit. `level` picks the scan (as it picks the decoder; tests force each one);
// throws Error if the CPU lacks it. REQUIRES: `positions` does not overlap src[0, srcSize).
std::optional<NibbleShard> indexNibbleChunk(const uint8_t* src, size_t srcSize, size_t n, uint32_t* positions,
                                            size_t capacity, NibbleDecodeLevel level = bestNibbleDecodeLevel());

}  // namespace zipmoe
