// lz4 (fast mode with an acceleration factor) and lz4-HC, as in the ZipMoE paper's implementation.
#include <lz4.h>
#include <lz4hc.h>

#include <climits>
#include <string>

#include "format/codecs.h"
#include "zipmoe/base/error.h"

namespace zipmoe::detail {
namespace {

int checkedInt(size_t n, const char* what) {
  if (n > static_cast<size_t>(LZ4_MAX_INPUT_SIZE))
    throw Error(std::string("lz4: ") + what + " of " + std::to_string(n) + " bytes exceeds LZ4_MAX_INPUT_SIZE");
  return static_cast<int>(n);
}

class Lz4Codec final : public ExponentCodec {
 public:
  Lz4Codec(bool hc, int level) : hc_(hc), level_(level) {}
  CodecSpec spec() const override { return {hc_ ? CodecId::Lz4Hc : CodecId::Lz4, level_}; }
  size_t maxCompressedSize(size_t n) const override {
    return static_cast<size_t>(LZ4_compressBound(checkedInt(n, "chunk")));
  }
  size_t compress(const uint8_t* src, size_t n, uint8_t* dst, size_t dstCapacity) const override {
    const int cap = static_cast<int>(std::min<size_t>(dstCapacity, INT_MAX));
    static const uint8_t kEmpty = 0;  // lz4-HC dereferences src even for an empty input
    const char* s = reinterpret_cast<const char*>(n == 0 ? &kEmpty : src);
    char* d = reinterpret_cast<char*>(dst);
    const int r = hc_ ? LZ4_compress_HC(s, d, checkedInt(n, "chunk"), cap, level_)
                      : LZ4_compress_fast(s, d, checkedInt(n, "chunk"), cap, level_);
    if (r <= 0 && n > 0) throw Error("lz4: compression failed (output buffer too small?)");
    return static_cast<size_t>(r);
  }
  void decompress(const uint8_t* src, size_t srcSize, uint8_t* dst, size_t n) const override {
    const int r = LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst),
                                      checkedInt(srcSize, "compressed chunk"), checkedInt(n, "chunk"));
    if (r < 0 || static_cast<size_t>(r) != n)
      throw Error("lz4 chunk: corrupt data (" + std::to_string(srcSize) + " bytes did not decode to " +
                  std::to_string(n) + " bytes)");
  }

 private:
  bool hc_;
  int level_;
};

}  // namespace

std::unique_ptr<ExponentCodec> makeLz4Codec(int acceleration) { return std::make_unique<Lz4Codec>(false, acceleration); }
std::unique_ptr<ExponentCodec> makeLz4HcCodec(int level) { return std::make_unique<Lz4Codec>(true, level); }

}  // namespace zipmoe::detail
