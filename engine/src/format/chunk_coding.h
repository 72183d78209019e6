// Internal: what the byte-oriented exponent codecs (`huffman`, `huffman8`, `nibble`) share: LEB128
// varints (at most 10 bytes) and the chunk prelude — a mode byte (0 raw, 1 run, 2 the codec's own)
// and the symbol count — with the raw and run modes decoded here. Errors are zipmoe::Error messages
// "<codec> chunk: …" naming the field and the offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zipmoe::detail {

// The mode byte's value for a chunk in the codec's own coding (0 and 1 are raw and run).
inline constexpr uint8_t kModeCoded = 2;

size_t varintSize(uint64_t v);
size_t putVarint(uint8_t* p, uint64_t v);  // returns the bytes written
// Reads the varint at `offset` (advanced past it). `codec` prefixes errors, `field` names the value.
uint64_t getVarint(const char* codec, const uint8_t* src, size_t srcSize, size_t& offset, const char* field);

[[noreturn]] void failChunk(const char* codec, const std::string& what);

// Writes a raw-mode chunk of src[0, n) at dst; returns its size (1 + varintSize(n) + n).
size_t writeRawChunk(const uint8_t* src, size_t n, uint8_t* dst);
// Writes a run-mode chunk (n ≥ 1 copies of `symbol`); returns its size.
size_t writeRunChunk(uint8_t symbol, size_t n, uint8_t* dst);

// Checks the prelude (mode byte and symbol count) against the caller's n; returns the mode, with
// `offset` after the count.
uint8_t readPrelude(const char* codec, const uint8_t* src, size_t srcSize, size_t n, size_t& offset);
// Checks the prelude against the caller's n and decodes raw and run chunks into dst[0, n). Returns
// true when the chunk was one of them (done); false for mode 2, with `offset` after the count.
bool decodeRawOrRun(const char* codec, const uint8_t* src, size_t srcSize, uint8_t* dst, size_t n, size_t& offset);

// The levels of a decoder with a baseline level and one wider level, in order, as the CPU has them.
template <class Level>
std::vector<Level> baselineAndWider(Level baseline, Level wider, bool cpuHasWider) {
  std::vector<Level> v{baseline};
  if (cpuHasWider) v.push_back(wider);
  return v;
}

}  // namespace zipmoe::detail
