// Fuzzes the E-chunk decoders the store reader runs on bytes from disk. Input layout: byte 0 picks
// the codec (the Huffman and nibble codecs once per decoder level this CPU supports), bytes 1–3 the expected decoded size (≤ 1 MiB), the rest is the chunk. Decoding must
// throw zipmoe::Error or succeed, writing only inside the output buffer.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "zipmoe/error.h"
#include "zipmoe/exponent_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  static const std::vector<std::unique_ptr<zipmoe::ExponentCodec>> codecs = [] {
    std::vector<std::unique_ptr<zipmoe::ExponentCodec>> v;
    // 0-4 are fixed (the seeds' byte 0); then each Huffman codec at every decoder level, scalar first,
    // then the nibble codec at every level.
    v.push_back(zipmoe::makeCodec({zipmoe::CodecId::Huffman, 0}));
    v.push_back(zipmoe::makeCodec({zipmoe::CodecId::Lz4Hc, 0}));
    v.push_back(zipmoe::makeCodec({zipmoe::CodecId::Zstd, 0}));
    v.push_back(zipmoe::makeCodec({zipmoe::CodecId::Raw, 0}));
    v.push_back(zipmoe::makeCodec({zipmoe::CodecId::Huffman8, 0}));
    for (const auto level : zipmoe::supportedHuffmanDecodeLevels()) {
      v.push_back(zipmoe::makeCodec({zipmoe::CodecId::Huffman, 0}, level));
      v.push_back(zipmoe::makeCodec({zipmoe::CodecId::Huffman8, 0}, level));
    }
    for (const auto level : zipmoe::supportedNibbleDecodeLevels()) v.push_back(zipmoe::makeNibbleCodec(level));
    return v;
  }();
  const auto& codec = *codecs[data[0] % codecs.size()];
  const size_t n = ((size_t{data[1]} << 16) | (size_t{data[2]} << 8) | data[3]) & 0xFFFFF;
  std::vector<uint8_t> out(n);
  try {
    codec.decompress(data + 4, size - 4, out.data(), n);
  } catch (const zipmoe::Error&) {
  }
  return 0;
}
