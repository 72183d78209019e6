// makeStoreReaderExperts: every requested expert read from the store when asked, into buffers the
// batch owns (see zipmoe/distributed_experts.h).
#include <memory>
#include <vector>

#include "zipmoe/distributed_experts.h"
#include "zipmoe/error.h"
#include "zipmoe/store.h"

namespace zipmoe {
namespace {

class StoreReaderExperts : public ExpertProvider {
 public:
  explicit StoreReaderExperts(std::unique_ptr<Store> store) : store_(std::move(store)) {}

  std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) override {
    const Manifest& m = store_->manifest();
    if (layer < 0 || layer >= m.numLayers())
      throw Error("store reader: MoE layer " + std::to_string(layer) + " out of range (0.." + std::to_string(m.numLayers() - 1) + ")");
    auto batch = std::make_unique<Batch>();
    for (const ExpertRequest& r : requests) {
      if (r.expert < 0 || r.expert >= m.numExperts)
        throw Error("store reader: expert " + std::to_string(r.expert) + " out of range (0.." + std::to_string(m.numExperts - 1) + ")");
      Batch::Expert e{r.expert, {}};
      for (int kind = 0; kind < m.numKinds(); ++kind) {
        std::vector<uint16_t> t(m.expert(layer, r.expert, kind).numel);
        store_->readExpertTensor(layer, r.expert, kind, t.data(), ReadMode::Buffered);
        e.tensors.push_back(std::move(t));
      }
      batch->experts.push_back(std::move(e));
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
  struct Batch : ExpertBatch {
    struct Expert {
      int id;
      std::vector<std::vector<uint16_t>> tensors;
    };
    std::vector<Expert> experts;
    size_t next_ = 0;
    std::optional<ReadyExpert> next() override {
      if (next_ >= experts.size()) return std::nullopt;
      ReadyExpert r{experts[next_].id, {}};
      for (const auto& t : experts[next_].tensors) r.tensors.push_back(t.data());
      ++next_;
      return r;
    }
  };
  std::unique_ptr<Store> store_;
};

}  // namespace

std::shared_ptr<ExpertProvider> makeStoreReaderExperts(const std::filesystem::path& store) {
  return std::make_shared<StoreReaderExperts>(Store::open(store));
}

}  // namespace zipmoe
