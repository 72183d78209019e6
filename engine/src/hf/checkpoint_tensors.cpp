// checkpointTensors: the tensor table of an HF checkpoint, derived from its config.json alone.
//
// Names and shapes follow Hugging Face transformers' modeling code (Linear weights are
// [out_features, in_features]) and the published checkpoints, including their quirks:
//  * qwen2_moe: q/k/v projections carry biases; every MoE layer has a shared expert and a
//    one-output `shared_expert_gate`; layers in `mlp_only_layers` or off `decoder_sparse_step` are dense.
//  * qwen3_moe: per-head q_norm/k_norm of head_dim; no shared expert.
//  * olmoe: q_norm/k_norm over the whole projection width (heads × head_dim).
//  * deepseek_v2: multi-head latent attention (q_proj or q_a/q_b with q_lora_rank, kv_a_proj_with_mqa,
//    kv_a_layernorm, kv_b_proj); the first `first_k_dense_replace` layers are dense; MoE layers have
//    `shared_experts` of n_shared_experts × moe_intermediate_size.
//  * switch_transformers: `shared`, both stacks' `embed_tokens` and `lm_head` are all stored; only
//    block 0 of each stack has relative_attention_bias; sparse blocks have `mlp.router.classifier`.
// Every tensor is BF16. The order is the modules' order (embeddings, blocks, final norm, head), which
// is stable and groups each layer's tensors together.
#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zipmoe/error.h"
#include "zipmoe/synthetic_model.h"

namespace zipmoe {
namespace {

using Declared = SafetensorsWriter::Declared;

// Reads config fields with errors that name the field, since this runs on user-supplied configs.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& config, ModelFamily family) : config_(config), family_(family) {}

  int64_t integer(const char* key) const {
    if (!config_.contains(key)) fail(key, "is missing");
    return integerValue(key, config_[key]);
  }
  int64_t integerOr(const char* key, int64_t fallback) const {
    if (!config_.contains(key) || config_[key].is_null()) return fallback;
    return integerValue(key, config_[key]);
  }
  bool has(const char* key) const { return config_.contains(key) && !config_[key].is_null(); }
  bool flagOr(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!config_[key].is_boolean()) fail(key, "is not a boolean (found " + config_[key].dump() + ")");
    return config_[key].get<bool>();
  }
  std::vector<int64_t> integerListOr(const char* key) const {
    std::vector<int64_t> out;
    if (!has(key)) return out;
    if (!config_[key].is_array()) fail(key, "is not a list (found " + config_[key].dump() + ")");
    for (const auto& item : config_[key]) out.push_back(integerValue(key, item));
    return out;
  }

 private:
  int64_t integerValue(const char* key, const nlohmann::json& value) const {
    if (!value.is_number_integer()) fail(key, "is not an integer (found " + value.dump() + ")");
    const int64_t v = value.get<int64_t>();
    if (v < 0) fail(key, "is negative (" + std::to_string(v) + ")");
    return v;
  }
  [[noreturn]] void fail(const char* key, const std::string& problem) const {
    throw Error(std::string("checkpoint tensors of a ") + familyName(family_) + " config: \"" + key +
                "\" " + problem);
  }
  const nlohmann::json& config_;
  ModelFamily family_;
};

class TensorList {
 public:
  void add(std::string name, std::vector<int64_t> shape) {
    tensors_.push_back(Declared{std::move(name), DType::BF16, std::move(shape)});
  }
  std::vector<Declared> take() { return std::move(tensors_); }

 private:
  std::vector<Declared> tensors_;
};

void addGatedMlp(TensorList& out, const std::string& prefix, int64_t hidden, int64_t intermediate) {
  out.add(prefix + "gate_proj.weight", {intermediate, hidden});
  out.add(prefix + "up_proj.weight", {intermediate, hidden});
  out.add(prefix + "down_proj.weight", {hidden, intermediate});
}

void addRoutedExperts(TensorList& out, ModelFamily family, const std::string& prefix, int64_t experts,
                      int64_t hidden, int64_t intermediate) {
  const auto& kinds = expertTensorKinds(family);  // {up-like, up-like, down} or {wi, wo}
  for (int64_t e = 0; e < experts; ++e) {
    const std::string base = prefix + std::to_string(e) + ".";
    for (size_t k = 0; k < kinds.size(); ++k) {
      const bool isDown = k + 1 == kinds.size();
      out.add(base + kinds[k] + ".weight", isDown ? std::vector<int64_t>{hidden, intermediate}
                                                  : std::vector<int64_t>{intermediate, hidden});
    }
  }
}

// Llama-style grouped-query attention shared by mixtral, qwen2_moe, qwen3_moe and olmoe.
struct AttentionShape {
  int64_t hidden, heads, kvHeads, headDim;
  bool qkvBias = false, outBias = false;
  enum class Norm { None, PerHead, FullWidth } norm = Norm::None;
};

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

void addEmbeddingAndHead(TensorList& out, const ConfigReader& c, bool head, int64_t hidden) {
  const int64_t vocab = c.integer("vocab_size");
  if (!head) {
    out.add("model.embed_tokens.weight", {vocab, hidden});
    return;
  }
  out.add("model.norm.weight", {hidden});
  if (!c.flagOr("tie_word_embeddings", false)) out.add("lm_head.weight", {vocab, hidden});
}

// The decoder-only families that differ only in attention details and the MoE block.
std::vector<Declared> decoderOnlyTensors(ModelFamily family, const ConfigReader& c) {
  TensorList out;
  const int64_t hidden = c.integer("hidden_size");
  const int64_t layers = c.integer("num_hidden_layers");
  const int64_t heads = c.integer("num_attention_heads");
  AttentionShape attention{hidden, heads, c.integerOr("num_key_value_heads", heads),
                           c.integerOr("head_dim", heads > 0 ? hidden / heads : 0)};
  switch (family) {
    case ModelFamily::Qwen2Moe:
      attention.qkvBias = c.flagOr("qkv_bias", true);
      break;
    case ModelFamily::Qwen3Moe:
      attention.qkvBias = attention.outBias = c.flagOr("attention_bias", false);
      attention.norm = AttentionShape::Norm::PerHead;
      break;
    case ModelFamily::Olmoe:
      attention.qkvBias = attention.outBias = c.flagOr("attention_bias", false);
      attention.norm = AttentionShape::Norm::FullWidth;
      break;
    default:
      break;
  }
  const bool qwen = family == ModelFamily::Qwen2Moe || family == ModelFamily::Qwen3Moe;
  const int64_t experts = c.integer(family == ModelFamily::Mixtral ? "num_local_experts" : "num_experts");
  const int64_t sparseStep = qwen ? c.integerOr("decoder_sparse_step", 1) : 1;
  const std::vector<int64_t> mlpOnly = qwen ? c.integerListOr("mlp_only_layers") : std::vector<int64_t>{};
  // OLMoE and Mixtral size their experts with intermediate_size; the Qwen MoEs have a separate field.
  const int64_t expertWidth = qwen ? c.integer("moe_intermediate_size") : c.integer("intermediate_size");

  addEmbeddingAndHead(out, c, false, hidden);
  for (int64_t layer = 0; layer < layers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    out.add(prefix + "input_layernorm.weight", {hidden});
    addAttention(out, prefix + "self_attn.", attention);
    out.add(prefix + "post_attention_layernorm.weight", {hidden});
    const bool listedDense = std::find(mlpOnly.begin(), mlpOnly.end(), layer) != mlpOnly.end();
    const bool sparse = !listedDense && experts > 0 && sparseStep > 0 && (layer + 1) % sparseStep == 0;
    if (family == ModelFamily::Mixtral) {
      out.add(prefix + "block_sparse_moe.gate.weight", {experts, hidden});
      addRoutedExperts(out, family, prefix + "block_sparse_moe.experts.", experts, hidden, expertWidth);
    } else if (!sparse) {
      addGatedMlp(out, prefix + "mlp.", hidden, c.integer("intermediate_size"));
    } else {
      out.add(prefix + "mlp.gate.weight", {experts, hidden});
      addRoutedExperts(out, family, prefix + "mlp.experts.", experts, hidden, expertWidth);
      if (family == ModelFamily::Qwen2Moe) {
        addGatedMlp(out, prefix + "mlp.shared_expert.", hidden, c.integer("shared_expert_intermediate_size"));
        out.add(prefix + "mlp.shared_expert_gate.weight", {1, hidden});
      }
    }
  }
  addEmbeddingAndHead(out, c, true, hidden);
  return out.take();
}

std::vector<Declared> deepseekV2Tensors(const ConfigReader& c) {
  TensorList out;
  const int64_t hidden = c.integer("hidden_size");
  const int64_t layers = c.integer("num_hidden_layers");
  const int64_t heads = c.integer("num_attention_heads");
  const int64_t nope = c.integer("qk_nope_head_dim"), rope = c.integer("qk_rope_head_dim");
  const int64_t vDim = c.integer("v_head_dim"), kvRank = c.integer("kv_lora_rank");
  const int64_t qHeadDim = nope + rope;
  const bool bias = c.flagOr("attention_bias", false);
  const bool routed = c.has("n_routed_experts");
  const int64_t experts = c.integerOr("n_routed_experts", 0);
  const int64_t firstDense = c.integerOr("first_k_dense_replace", 0);
  const int64_t layerFreq = c.integerOr("moe_layer_freq", 1);

  addEmbeddingAndHead(out, c, false, hidden);
  for (int64_t layer = 0; layer < layers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".";
    const std::string attn = prefix + "self_attn.";
    out.add(prefix + "input_layernorm.weight", {hidden});
    if (c.has("q_lora_rank")) {
      const int64_t qRank = c.integer("q_lora_rank");
      out.add(attn + "q_a_proj.weight", {qRank, hidden});
      if (bias) out.add(attn + "q_a_proj.bias", {qRank});
      out.add(attn + "q_a_layernorm.weight", {qRank});
      out.add(attn + "q_b_proj.weight", {heads * qHeadDim, qRank});
    } else {
      out.add(attn + "q_proj.weight", {heads * qHeadDim, hidden});
    }
    out.add(attn + "kv_a_proj_with_mqa.weight", {kvRank + rope, hidden});
    if (bias) out.add(attn + "kv_a_proj_with_mqa.bias", {kvRank + rope});
    out.add(attn + "kv_a_layernorm.weight", {kvRank});
    out.add(attn + "kv_b_proj.weight", {heads * (nope + vDim), kvRank});
    out.add(attn + "o_proj.weight", {hidden, heads * vDim});
    if (bias) out.add(attn + "o_proj.bias", {hidden});
    out.add(prefix + "post_attention_layernorm.weight", {hidden});
    const bool sparse = routed && layer >= firstDense && layerFreq > 0 && layer % layerFreq == 0;
    if (!sparse) {
      addGatedMlp(out, prefix + "mlp.", hidden, c.integer("intermediate_size"));
      continue;
    }
    const int64_t expertWidth = c.integer("moe_intermediate_size");
    addRoutedExperts(out, ModelFamily::DeepseekV2, prefix + "mlp.experts.", experts, hidden, expertWidth);
    out.add(prefix + "mlp.gate.weight", {experts, hidden});
    const int64_t shared = c.integerOr("n_shared_experts", 0);
    if (shared > 0) addGatedMlp(out, prefix + "mlp.shared_experts.", hidden, expertWidth * shared);
  }
  addEmbeddingAndHead(out, c, true, hidden);
  return out.take();
}

// HF's SwitchTransformersConfig recomputes the sparse step from the number of sparse layers; a block i
// is sparse when i % step == 1 (or every block when step == 1).
int64_t switchSparseStep(const ConfigReader& c, const char* sparseLayersKey, const char* stepKey,
                         int64_t layers) {
  if (!c.has(sparseLayersKey)) return c.integerOr(stepKey, 1);
  const int64_t sparseLayers = c.integer(sparseLayersKey);
  return sparseLayers > 0 ? layers / sparseLayers : layers;
}

std::vector<Declared> switchTensors(const ConfigReader& c) {
  TensorList out;
  const int64_t model = c.integer("d_model"), ff = c.integer("d_ff"), kv = c.integer("d_kv");
  const int64_t heads = c.integer("num_heads"), vocab = c.integer("vocab_size");
  const int64_t experts = c.integer("num_experts");
  const int64_t buckets = c.integerOr("relative_attention_num_buckets", 32);
  const int64_t inner = heads * kv;
  out.add("shared.weight", {vocab, model});

  auto addAttention = [&](const std::string& prefix, bool relativeBias) {
    out.add(prefix + "q.weight", {inner, model});
    out.add(prefix + "k.weight", {inner, model});
    out.add(prefix + "v.weight", {inner, model});
    out.add(prefix + "o.weight", {model, inner});
    if (relativeBias) out.add(prefix + "relative_attention_bias.weight", {buckets, heads});
  };
  auto addStack = [&](const std::string& stack, bool decoder) {
    const int64_t layers = decoder ? c.integerOr("num_decoder_layers", c.integer("num_layers"))
                                   : c.integer("num_layers");
    const int64_t step = decoder ? switchSparseStep(c, "num_sparse_decoder_layers", "decoder_sparse_step", layers)
                                 : switchSparseStep(c, "num_sparse_encoder_layers", "encoder_sparse_step", layers);
    out.add(stack + ".embed_tokens.weight", {vocab, model});
    for (int64_t block = 0; block < layers; ++block) {
      const std::string prefix = stack + ".block." + std::to_string(block) + ".layer.";
      addAttention(prefix + "0.SelfAttention.", block == 0);
      out.add(prefix + "0.layer_norm.weight", {model});
      if (decoder) {
        addAttention(prefix + "1.EncDecAttention.", false);
        out.add(prefix + "1.layer_norm.weight", {model});
      }
      const std::string mlp = prefix + (decoder ? "2" : "1") + ".";
      const bool sparse = step > 0 && (block % step == 1 || step == 1);
      if (sparse) {
        out.add(mlp + "mlp.router.classifier.weight", {experts, model});
        addRoutedExperts(out, ModelFamily::SwitchTransformers, mlp + "mlp.experts.expert_", experts, model, ff);
      } else {
        out.add(mlp + "mlp.wi.weight", {ff, model});
        out.add(mlp + "mlp.wo.weight", {model, ff});
      }
      out.add(mlp + "layer_norm.weight", {model});
    }
    out.add(stack + ".final_layer_norm.weight", {model});
  };
  addStack("encoder", false);
  addStack("decoder", true);
  out.add("lm_head.weight", {vocab, model});
  return out.take();
}

}  // namespace

std::vector<SafetensorsWriter::Declared> checkpointTensors(ModelFamily family, const nlohmann::json& config) {
  if (!config.is_object())
    throw Error(std::string("checkpoint tensors of a ") + familyName(family) + " config: not a JSON object");
  const ConfigReader reader(config, family);
  switch (family) {
    case ModelFamily::DeepseekV2:
      return deepseekV2Tensors(reader);
    case ModelFamily::SwitchTransformers:
      return switchTensors(reader);
    case ModelFamily::Mixtral:
    case ModelFamily::Qwen2Moe:
    case ModelFamily::Qwen3Moe:
    case ModelFamily::Olmoe:
      break;
  }
  return decoderOnlyTensors(family, reader);
}

}  // namespace zipmoe
