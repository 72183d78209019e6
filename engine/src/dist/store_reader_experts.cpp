// makeStoreReaderExperts: every requested expert read from the store when asked, into buffers the
// batch shares; kept for later requests when asked to (see zipmoe/dist/distributed_experts.h).
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "zipmoe/dist/distributed_experts.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/store.h"

namespace zipmoe {
namespace {

class StoreReaderExperts : public ExpertProvider {
 public:
  StoreReaderExperts(std::unique_ptr<Store> store, bool keep) : store_(std::move(store)), keep_(keep) {}

  std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) override {
    const Manifest& m = store_->manifest();
    if (layer < 0 || layer >= m.numLayers())
      throw Error("store reader: MoE layer " + std::to_string(layer) + " out of range (0.." + std::to_string(m.numLayers() - 1) + ")");
    auto batch = std::make_unique<Batch>();
    for (const ExpertRequest& r : requests) {
      if (r.expert < 0 || r.expert >= m.numExperts)
        throw Error("store reader: expert " + std::to_string(r.expert) + " out of range (0.." + std::to_string(m.numExperts - 1) + ")");
      const int key = layer * m.numExperts + r.expert;
      std::shared_ptr<const Tensors> tensors;
      {
        std::lock_guard lock(mutex_);
        if (const auto it = kept_.find(key); it != kept_.end()) tensors = it->second;
      }
      if (!tensors) {
        auto read = std::make_shared<Tensors>();
        for (int kind = 0; kind < m.numKinds(); ++kind) {
          std::vector<uint16_t> t(m.expert(layer, r.expert, kind).numel);
          store_->readExpertTensor(layer, r.expert, kind, t.data(), ReadMode::Buffered);
          read->push_back(std::move(t));
        }
        tensors = read;
        if (keep_) {
          std::lock_guard lock(mutex_);
          kept_[key] = tensors;
        }
      }
      batch->experts.push_back({r.expert, std::move(tensors)});
    }
    return batch;
  }
  int numLayers() const override { return store_->manifest().numLayers(); }
  int numExperts() const override { return store_->manifest().numExperts; }
  std::pair<int64_t, int64_t> tensorShape(int kind) const override {
    const auto& shape = store_->manifest().expert(0, 0, kind).shape;
    return {shape.at(0), shape.at(1)};
  }

 private:
  using Tensors = std::vector<std::vector<uint16_t>>;
  struct Batch : ExpertBatch {
    struct Expert {
      int id;
      std::shared_ptr<const Tensors> tensors;
    };
    std::vector<Expert> experts;
    size_t next_ = 0;
    std::optional<ReadyExpert> next() override {
      if (next_ >= experts.size()) return std::nullopt;
      ReadyExpert r;
      r.expert = experts[next_].id;
      for (const auto& t : *experts[next_].tensors) r.tensors.push_back(t.data());
      ++next_;
      return r;
    }
  };
  std::unique_ptr<Store> store_;
  bool keep_;
  std::mutex mutex_;
  std::map<int, std::shared_ptr<const Tensors>> kept_;  // layer × experts + expert
};

}  // namespace

std::shared_ptr<ExpertProvider> makeStoreReaderExperts(const std::filesystem::path& store, bool keepInMemory) {
  return std::make_shared<StoreReaderExperts>(Store::open(store), keepInMemory);
}

}  // namespace zipmoe
