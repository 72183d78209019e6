// indexTensorCodes (see tensor_codes.h).
#include "sched/tensor_codes.h"

#include <string>

#include "zipmoe/base/error.h"

namespace zipmoe::sched {

std::optional<std::vector<NibbleShard>> indexTensorCodes(const ExpertTensorEntry& te, uint8_t* base, size_t bytes,
                                                         const std::string& what) {
  if (te.shape.size() != 2 || te.shape[1] % 2 != 0) return std::nullopt;
  const auto cols = static_cast<uint64_t>(te.shape[1]);
  const uint64_t shards = te.eChunks.size();
  std::vector<NibbleShard> out;
  uint64_t at = 0;
  for (uint64_t s = 0; s < shards; ++s) {
    const ChunkRef& c = te.eChunks[s];
    const uint64_t begin = te.numel * s / shards, end = te.numel * (s + 1) / shards;
    if (begin % cols != 0 || end % cols != 0 || at + c.paddedSize > bytes) return std::nullopt;
    const uint64_t positionsAt = (c.size + 3) / 4 * 4;  // the padding after the chunk, 4-byte aligned
    const uint64_t capacity = c.paddedSize > positionsAt ? (c.paddedSize - positionsAt) / 4 : 0;
    std::optional<NibbleShard> shard;
    try {
      shard = indexNibbleChunk(base + at, c.size, end - begin, reinterpret_cast<uint32_t*>(base + at + positionsAt),
                               capacity);
    } catch (const Error& e) {
      throw Error(what + " E-chunk " + std::to_string(s) + ": " + e.what());
    }
    if (!shard) return std::nullopt;
    shard->rowBegin = begin / cols;
    shard->rowEnd = end / cols;
    out.push_back(*shard);
    at += c.paddedSize;
  }
  return out;
}

}  // namespace zipmoe::sched
