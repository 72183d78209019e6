// The `nibble` exponent coder: a 4-bit code per exponent over the chunk's 15 most frequent exponents,
// with one escape code for the rest. It stores 4 bits per exponent where `huffman8` stores about 2.6
// (75 % of BF16 instead of about 66 %), and in exchange decodes with two table shuffles per 64
// exponents instead of one dependent table load per 4 or 5: an order of magnitude faster, so that a
// compressed expert costs little more CPU than a resident one on a machine whose cores are also
// busy computing the model.
//
// Chunk format (all integers little-endian; varint = LEB128, at most 10 bytes):
//   byte    mode: 0 = raw, 1 = run, 2 = nibble
//   varint  n, the number of symbols (checked against the caller's n)
//   raw:    n bytes, verbatim (n = 0, or when nibble coding would not be smaller)
//   run:    1 byte, the symbol repeated n times (n >= 1)
//   nibble: byte d, the dictionary size (1..15); d bytes, the dictionary, strictly increasing;
//           varint e, the number of escaped symbols (at most n);
//           ceil(n/2) bytes of codes: symbol 2j in the low nibble of byte j, symbol 2j+1 in its high
//           nibble (for odd n the last high nibble is 0);
//           e bytes: the escaped symbols in order, none of them in the dictionary.
//           Code c < d decodes to dictionary[c]; code 15 to the next escaped symbol; codes d..14 are
//           invalid. The chunk ends exactly after the escaped symbols.
// The encoder puts the 15 most frequent symbols (ties: the smaller symbol) in the dictionary, or all
// of them when fewer are present.
//
// Decoder levels: `scalar` (baseline x86-64: a 256-entry table of symbol pairs, one load per code
// byte) and `avx2` (per 32 code bytes, the low and high nibbles are looked up in the dictionary with
// vpshufb and interleaved back into 64 symbols; a second vpshufb of a "special" table flags escape
// and invalid codes). A code byte (scalar) or block (avx2) with an escape or an invalid code is decoded
// one symbol at a time by the same function at both levels, so they produce identical output and
// identical errors.
// Indexing (zipmoe/format/nibble_shard.h, indexNibbleChunk): for decoding's kernels, which read the codes in
// place, one pass over a nibble-mode chunk's codes checks them as decoding does (the same messages,
// found in the same order) and lists the positions of its escaped symbols.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "format/chunk_coding.h"
#include "format/codecs.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/nibble_shard.h"

namespace zipmoe::detail {
namespace {

static_assert(std::endian::native == std::endian::little, "symbol pairs are stored as little-endian uint16");

constexpr unsigned kEscape = 15;
constexpr size_t kMaxDictionary = 15;
constexpr size_t kBlockSymbols = 64;  // the AVX2 loop's step: 32 code bytes

[[noreturn]] void fail(const std::string& what) { failChunk("nibble", what); }

// The parsed body of a nibble-mode chunk.
struct Body {
  std::array<uint8_t, 16> dictionary{};  // entries d..15 are 0
  size_t size = 0;                       // d
  const uint8_t* codes = nullptr;        // ceil(n/2) bytes
  const uint8_t* escapes = nullptr;      // e bytes
  size_t escapeCount = 0;
};

// Checks a code c ≥ size at symbol j, `used` escapes having been taken before it: it must be an
// escape with an escaped symbol left for it.
void checkSpecial(const Body& b, unsigned c, size_t j, size_t used) {
  if (c != kEscape)
    fail("code " + std::to_string(c) + " at symbol " + std::to_string(j) + " is outside the dictionary of " +
         std::to_string(b.size) + " symbols");
  if (used == b.escapeCount)
    fail("escape code at symbol " + std::to_string(j) + " but only " + std::to_string(b.escapeCount) +
         " escaped symbols are stored");
}

// Decodes symbols [begin, end) one at a time; `escape` is the index of the next escaped symbol.
void decodeScalar(const Body& b, size_t begin, size_t end, uint8_t* dst, size_t& escape) {
  for (size_t j = begin; j < end; ++j) {
    const unsigned c = (b.codes[j >> 1] >> (4 * (j & 1))) & 0xF;
    if (c < b.size) {
      dst[j] = b.dictionary[c];
    } else {
      checkSpecial(b, c, j, escape);
      dst[j] = b.escapes[escape++];
    }
  }
}

// Baseline x86-64: one table load per code byte (two symbols); a byte holding an escape or invalid
// code goes through decodeScalar.
void decodePairs(const Body& b, size_t n, uint8_t* dst, size_t& escape) {
  std::array<uint16_t, 256> pair;
  std::array<bool, 256> special;
  for (unsigned v = 0; v < 256; ++v) {
    const unsigned lo = v & 0xF, hi = v >> 4;
    special[v] = lo >= b.size || hi >= b.size;
    pair[v] = static_cast<uint16_t>(b.dictionary[lo] | (b.dictionary[hi] << 8));
  }
  size_t j = 0;
  for (; j + 2 <= n; j += 2) {
    const uint8_t v = b.codes[j / 2];
    if (special[v]) {
      decodeScalar(b, j, j + 2, dst, escape);
    } else {
      std::memcpy(dst + j, &pair[v], 2);
    }
  }
  decodeScalar(b, j, n, dst, escape);
}

// The AVX2 loops' table: 0xFF for a code the dictionary does not hold (codes d..14 are invalid, 15
// escapes), in both lanes.
__attribute__((target("avx2"))) inline __m256i specialCodes(const Body& b) {
  alignas(16) std::array<uint8_t, 16> special{};
  for (size_t c = b.size; c < 16; ++c) special[c] = 0xFF;
  return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(special.data())));
}

// Block j (64 symbols, 32 code bytes) split into its low nibbles (symbols j, j + 2, …) and high
// nibbles (j + 1, j + 3, …); returns whether any code is special (see specialCodes).
__attribute__((target("avx2"))) inline bool splitBlock(const Body& b, size_t j, __m256i special, __m256i& lo,
                                                        __m256i& hi) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i in = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.codes + j / 2));
  lo = _mm256_and_si256(in, low4);
  hi = _mm256_and_si256(_mm256_srli_epi16(in, 4), low4);
  const __m256i bad = _mm256_or_si256(_mm256_shuffle_epi8(special, lo), _mm256_shuffle_epi8(special, hi));
  return !_mm256_testz_si256(bad, bad);
}

__attribute__((target("avx2"))) void decodeAvx2(const Body& b, size_t n, uint8_t* dst, size_t& escape) {
  const __m256i dict = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.dictionary.data())));
  const __m256i special = specialCodes(b);
  size_t j = 0;
  for (; j + kBlockSymbols <= n; j += kBlockSymbols) {
    __m256i lo, hi;
    if (splitBlock(b, j, special, lo, hi)) {
      decodeScalar(b, j, j + kBlockSymbols, dst, escape);
      continue;
    }
    const __m256i vlo = _mm256_shuffle_epi8(dict, lo);  // symbols 0, 2, 4, ... of the block
    const __m256i vhi = _mm256_shuffle_epi8(dict, hi);  // symbols 1, 3, 5, ...
    // unpack works within 128-bit lanes: lane 0 of a and c holds symbols 0..15 and 16..31, lane 1
    // symbols 32..47 and 48..63.
    const __m256i a = _mm256_unpacklo_epi8(vlo, vhi);
    const __m256i c = _mm256_unpackhi_epi8(vlo, vhi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), _mm256_permute2x128_si256(a, c, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j + 32), _mm256_permute2x128_si256(a, c, 0x31));
  }
  decodeScalar(b, j, n, dst, escape);
}

// Parses a nibble-mode chunk body (after the prelude, at `off`), checking every header field.
Body parse(const uint8_t* src, size_t srcSize, size_t off, size_t n) {
  Body b;
  if (off >= srcSize) fail("header truncated before the dictionary size");
  b.size = src[off++];
  if (b.size < 1 || b.size > kMaxDictionary)
    fail("dictionary size " + std::to_string(b.size) + " is outside 1..15");
  if (srcSize - off < b.size)
    fail("header truncated in the dictionary (" + std::to_string(b.size) + " bytes needed, " +
         std::to_string(srcSize - off) + " left)");
  std::array<bool, 256> inDictionary{};
  for (size_t c = 0; c < b.size; ++c) {
    b.dictionary[c] = src[off + c];
    inDictionary[src[off + c]] = true;
    if (c > 0 && b.dictionary[c] <= b.dictionary[c - 1])
      fail("dictionary is not strictly increasing at entry " + std::to_string(c) + " (" +
           std::to_string(b.dictionary[c - 1]) + " then " + std::to_string(b.dictionary[c]) + ")");
  }
  off += b.size;
  const uint64_t e = getVarint("nibble", src, srcSize, off, "escape count");
  if (e > n) fail("escape count " + std::to_string(e) + " exceeds the " + std::to_string(n) + " symbols");
  b.escapeCount = static_cast<size_t>(e);
  const size_t codeBytes = (n + 1) / 2;
  const size_t expected = codeBytes + b.escapeCount;
  if (srcSize - off != expected)
    fail("holds " + std::to_string(srcSize - off) + " bytes after its header, expected " +
         std::to_string(codeBytes) + " code bytes + " + std::to_string(b.escapeCount) + " escaped symbols");
  b.codes = src + off;
  b.escapes = b.codes + codeBytes;
  if (n % 2 == 1 && (b.codes[codeBytes - 1] >> 4) != 0) fail("unused last code nibble is not zero");
  for (size_t i = 0; i < b.escapeCount; ++i)
    if (inDictionary[b.escapes[i]])
      fail("escaped symbol " + std::to_string(i) + " (" + std::to_string(b.escapes[i]) +
           ") is in the dictionary");
  return b;
}

// The escapes of symbols [begin, end), one at a time: appends their positions while they fit (`count`
// goes on past `capacity`), and fails on an invalid code as decodeScalar does.
void indexScalar(const Body& b, size_t begin, size_t end, uint32_t* positions, size_t capacity, size_t& count) {
  for (size_t j = begin; j < end; ++j) {
    const unsigned c = (b.codes[j >> 1] >> (4 * (j & 1))) & 0xF;
    if (c < b.size) continue;
    checkSpecial(b, c, j, count);
    if (count < capacity) positions[count] = static_cast<uint32_t>(j);
    ++count;
  }
}

// Spreads the 32 bits of v to the even bits of the result (bit i to bit 2i).
inline uint64_t spreadEven(uint32_t v) {
  uint64_t x = v;
  x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
  x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
  x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;
  x = (x | (x << 2)) & 0x3333333333333333ull;
  x = (x | (x << 1)) & 0x5555555555555555ull;
  return x;
}

// The same over 64 symbols at a time: a block with no code ≥ size (the common case) is skipped after
// two shuffles of a "special" table, as decodeAvx2 flags it. A block whose special codes are all
// escapes with escaped symbols left for them lists their positions from the two nibbles' compare
// masks (byte i holds symbols 2i and 2i + 1); any other block (an invalid code, or more escapes than
// stored) goes through indexScalar, which finds the same problem in the same order as decoding.
__attribute__((target("avx2"))) void indexAvx2(const Body& b, size_t n, uint32_t* positions, size_t capacity,
                                                size_t& count) {
  const __m256i special = specialCodes(b);
  const __m256i escape = _mm256_set1_epi8(static_cast<char>(kEscape));
  size_t j = 0;
  for (; j + kBlockSymbols <= n; j += kBlockSymbols) {
    __m256i lo, hi;
    if (!splitBlock(b, j, special, lo, hi)) continue;
    const __m256i escLo = _mm256_cmpeq_epi8(lo, escape), escHi = _mm256_cmpeq_epi8(hi, escape);
    const auto specialLo = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_shuffle_epi8(special, lo)));
    const auto specialHi = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_shuffle_epi8(special, hi)));
    const auto maskLo = static_cast<uint32_t>(_mm256_movemask_epi8(escLo));
    const auto maskHi = static_cast<uint32_t>(_mm256_movemask_epi8(escHi));
    uint64_t found = spreadEven(maskLo) | (spreadEven(maskHi) << 1);
    const auto inBlock = static_cast<size_t>(std::popcount(found));
    if (specialLo != maskLo || specialHi != maskHi || count + inBlock > b.escapeCount) {
      indexScalar(b, j, j + kBlockSymbols, positions, capacity, count);
      continue;
    }
    for (; found != 0; found &= found - 1) {
      if (count < capacity) positions[count] = static_cast<uint32_t>(j + static_cast<size_t>(std::countr_zero(found)));
      ++count;
    }
  }
  indexScalar(b, j, n, positions, capacity, count);
}

bool cpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}

class NibbleCodec final : public ExponentCodec {
 public:
  explicit NibbleCodec(NibbleDecodeLevel level) : level_(level) {}

  CodecSpec spec() const override { return CodecSpec{CodecId::Nibble, 0}; }

  size_t maxCompressedSize(size_t n) const override { return 1 + varintSize(n) + n; }

  size_t compress(const uint8_t* src, size_t n, uint8_t* dst, size_t dstCapacity) const override {
    if (dstCapacity < maxCompressedSize(n))
      throw Error("nibble compress: destination holds " + std::to_string(dstCapacity) + " bytes, " +
                  std::to_string(maxCompressedSize(n)) + " needed for " + std::to_string(n) + " symbols");
    const size_t nBytes = varintSize(n);
    const size_t rawSize = 1 + nBytes + n;
    if (n == 0) return writeRawChunk(src, n, dst);
    std::array<uint64_t, 256> count{};
    for (size_t i = 0; i < n; ++i) ++count[src[i]];
    std::array<uint8_t, 256> bySymbol;
    for (size_t s = 0; s < 256; ++s) bySymbol[s] = static_cast<uint8_t>(s);
    std::stable_sort(bySymbol.begin(), bySymbol.end(), [&](uint8_t a, uint8_t b) { return count[a] > count[b]; });
    size_t present = 0;
    while (present < 256 && count[bySymbol[present]] != 0) ++present;
    if (present == 1) return writeRunChunk(src[0], n, dst);
    const size_t d = std::min(present, kMaxDictionary);
    std::array<uint8_t, kMaxDictionary> dictionary;
    std::copy_n(bySymbol.begin(), d, dictionary.begin());
    std::sort(dictionary.begin(), dictionary.begin() + static_cast<std::ptrdiff_t>(d));
    std::array<uint8_t, 256> code;
    code.fill(kEscape);
    for (size_t c = 0; c < d; ++c) code[dictionary[c]] = static_cast<uint8_t>(c);
    uint64_t e = 0;
    for (size_t i = d; i < present; ++i) e += count[bySymbol[i]];
    const size_t size = 1 + nBytes + 1 + d + varintSize(e) + (n + 1) / 2 + static_cast<size_t>(e);
    if (size >= rawSize) return writeRawChunk(src, n, dst);

    uint8_t* p = dst;
    *p++ = kModeCoded;
    p += putVarint(p, n);
    *p++ = static_cast<uint8_t>(d);
    std::memcpy(p, dictionary.data(), d);
    p += d;
    p += putVarint(p, e);
    uint8_t* codes = p;
    uint8_t* escapes = p + (n + 1) / 2;
    for (size_t i = 0; i + 1 < n; i += 2) {
      const uint8_t a = code[src[i]], b = code[src[i + 1]];
      codes[i / 2] = static_cast<uint8_t>(a | (b << 4));
      if (a == kEscape) *escapes++ = src[i];
      if (b == kEscape) *escapes++ = src[i + 1];
    }
    if (n % 2 == 1) {
      const uint8_t a = code[src[n - 1]];
      codes[n / 2] = a;
      if (a == kEscape) *escapes++ = src[n - 1];
    }
    return size;
  }

  void decompress(const uint8_t* src, size_t srcSize, uint8_t* dst, size_t n) const override {
    size_t off = 0;
    if (decodeRawOrRun("nibble", src, srcSize, dst, n, off)) return;
    const Body body = parse(src, srcSize, off, n);
    size_t escape = 0;
    if (level_ == NibbleDecodeLevel::Avx2)
      decodeAvx2(body, n, dst, escape);
    else
      decodePairs(body, n, dst, escape);
    if (escape != body.escapeCount)
      fail(std::to_string(body.escapeCount) + " escaped symbols are stored but the codes use " +
           std::to_string(escape));
  }

 private:
  const NibbleDecodeLevel level_;
};

}  // namespace

std::unique_ptr<ExponentCodec> makeNibbleCodec(NibbleDecodeLevel level) {
  if (!nibbleDecodeLevelSupported(level))
    throw Error(std::string("nibble decoder level ") + nibbleDecodeLevelName(level) + " is not supported by this CPU");
  return std::make_unique<NibbleCodec>(level);
}

}  // namespace zipmoe::detail

namespace zipmoe {

const char* nibbleDecodeLevelName(NibbleDecodeLevel level) {
  switch (level) {
    case NibbleDecodeLevel::Scalar: return "scalar";
    case NibbleDecodeLevel::Avx2: return "avx2";
  }
  return "?";
}

bool nibbleDecodeLevelSupported(NibbleDecodeLevel level) {
  static const bool avx2 = detail::cpuHasAvx2();
  return level == NibbleDecodeLevel::Scalar || (level == NibbleDecodeLevel::Avx2 && avx2);
}

std::vector<NibbleDecodeLevel> supportedNibbleDecodeLevels() {
  return detail::baselineAndWider(NibbleDecodeLevel::Scalar, NibbleDecodeLevel::Avx2,
                                  nibbleDecodeLevelSupported(NibbleDecodeLevel::Avx2));
}

NibbleDecodeLevel bestNibbleDecodeLevel() { return supportedNibbleDecodeLevels().back(); }

std::optional<NibbleShard> indexNibbleChunk(const uint8_t* src, size_t srcSize, size_t n, uint32_t* positions,
                                            size_t capacity, NibbleDecodeLevel level) {
  using namespace detail;
  if (!nibbleDecodeLevelSupported(level))
    throw Error(std::string("nibble indexing level ") + nibbleDecodeLevelName(level) + " is not supported by this CPU");
  size_t off = 0;
  if (readPrelude("nibble", src, srcSize, n, off) != kModeCoded)
    return std::nullopt;  // raw or run: decoding checks and reads it
  const Body b = parse(src, srcSize, off, n);
  if (n > (uint64_t{1} << 32)) return std::nullopt;  // positions are 32-bit
  size_t escapes = 0;
  if (level == NibbleDecodeLevel::Avx2)
    indexAvx2(b, n, positions, capacity, escapes);
  else
    indexScalar(b, 0, n, positions, capacity, escapes);
  if (escapes != b.escapeCount)
    fail(std::to_string(b.escapeCount) + " escaped symbols are stored but the codes use " + std::to_string(escapes));
  if (escapes > capacity) return std::nullopt;
  NibbleShard shard;
  shard.codes = b.codes;
  shard.dictionary = b.dictionary;
  shard.size = static_cast<uint8_t>(b.size);
  shard.escapes = b.escapes;
  shard.escapePositions = positions;
  shard.escapeCount = escapes;
  return shard;
}

std::unique_ptr<ExponentCodec> makeNibbleCodec(NibbleDecodeLevel level) { return detail::makeNibbleCodec(level); }

}  // namespace zipmoe
