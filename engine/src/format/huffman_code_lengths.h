// Code-length construction for the order-0 canonical Huffman exponent coder (huffman_codec.cpp).
//
// huffmanCodeLengths() computes OPTIMAL length-limited code lengths with package-merge (the
// coin-collector formulation of Larmore and Hirschberg): among all prefix codes whose codes are at most
// maxBits long it minimises sum(count[s] * length[s]). When the unlimited Huffman code already fits,
// the result costs exactly as much as that code. canonicalReversedCodes() turns lengths into canonical
// codes, bit-reversed for the LSB-first bit streams of the codec; encoder and decoder both call it, so
// the lengths alone describe the code.
// Thread-safety: pure functions. Cost: O(symbols × maxBits), a few microseconds for 256 symbols.
#pragma once

#include <cstdint>

namespace zipmoe::detail {

inline constexpr int kHuffmanMaxCodeBits = 12;

// counts: 256 symbol counts; lengths: 256 outputs (0 for absent symbols). With one present symbol its
// length is 1; with none all lengths are 0. REQUIRES: 1 <= maxBits <= 16 and the number of present
// symbols <= 2^maxBits (always true for bytes and maxBits >= 8); throws std::invalid_argument otherwise.
void huffmanCodeLengths(const uint64_t* counts, int maxBits, uint8_t* lengths);

// lengths: 256 code lengths (0 = absent, each <= 16) that satisfy Kraft's inequality. Assigns canonical
// codes (shorter codes first, ties by symbol value) and stores each bit-reversed in codes[s], so that
// writing its `length` low bits LSB-first emits the code's first bit first. codes[s] = 0 when absent.
void canonicalReversedCodes(const uint8_t* lengths, uint16_t* codes);

}  // namespace zipmoe::detail
