// checkpointTensors and the building blocks of the families' tensor tables (see checkpoint_tensors.h).
// Each family's own quirks are described in its file under hf/families/.
#include "hf/checkpoint_tensors.h"

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/family_description.h"
#include "zipmoe/base/error.h"

namespace zipmoe {

int64_t CheckpointConfig::integer(const char* key) const {
  if (!config_.contains(key)) fail(key, "is missing");
  return integerValue(key, config_[key]);
}

int64_t CheckpointConfig::integerOr(const char* key, int64_t fallback) const {
  if (!config_.contains(key) || config_[key].is_null()) return fallback;
  return integerValue(key, config_[key]);
}

bool CheckpointConfig::has(const char* key) const { return config_.contains(key) && !config_[key].is_null(); }

bool CheckpointConfig::flagOr(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!config_[key].is_boolean()) fail(key, "is not a boolean (found " + config_[key].dump() + ")");
  return config_[key].get<bool>();
}

std::vector<int64_t> CheckpointConfig::integerListOr(const char* key) const {
  std::vector<int64_t> out;
  if (!has(key)) return out;
  if (!config_[key].is_array()) fail(key, "is not a list (found " + config_[key].dump() + ")");
  for (const auto& item : config_[key]) out.push_back(integerValue(key, item));
  return out;
}

int64_t CheckpointConfig::integerValue(const char* key, const nlohmann::json& value) const {
  if (!value.is_number_integer()) fail(key, "is not an integer (found " + value.dump() + ")");
  const int64_t v = value.get<int64_t>();
  if (v < 0) fail(key, "is negative (" + std::to_string(v) + ")");
  return v;
}

void CheckpointConfig::fail(const char* key, const std::string& problem) const {
  throw Error(std::string("checkpoint tensors of a ") + familyName(family_) + " config: \"" + key + "\" " + problem);
}

void addGatedMlp(TensorList& out, const std::string& prefix, int64_t hidden, int64_t intermediate) {
  out.add(prefix + "gate_proj.weight", {intermediate, hidden});
  out.add(prefix + "up_proj.weight", {intermediate, hidden});
  out.add(prefix + "down_proj.weight", {hidden, intermediate});
}

void addRoutedExperts(TensorList& out, const std::vector<std::string>& kinds, const std::string& prefix,
                      int64_t experts, int64_t hidden, int64_t intermediate) {
  for (int64_t e = 0; e < experts; ++e) {
    const std::string base = prefix + std::to_string(e) + ".";
    for (size_t k = 0; k < kinds.size(); ++k) {
      const bool isDown = k + 1 == kinds.size();
      out.add(base + kinds[k] + ".weight", isDown ? std::vector<int64_t>{hidden, intermediate}
                                                  : std::vector<int64_t>{intermediate, hidden});
    }
  }
}

void addEmbeddingAndHead(TensorList& out, const CheckpointConfig& c, bool head, int64_t hidden) {
  const int64_t vocab = c.integer("vocab_size");
  if (!head) {
    out.add("model.embed_tokens.weight", {vocab, hidden});
    return;
  }
  out.add("model.norm.weight", {hidden});
  if (!c.flagOr("tie_word_embeddings", false)) out.add("lm_head.weight", {vocab, hidden});
}

namespace {

void addAttention(TensorList& out, const std::string& prefix, const AttentionShape& a) {
  const int64_t qWidth = a.heads * a.headDim, kvWidth = a.kvHeads * a.headDim;
  out.add(prefix + "q_proj.weight", {qWidth, a.hidden});
  if (a.qkvBias) out.add(prefix + "q_proj.bias", {qWidth});
  out.add(prefix + "k_proj.weight", {kvWidth, a.hidden});
  if (a.qkvBias) out.add(prefix + "k_proj.bias", {kvWidth});
  out.add(prefix + "v_proj.weight", {kvWidth, a.hidden});
  if (a.qkvBias) out.add(prefix + "v_proj.bias", {kvWidth});
  out.add(prefix + "o_proj.weight", {a.hidden, qWidth});
  if (a.outBias) out.add(prefix + "o_proj.bias", {a.hidden});
  if (a.norm == AttentionShape::Norm::PerHead) {
    out.add(prefix + "q_norm.weight", {a.headDim});
    out.add(prefix + "k_norm.weight", {a.headDim});
  } else if (a.norm == AttentionShape::Norm::FullWidth) {
    out.add(prefix + "q_norm.weight", {qWidth});
    out.add(prefix + "k_norm.weight", {kvWidth});
  }
}

}  // namespace

LlamaStyleLayout readLlamaStyleLayout(const CheckpointConfig& c) {
  LlamaStyleLayout layout;
  const int64_t hidden = c.integer("hidden_size");
  layout.layers = c.integer("num_hidden_layers");
  const int64_t heads = c.integer("num_attention_heads");
  layout.attention = AttentionShape{hidden, heads, c.integerOr("num_key_value_heads", heads),
                                    c.integerOr("head_dim", heads > 0 ? hidden / heads : 0)};
  return layout;
}

std::vector<bool> sparseStepLayers(const CheckpointConfig& c, int64_t layers, int64_t experts) {
  const int64_t sparseStep = c.integerOr("decoder_sparse_step", 1);
  const std::vector<int64_t> mlpOnly = c.integerListOr("mlp_only_layers");
  std::vector<bool> out;
  for (int64_t layer = 0; layer < layers; ++layer) {
    const bool listedDense = std::find(mlpOnly.begin(), mlpOnly.end(), layer) != mlpOnly.end();
    out.push_back(!listedDense && experts > 0 && sparseStep > 0 && (layer + 1) % sparseStep == 0);
  }
  return out;
}

std::vector<SafetensorsWriter::Declared> llamaStyleTensors(const CheckpointConfig& c, const LlamaStyleLayout& layout,
                                                           const DecoderLayerNames& names,
                                                           const std::vector<std::string>& expertKinds) {
  TensorList out;
  const int64_t hidden = layout.attention.hidden;
  addEmbeddingAndHead(out, c, false, hidden);
  for (int64_t layer = 0; layer < layout.layers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    out.add(prefix + "input_layernorm.weight", {hidden});
    addAttention(out, prefix + "self_attn.", layout.attention);
    out.add(prefix + "post_attention_layernorm.weight", {hidden});
    if (!layout.moeLayers[static_cast<size_t>(layer)]) {
      addGatedMlp(out, prefix + "mlp.", hidden, c.integer("intermediate_size"));
      continue;
    }
    out.add(prefix + names.router, {layout.experts, hidden});
    addRoutedExperts(out, expertKinds, prefix + names.routedExperts, layout.experts, hidden, layout.expertWidth);
    if (!names.sharedExperts.empty()) addGatedMlp(out, prefix + names.sharedExperts, hidden, layout.sharedExpertWidth);
    if (!names.sharedExpertGate.empty()) out.add(prefix + names.sharedExpertGate, {1, hidden});
  }
  addEmbeddingAndHead(out, c, true, hidden);
  return out.take();
}

std::vector<SafetensorsWriter::Declared> checkpointTensors(ModelFamily family, const nlohmann::json& config) {
  if (!config.is_object())
    throw Error(std::string("checkpoint tensors of a ") + familyName(family) + " config: not a JSON object");
  return describe(family).tensors(CheckpointConfig(config, family));
}

}  // namespace zipmoe
