// The chunk prelude and varints the byte-oriented exponent codecs share (see chunk_coding.h).
#include "format/chunk_coding.h"

#include <cstring>

#include "zipmoe/base/error.h"

namespace zipmoe::detail {
namespace {
constexpr size_t kMaxVarint = 10;
enum Mode : uint8_t { kModeRaw = 0, kModeRun = 1 };
}  // namespace

void failChunk(const char* codec, const std::string& what) { throw Error(std::string(codec) + " chunk: " + what); }

size_t varintSize(uint64_t v) {
  size_t size = 1;
  for (; v >= 0x80; v >>= 7) ++size;
  return size;
}

size_t putVarint(uint8_t* p, uint64_t v) {
  size_t i = 0;
  for (; v >= 0x80; v >>= 7) p[i++] = static_cast<uint8_t>(v | 0x80);
  p[i++] = static_cast<uint8_t>(v);
  return i;
}

uint64_t getVarint(const char* codec, const uint8_t* src, size_t srcSize, size_t& offset, const char* field) {
  uint64_t value = 0;
  for (size_t i = 0; i < kMaxVarint; ++i) {
    if (offset >= srcSize)
      failChunk(codec, std::string(field) + " truncated at byte " + std::to_string(offset) + " of " +
                           std::to_string(srcSize));
    const uint64_t byte = src[offset++];
    if (i == kMaxVarint - 1 && byte > 1)
      failChunk(codec, std::string(field) + " varint overflows 64 bits at byte " + std::to_string(offset - 1));
    value |= (byte & 0x7F) << (7 * i);
    if ((byte & 0x80) == 0) return value;
  }
  failChunk(codec, std::string(field) + " varint longer than 10 bytes at byte " + std::to_string(offset));
}

size_t writeRawChunk(const uint8_t* src, size_t n, uint8_t* dst) {
  dst[0] = kModeRaw;
  const size_t header = 1 + putVarint(dst + 1, n);
  if (n != 0) std::memcpy(dst + header, src, n);
  return header + n;
}

size_t writeRunChunk(uint8_t symbol, size_t n, uint8_t* dst) {
  dst[0] = kModeRun;
  const size_t header = 1 + putVarint(dst + 1, n);
  dst[header] = symbol;
  return header + 1;
}

uint8_t readPrelude(const char* codec, const uint8_t* src, size_t srcSize, size_t n, size_t& offset) {
  if (srcSize == 0) failChunk(codec, "empty (expected a mode byte and a symbol count)");
  offset = 1;
  const uint8_t mode = src[0];
  if (mode > kModeCoded)
    failChunk(codec, "unknown mode " + std::to_string(mode) + " (expected 0 raw, 1 run, 2 " + codec + ")");
  const uint64_t count = getVarint(codec, src, srcSize, offset, "symbol count");
  if (count != n)
    failChunk(codec, "encodes " + std::to_string(count) + " symbols but " + std::to_string(n) + " were requested");
  return mode;
}

bool decodeRawOrRun(const char* codec, const uint8_t* src, size_t srcSize, uint8_t* dst, size_t n, size_t& offset) {
  const uint8_t mode = readPrelude(codec, src, srcSize, n, offset);
  const size_t left = srcSize - offset;
  if (mode == kModeRaw) {
    if (left != n)
      failChunk(codec, "raw mode holds " + std::to_string(left) + " bytes after its header, expected " +
                           std::to_string(n));
    if (n != 0) std::memcpy(dst, src + offset, n);
    return true;
  }
  if (mode == kModeRun) {
    if (n == 0) failChunk(codec, "run mode with 0 symbols");
    if (left != 1) failChunk(codec, "run mode holds " + std::to_string(left) + " bytes after its header, expected 1");
    std::memset(dst, src[offset], n);
    return true;
  }
  return false;
}

}  // namespace zipmoe::detail
