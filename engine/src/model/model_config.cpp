// parseModelConfig — HF config.json → ModelConfig for the decoder-only MoE families with a forward pass.
//
// Field names and defaults follow transformers' configuration classes (MixtralConfig, Qwen2MoeConfig,
// Qwen3MoeConfig, OlmoeConfig, DeepseekV2Config). Fields that fix the model's shapes (vocab_size,
// hidden_size, num_hidden_layers, num_attention_heads, the expert counts and widths) are required:
// defaulting them to some published model's values would only turn a broken config into a confusing
// shape error later. Fields with a neutral HF default (rms_norm_eps, rope_theta, num_key_value_heads,
// norm_topk_prob, tie_word_embeddings, ...) take that default when absent or null. Every value read is
// type- and range-checked; errors name the file and the field.
// Thread-safety: pure function. Cost: microseconds.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zipmoe/error.h"
#include "zipmoe/model_config.h"

namespace zipmoe {
namespace {

using nlohmann::json;

const char* const kForwardFamilies = "mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2";

class Fields {
 public:
  Fields(const json& config, const std::string& what) : c_(config), what_(what) {}

  bool has(const char* key) const { return c_.contains(key) && !c_[key].is_null(); }
  bool present(const char* key) const { return c_.contains(key); }

  int integer(const char* key, int minValue = 1) const {
    if (!has(key)) fail(key, "is missing");
    return integerValue(key, c_[key], minValue);
  }
  int integerOr(const char* key, int fallback, int minValue = 1) const {
    if (!has(key)) return fallback;
    return integerValue(key, c_[key], minValue);
  }
  double number(const json& v, const char* key) const {
    if (!v.is_number()) fail(key, "is not a number (found " + v.dump() + ")");
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(key, "is not finite");
    return d;
  }
  double numberOr(const char* key, double fallback) const { return has(key) ? number(c_[key], key) : fallback; }
  double positiveOr(const char* key, double fallback) const {
    const double d = numberOr(key, fallback);
    if (!(d > 0)) fail(key, "must be positive (found " + std::to_string(d) + ")");
    return d;
  }
  bool flagOr(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!c_[key].is_boolean()) fail(key, "is not a boolean (found " + c_[key].dump() + ")");
    return c_[key].get<bool>();
  }
  std::string stringOr(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!c_[key].is_string()) fail(key, "is not a string (found " + c_[key].dump() + ")");
    return c_[key].get<std::string>();
  }
  std::vector<int> integerListOr(const char* key) const {
    std::vector<int> out;
    if (!has(key)) return out;
    if (!c_[key].is_array()) fail(key, "is not a list (found " + c_[key].dump() + ")");
    for (const auto& item : c_[key]) out.push_back(integerValue(key, item, 0));
    return out;
  }
  // An integer or a list of integers (eos_token_id).
  std::vector<int> tokenIds(const char* key) const {
    if (!has(key)) return {};
    if (c_[key].is_array()) return integerListOr(key);
    return {integerValue(key, c_[key], 0)};
  }
  const json& at(const char* key) const { return c_[key]; }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw Error(what_ + ": \"" + key + "\" " + problem);
  }

 private:
  int integerValue(const char* key, const json& v, int minValue) const {
    // Some configs write integral values as floats (e.g. "rope_theta": 10000 or "factor": 40.0).
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() && std::fabs(v.get<double>()) < 1e9)
      return checkRange(key, static_cast<int64_t>(v.get<double>()), minValue);
    if (!v.is_number_integer()) fail(key, "is not an integer (found " + v.dump() + ")");
    return checkRange(key, v.get<int64_t>(), minValue);
  }
  int checkRange(const char* key, int64_t v, int minValue) const {
    if (v < minValue) fail(key, "must be at least " + std::to_string(minValue) + " (found " + std::to_string(v) + ")");
    if (v > 1'000'000'000) fail(key, "is too large (" + std::to_string(v) + ")");
    return static_cast<int>(v);
  }
  const json& c_;
  const std::string& what_;
};

// `key` is "rope_scaling" (checkpoints' config.json) or "rope_parameters" (written by transformers 5,
// which also moves rope_theta into it).
void parseRopeScaling(const Fields& f, ModelConfig& m, const char* field) {
  if (!f.has(field)) return;
  const json& rs = f.at(field);
  if (!rs.is_object()) f.fail(field, "is not an object (found " + rs.dump() + ")");
  if (rs.contains("rope_theta") && !rs["rope_theta"].is_null()) {
    m.ropeTheta = f.number(rs["rope_theta"], (std::string(field) + ".rope_theta").c_str());
    if (!(m.ropeTheta > 0)) f.fail(std::string(field) + ".rope_theta", "must be positive");
  }
  std::string type;
  for (const char* key : {"rope_type", "type"})
    if (rs.contains(key) && rs[key].is_string()) {
      type = rs[key].get<std::string>();
      break;
    }
  if (type.empty()) f.fail(field, "has no \"type\" / \"rope_type\"");
  if (type == "default") return;
  if (type != "yarn" && type != "linear")
    f.fail(field, "type \"" + type + "\" is not supported (supported: default, linear, yarn)");
  RopeScaling& r = m.ropeScaling;
  r.type = type;
  auto num = [&](const char* key, double fallback) {
    if (!rs.contains(key) || rs[key].is_null()) return fallback;
    return f.number(rs[key], (std::string(field) + "." + key).c_str());
  };
  r.factor = num("factor", 0.0);
  // transformers: a yarn config without factor takes max_position_embeddings / original length.
  if (type == "yarn" && r.factor == 0.0 && num("original_max_position_embeddings", 0.0) > 0)
    r.factor = m.maxPositionEmbeddings / num("original_max_position_embeddings", 0.0);
  if (!(r.factor >= 1.0)) f.fail(std::string(field) + ".factor", "must be a number ≥ 1 (found " + rs.value("factor", json()).dump() + ")");
  if (type == "linear") return;
  r.betaFast = num("beta_fast", 32.0);
  r.betaSlow = num("beta_slow", 1.0);
  // Absent or null mscale behaves as 0 in transformers' yarn ("if mscale and mscale_all_dim").
  r.mscale = num("mscale", 0.0);
  r.mscaleAllDim = num("mscale_all_dim", 0.0);
  r.attentionFactor = num("attention_factor", 0.0);
  const double original = num("original_max_position_embeddings", 0.0);
  if (original < 0 || std::floor(original) != original)
    f.fail(std::string(field) + ".original_max_position_embeddings", "must be a positive integer");
  r.originalMaxPositionEmbeddings = static_cast<int>(original);
  if (rs.contains("truncate") && rs["truncate"].is_boolean()) r.truncate = rs["truncate"].get<bool>();
}

void parseRoutedCommon(const Fields& f, ModelConfig& m, const char* expertsKey) {
  m.numExperts = f.integer(expertsKey);
  m.numExpertsPerTok = f.integer("num_experts_per_tok");
  if (m.numExpertsPerTok > m.numExperts)
    f.fail("num_experts_per_tok", "(" + std::to_string(m.numExpertsPerTok) + ") exceeds the number of experts (" +
                                      std::to_string(m.numExperts) + ")");
}

}  // namespace

int ModelConfig::numMoeLayers() const {
  return static_cast<int>(std::count(layerIsMoe.begin(), layerIsMoe.end(), true));
}

int ModelConfig::moeLayerIndex(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(layerIsMoe.size()) || !layerIsMoe[static_cast<size_t>(layer)]) return -1;
  return static_cast<int>(std::count(layerIsMoe.begin(), layerIsMoe.begin() + layer, true));
}

ModelConfig parseModelConfig(const nlohmann::json& config, const std::string& what) {
  if (!config.is_object()) throw Error(what + ": not a JSON object");
  if (!config.contains("model_type") || !config["model_type"].is_string())
    throw Error(what + ": \"model_type\" is missing or not a string; supported architectures: " + kForwardFamilies);
  const std::string modelType = config["model_type"].get<std::string>();
  const auto family = familyFromName(modelType);
  if (!family || *family == ModelFamily::SwitchTransformers)
    throw Error(what + ": architecture \"" + modelType + "\" is not supported by the forward pass" +
                (family ? " (switch_transformers is encoder-decoder)" : "") +
                "; supported architectures: " + kForwardFamilies);

  const Fields f(config, what);
  ModelConfig m;
  m.family = *family;
  m.vocabSize = f.integer("vocab_size");
  m.hiddenSize = f.integer("hidden_size");
  m.numLayers = f.integer("num_hidden_layers");
  m.numHeads = f.integer("num_attention_heads");
  m.numKvHeads = f.integerOr("num_key_value_heads", m.numHeads);
  if (m.numHeads % m.numKvHeads != 0)
    f.fail("num_key_value_heads", "(" + std::to_string(m.numKvHeads) + ") does not divide num_attention_heads (" +
                                      std::to_string(m.numHeads) + ")");
  const bool deepseek = m.family == ModelFamily::DeepseekV2;
  // HF defaults of max_position_embeddings / rms_norm_eps / rope_theta per configuration class.
  int defaultMaxPos = 4096;
  double defaultEps = 1e-6, defaultTheta = 10000.0;
  switch (m.family) {
    case ModelFamily::Mixtral: defaultMaxPos = 4096 * 32, defaultEps = 1e-5, defaultTheta = 1e6; break;
    case ModelFamily::Qwen2Moe: defaultMaxPos = 32768; break;
    case ModelFamily::Qwen3Moe: defaultMaxPos = 32768; break;
    case ModelFamily::Olmoe: defaultMaxPos = 4096, defaultEps = 1e-5; break;
    case ModelFamily::DeepseekV2: defaultMaxPos = 2048; break;
    case ModelFamily::SwitchTransformers: break;
  }
  m.maxPositionEmbeddings = f.integerOr("max_position_embeddings", defaultMaxPos);
  m.rmsNormEps = f.positiveOr("rms_norm_eps", defaultEps);
  m.ropeTheta = f.positiveOr("rope_theta", defaultTheta);
  m.tieWordEmbeddings = f.flagOr("tie_word_embeddings", false);
  const std::string act = f.stringOr("hidden_act", "silu");
  if (act != "silu") f.fail("hidden_act", "\"" + act + "\" is not supported (only silu)");
  parseRopeScaling(f, m, "rope_parameters");
  parseRopeScaling(f, m, "rope_scaling");
  m.eosTokenIds = f.tokenIds("eos_token_id");
  if (f.has("bos_token_id")) m.bosTokenId = f.integerOr("bos_token_id", 0, 0);

  if (deepseek) {
    m.qkNopeHeadDim = f.integerOr("qk_nope_head_dim", 128);
    m.qkRopeHeadDim = f.integerOr("qk_rope_head_dim", 64);
    if (m.qkRopeHeadDim % 2 != 0) f.fail("qk_rope_head_dim", "must be even");
    m.vHeadDim = f.integerOr("v_head_dim", 128);
    m.kvLoraRank = f.integerOr("kv_lora_rank", 512);
    // DeepseekV2Config's default is 1536; null means "no low-rank query" (q_proj).
    m.qLoraRank = f.present("q_lora_rank") ? f.integerOr("q_lora_rank", 0) : 1536;
    m.headDim = m.qkNopeHeadDim + m.qkRopeHeadDim;
    m.numKvHeads = m.numHeads;  // MLA: every head has its own key and value
    m.attentionBias = f.flagOr("attention_bias", false);
    m.intermediateSize = f.integer("intermediate_size");
    m.moeIntermediateSize = f.integer("moe_intermediate_size");
    parseRoutedCommon(f, m, "n_routed_experts");
    const int shared = f.integerOr("n_shared_experts", 0, 0);
    m.sharedExpertIntermediateSize = shared * m.moeIntermediateSize;
    m.topkMethod = f.stringOr("topk_method", "greedy");
    if (m.topkMethod != "greedy" && m.topkMethod != "group_limited_greedy")
      f.fail("topk_method", "\"" + m.topkMethod + "\" is not supported (greedy, group_limited_greedy)");
    m.nGroup = f.integerOr("n_group", 1);
    m.topkGroup = f.integerOr("topk_group", 1);
    if (m.topkMethod == "group_limited_greedy") {
      if (m.numExperts % m.nGroup != 0) f.fail("n_group", "does not divide n_routed_experts");
      if (m.topkGroup > m.nGroup) f.fail("topk_group", "exceeds n_group");
      if (m.numExpertsPerTok > m.topkGroup * (m.numExperts / m.nGroup))
        f.fail("num_experts_per_tok", "exceeds the experts of topk_group groups");
    }
    m.routedScalingFactor = f.numberOr("routed_scaling_factor", 1.0);
    m.normTopkProb = f.flagOr("norm_topk_prob", false);
    const std::string scoring = f.stringOr("scoring_func", "softmax");
    if (scoring != "softmax") f.fail("scoring_func", "\"" + scoring + "\" is not supported (softmax)");
    const int firstDense = f.integerOr("first_k_dense_replace", 0, 0);
    const int freq = f.integerOr("moe_layer_freq", 1);
    for (int i = 0; i < m.numLayers; ++i) m.layerIsMoe.push_back(i >= firstDense && i % freq == 0);
  } else {
    m.headDim = f.integerOr("head_dim", m.hiddenSize / m.numHeads);
    if (m.family != ModelFamily::Qwen3Moe && m.family != ModelFamily::Mixtral && m.headDim * m.numHeads != m.hiddenSize)
      f.fail("hidden_size", "(" + std::to_string(m.hiddenSize) + ") is not num_attention_heads × head_dim");
    if (m.headDim % 2 != 0) f.fail("head_dim", "must be even");
    if (m.family == ModelFamily::Mixtral) {
      parseRoutedCommon(f, m, "num_local_experts");
      m.moeIntermediateSize = f.integer("intermediate_size");
      m.intermediateSize = m.moeIntermediateSize;
      m.normTopkProb = true;  // Mixtral always renormalises its top-k weights
      m.layerIsMoe.assign(static_cast<size_t>(m.numLayers), true);
    } else if (m.family == ModelFamily::Olmoe) {
      parseRoutedCommon(f, m, "num_experts");
      m.moeIntermediateSize = f.integer("intermediate_size");
      m.intermediateSize = m.moeIntermediateSize;
      m.normTopkProb = f.flagOr("norm_topk_prob", false);
      m.attentionBias = f.flagOr("attention_bias", false);
      m.qkNormFull = true;
      if (f.has("clip_qkv")) {
        m.clipQkv = f.number(f.at("clip_qkv"), "clip_qkv");
        if (!(*m.clipQkv > 0)) f.fail("clip_qkv", "must be positive");
      }
      m.layerIsMoe.assign(static_cast<size_t>(m.numLayers), true);
    } else {  // qwen2_moe, qwen3_moe
      m.intermediateSize = f.integer("intermediate_size");
      parseRoutedCommon(f, m, "num_experts");
      m.moeIntermediateSize = f.integer("moe_intermediate_size");
      m.normTopkProb = f.flagOr("norm_topk_prob", false);
      const int step = f.integerOr("decoder_sparse_step", 1);
      const std::vector<int> mlpOnly = f.integerListOr("mlp_only_layers");
      for (int i = 0; i < m.numLayers; ++i) {
        const bool listed = std::find(mlpOnly.begin(), mlpOnly.end(), i) != mlpOnly.end();
        m.layerIsMoe.push_back(!listed && (i + 1) % step == 0);
      }
      if (m.family == ModelFamily::Qwen2Moe) {
        m.attentionBias = f.flagOr("qkv_bias", true);  // q/k/v carry biases, o_proj none
        m.sharedExpertIntermediateSize = f.integerOr("shared_expert_intermediate_size", 0, 0);
        m.sharedExpertGated = m.sharedExpertIntermediateSize > 0;
      } else {
        m.attentionBias = f.flagOr("attention_bias", false);
        m.qkNormPerHead = true;
      }
    }
  }
  if (m.numMoeLayers() == 0) throw Error(what + ": the configuration has no MoE layer");
  if (m.ropeScaling.type == "yarn" && m.ropeScaling.originalMaxPositionEmbeddings == 0)
    m.ropeScaling.originalMaxPositionEmbeddings = m.maxPositionEmbeddings;
  return m;
}

}  // namespace zipmoe
