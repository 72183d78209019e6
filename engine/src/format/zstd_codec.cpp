// zstd at a chosen level. Contexts are per thread (thread_local) so that concurrent decompression
// allocates nothing on the hot path.
#include <zstd.h>

#include <memory>
#include <string>

#include "format/codecs.h"
#include "zipmoe/base/error.h"

namespace zipmoe::detail {
namespace {

struct DCtxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};
struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

class ZstdCodec final : public ExponentCodec {
 public:
  explicit ZstdCodec(int level) : level_(level) {}
  CodecSpec spec() const override { return {CodecId::Zstd, level_}; }
  size_t maxCompressedSize(size_t n) const override { return ZSTD_compressBound(n); }
  size_t compress(const uint8_t* src, size_t n, uint8_t* dst, size_t dstCapacity) const override {
    thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> ctx(ZSTD_createCCtx());
    const size_t r = ZSTD_compressCCtx(ctx.get(), dst, dstCapacity, src, n, level_);
    if (ZSTD_isError(r)) throw Error(std::string("zstd: compression failed: ") + ZSTD_getErrorName(r));
    return r;
  }
  void decompress(const uint8_t* src, size_t srcSize, uint8_t* dst, size_t n) const override {
    thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> ctx(ZSTD_createDCtx());
    const unsigned long long declared = ZSTD_getFrameContentSize(src, srcSize);
    if (declared == ZSTD_CONTENTSIZE_ERROR) throw Error("zstd chunk: not a zstd frame (bad magic or header)");
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != n)
      throw Error("zstd chunk: frame declares " + std::to_string(declared) + " bytes, expected " +
                  std::to_string(n));
    const size_t r = ZSTD_decompressDCtx(ctx.get(), dst, n, src, srcSize);
    if (ZSTD_isError(r)) throw Error(std::string("zstd chunk: corrupt data: ") + ZSTD_getErrorName(r));
    if (r != n)
      throw Error("zstd chunk: decoded " + std::to_string(r) + " bytes, expected " + std::to_string(n));
  }

 private:
  int level_;
};

}  // namespace

std::unique_ptr<ExponentCodec> makeZstdCodec(int level) { return std::make_unique<ZstdCodec>(level); }

}  // namespace zipmoe::detail
