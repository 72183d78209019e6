// Fuzzes the E-chunk decoders the store reader runs on bytes from disk. Input layout: byte 0 picks
// the codec (the Huffman and nibble codecs once per decoder level this CPU supports), bytes 1–3 the expected decoded size (≤ 1 MiB), the rest is the chunk. Decoding must
// throw zipmoe::Error or succeed, writing only inside the output buffer. For the nibble codec, indexing
// for the GEMV (zipmoe/format/nibble_shard.h) runs on the same bytes too: it must fail exactly when decoding
// fails on a nibble-mode chunk, write only inside its positions, and describe the decoded plane.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "zipmoe/base/error.h"
#include "zipmoe/format/exponent_codec.h"
#include "zipmoe/format/nibble_shard.h"

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
  bool decoded = true;
  try {
    codec.decompress(data + 4, size - 4, out.data(), n);
  } catch (const zipmoe::Error&) {
    decoded = false;
  }
  if (codec.spec().id != zipmoe::CodecId::Nibble || size == 4 || data[4] != 2) return 0;  // nibble mode only
  std::vector<uint32_t> positions(n / 64 + 1);
  std::optional<zipmoe::NibbleShard> shard;
  try {
    shard = zipmoe::indexNibbleChunk(data + 4, size - 4, n, positions.data(), positions.size());
  } catch (const zipmoe::Error&) {
    if (decoded) std::abort();  // indexing refused a chunk decoding accepts
    return 0;
  }
  if (!decoded) std::abort();  // indexing accepted a chunk decoding refuses
  if (!shard) return 0;        // more escapes than positions
  size_t escape = 0;
  for (size_t j = 0; j < n; ++j) {
    const unsigned c = (shard->codes[j / 2] >> (4 * (j % 2))) & 0xF;
    const uint8_t e = c < shard->size ? shard->dictionary[c]
                      : (escape < shard->escapeCount && shard->escapePositions[escape] == j) ? shard->escapes[escape++]
                                                                                             : static_cast<uint8_t>(~out[j]);
    if (e != out[j]) std::abort();  // the shard does not describe the decoded plane
  }
  return 0;
}
