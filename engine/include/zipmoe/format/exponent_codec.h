// ExponentCodec — lossless coders for exponent planes (one E-chunk at a time).
//
// Each E-chunk is compressed on its own, so that L workers can decompress the shards of one tensor
// in parallel. Implementations: our order-0 canonical Huffman coders (code lengths capped at 12 bits,
// a 4096-entry multi-symbol decode table, bit streams decoded in lock-step): `huffman8` (8 streams
// per chunk, the default) and `huffman` (4 streams, the first stores' format); `nibble` (a 4-bit
// code over each chunk's 15 most frequent exponents plus an escape: larger, about 75 % of BF16, but
// decoded with SIMD shuffles an order of magnitude faster); lz4 (fast and HC) and zstd (any level).
//
// Thread-safety: a codec object is immutable after construction; compress() and decompress() may be
// called concurrently from any number of threads. decompress() validates its input completely and
// throws zipmoe::Error on malformed data — it never reads or writes out of bounds.
// Cost: see `zipmoe bench codec` and docs/CODECS.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zipmoe {

// Stored in the manifest: never renumber.
enum class CodecId : uint8_t { Raw = 0, Huffman = 1, Lz4 = 2, Lz4Hc = 3, Zstd = 4, Huffman8 = 5, Nibble = 6 };

struct CodecSpec {
  CodecId id = CodecId::Huffman8;
  int level = 0;  // codec-specific; 0 = the codec's default
  bool operator==(const CodecSpec&) const = default;
};

// "huffman8", "huffman", "nibble", "raw", "lz4", "lz4hc", "zstd"; with an optional ":LEVEL" suffix ("zstd:19").
// Throws zipmoe::Error naming the text and the accepted names.
CodecSpec parseCodecSpec(std::string_view text);
std::string codecName(CodecId id);
// "zstd:3" style, with the effective level.
std::string describe(const CodecSpec& spec);

class ExponentCodec {
 public:
  virtual ~ExponentCodec() = default;
  ExponentCodec() = default;
  ExponentCodec(const ExponentCodec&) = delete;
  ExponentCodec& operator=(const ExponentCodec&) = delete;

  virtual CodecSpec spec() const = 0;
  // Upper bound of compress()'s output for n input bytes.
  virtual size_t maxCompressedSize(size_t n) const = 0;
  // Compresses n bytes; returns the compressed size (≤ maxCompressedSize(n)).
  // REQUIRES: dstCapacity >= maxCompressedSize(n).
  virtual size_t compress(const uint8_t* src, size_t n, uint8_t* dst, size_t dstCapacity) const = 0;
  // Decodes exactly n bytes from src[0, srcSize). Throws zipmoe::Error if src is not a valid encoding
  // of exactly n bytes.
  virtual void decompress(const uint8_t* src, size_t srcSize, uint8_t* dst, size_t n) const = 0;
};

// Throws zipmoe::Error for an invalid level. Huffman codecs decode at bestHuffmanDecodeLevel().
std::unique_ptr<ExponentCodec> makeCodec(const CodecSpec& spec);

// Instruction-set levels of the Huffman decoders' fast loop (identical output and errors at every
// level): Scalar = baseline x86-64, Bmi2 = the same loop with BMI2/LZCNT (shrx, lzcnt).
enum class HuffmanDecodeLevel : uint8_t { Scalar, Bmi2 };
const char* huffmanDecodeLevelName(HuffmanDecodeLevel level);  // "scalar", "bmi2"
bool huffmanDecodeLevelSupported(HuffmanDecodeLevel level);
std::vector<HuffmanDecodeLevel> supportedHuffmanDecodeLevels();  // scalar first
HuffmanDecodeLevel bestHuffmanDecodeLevel();                     // the widest supported
// makeCodec with the Huffman decoders forced to `level` (other codecs ignore it); throws Error if the
// CPU does not support it.
std::unique_ptr<ExponentCodec> makeCodec(const CodecSpec& spec, HuffmanDecodeLevel level);

// Instruction-set levels of the nibble decoder (identical output and errors at every level): Scalar
// = baseline x86-64 (a symbol-pair table, two symbols per load), Avx2 = 64 symbols per step with
// vpshufb. makeCodec decodes
// at bestNibbleDecodeLevel(); makeNibbleCodec forces a level (throws Error if the CPU lacks it).
enum class NibbleDecodeLevel : uint8_t { Scalar, Avx2 };
const char* nibbleDecodeLevelName(NibbleDecodeLevel level);  // "scalar", "avx2"
bool nibbleDecodeLevelSupported(NibbleDecodeLevel level);
std::vector<NibbleDecodeLevel> supportedNibbleDecodeLevels();  // scalar first
NibbleDecodeLevel bestNibbleDecodeLevel();                     // the widest supported
std::unique_ptr<ExponentCodec> makeNibbleCodec(NibbleDecodeLevel level);

// Every codec and level `zipmoe bench codec` compares, default first.
std::vector<CodecSpec> benchmarkCodecSpecs();

// Shannon entropy in bits per symbol of a byte histogram (256 counts).
double entropyBits(const uint64_t* histogram256);

}  // namespace zipmoe
