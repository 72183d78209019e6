// generateSyntheticModel: writes a complete Hugging Face model directory for a preset or a given config.
//
// Layout written: config.json, generation_config.json, tokenizer.json, tokenizer_config.json, and
// either model.safetensors or model-0000i-of-0000N.safetensors + model.safetensors.index.json (as
// transformers' save_pretrained shards: tensors in order, a new shard when the next tensor would pass
// the limit; a single resulting shard is written unsharded, like save_pretrained does).
//
// Weights stream tensor by tensor through SafetensorsWriter in chunks of 2^20 weights, so memory stays
// bounded whatever the model's size. Chunk c of tensor t is sampled from stream (t << 32) | c, so the
// bytes depend only on (config, sigma, seed) — not on sharding or on how many threads fill chunks.
// Routed experts, dense projections, routers and embeddings are N(0, σ²); normalisation weights are
// 1 + N(0, 0.02²) so that forward passes over a synthetic model stay numerically sane.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <fstream>
#include <system_error>
#include <thread>

#include "hf/hf_directory.h"
#include "hf/synthetic_tokenizer.h"
#include "zipmoe/base/error.h"
#include "hf/checkpoint_tensors.h"
#include "tools/synthetic/synthetic_model.h"

namespace zipmoe {

namespace {

constexpr size_t kChunkWeights = size_t{1} << 20;
constexpr double kNormNoiseSigma = 0.02;

uint64_t tensorBytes(const SafetensorsWriter::Declared& tensor) {
  uint64_t n = dtypeSize(tensor.dtype);
  for (int64_t d : tensor.shape) n *= static_cast<uint64_t>(d);
  return n;
}

bool isNormWeight(const std::string& name) {
  static constexpr std::string_view kSuffix = "norm.weight";
  return name.size() >= kSuffix.size() && std::string_view(name).substr(name.size() - kSuffix.size()) == kSuffix;
}

uint16_t roundToBf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t roundingBias = 0x7FFF + ((bits >> 16) & 1);  // round to nearest, ties to even
  return static_cast<uint16_t>((bits + roundingBias) >> 16);
}

void removeIfPresent(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (ec) throw Error("cannot remove stale " + path.string() + ": " + ec.message());
}

std::string shardName(size_t index, size_t count) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buffer;
}

// Tensors grouped into files in declaration order.
std::vector<std::vector<size_t>> planShards(const std::vector<SafetensorsWriter::Declared>& tensors,
                                            uint64_t maxShardBytes) {
  std::vector<std::vector<size_t>> shards(1);
  uint64_t current = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = tensorBytes(tensors[i]);
    if (maxShardBytes > 0 && !shards.back().empty() && current + bytes > maxShardBytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(i);
    current += bytes;
  }
  return shards;
}

// Fills and appends one tensor, several chunks at a time across threads.
class TensorFiller {
 public:
  TensorFiller(const SyntheticModelOptions& options, uint64_t totalBytes)
      : options_(options), totalBytes_(totalBytes),
        threads_(std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16)),
        buffer_(threads_ * kChunkWeights) {}

  void write(SafetensorsWriter& writer, const SafetensorsWriter::Declared& tensor, uint64_t tensorIndex) {
    const uint64_t weights = tensorBytes(tensor) / sizeof(uint16_t);
    const bool norm = isNormWeight(tensor.name);
    for (uint64_t first = 0; first < weights; first += threads_ * kChunkWeights) {
      const uint64_t batch = std::min<uint64_t>(weights - first, threads_ * kChunkWeights);
      const size_t chunks = static_cast<size_t>((batch + kChunkWeights - 1) / kChunkWeights);
      auto fillChunk = [&](size_t c) {
        const uint64_t begin = c * kChunkWeights;
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkWeights, batch - begin));
        uint16_t* dst = buffer_.data() + begin;
        const uint64_t stream = (tensorIndex << 32) | ((first / kChunkWeights) + c);
        fillGaussianBf16(dst, n, norm ? kNormNoiseSigma : options_.sigma, options_.seed, stream);
        if (norm)
          for (size_t i = 0; i < n; ++i)
            dst[i] = roundToBf16(1.0f + std::bit_cast<float>(static_cast<uint32_t>(dst[i]) << 16));
      };
      if (chunks == 1) {
        fillChunk(0);
      } else {
        std::vector<std::thread> workers;
        for (size_t c = 1; c < chunks; ++c) workers.emplace_back(fillChunk, c);
        fillChunk(0);
        for (auto& worker : workers) worker.join();
      }
      writer.append(buffer_.data(), static_cast<size_t>(batch) * sizeof(uint16_t));
      done_ += batch * sizeof(uint16_t);
      if (options_.onProgress) options_.onProgress(done_, totalBytes_);
    }
  }

 private:
  const SyntheticModelOptions& options_;
  uint64_t totalBytes_, done_ = 0;
  size_t threads_;
  std::vector<uint16_t> buffer_;
};

}  // namespace

uint64_t generateSyntheticModel(const std::filesystem::path& outDir, const nlohmann::json& config,
                           const SyntheticModelOptions& options) {
  const std::vector<SafetensorsWriter::Declared> tensors = checkpointTensors(options.family, config);
  const hf::SyntheticTokenizerFiles tokenizer = hf::makeSyntheticTokenizer(options.family, config);

  std::error_code ec;
  std::filesystem::create_directories(outDir, ec);
  if (ec || !std::filesystem::is_directory(outDir))
    throw Error("cannot create directory " + outDir.string() + (ec ? ": " + ec.message() : ": not a directory"));
  hf::writeHfJsonFiles(outDir, {config, tokenizer.generationConfig, tokenizer.tokenizer, tokenizer.tokenizerConfig});

  uint64_t totalBytes = 0;
  for (const auto& tensor : tensors) totalBytes += tensorBytes(tensor);
  const std::vector<std::vector<size_t>> shards = planShards(tensors, options.maxShardBytes);
  const bool sharded = shards.size() > 1;
  removeIfPresent(outDir / (sharded ? "model.safetensors" : "model.safetensors.index.json"));

  TensorFiller filler(options, totalBytes);
  nlohmann::json weightMap = nlohmann::json::object();
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string fileName = sharded ? shardName(s, shards.size()) : "model.safetensors";
    std::vector<SafetensorsWriter::Declared> declared;
    for (size_t index : shards[s]) {
      declared.push_back(tensors[index]);
      weightMap[tensors[index].name] = fileName;
    }
    SafetensorsWriter writer(outDir / fileName, declared, metadata);
    for (size_t index : shards[s]) filler.write(writer, tensors[index], index);
    writer.finish();
  }
  if (sharded)
    hf::writeJsonFile(outDir / "model.safetensors.index.json",
                  {{"metadata", {{"total_size", totalBytes}}}, {"weight_map", weightMap}});
  return totalBytes;
}

uint64_t generateSyntheticModel(const std::filesystem::path& outDir, const SyntheticModelOptions& options) {
  return generateSyntheticModel(outDir, syntheticModelConfig(options), options);
}

}  // namespace zipmoe
