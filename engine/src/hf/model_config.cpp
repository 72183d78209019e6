// parseModelConfig — HF config.json → ModelConfig for the decoder-only MoE families with a forward pass.
//
// Field names and defaults follow transformers' configuration classes (MixtralConfig, Qwen2MoeConfig,
// Qwen3MoeConfig, OlmoeConfig, DeepseekV2Config). Fields that fix the model's shapes (vocab_size,
// hidden_size, num_hidden_layers, num_attention_heads, the expert counts and widths) are required:
// defaulting them to some published model's values would only turn a broken config into a confusing
// shape error later. Fields with a neutral HF default (rms_norm_eps, rope_theta, num_key_value_heads,
// norm_topk_prob, tie_word_embeddings, ...) take that default when absent or null. Every value read is
// type- and range-checked; errors name the file and the field. This file reads the fields every family
// shares; each family's own fields and defaults are in its description (hf/families/).
// Thread-safety: pure function. Cost: microseconds.
#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "hf/config_fields.h"
#include "hf/family_description.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/model_config.h"

namespace zipmoe {
namespace {

using nlohmann::json;

// `key` is "rope_scaling" (checkpoints' config.json) or "rope_parameters" (written by transformers 5,
// which also moves rope_theta into it).
void parseRopeScaling(const ConfigFields& f, ModelConfig& m, const char* field) {
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
    throw Error(what + ": \"model_type\" is missing or not a string; supported architectures: " + forwardFamilyList());
  const std::string modelType = config["model_type"].get<std::string>();
  const auto family = familyFromName(modelType);
  const FamilyDescription* description = family ? &describe(*family) : nullptr;
  if (!description || !description->forward)
    throw Error(what + ": architecture \"" + modelType + "\" is not supported by the forward pass" +
                (description ? std::string(" (") + description->withoutForwardPass + ")" : "") +
                "; supported architectures: " + forwardFamilyList());
  const ForwardPass& forward = *description->forward;

  const ConfigFields f(config, what);
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
  m.maxPositionEmbeddings = f.integerOr("max_position_embeddings", forward.defaultMaxPositions);
  m.rmsNormEps = f.positiveOr("rms_norm_eps", forward.defaultRmsNormEps);
  m.ropeTheta = f.positiveOr("rope_theta", forward.defaultRopeTheta);
  m.tieWordEmbeddings = f.flagOr("tie_word_embeddings", false);
  const std::string act = f.stringOr("hidden_act", "silu");
  if (act != "silu") f.fail("hidden_act", "\"" + act + "\" is not supported (only silu)");
  parseRopeScaling(f, m, "rope_parameters");
  parseRopeScaling(f, m, "rope_scaling");
  m.eosTokenIds = f.tokenIds("eos_token_id");
  if (f.has("bos_token_id")) m.bosTokenId = f.integerOr("bos_token_id", 0, 0);

  forward.readConfig(f, m);
  if (m.numMoeLayers() == 0) throw Error(what + ": the configuration has no MoE layer");
  if (m.ropeScaling.type == "yarn" && m.ropeScaling.originalMaxPositionEmbeddings == 0)
    m.ropeScaling.originalMaxPositionEmbeddings = m.maxPositionEmbeddings;
  return m;
}

}  // namespace zipmoe
