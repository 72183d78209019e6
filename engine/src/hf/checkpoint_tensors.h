// Internal: the building blocks of a family's checkpoint tensor table (FamilyDescription::tensors).
//
// checkpointTensors() (below) lists every tensor an HF checkpoint of a config.json
// holds; each family's file under hf/families/ builds its list from these parts. Names and shapes
// follow Hugging Face transformers' modeling code (Linear weights are [out_features, in_features]) and
// the published checkpoints. Every tensor is BF16. The order is the modules' order (embeddings, blocks,
// final norm, head), which is stable, groups each layer's tensors together, and must not change: a
// synthetic model draws each tensor's weights from the stream of its index in this list.
// Thread-safety: values and free functions. Cost: microseconds per layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "zipmoe/hf/model_family.h"
#include "zipmoe/hf/safetensors.h"

namespace zipmoe {

struct DecoderLayerNames;

// A config.json read for its tensor table, with errors that name the family and the field
// ("checkpoint tensors of a qwen2_moe config: "hidden_size" is missing"), since this runs on
// user-supplied configs.
class CheckpointConfig {
 public:
  // `config` must be a JSON object and outlive the reader.
  CheckpointConfig(const nlohmann::json& config, ModelFamily family) : config_(config), family_(family) {}

  int64_t integer(const char* key) const;
  int64_t integerOr(const char* key, int64_t fallback) const;  // absent or null → fallback
  bool has(const char* key) const;                             // present and not null
  bool flagOr(const char* key, bool fallback) const;
  std::vector<int64_t> integerListOr(const char* key) const;  // absent or null → empty

 private:
  int64_t integerValue(const char* key, const nlohmann::json& value) const;
  [[noreturn]] void fail(const char* key, const std::string& problem) const;

  const nlohmann::json& config_;
  ModelFamily family_;
};

class TensorList {
 public:
  void add(std::string name, std::vector<int64_t> shape) {
    tensors_.push_back(SafetensorsWriter::Declared{std::move(name), DType::BF16, std::move(shape)});
  }
  std::vector<SafetensorsWriter::Declared> take() { return std::move(tensors_); }

 private:
  std::vector<SafetensorsWriter::Declared> tensors_;
};

// {prefix}gate_proj, up_proj, down_proj.
void addGatedMlp(TensorList& out, const std::string& prefix, int64_t hidden, int64_t intermediate);
// {prefix}{E}.{kind}.weight for every expert: the last kind projects down ([hidden, intermediate]),
// the others up ([intermediate, hidden]).
void addRoutedExperts(TensorList& out, const std::vector<std::string>& kinds, const std::string& prefix,
                      int64_t experts, int64_t hidden, int64_t intermediate);
// model.embed_tokens (head = false), or model.norm and lm_head unless tie_word_embeddings (head = true).
void addEmbeddingAndHead(TensorList& out, const CheckpointConfig& c, bool head, int64_t hidden);

// Llama-style grouped-query attention (mixtral, qwen2_moe, qwen3_moe, olmoe).
struct AttentionShape {
  int64_t hidden = 0, heads = 0, kvHeads = 0, headDim = 0;
  bool qkvBias = false, outBias = false;
  enum class Norm { None, PerHead, FullWidth } norm = Norm::None;  // q_norm / k_norm
};

// A Llama-style decoder: per layer input_layernorm, self_attn, post_attention_layernorm, then either
// a dense mlp of intermediate_size or the router, the routed experts and any shared experts.
struct LlamaStyleLayout {
  int64_t layers = 0;
  AttentionShape attention;
  std::vector<bool> moeLayers;  // per layer
  int64_t experts = 0, expertWidth = 0;
  int64_t sharedExpertWidth = 0;  // with DecoderLayerNames::sharedExperts
};

// Reads hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads (default: heads) and
// head_dim (default: hidden / heads) — the fields every Llama-style config spells alike.
LlamaStyleLayout readLlamaStyleLayout(const CheckpointConfig& c);
// decoder_sparse_step and mlp_only_layers (the Qwen MoE configs): layer i has experts when it is not
// listed, `experts` > 0 and (i + 1) is a multiple of the step.
std::vector<bool> sparseStepLayers(const CheckpointConfig& c, int64_t layers, int64_t experts);
std::vector<SafetensorsWriter::Declared> llamaStyleTensors(const CheckpointConfig& c, const LlamaStyleLayout& layout,
                                                           const DecoderLayerNames& names,
                                                           const std::vector<std::string>& expertKinds);

// Every tensor (name, dtype, shape) an HF checkpoint of this config holds, in a stable order.
// Works for real configs too: it is checked against the real checkpoints' tensor indexes.
std::vector<SafetensorsWriter::Declared> checkpointTensors(ModelFamily family, const nlohmann::json& config);

}  // namespace zipmoe
