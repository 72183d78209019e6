// WeightLoader — the dense (non-expert) tensors of a model, from an HF directory or a ZipMoE store.
//
// Internal to the forward pass. open() detects a store by its manifest.json; otherwise the directory
// is read as an HF checkpoint (config.json + safetensors). load() reads one tensor, checks its shape
// against what the architecture expects and converts it to the requested dtype; a missing tensor, a
// wrong shape or an unsupported dtype throws zipmoe::Error naming the file and the tensor.
// Thread-safety: load() may run concurrently (pread only). Cost: one read of the tensor's bytes plus
// a dtype conversion when the requested dtype differs from the stored one.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json_fwd.hpp>

namespace zipmoe {

// An uninitialised tensor for weights decoding will stream: from a huge page's size up, in memory
// backed by transparent huge pages where the kernel allows (io::AlignedBuffer), since the GEMV reads
// weights 3–12 % faster from 2 MiB pages than from 4 KiB ones on this project's VM (docs/MODEL.md,
// "Weights in huge pages"); smaller, libtorch's allocation.
at::Tensor emptyWeight(const std::vector<int64_t>& shape, at::ScalarType dtype);

class WeightLoader {
 public:
  static std::unique_ptr<WeightLoader> open(const std::filesystem::path& dir);
  virtual ~WeightLoader() = default;

  virtual const nlohmann::json& config() const = 0;
  // The file errors about the config should name ("DIR/config.json" or "DIR/manifest.json").
  virtual std::string configName() const = 0;
  virtual bool has(const std::string& name) const = 0;
  at::Tensor load(const std::string& name, const std::vector<int64_t>& shape, at::ScalarType dtype) const;

 protected:
  struct Raw {
    std::string file;  // for error messages
    std::string dtype;
    std::vector<int64_t> shape;
  };
  // Describes the tensor (throws a named error when it is missing) and reads its bytes into dst.
  virtual Raw describe(const std::string& name) const = 0;
  virtual void read(const std::string& name, void* dst) const = 0;
};

}  // namespace zipmoe
