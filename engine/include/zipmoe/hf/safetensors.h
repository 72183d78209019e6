// Safetensors files and Hugging Face checkpoint directories.
//
// SafetensorsFile parses and validates a `.safetensors` header (8-byte little-endian length, JSON
// table of tensors, then the data) and reads tensor bytes with pread. HfCheckpoint opens an HF model
// directory: `config.json` plus either `model.safetensors` or the shards listed in
// `model.safetensors.index.json`. SafetensorsWriter writes a file tensor by tensor, so that memory use
// does not depend on the model's size.
//
// Every malformed input (truncated file, bad JSON, overlapping or out-of-range offsets, a shape that
// does not match the byte size, an unknown dtype, a missing shard) is reported as zipmoe::Error naming
// the file and the field.
// Thread-safety: a SafetensorsFile may be read from several threads at once (pread only).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zipmoe {

enum class DType { BF16, F16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, BOOL, F8_E4M3, F8_E5M2 };

const char* dtypeName(DType dtype);  // safetensors spelling: "BF16", "F32", ...
size_t dtypeSize(DType dtype);
// Throws zipmoe::Error naming `context` when the name is unknown.
DType parseDType(const std::string& name, const std::string& context);

struct TensorInfo {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // absolute byte offset of the data in the file
  uint64_t size = 0;    // bytes
  uint64_t numel() const;
};

// The parsed header of a safetensors file. `fileSize` is the size of the whole file; the header is
// checked against it (data offsets in range, no overlaps, sizes matching shapes).
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in data-offset order
  std::map<std::string, std::string> metadata;
  uint64_t dataStart = 0;
};
// `bytes` holds the start of the file (at least the 8-byte length and the JSON). `what` names the
// file in error messages.
SafetensorsHeader parseSafetensorsHeader(std::span<const uint8_t> bytes, uint64_t fileSize,
                                         const std::string& what);

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const TensorInfo* find(const std::string& name) const;
  // Reads `length` bytes of the tensor starting at `offsetInTensor`.
  void read(const TensorInfo& tensor, uint64_t offsetInTensor, uint64_t length, void* dst) const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  SafetensorsHeader header_;
  std::map<std::string, size_t> byName_;
};

class HfCheckpoint {
 public:
  // Throws zipmoe::Error if config.json is missing or invalid, or a weight file is missing/invalid.
  explicit HfCheckpoint(const std::filesystem::path& dir);
  ~HfCheckpoint();
  HfCheckpoint(const HfCheckpoint&) = delete;
  HfCheckpoint& operator=(const HfCheckpoint&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  const nlohmann::json& config() const { return *config_; }
  std::string modelType() const;  // config.json "model_type"

  struct Entry {
    const TensorInfo* info;
    const SafetensorsFile* file;
  };
  // Every tensor of the checkpoint, sorted by name.
  const std::vector<Entry>& tensors() const { return entries_; }
  const Entry* find(const std::string& name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<nlohmann::json> config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<Entry> entries_;
};

// Writes a safetensors file whose tensor table is known up front; data is then appended tensor by
// tensor in the declared order. The file is written as PATH.partial and renamed on finish(), so an
// interrupted write never leaves a file that looks complete.
class SafetensorsWriter {
 public:
  struct Declared {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  SafetensorsWriter(const std::filesystem::path& path, const std::vector<Declared>& tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();  // removes the partial file if finish() was not reached
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends bytes of the current tensor; tensors are filled in declaration order.
  void append(const void* data, size_t bytes);
  void finish();

 private:
  std::filesystem::path path_, partial_;
  int fd_ = -1;
  uint64_t expectedTotal_ = 0, written_ = 0;
  bool finished_ = false;
};

}  // namespace zipmoe
