// ConfigFields and the shared field-group readers (see config_fields.h).
#include "hf/config_fields.h"

#include <algorithm>
#include <cmath>

#include "zipmoe/base/error.h"
#include "zipmoe/hf/model_config.h"

namespace zipmoe {

using nlohmann::json;

int ConfigFields::integer(const char* key, int minValue) const {
  if (!has(key)) fail(key, "is missing");
  return integerValue(key, c_[key], minValue);
}

int ConfigFields::integerOr(const char* key, int fallback, int minValue) const {
  if (!has(key)) return fallback;
  return integerValue(key, c_[key], minValue);
}

double ConfigFields::number(const json& v, const char* key) const {
  if (!v.is_number()) fail(key, "is not a number (found " + v.dump() + ")");
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail(key, "is not finite");
  return d;
}

double ConfigFields::numberOr(const char* key, double fallback) const {
  return has(key) ? number(c_[key], key) : fallback;
}

double ConfigFields::positiveOr(const char* key, double fallback) const {
  const double d = numberOr(key, fallback);
  if (!(d > 0)) fail(key, "must be positive (found " + std::to_string(d) + ")");
  return d;
}

bool ConfigFields::flagOr(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!c_[key].is_boolean()) fail(key, "is not a boolean (found " + c_[key].dump() + ")");
  return c_[key].get<bool>();
}

std::string ConfigFields::stringOr(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!c_[key].is_string()) fail(key, "is not a string (found " + c_[key].dump() + ")");
  return c_[key].get<std::string>();
}

std::vector<int> ConfigFields::integerListOr(const char* key) const {
  std::vector<int> out;
  if (!has(key)) return out;
  if (!c_[key].is_array()) fail(key, "is not a list (found " + c_[key].dump() + ")");
  for (const auto& item : c_[key]) out.push_back(integerValue(key, item, 0));
  return out;
}

std::vector<int> ConfigFields::tokenIds(const char* key) const {
  if (!has(key)) return {};
  if (c_[key].is_array()) return integerListOr(key);
  return {integerValue(key, c_[key], 0)};
}

void ConfigFields::fail(const std::string& key, const std::string& problem) const {
  throw Error(what_ + ": \"" + key + "\" " + problem);
}

int ConfigFields::integerValue(const char* key, const json& v, int minValue) const {
  // Some configs write integral values as floats (e.g. "rope_theta": 10000 or "factor": 40.0).
  if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() && std::fabs(v.get<double>()) < 1e9)
    return checkRange(key, static_cast<int64_t>(v.get<double>()), minValue);
  if (!v.is_number_integer()) fail(key, "is not an integer (found " + v.dump() + ")");
  return checkRange(key, v.get<int64_t>(), minValue);
}

int ConfigFields::checkRange(const char* key, int64_t v, int minValue) const {
  if (v < minValue) fail(key, "must be at least " + std::to_string(minValue) + " (found " + std::to_string(v) + ")");
  if (v > 1'000'000'000) fail(key, "is too large (" + std::to_string(v) + ")");
  return static_cast<int>(v);
}

void readRoutedExperts(const ConfigFields& f, ModelConfig& m, const char* expertsKey) {
  m.numExperts = f.integer(expertsKey);
  m.numExpertsPerTok = f.integer("num_experts_per_tok");
  if (m.numExpertsPerTok > m.numExperts)
    f.fail("num_experts_per_tok", "(" + std::to_string(m.numExpertsPerTok) + ") exceeds the number of experts (" +
                                      std::to_string(m.numExperts) + ")");
}

void readGqaHeadDim(const ConfigFields& f, ModelConfig& m, bool independentHeadDim) {
  m.headDim = f.integerOr("head_dim", m.hiddenSize / m.numHeads);
  if (!independentHeadDim && m.headDim * m.numHeads != m.hiddenSize)
    f.fail("hidden_size", "(" + std::to_string(m.hiddenSize) + ") is not num_attention_heads × head_dim");
  if (m.headDim % 2 != 0) f.fail("head_dim", "must be even");
}

void readQwenMoeExperts(const ConfigFields& f, ModelConfig& m) {
  m.intermediateSize = f.integer("intermediate_size");
  readRoutedExperts(f, m, "num_experts");
  m.moeIntermediateSize = f.integer("moe_intermediate_size");
  m.normTopkProb = f.flagOr("norm_topk_prob", false);
  const int step = f.integerOr("decoder_sparse_step", 1);
  const std::vector<int> mlpOnly = f.integerListOr("mlp_only_layers");
  for (int i = 0; i < m.numLayers; ++i) {
    const bool listed = std::find(mlpOnly.begin(), mlpOnly.end(), i) != mlpOnly.end();
    m.layerIsMoe.push_back(!listed && (i + 1) % step == 0);
  }
}

}  // namespace zipmoe
