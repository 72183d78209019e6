// The order-0 canonical Huffman exponent coders: `huffman` (4 interleaved streams, format of the first
// stores) and `huffman8` (8 streams, the store's default). Both share this file; only the stream count
// S differs.
//
// Chunk format (S = 4 for huffman, 8 for huffman8) (all integers little-endian; varint = LEB128, at most 10 bytes):
//   byte    mode: 0 = raw, 1 = run, 2 = huffman
//   varint  n, the number of symbols (checked against the caller's n)
//   raw:     n bytes, verbatim (n = 0, or when Huffman would not be smaller)
//   run:     1 byte, the symbol repeated n times (n >= 1)
//   huffman: byte minSym, byte maxSym (both present, minSym < maxSym);
//            ceil((maxSym-minSym+1)/2) bytes of 4-bit code lengths for minSym..maxSym, low nibble
//            first (0 = absent; a trailing unused nibble is 0); the lengths form a complete prefix
//            code (Kraft sum exactly 1) with codes of at most 12 bits, canonical order;
//            S-1 varints: byte sizes of streams 0..S-2; stream S-1 takes the rest of the chunk;
//            the S streams. Stream i codes output symbols [i*q, min(n, (i+1)*q)), q = ceil(n/S),
//            LSB-first, each code bit-reversed so the code's first bit is the lowest; the last byte is
//            padded with 0 to 7 zero bits.
//
// Decoder design. A 4096-entry table maps the next 12 bits of a stream to as many whole symbols as they
// hold (at most 6), packed in one uint64: the bits consumed in byte 0, the symbols in bytes 1..6 and the
// count in byte 7. The fast loop works in rounds over all S streams at once (every stream's bit buffer
// and output cursor stay in registers through the round, and the streams' k-th lookups are issued side
// by side, so the out-of-order core overlaps the S independent chains): each stream loads a 64-bit bit
// buffer at its bit position (one unaligned load, the top bit replaced by a sentinel 1, shifted by pos &
// 7: at least 56 valid bits), then does 4 lookups of at most 12 bits each: a mask, a table load, an
// 8-byte store of the entry's symbols at the output cursor (extra bytes are overwritten by later
// stores), the cursor moved by byte 7 and the buffer shifted right by the entry itself (a shift uses its
// count's low 6 bits, byte 0, so the critical path per lookup is mask, load, shift). The new bit
// position is the round's start byte plus the sentinel's leading zeros. The rounds run in batches whose
// length is computed so that no load can pass src + srcSize and no store can pass the stream's own
// output range (a round consumes at most 48 bits and produces at most 24 symbols); when no full batch is
// safe, each stream finishes alone, then symbol by symbol with bounds checks. Bits a stream reads past
// its own end (into the next stream) are harmless in the fast loop: the final check that each stream
// consumed exactly its bytes (at most 7 zero padding bits) rejects them.
//
// Dispatch: the same loop is compiled twice, for baseline x86-64 (shift by cl, bsr) and with
// BMI2/LZCNT (shrx, lzcnt: fewer uops per lookup); bestHuffmanDecodeLevel() picks the widest the CPU
// has, and makeHuffmanCodec(streams, level) forces one for tests and `zipmoe bench codec`. Every
// level produces identical output and identical errors (the tails and all checks are shared).
//
// The table is built per chunk in O(8191) steps from tables for shorter bit windows: the entry for a
// k-bit value v is its first symbol (code length l <= k) followed by the entry for the (k-l)-bit value
// v >> l, so every entry is a constant amount of work.
#include <cpuid.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "format/chunk_coding.h"
#include "format/codecs.h"
#include "format/huffman_code_lengths.h"
#include "zipmoe/base/error.h"

namespace zipmoe::detail {
namespace {

static_assert(std::endian::native == std::endian::little, "the bit streams assume a little-endian host");

constexpr int kMaxBits = kHuffmanMaxCodeBits;
constexpr size_t kTableSize = size_t{1} << kMaxBits;
constexpr uint64_t kTableMask = kTableSize - 1;
constexpr uint64_t kMaxPerEntry = 6;
constexpr uint64_t kSymbolMask = (uint64_t{1} << 48) - 1;

inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, sizeof v); }

[[noreturn]] void fail(const std::string& what) { failChunk("huffman", what); }

// Output range [begin, end) of stream i of `streams` for n symbols.
struct Quarter {
  size_t begin, end;
};
Quarter quarter(size_t n, int i, int streams) {
  const auto s = static_cast<size_t>(streams);
  const size_t q = n / s + (n % s != 0 ? 1 : 0);
  const auto idx = static_cast<size_t>(i);
  return {std::min(n, idx * q), std::min(n, (idx + 1) * q)};
}

// ---------------------------------------------------------------------------------------------
// Encoder

// Appends the codes of src[0, count) LSB-first at p. Stores 8 bytes at a time while they fit below
// limit (they may run into the next stream's bytes, which that stream overwrites later), bytes after.
uint8_t* encodeStream(const uint8_t* src, size_t count, const uint32_t* enc, uint8_t* p, uint8_t* limit) {
  uint64_t acc = 0;
  unsigned bits = 0;  // valid bits in acc, < 8 after each flush
  auto flush = [&] {
    const unsigned bytes = bits >> 3;
    if (limit - p >= 8) {
      store64(p, acc);
    } else {
      for (unsigned b = 0; b < bytes; ++b) p[b] = static_cast<uint8_t>(acc >> (8 * b));
    }
    p += bytes;
    acc = bytes == 8 ? 0 : acc >> (8 * bytes);
    bits &= 7;
  };
  auto put = [&](uint8_t s) {
    const uint32_t e = enc[s];
    acc |= static_cast<uint64_t>(e & 0xFFFF) << bits;
    bits += e >> 16;
  };
  size_t i = 0;
  // 7 + 4 * 12 = 55 bits: four codes always fit in the accumulator between flushes.
  for (; i + 4 <= count; i += 4) {
    put(src[i]);
    put(src[i + 1]);
    put(src[i + 2]);
    put(src[i + 3]);
    flush();
  }
  for (; i < count; ++i) put(src[i]);
  flush();
  if (bits != 0) *p++ = static_cast<uint8_t>(acc);
  return p;
}

// ---------------------------------------------------------------------------------------------
// Decoder

// Builds the multi-symbol table from validated lengths (complete code, max 12 bits). It is built with
// the symbols in bytes 0..5 and the bits in byte 6, then moved to the decode loop's layout.
// Level k holds the entries for k-bit windows, k = 0..12: a window v whose first code (symbol s,
// length l <= k, reversed code r) sits in its low bits is v = r | w << l, and its entry is s followed
// by level k-l's entry for w. Iterating per symbol and per w keeps the loop free of lookups and
// branches; windows whose first code is longer than k stay empty (0).
void buildDecodeTable(const uint8_t* lengths, uint64_t* table) {
  std::array<uint16_t, 256> codes;
  canonicalReversedCodes(lengths, codes.data());
  std::array<uint8_t, 256> symbols;  // present symbols
  size_t present = 0;
  for (unsigned s = 0; s < 256; ++s)
    if (lengths[s] != 0) symbols[present++] = static_cast<uint8_t>(s);
  // shorter[(1 << k) - 1 + v]: entry for the k-bit window v, k = 0..11; level 12 is `table` itself.
  std::array<uint64_t, kTableSize - 1> shorter;
  shorter[0] = 0;
  for (unsigned k = 1; k <= static_cast<unsigned>(kMaxBits); ++k) {
    uint64_t* level = k == static_cast<unsigned>(kMaxBits) ? table : &shorter[(size_t{1} << k) - 1];
    // Windows whose first code is longer than k stay empty; at k = 12 there are none (complete code).
    if (k < static_cast<unsigned>(kMaxBits)) std::memset(level, 0, sizeof(uint64_t) << k);
    for (size_t i = 0; i < present; ++i) {
      const uint8_t s = symbols[i];
      const unsigned len = lengths[s];
      if (len > k) continue;
      const uint64_t* rest = &shorter[(size_t{1} << (k - len)) - 1];
      const size_t restCount = size_t{1} << (k - len);
      const size_t r = codes[s];
      const uint64_t add = s + (uint64_t{len} << 48) + (uint64_t{1} << 56);
      for (size_t w = 0; w < restCount; ++w) {
        uint64_t e = rest[w];
        // A full entry drops its last symbol (byte 5) to make room for s; rare, so a branch is cheap.
        if ((e >> 56) == kMaxPerEntry) e -= (uint64_t{lengths[(e >> 40) & 0xFF]} << 48) + (uint64_t{1} << 56);
        // Moving the symbols up one byte, s in byte 0, adds len to the bits and 1 to the count.
        level[r | (w << len)] = (((e << 8) & kSymbolMask) | (e & ~kSymbolMask)) + add;
      }
    }
  }
  // Final layout: bits consumed in byte 0, symbols in bytes 1..6, count in byte 7, so that the decode
  // loop shifts its bit buffer by the entry itself (shrx and shr use the count's low 6 bits): one
  // dependent operation fewer per lookup on each stream's critical path.
  for (size_t v = 0; v < kTableSize; ++v) {
    const uint64_t e = table[v];
    table[v] = ((e & kSymbolMask) << 8) | ((e >> 48) & 0xFF) | (e & (uint64_t{0xFF} << 56));
  }
}

struct StreamCursor {
  size_t pos;       // absolute bit position in src
  size_t endBit;    // one past the stream's last bit
  uint8_t* out;     // next output byte
  uint8_t* outEnd;  // one past the stream's quarter
};

constexpr int kLookupsPerRound = 4;  // 4 x 12 bits <= the 56 valid bits of a refilled buffer
constexpr size_t kMaxRoundSymbols = kLookupsPerRound * kMaxPerEntry;

// Rounds that are safe for this stream: every 64-bit load stays below srcSize (a round starts at most
// 6 bytes after the previous one) and every 8-byte store below outEnd (a round's last store starts at
// most 18 symbols in and ends 26 bytes after the round's start, later rounds start 24 further).
inline size_t safeRounds(const StreamCursor& c, size_t lastLoadByte) {
  const auto room = static_cast<size_t>(c.outEnd - c.out);
  if (room < kMaxRoundSymbols + 2 || (c.pos >> 3) > lastLoadByte) return 0;
  return std::min((lastLoadByte - (c.pos >> 3)) / 6 + 1, (room - 2) / kMaxRoundSymbols);
}

// One round of one stream's lookups: refills the bit buffer at pos and decodes 4 table entries.
// The caller guarantees the load and stores stay in bounds (safeRounds).
#define ZIPMOE_HUFFMAN_ROUNDS(NAME, ATTR)                                                                  \
  ATTR void NAME(const uint8_t* src, size_t srcSize, const uint64_t* table, StreamCursor* c, int streams) { \
    if (srcSize < 8) return;                                                                                \
    const size_t lastLoadByte = srcSize - 8;                                                                \
    if (streams == 8) decodeRounds<8>(src, lastLoadByte, table, c);                                         \
    if (streams == 4) decodeRounds<4>(src, lastLoadByte, table, c);                                         \
    for (int i = 0; i < streams; ++i) decodeRounds<1>(src, lastLoadByte, table, c + i);                     \
  }

// Decodes rounds for S streams in lock-step while all of them are safe (S = 1: one stream alone).
template <int S>
[[gnu::always_inline]] inline void decodeRounds(const uint8_t* src, size_t lastLoadByte, const uint64_t* table,
                                                StreamCursor* c) {
  size_t pos[S];
  uint8_t* out[S];
  for (int i = 0; i < S; ++i) pos[i] = c[i].pos, out[i] = c[i].out;
  for (;;) {
    size_t rounds = SIZE_MAX;
    for (int i = 0; i < S; ++i) {
      c[i].pos = pos[i], c[i].out = out[i];
      rounds = std::min(rounds, safeRounds(c[i], lastLoadByte));
    }
    if (rounds == 0 || (S > 1 && rounds < 4)) return;
    for (size_t r = 0; r < rounds; ++r) {
      // Lookup-major: the S streams' k-th lookups are adjacent in program order, so the scheduler
      // always holds S independent chains (mask, load, shift) and overlaps them; stream-major order
      // left one stream's 4-lookup chain waiting in the scheduler ahead of the others' (3.79 vs
      // 4.52 G exp/s in cache on a Zen 4 core, docs/CODECS.md). All S buffers and cursors stay in
      // registers.
      uint64_t buf[S];
      uint8_t* o[S];
#pragma GCC unroll 8
      for (int i = 0; i < S; ++i) {
        buf[i] = (load64(src + (pos[i] >> 3)) | (uint64_t{1} << 63)) >> (pos[i] & 7);
        o[i] = out[i];
      }
#pragma GCC unroll 4
      for (int k = 0; k < kLookupsPerRound; ++k) {
#pragma GCC unroll 8
        for (int i = 0; i < S; ++i) {
          const uint64_t e = table[buf[i] & kTableMask];
          store64(o[i], e >> 8);
          o[i] += e >> 56;
          buf[i] >>= e & 63;
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < S; ++i) {
        out[i] = o[i];
        // The sentinel started at bit 63 - (pos & 7) and moved down by the bits consumed.
        pos[i] = (pos[i] & ~size_t{7}) + static_cast<size_t>(std::countl_zero(buf[i]));
      }
    }
  }
}

ZIPMOE_HUFFMAN_ROUNDS(decodeFastScalar, )
ZIPMOE_HUFFMAN_ROUNDS(decodeFastBmi2, __attribute__((target("bmi,bmi2,lzcnt"))))
#undef ZIPMOE_HUFFMAN_ROUNDS

bool cpuHasBmi2() {
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // LZCNT (ABM): CPUID 0x80000001, ECX bit 5 (clang's __builtin_cpu_supports has no name for it).
  const bool lzcnt = __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 5)) != 0;
  return lzcnt && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
}

// Finishes stream i symbol by symbol; the 12-bit window is assembled from the stream's own bytes only.
void decodeTail(const uint8_t* src, const uint64_t* table, const uint8_t* lengths, StreamCursor& c, int i,
                size_t streamBytes) {
  while (c.out < c.outEnd) {
    if (c.pos > c.endBit) break;
    const size_t byte = c.pos >> 3;
    const size_t endByte = c.endBit >> 3;
    uint64_t window = 0;
    // 3 bytes hold the 12-bit window at any bit offset; bytes past the stream's end read as 0.
    for (size_t b = byte; b < endByte && b < byte + 3; ++b)
      window |= static_cast<uint64_t>(src[b]) << (8 * (b - byte));
    const uint8_t s = static_cast<uint8_t>(table[(window >> (c.pos & 7)) & kTableMask] >> 8);
    *c.out++ = s;
    c.pos += lengths[s];
  }
  if (c.pos > c.endBit)
    fail("stream " + std::to_string(i) + " overruns its " + std::to_string(streamBytes) + " bytes");
}

// ---------------------------------------------------------------------------------------------

constexpr int kMaxStreams = 8;

class HuffmanCodec final : public ExponentCodec {
 public:
  HuffmanCodec(int streams, HuffmanDecodeLevel level) : streams_(streams), level_(level) {}

  CodecSpec spec() const override { return CodecSpec{streams_ == 8 ? CodecId::Huffman8 : CodecId::Huffman, 0}; }

  size_t maxCompressedSize(size_t n) const override {
    // Huffman is only chosen when smaller than raw; raw is mode + varint(n) + n bytes.
    return 1 + varintSize(n) + n;
  }

  size_t compress(const uint8_t* src, size_t n, uint8_t* dst, size_t dstCapacity) const override {
    if (dstCapacity < maxCompressedSize(n))
      throw Error("huffman compress: destination holds " + std::to_string(dstCapacity) + " bytes, " +
                  std::to_string(maxCompressedSize(n)) + " needed for " + std::to_string(n) + " symbols");
    const size_t nBytes = varintSize(n);
    if (n == 0) return writeRawChunk(src, n, dst);

    std::array<std::array<uint64_t, 256>, kMaxStreams> hist{};
    for (int i = 0; i < streams_; ++i) {
      const Quarter qr = quarter(n, i, streams_);
      countSymbols(src + qr.begin, qr.end - qr.begin, hist[static_cast<size_t>(i)].data());
    }
    std::array<uint64_t, 256> total{};
    int present = 0, minSym = 256, maxSym = -1;
    for (int s = 0; s < 256; ++s) {
      for (size_t i = 0; i < static_cast<size_t>(streams_); ++i) total[static_cast<size_t>(s)] += hist[i][static_cast<size_t>(s)];
      if (total[static_cast<size_t>(s)] != 0) {
        ++present;
        minSym = std::min(minSym, s);
        maxSym = s;
      }
    }
    if (present == 1) return writeRunChunk(src[0], n, dst);

    std::array<uint8_t, 256> lengths;
    huffmanCodeLengths(total.data(), kMaxBits, lengths.data());
    std::array<size_t, kMaxStreams> streamBytes{};
    for (size_t i = 0; i < static_cast<size_t>(streams_); ++i) {
      uint64_t bits = 0;
      for (size_t s = 0; s < 256; ++s) bits += hist[i][s] * lengths[s];
      streamBytes[i] = static_cast<size_t>((bits + 7) / 8);
    }
    const auto range = static_cast<size_t>(maxSym - minSym + 1);
    size_t header = 1 + nBytes + 2 + (range + 1) / 2;
    for (size_t i = 0; i + 1 < static_cast<size_t>(streams_); ++i) header += varintSize(streamBytes[i]);
    size_t size = header;
    for (size_t b : streamBytes) size += b;  // unused streams are 0
    if (size >= 1 + nBytes + n) return writeRawChunk(src, n, dst);

    uint8_t* p = dst;
    *p++ = kModeCoded;
    p += putVarint(p, n);
    *p++ = static_cast<uint8_t>(minSym);
    *p++ = static_cast<uint8_t>(maxSym);
    for (size_t j = 0; j < range; j += 2) {
      const auto lo = lengths[static_cast<size_t>(minSym) + j];
      const auto hi = j + 1 < range ? lengths[static_cast<size_t>(minSym) + j + 1] : uint8_t{0};
      *p++ = static_cast<uint8_t>(lo | (hi << 4));
    }
    for (size_t i = 0; i + 1 < static_cast<size_t>(streams_); ++i) p += putVarint(p, streamBytes[i]);

    std::array<uint16_t, 256> codes;
    canonicalReversedCodes(lengths.data(), codes.data());
    std::array<uint32_t, 256> enc;
    for (size_t s = 0; s < 256; ++s) enc[s] = codes[s] | (static_cast<uint32_t>(lengths[s]) << 16);
    for (int i = 0; i < streams_; ++i) {
      const Quarter qr = quarter(n, i, streams_);
      uint8_t* end = encodeStream(src + qr.begin, qr.end - qr.begin, enc.data(), p, dst + dstCapacity);
      if (static_cast<size_t>(end - p) != streamBytes[static_cast<size_t>(i)])
        throw std::logic_error("huffman compress: stream size differs from its prediction");
      p = end;
    }
    return size;
  }

  void decompress(const uint8_t* src, size_t srcSize, uint8_t* dst, size_t n) const override {
    size_t off = 0;
    if (decodeRawOrRun("huffman", src, srcSize, dst, n, off)) return;
    decodeHuffman(src, srcSize, off, dst, n);
  }

 private:
  static void countSymbols(const uint8_t* p, size_t count, uint64_t* out) {
    // Two interleaved histograms halve the store-to-load stalls on runs of one symbol.
    std::array<std::array<uint32_t, 256>, 2> h{};
    size_t i = 0;
    while (i < count) {
      // uint32 counters: flush at most every 2^31 symbols so they never wrap.
      const size_t stop = std::min(count, i + (size_t{1} << 31));
      for (; i + 2 <= stop; i += 2) {
        ++h[0][p[i]];
        ++h[1][p[i + 1]];
      }
      for (; i < stop; ++i) ++h[0][p[i]];
      for (size_t s = 0; s < 256; ++s) {
        out[s] += uint64_t{h[0][s]} + h[1][s];
        h[0][s] = h[1][s] = 0;
      }
    }
  }

  void decodeHuffman(const uint8_t* src, size_t srcSize, size_t off, uint8_t* dst, size_t n) const {
    if (srcSize - off < 2) fail("header truncated before the symbol range");
    const unsigned minSym = src[off], maxSym = src[off + 1];
    off += 2;
    const std::string rangeText = std::to_string(minSym) + ".." + std::to_string(maxSym);
    if (minSym >= maxSym) fail("symbol range " + rangeText + " holds fewer than 2 symbols");
    const size_t range = maxSym - minSym + 1;
    const size_t lengthBytes = (range + 1) / 2;
    if (srcSize - off < lengthBytes)
      fail("header truncated in the code lengths (" + std::to_string(lengthBytes) + " bytes needed, " +
           std::to_string(srcSize - off) + " left)");
    std::array<uint8_t, 256> lengths{};
    uint64_t kraft = 0;  // in units of 2^-12
    for (size_t j = 0; j < range; ++j) {
      const unsigned len = (src[off + j / 2] >> (4 * (j % 2))) & 0xF;
      if (len > static_cast<unsigned>(kMaxBits))
        fail("code length " + std::to_string(len) + " of symbol " + std::to_string(minSym + j) +
             " exceeds 12 bits");
      lengths[minSym + j] = static_cast<uint8_t>(len);
      if (len != 0) kraft += uint64_t{1} << (kMaxBits - static_cast<int>(len));
    }
    if (range % 2 == 1 && (src[off + lengthBytes - 1] >> 4) != 0)
      fail("unused code-length nibble is not zero");
    if (lengths[minSym] == 0 || lengths[maxSym] == 0)
      fail("symbol range " + rangeText + " does not start and end with present symbols");
    if (kraft != kTableSize)
      fail("code lengths do not form a complete prefix code (Kraft sum " + std::to_string(kraft) + "/4096)");
    off += lengthBytes;

    const auto streams = static_cast<size_t>(streams_);
    std::array<size_t, kMaxStreams> sizes{};
    for (size_t i = 0; i + 1 < streams; ++i) {
      const uint64_t s = getVarint("huffman", src, srcSize, off, "stream size");
      if (s > srcSize - off)
        fail("stream sizes exceed the chunk (" + std::to_string(s) + " bytes for stream " +
             std::to_string(i) + ", at most " + std::to_string(srcSize - off) + " available)");
      sizes[i] = static_cast<size_t>(s);
    }
    size_t used = 0;
    for (size_t i = 0; i + 1 < streams; ++i) {
      used += sizes[i];
      if (used > srcSize - off) {
        std::string list;
        for (size_t j = 0; j + 1 < streams; ++j) {
          if (j != 0) list += '+';
          list += std::to_string(sizes[j]);
        }
        fail("stream sizes " + list + " exceed the " + std::to_string(srcSize - off) + " bytes after the header");
      }
    }
    sizes[streams - 1] = srcSize - off - used;

    std::vector<uint64_t> table(kTableSize);
    buildDecodeTable(lengths.data(), table.data());

    std::array<StreamCursor, kMaxStreams> c;
    size_t start = off;
    for (int i = 0; i < streams_; ++i) {
      const Quarter qr = quarter(n, i, streams_);
      const auto size = sizes[static_cast<size_t>(i)];
      c[static_cast<size_t>(i)] = StreamCursor{8 * start, 8 * (start + size), dst + qr.begin, dst + qr.end};
      start += size;
    }
    if (level_ == HuffmanDecodeLevel::Bmi2)
      decodeFastBmi2(src, srcSize, table.data(), c.data(), streams_);
    else
      decodeFastScalar(src, srcSize, table.data(), c.data(), streams_);

    start = off;
    for (int i = 0; i < streams_; ++i) {
      StreamCursor& cur = c[static_cast<size_t>(i)];
      const size_t size = sizes[static_cast<size_t>(i)];
      decodeTail(src, table.data(), lengths.data(), cur, i, size);
      // Every symbol was produced; the stream must end within its last byte, on zero padding bits.
      const size_t padding = cur.endBit - cur.pos;
      if (padding > 7)
        fail("stream " + std::to_string(i) + " leaves " + std::to_string(padding) + " of its " +
             std::to_string(8 * size) + " bits unused");
      if (padding != 0 && (src[start + size - 1] >> (8 - padding)) != 0)
        fail("stream " + std::to_string(i) + " has non-zero padding bits");
      start += size;
    }
  }

  const int streams_;  // 4 or 8
  const HuffmanDecodeLevel level_;
};

}  // namespace

std::unique_ptr<ExponentCodec> makeHuffmanCodec(int streams, HuffmanDecodeLevel level) {
  if (streams != 4 && streams != 8) throw std::invalid_argument("makeHuffmanCodec: streams must be 4 or 8");
  if (!huffmanDecodeLevelSupported(level))
    throw Error(std::string("huffman decoder level ") + huffmanDecodeLevelName(level) + " is not supported by this CPU");
  return std::make_unique<HuffmanCodec>(streams, level);
}

}  // namespace zipmoe::detail

namespace zipmoe {

const char* huffmanDecodeLevelName(HuffmanDecodeLevel level) {
  switch (level) {
    case HuffmanDecodeLevel::Scalar: return "scalar";
    case HuffmanDecodeLevel::Bmi2: return "bmi2";
  }
  return "?";
}

bool huffmanDecodeLevelSupported(HuffmanDecodeLevel level) {
  static const bool bmi2 = detail::cpuHasBmi2();
  return level == HuffmanDecodeLevel::Scalar || (level == HuffmanDecodeLevel::Bmi2 && bmi2);
}

std::vector<HuffmanDecodeLevel> supportedHuffmanDecodeLevels() {
  return detail::baselineAndWider(HuffmanDecodeLevel::Scalar, HuffmanDecodeLevel::Bmi2,
                                  huffmanDecodeLevelSupported(HuffmanDecodeLevel::Bmi2));
}

HuffmanDecodeLevel bestHuffmanDecodeLevel() { return supportedHuffmanDecodeLevels().back(); }

}  // namespace zipmoe
