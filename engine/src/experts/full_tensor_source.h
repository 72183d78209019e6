// Internal: where the full-tensor baseline finds each routed expert tensor — whole BF16 tensors in
// the safetensors files of the HF checkpoint the store was converted from. Each file is opened once
// (io::FileHandle, with O_DIRECT or buffered) and closed with the source; every tensor is read as a
// 4 KiB-aligned superset of its bytes, so that O_DIRECT can serve it.
// Thread-safety: immutable after construction; the executor's I/O thread reads through the ranges.
// Cost: opening reads the checkpoint's headers.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <vector>

#include "io/file_io.h"
#include "zipmoe/hf/safetensors.h"
#include "zipmoe/format/store.h"

namespace zipmoe::experts {

struct FullTensorLocation {
  io::FileRange range;       // the aligned read
  uint64_t dataOffset = 0;   // where the tensor starts inside it
  uint64_t tensorBytes = 0;  // the tensor's BF16 bytes
};

class FullTensorSource {
 public:
  // Throws zipmoe::Error naming the checkpoint when it lacks a tensor the store has, holds it in
  // another dtype or size, or a file cannot be opened (with O_DIRECT: naming that too).
  FullTensorSource(const Store& store, const std::filesystem::path& checkpointDir, ReadMode mode);
  FullTensorSource(const FullTensorSource&) = delete;
  FullTensorSource& operator=(const FullTensorSource&) = delete;

  const FullTensorLocation& tensor(int layer, int expert, int kind) const;
  uint64_t maxReadBytes(int kind) const { return maxReadBytes_.at(static_cast<size_t>(kind)); }

 private:
  int experts_ = 0, kinds_ = 0;
  std::unique_ptr<HfCheckpoint> checkpoint_;
  std::deque<io::FileHandle> files_;  // stable addresses: the ranges point at them
  std::vector<FullTensorLocation> tensors_;  // [(layer * experts + expert) * kinds + kind]
  std::vector<uint64_t> maxReadBytes_;
};

}  // namespace zipmoe::experts
