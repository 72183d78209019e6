// Internal: constructors of the concrete exponent codecs (use makeCodec() from the public header).
#pragma once

#include <memory>

#include "zipmoe/format/exponent_codec.h"

namespace zipmoe::detail {

std::unique_ptr<ExponentCodec> makeRawCodec();
// streams: 4 (`huffman`) or 8 (`huffman8`); level: a supported decoder level (throws Error otherwise).
std::unique_ptr<ExponentCodec> makeHuffmanCodec(int streams, HuffmanDecodeLevel level);
std::unique_ptr<ExponentCodec> makeNibbleCodec(NibbleDecodeLevel level);  // a supported level (throws Error otherwise)
std::unique_ptr<ExponentCodec> makeLz4Codec(int acceleration);  // lz4 fast mode, acceleration ≥ 1
std::unique_ptr<ExponentCodec> makeLz4HcCodec(int level);       // 1..12
std::unique_ptr<ExponentCodec> makeZstdCodec(int level);        // 1..22 (negative: fast modes)

}  // namespace zipmoe::detail
