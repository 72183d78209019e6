// The codec registry: names, levels, the factory, and the raw (identity) codec.
#include "zipmoe/format/exponent_codec.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "format/codecs.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

class RawCodec final : public ExponentCodec {
 public:
  CodecSpec spec() const override { return {CodecId::Raw, 0}; }
  size_t maxCompressedSize(size_t n) const override { return n; }
  size_t compress(const uint8_t* src, size_t n, uint8_t* dst, size_t dstCapacity) const override {
    if (dstCapacity < n) throw Error("raw codec: output buffer too small");
    if (n > 0) std::memcpy(dst, src, n);
    return n;
  }
  void decompress(const uint8_t* src, size_t srcSize, uint8_t* dst, size_t n) const override {
    if (srcSize != n)
      throw Error("raw chunk: holds " + std::to_string(srcSize) + " bytes, expected " + std::to_string(n));
    if (n > 0) std::memcpy(dst, src, n);
  }
};

struct CodecNameEntry {
  CodecId id;
  const char* name;
  int defaultLevel;
};
constexpr CodecNameEntry kCodecNames[] = {
    {CodecId::Huffman8, "huffman8", 0}, {CodecId::Huffman, "huffman", 0}, {CodecId::Nibble, "nibble", 0}, {CodecId::Lz4, "lz4", 1}, {CodecId::Lz4Hc, "lz4hc", 9},
    {CodecId::Zstd, "zstd", 3},       {CodecId::Raw, "raw", 0},
};

std::string acceptedNames() {
  std::string s;
  for (const auto& e : kCodecNames) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

int effectiveLevel(const CodecSpec& spec) {
  if (spec.level != 0) return spec.level;
  for (const auto& e : kCodecNames)
    if (e.id == spec.id) return e.defaultLevel;
  return 0;
}

}  // namespace

namespace detail {
std::unique_ptr<ExponentCodec> makeRawCodec() { return std::make_unique<RawCodec>(); }
}  // namespace detail

std::string codecName(CodecId id) {
  for (const auto& e : kCodecNames)
    if (e.id == id) return e.name;
  return "codec#" + std::to_string(static_cast<int>(id));
}

std::string describe(const CodecSpec& spec) {
  const int level = effectiveLevel(spec);
  if (spec.id == CodecId::Huffman || spec.id == CodecId::Huffman8 || spec.id == CodecId::Nibble || spec.id == CodecId::Raw)
    return codecName(spec.id);
  return codecName(spec.id) + ":" + std::to_string(level);
}

CodecSpec parseCodecSpec(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  for (const auto& e : kCodecNames) {
    if (name != e.name) continue;
    CodecSpec spec{e.id, 0};
    if (colon != std::string_view::npos) {
      const std::string_view lv = text.substr(colon + 1);
      int level = 0;
      const auto [ptr, ec] = std::from_chars(lv.data(), lv.data() + lv.size(), level);
      if (ec != std::errc() || ptr != lv.data() + lv.size() || lv.empty())
        throw Error("codec '" + std::string(text) + "': level '" + std::string(lv) + "' is not an integer");
      spec.level = level;
    }
    makeCodec(spec);  // validates the level
    return spec;
  }
  throw Error("unknown codec '" + std::string(text) + "' (accepted: " + acceptedNames() + ")");
}

std::unique_ptr<ExponentCodec> makeCodec(const CodecSpec& spec) { return makeCodec(spec, bestHuffmanDecodeLevel()); }

std::unique_ptr<ExponentCodec> makeCodec(const CodecSpec& spec, HuffmanDecodeLevel decodeLevel) {
  const int level = effectiveLevel(spec);
  auto badLevel = [&](const char* range) {
    return Error("codec " + codecName(spec.id) + ": level " + std::to_string(level) + " is out of range (" + range +
                 ")");
  };
  switch (spec.id) {
    case CodecId::Raw: return detail::makeRawCodec();
    case CodecId::Huffman:
      if (spec.level != 0) throw badLevel("huffman takes no level");
      return detail::makeHuffmanCodec(4, decodeLevel);
    case CodecId::Huffman8:
      if (spec.level != 0) throw badLevel("huffman8 takes no level");
      return detail::makeHuffmanCodec(8, decodeLevel);
    case CodecId::Nibble:
      if (spec.level != 0) throw badLevel("nibble takes no level");
      return detail::makeNibbleCodec(bestNibbleDecodeLevel());
    case CodecId::Lz4:
      if (level < 1 || level > 65537) throw badLevel("acceleration 1..65537");
      return detail::makeLz4Codec(level);
    case CodecId::Lz4Hc:
      if (level < 1 || level > 12) throw badLevel("1..12");
      return detail::makeLz4HcCodec(level);
    case CodecId::Zstd:
      if (level < -7 || level > 22 || level == 0) throw badLevel("-7..-1, 1..22");
      return detail::makeZstdCodec(level);
  }
  throw Error("unknown codec id " + std::to_string(static_cast<int>(spec.id)));
}

std::vector<CodecSpec> benchmarkCodecSpecs() {
  return {{CodecId::Huffman8, 0}, {CodecId::Huffman, 0}, {CodecId::Nibble, 0}, {CodecId::Zstd, 1}, {CodecId::Zstd, 3},   {CodecId::Zstd, 19},
          {CodecId::Lz4, 1},     {CodecId::Lz4Hc, 9}, {CodecId::Lz4Hc, 12}};
}

double entropyBits(const uint64_t* histogram256) {
  uint64_t total = 0;
  for (int i = 0; i < 256; ++i) total += histogram256[i];
  if (total == 0) return 0.0;
  double h = 0;
  for (int i = 0; i < 256; ++i) {
    if (histogram256[i] == 0) continue;
    const double p = static_cast<double>(histogram256[i]) / static_cast<double>(total);
    h -= p * std::log2(p);
  }
  return h;
}

}  // namespace zipmoe
