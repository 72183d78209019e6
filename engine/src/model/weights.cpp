// WeightLoader implementations: HF safetensors checkpoints and ZipMoE stores (dense.bin).
//
// Thread-safety: see weights.h. Cost: one pread per tensor plus the dtype conversion.
#include "model/weights.h"

#include <sstream>

#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/safetensors.h"
#include "zipmoe/format/store.h"

namespace zipmoe {
namespace {

std::string shapeText(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

class HfWeights : public WeightLoader {
 public:
  explicit HfWeights(const std::filesystem::path& dir) : checkpoint_(dir) {}
  const nlohmann::json& config() const override { return checkpoint_.config(); }
  std::string configName() const override { return (checkpoint_.dir() / "config.json").string(); }
  bool has(const std::string& name) const override { return checkpoint_.find(name) != nullptr; }

 protected:
  Raw describe(const std::string& name) const override {
    const auto* entry = checkpoint_.find(name);
    if (!entry)
      throw Error(checkpoint_.dir().string() + ": tensor '" + name + "' is missing from the checkpoint");
    return Raw{entry->file->path().string(), dtypeName(entry->info->dtype), entry->info->shape};
  }
  void read(const std::string& name, void* dst) const override {
    const auto* entry = checkpoint_.find(name);
    entry->file->read(*entry->info, 0, entry->info->size, dst);
  }

 private:
  HfCheckpoint checkpoint_;
};

class StoreWeights : public WeightLoader {
 public:
  explicit StoreWeights(const std::filesystem::path& dir) : store_(Store::open(dir)) {}
  const nlohmann::json& config() const override { return *store_->manifest().config; }
  std::string configName() const override { return (store_->dir() / "manifest.json").string() + " (config)"; }
  bool has(const std::string& name) const override { return store_->findDense(name) != nullptr; }

 protected:
  Raw describe(const std::string& name) const override {
    const auto* entry = store_->findDense(name);
    if (!entry) throw Error((store_->dir() / "manifest.json").string() + ": dense tensor '" + name + "' is missing");
    return Raw{(store_->dir() / "dense.bin").string(), dtypeName(entry->dtype), entry->shape};
  }
  void read(const std::string& name, void* dst) const override { store_->readDenseTensor(*store_->findDense(name), dst); }

 private:
  std::unique_ptr<Store> store_;
};

}  // namespace

at::Tensor emptyWeight(const std::vector<int64_t>& shape, at::ScalarType dtype) {
  const auto options = at::TensorOptions().dtype(dtype);
  size_t bytes = c10::elementSize(dtype);
  for (const int64_t d : shape) bytes *= static_cast<size_t>(d);
  if (bytes < io::kHugePageBytes) return at::empty(shape, options);
  auto buffer = std::make_shared<io::AlignedBuffer>(bytes);
  return at::from_blob(buffer->data(), shape, [buffer](void*) mutable { buffer.reset(); }, options);
}

std::unique_ptr<WeightLoader> WeightLoader::open(const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "manifest.json")) return std::make_unique<StoreWeights>(dir);
  return std::make_unique<HfWeights>(dir);
}

at::Tensor WeightLoader::load(const std::string& name, const std::vector<int64_t>& shape, at::ScalarType dtype) const {
  const Raw raw = describe(name);
  if (raw.shape != shape)
    throw Error(raw.file + ": tensor '" + name + "' has shape " + shapeText(raw.shape) + ", expected " +
                shapeText(shape) + " from the config");
  at::ScalarType stored;
  if (raw.dtype == "BF16") stored = at::kBFloat16;
  else if (raw.dtype == "F16") stored = at::kHalf;
  else if (raw.dtype == "F32") stored = at::kFloat;
  else throw Error(raw.file + ": tensor '" + name + "' has dtype " + raw.dtype + " (supported: BF16, F16, F32)");
  // A converted tensor is libtorch's own allocation.
  at::Tensor t = stored == dtype ? emptyWeight(shape, stored) : at::empty(shape, at::TensorOptions().dtype(stored));
  read(name, t.data_ptr());
  return stored == dtype ? t : t.to(dtype);
}

}  // namespace zipmoe
