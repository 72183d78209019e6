// The ZipMoE store: a converted model on disk, and the reader that serves its chunks.
//
// Layout of a store directory:
//   manifest.json   format name and version, the model's config, codec and why it was chosen, K, the
//                   tensor tables (every offset, size and CRC-32C), per-kind exponent histograms.
//                   Written last, atomically: a directory without it is not a store.
//   dense.bin       dense (non-expert) tensors, raw, each 4 KiB-aligned.
//   experts.bin     each routed-expert tensor as K E-chunks (the exponent plane in K contiguous
//                   shards, each compressed on its own) followed by one SM-chunk (the sign-mantissa
//                   plane, raw). Every chunk starts on a 4 KiB boundary and is padded to one, so that
//                   it can be read with O_DIRECT.
//   tokenizer.json, tokenizer_config.json, generation_config.json  copied from the HF directory.
//
// Store::open validates the manifest completely (version, every offset and size against the file
// sizes, alignment, shard sizes against shapes) and throws zipmoe::Error naming the file and field.
// Every chunk read checks the chunk's CRC-32C.
// Thread-safety: a Store is immutable after open(); all read functions may run concurrently.
// Cost: open parses the JSON manifest (milliseconds); a chunk read is one pread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "zipmoe/format/codec_choice.h"
#include "zipmoe/format/exponent_codec.h"
#include "zipmoe/hf/model_family.h"
#include "zipmoe/hf/safetensors.h"

namespace zipmoe {

inline constexpr int kStoreFormatVersion = 1;
inline constexpr const char* kStoreFormatName = "zipmoe-store";
inline constexpr uint64_t kChunkAlignment = 4096;

struct ChunkRef {
  uint64_t offset = 0;      // in experts.bin, 4 KiB-aligned
  uint64_t size = 0;        // stored bytes (compressed for E-chunks)
  uint64_t paddedSize = 0;  // size rounded up to 4 KiB: what an O_DIRECT read transfers
  uint64_t count = 0;       // number of weights (exponents or sign-mantissa bytes) it holds
  uint32_t crc32c = 0;      // of the `size` stored bytes
};

struct ExpertTensorEntry {
  std::string name;  // the HF tensor name
  std::vector<int64_t> shape;
  uint64_t numel = 0;
  std::vector<ChunkRef> eChunks;  // K shards, in order
  ChunkRef smChunk;

  // Σ padded E-chunk sizes: the E-chunks' span in experts.bin, and the buffer that holds them.
  uint64_t paddedEBytes() const {
    uint64_t sum = 0;
    for (const ChunkRef& c : eChunks) sum += c.paddedSize;
    return sum;
  }
};

struct DenseTensorEntry {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // in dense.bin
  uint64_t size = 0;
  uint32_t crc32c = 0;
};

struct ExpertLayerEntry {
  int stack = 0;
  int block = 0;  // the checkpoint's block number of this MoE layer
};

struct Manifest {
  int version = kStoreFormatVersion;
  ModelFamily family = ModelFamily::Mixtral;
  std::string modelType;
  std::shared_ptr<const nlohmann::json> config;  // the HF config.json
  CodecSpec codec;
  // Why `codec` (field "codec_choice", optional: stores converted before it have none). Informational
  // (nothing reads it but `zipmoe inspect`), yet checked like every field: a malformed one is an error.
  std::optional<CodecChoice> codecChoice;
  int shards = 4;  // K
  std::vector<std::string> tensorKinds;  // per expert, in store order
  std::vector<ExpertLayerEntry> layers;
  int numExperts = 0;
  // experts[(layer * numExperts + expert) * tensorKinds.size() + kind]
  std::vector<ExpertTensorEntry> experts;
  std::vector<DenseTensorEntry> dense;
  // Exponent histograms of all expert tensors, per kind (256 counts each).
  std::vector<std::vector<uint64_t>> exponentHistograms;
  uint64_t expertsFileSize = 0;
  uint64_t denseFileSize = 0;

  int numLayers() const { return static_cast<int>(layers.size()); }
  int numKinds() const { return static_cast<int>(tensorKinds.size()); }
  const ExpertTensorEntry& expert(int layer, int expert, int kind) const;
  // Every routed expert tensor in BF16: what a memory budget's share of the experts is a share of.
  uint64_t routedExpertBytes() const;
};

// Identifies one chunk. shard in [0, K) is an E-chunk; kSmShard is the SM-chunk.
struct ChunkKey {
  int layer = 0;
  int expert = 0;
  int kind = 0;
  int shard = 0;
};
inline constexpr int kSmShard = -1;

enum class ReadMode {
  Direct,   // O_DIRECT: bypasses the page cache (cold, honest I/O timings)
  Buffered  // through the page cache
};

class Store {
 public:
  // Throws zipmoe::Error if the directory is not a valid store.
  static std::unique_ptr<Store> open(const std::filesystem::path& dir);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  const ChunkRef& chunk(const ChunkKey& key) const;

  // Whether a read checks its chunks' CRC-32C itself (Now), or leaves that to the caller, who calls
  // verifyChunk / verifyTensorChunks before anything uses the bytes (Later: the executor's I/O thread
  // goes on to the next read while another thread checks this one, so the disk does not wait).
  enum class Verify : uint8_t { Now, Later };

  // Reads a chunk's stored bytes into dst and checks its CRC-32C. Returns the stored size.
  // REQUIRES: dst.size() >= chunk(key).paddedSize; for ReadMode::Direct, dst.data() is 4 KiB-aligned.
  size_t readChunk(const ChunkKey& key, std::span<uint8_t> dst, ReadMode mode, Verify verify = Verify::Now) const;
  // The CRC-32C check of a chunk read into `data`; throws zipmoe::Error naming the chunk, its file
  // and offset on a mismatch.
  void verifyChunk(const ChunkKey& key, const uint8_t* data) const;
  // The same for a tensor's E-chunks at eData (laid out as readTensorChunks reads them) and its
  // SM-chunk at smData; a null pointer skips that part.
  void verifyTensorChunks(int layer, int expert, int kind, const uint8_t* eData, const uint8_t* smData) const;

  // Reads a tensor's K E-chunks into eDst (chunk s at the sum of the padded sizes before it) and, when
  // smDst is not empty, its SM-chunk into smDst, in one request (preadv): they are contiguous in
  // experts.bin. smDst may be anywhere, including right after the E-chunks in the same buffer. Checks
  // every chunk's CRC-32C. Returns the bytes transferred. REQUIRES: eDst.size() >= Σ padded E-chunk
  // sizes, smDst.size() >= the padded SM-chunk size (or empty); 4 KiB-aligned buffers for ReadMode::Direct.
  uint64_t readTensorChunks(int layer, int expert, int kind, std::span<uint8_t> eDst, std::span<uint8_t> smDst,
                            ReadMode mode, Verify verify = Verify::Now) const;

  // Reads, decompresses and merges a whole expert tensor into BF16 words (numel of them).
  void readExpertTensor(int layer, int expert, int kind, uint16_t* dst, ReadMode mode) const;
  // Reads a dense tensor (entry.size bytes) and checks its CRC-32C.
  void readDenseTensor(const DenseTensorEntry& entry, void* dst) const;
  const DenseTensorEntry* findDense(const std::string& name) const;

  const ExponentCodec& codec() const { return *codec_; }

 private:
  std::string chunkName(const ChunkKey& key) const;  // "E-chunk 2 of 'NAME' in DIR/experts.bin"
  Store() = default;
  std::filesystem::path dir_;
  Manifest manifest_;
  std::unique_ptr<ExponentCodec> codec_;
  int expertsFd_ = -1, expertsDirectFd_ = -1, denseFd_ = -1;
  int directOpenError_ = 0;
};

// Parses and validates manifest JSON text. `what` names the file in errors. Exposed for fuzzing.
Manifest parseManifest(std::string_view text, const std::string& what);
std::string serializeManifest(const Manifest& manifest);

}  // namespace zipmoe
