// MoeModel implementation: loading, the decoder stack, per-sequence KV caches and batched forward.
//
// A forward concatenates the new tokens of every step into one [N, hidden] activation, so that
// embeddings, norms, projections, routers, experts (one ExpertProvider::acquire per MoE layer for
// the whole batch) and the LM head all run once per layer over the batch; only the attention core
// runs per sequence, against that sequence's cache. Inputs are validated before anything changes;
// sequence lengths are committed only after a forward completes, so a failed forward (a bad step or
// an expert that could not be loaded) leaves every sequence as it was.
// Thread-safety: see model.h (one thread drives a model). Cost: loading reads every dense tensor once
// (plus every expert with the resident provider); a forward is dominated by its matrix products.
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "base/crc32c.h"
#include "hf/family_description.h"
#include "model/attention.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/mla_attention.h"
#include "model/expert_predictor.h"
#include "model/moe_model_ffn.h"
#include "model/moe_model_ops.h"
#include "model/weights.h"
#include "zipmoe/base/error.h"
#include "zipmoe/model/model.h"

namespace zipmoe {
namespace {

bool cpuHasNativeBf16() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
#else
  return false;
#endif
}

struct DecoderLayer {
  at::Tensor inputNorm, postNorm;
  std::unique_ptr<AttentionLayer> attention;
  std::unique_ptr<FeedForward> ffn;
};

class MoeModelImpl : public MoeModel {
 public:
  MoeModelImpl(const std::filesystem::path& dir, const ModelOptions& options) {
    setComputeThreads(options.threads);
    if (!matmulKernelSupported(options.matmul))
      throw Error(std::string("matmul kernel ") + matmulKernelName(options.matmul) + " is not supported by this CPU");
    matmul_ = options.matmul;
    const auto weights = WeightLoader::open(dir);
    config_ = parseModelConfig(weights->config(), weights->configName());
    const bool bf16 = options.dtype == ComputeDtype::BFloat16 ||
                      (options.dtype == ComputeDtype::Auto && cpuHasNativeBf16());
    computeDtype_ = bf16 ? ComputeDtype::BFloat16 : ComputeDtype::Float32;
    dtype_ = bf16 ? at::kBFloat16 : at::kFloat;
    experts_ = options.experts ? options.experts : std::shared_ptr<ExpertProvider>(makeResidentExperts(dir));
    routing_ = options.routing;
    checkProvider(dir);
    predictor_ = std::make_unique<ExpertPredictor>(config_, options.prefetch, routing_.get(), *experts_);

    const int64_t hidden = config_.hiddenSize, vocab = config_.vocabSize;
    embed_ = weights->load("model.embed_tokens.weight", {vocab, hidden}, dtype_);
    finalNorm_ = weights->load("model.norm.weight", {hidden}, dtype_);
    lmHead_ = config_.tieWordEmbeddings ? embed_ : weights->load("lm_head.weight", {vocab, hidden}, dtype_);
    for (int i = 0; i < config_.numLayers; ++i) {
      const std::string prefix = "model.layers." + std::to_string(i) + ".";
      DecoderLayer layer;
      layer.inputNorm = weights->load(prefix + "input_layernorm.weight", {hidden}, dtype_);
      layer.postNorm = weights->load(prefix + "post_attention_layernorm.weight", {hidden}, dtype_);
      layer.attention = forwardPass(config_.family).attention == AttentionKind::MultiHeadLatent
                            ? makeMlaAttention(config_, *weights, prefix + "self_attn.", dtype_)
                            : makeGqaAttention(config_, *weights, prefix + "self_attn.", dtype_);
      const int moeLayer = config_.moeLayerIndex(i);
      layer.ffn = moeLayer >= 0
                      ? makeMoeBlock(config_, *weights, prefix, dtype_, moeLayer, *experts_, routing_.get(), predictor_.get())
                      : makeDenseMlp(config_, *weights, prefix, dtype_);
      layers_.push_back(std::move(layer));
    }
    configText_ = weights->config().dump();
  }

  const ModelConfig& config() const override { return config_; }
  ComputeDtype computeDtype() const override { return computeDtype_; }

  SequenceId addSequence() override {
    KvCache cache;
    for (const DecoderLayer& layer : layers_) {
      auto [first, second] = layer.attention->makeCache();
      cache.first.push_back(std::move(first));
      cache.second.push_back(std::move(second));
    }
    const SequenceId id = nextId_++;
    sequences_.emplace(id, std::move(cache));
    return id;
  }

  void removeSequence(SequenceId seq) override {
    if (sequences_.erase(seq) == 0) throw Error("removeSequence: unknown sequence " + std::to_string(seq));
  }

  int64_t sequenceLength(SequenceId seq) const override { return find(seq, "sequenceLength").length; }
  uint64_t lastForwardWeightBytes() const override { return lastForwardWeightBytes_; }
  PrefetchAccuracy prefetchAccuracy() const override { return predictor_->accuracy(); }
  void setPrefetch(const PrefetchOptions& options) override { predictor_->setOptions(options); }

  void reserveSequence(SequenceId seq, int64_t tokens) override {
    find(seq, "reserveSequence");
    KvCache& cache = sequences_.at(seq);
    for (auto& t : cache.first) t.reserve(tokens);
    for (auto& t : cache.second) t.reserve(tokens);
  }

  uint64_t kvCacheBytes() const override {
    uint64_t sum = 0;
    for (const auto& [id, cache] : sequences_) {
      for (const auto& t : cache.first) sum += t.capacityBytes();
      for (const auto& t : cache.second) sum += t.capacityBytes();
    }
    return sum;
  }

  uint64_t kvBytesPerToken() const override {
    uint64_t sum = 0;
    for (const DecoderLayer& layer : layers_) {
      auto [first, second] = layer.attention->makeCache();
      sum += first.bytesPerTime() + second.bytesPerTime();
    }
    return sum;
  }

  std::string kvIdentity() const override {
    if (kvIdentity_.empty()) kvIdentity_ = describeKv();
    return kvIdentity_;
  }

  void saveSequence(SequenceId seq, int64_t tokens, std::ostream& out) const override {
    saveKvCache(find(seq, "saveSequence"), tokens, out);
  }

  void loadSequence(SequenceId seq, std::istream& in, int64_t stored, int64_t keep) override {
    find(seq, "loadSequence");
    loadKvCache(sequences_.at(seq), in, stored, keep);
  }

  void setRecordRouting(bool on) override { predictor_->setRecordRouting(on); }
  const std::vector<std::vector<int32_t>>& lastForwardRouting() const override { return predictor_->lastRouting(); }

  void truncateSequence(SequenceId seq, int64_t length) override {
    const int64_t current = find(seq, "truncateSequence").length;
    if (length < 0 || length > current)
      throw Error("truncateSequence: sequence " + std::to_string(seq) + " holds " + std::to_string(current) +
                  " tokens; cannot keep " + std::to_string(length));
    // The rows past the new length stay in the buffers and are overwritten by the next forward.
    sequences_.at(seq).length = length;
  }

  std::vector<std::vector<float>> forward(const std::vector<Step>& steps, bool allPositions) override {
    const MatmulScope matmul(matmul_);
    takeWeightBytesRead();
    if (steps.empty()) return {};
    validate(steps);
    std::vector<int64_t> ids, positions;
    std::vector<KvCache*> caches;
    for (const Step& step : steps) {
      KvCache& cache = sequences_.at(step.seq);
      caches.push_back(&cache);
      for (size_t i = 0; i < step.tokens.size(); ++i) {
        ids.push_back(step.tokens[i]);
        positions.push_back(cache.length + static_cast<int64_t>(i));
      }
    }
    const auto n = static_cast<int64_t>(ids.size());
    // Every product, norm and expert takes each step's rows as they would be alone (linear.h).
    std::vector<int64_t> stepRows;
    for (const Step& step : steps) stepRows.push_back(static_cast<int64_t>(step.tokens.size()));
    const RowSegmentsScope stepSegments(stepRows);
    const IntraOpThreadsScope intraOp(n);
    const at::Tensor idTensor = at::from_blob(ids.data(), {n}, at::kLong);
    const at::Tensor positionTensor = at::from_blob(positions.data(), {n}, at::kLong);

    predictor_->beginForward(ids);
    at::Tensor h = embed_.index_select(0, idTensor);
    for (size_t l = 0; l < layers_.size(); ++l) {
      std::vector<AttentionSegment> segments;
      int64_t offset = 0;
      for (size_t s = 0; s < steps.size(); ++s) {
        const auto count = static_cast<int64_t>(steps[s].tokens.size());
        segments.push_back({offset, count, caches[s]->length, &caches[s]->first[l], &caches[s]->second[l]});
        offset += count;
      }
      const DecoderLayer& layer = layers_[l];
      h = h + layer.attention->forward(rmsNorm(h, layer.inputNorm, config_.rmsNormEps), positionTensor, segments);
      h = h + layer.ffn->forward(rmsNorm(h, layer.postNorm, config_.rmsNormEps));
    }

    // The rows whose logits are wanted: every row, or the last of each step.
    std::vector<int64_t> rows;
    int64_t offset = 0;
    for (const Step& step : steps) {
      const auto count = static_cast<int64_t>(step.tokens.size());
      if (allPositions)
        for (int64_t i = 0; i < count; ++i) rows.push_back(offset + i);
      else
        rows.push_back(offset + count - 1);
      offset += count;
    }
    const at::Tensor rowTensor = at::from_blob(rows.data(), {static_cast<int64_t>(rows.size())}, at::kLong);
    const RowSegmentsScope headRows(allPositions ? stepRows : std::vector<int64_t>(steps.size(), 1));
    const at::Tensor hidden = rmsNorm(h.index_select(0, rowTensor), finalNorm_, config_.rmsNormEps);
    const at::Tensor logits = project(hidden, lmHead_).to(at::kFloat).contiguous();

    std::vector<std::vector<float>> out;
    const float* data = logits.data_ptr<float>();
    const auto vocab = static_cast<size_t>(config_.vocabSize);
    size_t row = 0;
    for (const Step& step : steps) {
      const size_t count = allPositions ? step.tokens.size() : 1;
      out.emplace_back(data + row * vocab, data + (row + count) * vocab);
      row += count;
    }
    for (size_t s = 0; s < steps.size(); ++s) caches[s]->length += static_cast<int64_t>(steps[s].tokens.size());
    lastForwardWeightBytes_ = takeWeightBytesRead();
    return out;
  }

 private:
  const KvCache& find(SequenceId seq, const char* what) const {
    const auto it = sequences_.find(seq);
    if (it == sequences_.end()) throw Error(std::string(what) + ": unknown sequence " + std::to_string(seq));
    return it->second;
  }

  void validate(const std::vector<Step>& steps) const {
    std::set<SequenceId> seen;
    for (size_t s = 0; s < steps.size(); ++s) {
      const Step& step = steps[s];
      const std::string where = "forward: step " + std::to_string(s) + " (sequence " + std::to_string(step.seq) + ")";
      const KvCache& cache = find(step.seq, "forward");
      if (!seen.insert(step.seq).second) throw Error(where + ": the sequence appears twice in one forward");
      if (step.tokens.empty()) throw Error(where + ": empty step (no tokens)");
      for (size_t i = 0; i < step.tokens.size(); ++i)
        if (step.tokens[i] < 0 || step.tokens[i] >= config_.vocabSize)
          throw Error(where + ": token id " + std::to_string(step.tokens[i]) + " at index " + std::to_string(i) +
                      " is outside the vocabulary (size " + std::to_string(config_.vocabSize) + ")");
      const int64_t total = cache.length + static_cast<int64_t>(step.tokens.size());
      if (total > config_.maxPositionEmbeddings)
        throw Error(where + ": " + std::to_string(cache.length) + " cached + " + std::to_string(step.tokens.size()) +
                    " new tokens = " + std::to_string(total) + " exceed the context window of " +
                    std::to_string(config_.maxPositionEmbeddings) + " (max_position_embeddings)");
    }
  }

  // kvIdentity(): the config (as parsed JSON, so formatting does not count); the embedding, the LM
  // head, the final norm and the first layer's two (checkpoints of one config — a base model and
  // its instruct tune — differ there; read once, at the first call); the dtype and each layer's
  // cache layout.
  std::string describeKv() const {
    const auto crcOf = [](const at::Tensor& t, uint32_t crc) {
      const at::Tensor c = t.contiguous();
      return detail::crc32c(c.data_ptr(), static_cast<size_t>(c.numel()) * static_cast<size_t>(c.element_size()), crc);
    };
    uint32_t weights = crcOf(lmHead_, crcOf(embed_, crcOf(finalNorm_, 0)));
    if (!layers_.empty()) weights = crcOf(layers_[0].postNorm, crcOf(layers_[0].inputNorm, weights));
    std::vector<std::string> per;
    for (const DecoderLayer& layer : layers_) {
      auto [first, second] = layer.attention->makeCache();
      per.push_back(first.layout() + "+" + second.layout());
    }
    std::string layout;
    for (size_t i = 0; i < per.size();) {
      size_t j = i;
      while (j < per.size() && per[j] == per[i]) ++j;
      layout += (layout.empty() ? "" : " ") + std::to_string(j - i) + "x(" + per[i] + ")";
      i = j;
    }
    char hex[64];
    std::snprintf(hex, sizeof hex, "config:%08x weights:%08x", detail::crc32c(configText_.data(), configText_.size()),
                  weights);
    return std::string(hex) + " dtype:" + (computeDtype_ == ComputeDtype::BFloat16 ? "bf16" : "fp32") + " kv:" + layout;
  }

  void checkProvider(const std::filesystem::path& dir) const {
    const ExpertProvider& p = *experts_;
    const std::string what = dir.string() + ": expert provider";
    if (p.numLayers() != config_.numMoeLayers() || p.numExperts() != config_.numExperts)
      throw Error(what + " has " + std::to_string(p.numLayers()) + " MoE layers × " + std::to_string(p.numExperts()) +
                  " experts; the config has " + std::to_string(config_.numMoeLayers()) + " × " +
                  std::to_string(config_.numExperts));
    const std::pair<int64_t, int64_t> up{config_.moeIntermediateSize, config_.hiddenSize};
    const std::pair<int64_t, int64_t> down{config_.hiddenSize, config_.moeIntermediateSize};
    for (int kind = 0; kind < 3; ++kind) {
      const auto shape = p.tensorShape(kind);
      const auto expected = kind == 2 ? down : up;
      if (shape != expected)
        throw Error(what + ": expert tensor kind " + std::to_string(kind) + " has shape [" +
                    std::to_string(shape.first) + ", " + std::to_string(shape.second) + "], expected [" +
                    std::to_string(expected.first) + ", " + std::to_string(expected.second) + "] from the config");
    }
  }

  ModelConfig config_;
  ComputeDtype computeDtype_ = ComputeDtype::Float32;
  MatmulKernel matmul_ = MatmulKernel::Auto;
  uint64_t lastForwardWeightBytes_ = 0;
  at::ScalarType dtype_ = at::kFloat;
  std::shared_ptr<ExpertProvider> experts_;
  std::shared_ptr<RoutingOverride> routing_;
  std::unique_ptr<ExpertPredictor> predictor_;  // before the layers: their blocks point at it
  at::Tensor embed_, finalNorm_, lmHead_;
  std::vector<DecoderLayer> layers_;
  std::map<SequenceId, KvCache> sequences_;
  std::string configText_;             // config.json as parsed, dumped (kvIdentity)
  mutable std::string kvIdentity_;     // computed at the first call
  SequenceId nextId_ = 0;
};

}  // namespace

std::unique_ptr<MoeModel> MoeModel::load(const std::filesystem::path& dir, const ModelOptions& options) {
  return std::make_unique<MoeModelImpl>(dir, options);
}

}  // namespace zipmoe
