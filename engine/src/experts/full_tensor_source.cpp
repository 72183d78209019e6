// FullTensorSource (see full_tensor_source.h).
#include "experts/full_tensor_source.h"

#include <fcntl.h>

#include <algorithm>
#include <map>

#include "zipmoe/base/error.h"

namespace zipmoe::experts {

FullTensorSource::FullTensorSource(const Store& store, const std::filesystem::path& checkpointDir, ReadMode mode) {
  if (checkpointDir.empty())
    throw Error("full-tensor offloading needs the HF checkpoint directory with the BF16 expert tensors");
  checkpoint_ = std::make_unique<HfCheckpoint>(checkpointDir);
  const Manifest& m = store.manifest();
  const int layers = m.numLayers();
  experts_ = m.numExperts;
  kinds_ = m.numKinds();
  const int flags = O_RDONLY | (mode == ReadMode::Direct ? O_DIRECT : 0);
  std::map<const SafetensorsFile*, const io::FileHandle*> opened;  // each file opened once
  tensors_.resize(static_cast<size_t>(layers) * static_cast<size_t>(experts_) * static_cast<size_t>(kinds_));
  maxReadBytes_.assign(static_cast<size_t>(kinds_), 0);
  for (int l = 0; l < layers; ++l)
    for (int e = 0; e < experts_; ++e)
      for (int kind = 0; kind < kinds_; ++kind) {
        const ExpertTensorEntry& entry = m.expert(l, e, kind);
        const auto* found = checkpoint_->find(entry.name);
        if (!found)
          throw Error(checkpointDir.string() + ": the checkpoint has no tensor '" + entry.name +
                      "' that the store has (is it the model the store was converted from?)");
        if (found->info->dtype != DType::BF16 || found->info->numel() != entry.numel)
          throw Error(found->file->path().string() + ": tensor '" + entry.name + "' is not BF16 with " +
                      std::to_string(entry.numel) + " elements as in the store");
        auto [it, inserted] = opened.emplace(found->file, nullptr);
        if (inserted) it->second = &files_.emplace_back(found->file->path(), flags);
        FullTensorLocation& t =
            tensors_[(static_cast<size_t>(l) * static_cast<size_t>(experts_) + static_cast<size_t>(e)) *
                         static_cast<size_t>(kinds_) +
                     static_cast<size_t>(kind)];
        const uint64_t offset = found->info->offset, size = found->info->numel() * 2;
        t.range.file = it->second;
        t.range.offset = offset / kChunkAlignment * kChunkAlignment;
        t.dataOffset = offset - t.range.offset;
        t.range.length = io::alignUp(t.dataOffset + size, kChunkAlignment);
        t.tensorBytes = size;
        maxReadBytes_[static_cast<size_t>(kind)] = std::max(maxReadBytes_[static_cast<size_t>(kind)], t.range.length);
      }
}

const FullTensorLocation& FullTensorSource::tensor(int layer, int expert, int kind) const {
  return tensors_[(static_cast<size_t>(layer) * static_cast<size_t>(experts_) + static_cast<size_t>(expert)) *
                      static_cast<size_t>(kinds_) +
                  static_cast<size_t>(kind)];
}

}  // namespace zipmoe::experts
