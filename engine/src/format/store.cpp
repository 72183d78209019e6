// Store: opening a converted model and reading its chunks.
#include "zipmoe/format/store.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/crc32c.h"
#include "io/file_io.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int openOrThrow(const std::filesystem::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw Error(systemErrorMessage("cannot open " + p.string(), errno));
  return fd;
}

}  // namespace

std::unique_ptr<Store> Store::open(const std::filesystem::path& dir) {
  const auto manifestPath = dir / "manifest.json";
  if (!std::filesystem::exists(manifestPath)) {
    if (std::filesystem::exists(dir / "experts.bin.partial") || std::filesystem::exists(dir / "experts.bin"))
      throw Error(dir.string() + " is not a complete ZipMoE store: manifest.json is missing (an interrupted "
                  "conversion? run zipmoe convert again)");
    throw Error(dir.string() + " is not a ZipMoE store: " + manifestPath.string() + " is missing");
  }
  std::unique_ptr<Store> s(new Store());
  s->dir_ = dir;
  s->manifest_ = parseManifest(io::readTextFile(manifestPath), manifestPath.string());
  s->codec_ = makeCodec(s->manifest_.codec);
  const auto checkSize = [&](const char* name, uint64_t expected) {
    const auto p = dir / name;
    if (!std::filesystem::exists(p)) throw Error("store " + dir.string() + ": " + name + " is missing");
    const uint64_t actual = std::filesystem::file_size(p);
    if (actual != expected)
      throw Error("store " + dir.string() + ": " + name + " is " + std::to_string(actual) + " bytes, the manifest says " +
                  std::to_string(expected) + (actual < expected ? " (truncated)" : ""));
  };
  checkSize("experts.bin", s->manifest_.expertsFileSize);
  checkSize("dense.bin", s->manifest_.denseFileSize);
  s->expertsFd_ = openOrThrow(dir / "experts.bin", O_RDONLY);
  s->denseFd_ = openOrThrow(dir / "dense.bin", O_RDONLY);
  // O_DIRECT is refused by some file systems (tmpfs); that only matters when a direct read is asked for.
  s->expertsDirectFd_ = ::open((dir / "experts.bin").c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (s->expertsDirectFd_ < 0) s->directOpenError_ = errno;
  return s;
}

Store::~Store() {
  closeFd(expertsFd_);
  closeFd(expertsDirectFd_);
  closeFd(denseFd_);
}

const ChunkRef& Store::chunk(const ChunkKey& key) const {
  const Manifest& m = manifest_;
  if (key.layer < 0 || key.layer >= m.numLayers() || key.expert < 0 || key.expert >= m.numExperts || key.kind < 0 ||
      key.kind >= m.numKinds() || key.shard < kSmShard || key.shard >= m.shards)
    throw Error("store " + dir_.string() + ": no chunk (layer " + std::to_string(key.layer) + ", expert " +
                std::to_string(key.expert) + ", tensor " + std::to_string(key.kind) + ", shard " +
                std::to_string(key.shard) + ")");
  const auto& e = m.expert(key.layer, key.expert, key.kind);
  return key.shard == kSmShard ? e.smChunk : e.eChunks[static_cast<size_t>(key.shard)];
}

std::string Store::chunkName(const ChunkKey& key) const {
  const auto& name = manifest_.expert(key.layer, key.expert, key.kind).name;
  return (key.shard == kSmShard ? "SM-chunk of '" : "E-chunk " + std::to_string(key.shard) + " of '") + name + "' in " +
         (dir_ / "experts.bin").string();
}

void Store::verifyChunk(const ChunkKey& key, const uint8_t* data) const {
  const ChunkRef& c = chunk(key);
  const uint32_t crc = detail::crc32c(data, static_cast<size_t>(c.size));
  if (crc != c.crc32c)
    throw Error(chunkName(key) + ": checksum mismatch at offset " + std::to_string(c.offset) + " (CRC-32C " +
                std::to_string(crc) + ", manifest " + std::to_string(c.crc32c) + "): the store is corrupted");
}

void Store::verifyTensorChunks(int layer, int expert, int kind, const uint8_t* eData, const uint8_t* smData) const {
  const auto& e = manifest_.expert(layer, expert, kind);
  uint64_t pos = 0;
  if (eData)
    for (size_t i = 0; i < e.eChunks.size(); ++i) {
      verifyChunk({layer, expert, kind, static_cast<int>(i)}, eData + pos);
      pos += e.eChunks[i].paddedSize;
    }
  if (smData) verifyChunk({layer, expert, kind, kSmShard}, smData);
}

size_t Store::readChunk(const ChunkKey& key, std::span<uint8_t> dst, ReadMode mode, Verify verify) const {
  const ChunkRef& c = chunk(key);
  const std::string what = chunkName(key);
  if (dst.size() < c.paddedSize) throw Error(what + ": destination buffer too small");
  int fd = expertsFd_;
  if (mode == ReadMode::Direct) {
    if (reinterpret_cast<uintptr_t>(dst.data()) % kChunkAlignment != 0)
      throw Error(what + ": O_DIRECT read needs a 4 KiB-aligned buffer");
    if (expertsDirectFd_ < 0)
      throw Error(systemErrorMessage(what + ": cannot open with O_DIRECT (the file system may not support it; "
                                            "use buffered reads)",
                                     directOpenError_));
    fd = expertsDirectFd_;
  }
  size_t done = 0;
  const size_t want = static_cast<size_t>(mode == ReadMode::Direct ? c.paddedSize : c.size);
  while (done < want) {
    const ssize_t r = ::pread(fd, dst.data() + done, want - done, static_cast<off_t>(c.offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(systemErrorMessage(what + ": read at offset " + std::to_string(c.offset) + " failed", errno));
    if (r == 0) throw Error(what + ": file ends before the chunk (truncated store)");
    done += static_cast<size_t>(r);
  }
  if (verify == Verify::Now) verifyChunk(key, dst.data());
  return static_cast<size_t>(c.size);
}

uint64_t Store::readTensorChunks(int layer, int expert, int kind, std::span<uint8_t> eDst, std::span<uint8_t> smDst,
                                 ReadMode mode, Verify verify) const {
  const auto& e = manifest_.expert(layer, expert, kind);
  const std::string what = "chunks of '" + e.name + "' in " + (dir_ / "experts.bin").string();
  const bool withSm = !smDst.empty();
  std::vector<const ChunkRef*> chunks;
  for (const auto& c : e.eChunks) chunks.push_back(&c);
  if (withSm) chunks.push_back(&e.smChunk);
  uint64_t total = 0;
  for (const ChunkRef* c : chunks) {
    if (c->offset != chunks.front()->offset + total)
      throw Error(what + ": the chunks are not contiguous (the manifest lays them out apart); read them one by one");
    total += c->paddedSize;
  }
  const uint64_t eTotal = withSm ? total - e.smChunk.paddedSize : total;
  if (eDst.size() < eTotal) throw Error(what + ": E destination buffer too small");
  if (withSm && smDst.size() < e.smChunk.paddedSize) throw Error(what + ": SM destination buffer too small");
  int fd = expertsFd_;
  if (mode == ReadMode::Direct) {
    if (reinterpret_cast<uintptr_t>(eDst.data()) % kChunkAlignment != 0 ||
        (withSm && reinterpret_cast<uintptr_t>(smDst.data()) % kChunkAlignment != 0))
      throw Error(what + ": O_DIRECT read needs 4 KiB-aligned buffers");
    if (expertsDirectFd_ < 0)
      throw Error(systemErrorMessage(what + ": cannot open with O_DIRECT (use buffered reads)", directOpenError_));
    fd = expertsDirectFd_;
  }
  // One request into one or two buffers. Buffered reads stop at the last chunk's stored bytes (the
  // file may end there).
  const uint64_t shortBy = mode == ReadMode::Direct ? 0 : chunks.back()->paddedSize - chunks.back()->size;
  iovec iov[2] = {{eDst.data(), static_cast<size_t>(eTotal)}, {smDst.data(), static_cast<size_t>(withSm ? e.smChunk.paddedSize : 0)}};
  const int parts = withSm ? 2 : 1;
  iov[parts - 1].iov_len -= static_cast<size_t>(shortBy);
  const uint64_t want = total - shortBy;
  uint64_t done = 0;
  int first = 0;
  while (done < want) {
    const ssize_t r = ::preadv(fd, iov + first, parts - first, static_cast<off_t>(chunks.front()->offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(systemErrorMessage(what + ": read at offset " + std::to_string(chunks.front()->offset) + " failed", errno));
    if (r == 0) throw Error(what + ": file ends before the chunks (truncated store)");
    done += static_cast<uint64_t>(r);
    for (size_t left = static_cast<size_t>(r); left > 0 && first < parts;) {  // a short read: go on from where it stopped
      const size_t take = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + take;
      iov[first].iov_len -= take;
      left -= take;
      if (iov[first].iov_len == 0) ++first;
    }
  }
  if (verify == Verify::Now) verifyTensorChunks(layer, expert, kind, eDst.data(), withSm ? smDst.data() : nullptr);
  return want;
}

void Store::readExpertTensor(int layer, int expert, int kind, uint16_t* dst, ReadMode mode) const {
  const auto& e = manifest_.expert(layer, expert, kind);
  uint64_t maxChunk = e.smChunk.paddedSize;
  for (const auto& c : e.eChunks) maxChunk = std::max(maxChunk, c.paddedSize);
  io::AlignedBuffer chunkBuf(static_cast<size_t>(maxChunk));
  std::vector<uint8_t> exps(static_cast<size_t>(e.numel)), sm(static_cast<size_t>(e.numel));
  uint64_t pos = 0;
  for (int s = 0; s < manifest_.shards; ++s) {
    const ChunkRef& c = e.eChunks[static_cast<size_t>(s)];
    const size_t n = readChunk({layer, expert, kind, s}, {chunkBuf.data(), chunkBuf.size()}, mode);
    try {
      codec_->decompress(chunkBuf.data(), n, exps.data() + pos, static_cast<size_t>(c.count));
    } catch (const Error& err) {
      throw Error("E-chunk " + std::to_string(s) + " of '" + e.name + "' in " + (dir_ / "experts.bin").string() + ": " +
                  err.what());
    }
    pos += c.count;
  }
  const size_t n = readChunk({layer, expert, kind, kSmShard}, {chunkBuf.data(), chunkBuf.size()}, mode);
  std::memcpy(sm.data(), chunkBuf.data(), n);
  bf16::merge(exps.data(), sm.data(), static_cast<size_t>(e.numel), dst);
}

void Store::readDenseTensor(const DenseTensorEntry& entry, void* dst) const {
  const std::string what = "dense tensor '" + entry.name + "' in " + (dir_ / "dense.bin").string();
  auto* p = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < entry.size) {
    const ssize_t r = ::pread(denseFd_, p + done, static_cast<size_t>(entry.size - done),
                              static_cast<off_t>(entry.offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(systemErrorMessage(what + ": read failed", errno));
    if (r == 0) throw Error(what + ": file ends early (truncated store)");
    done += static_cast<size_t>(r);
  }
  const uint32_t crc = detail::crc32c(dst, static_cast<size_t>(entry.size));
  if (crc != entry.crc32c) throw Error(what + ": checksum mismatch: the store is corrupted");
}

const DenseTensorEntry* Store::findDense(const std::string& name) const {
  for (const auto& d : manifest_.dense)
    if (d.name == name) return &d;
  return nullptr;
}

}  // namespace zipmoe
