// Internal: ConfigFields — typed, range-checked reads of a config.json for parseModelConfig, and the
// readers of field groups that several families spell alike.
//
// Integers are ints (at least 1 unless said otherwise, at most 10^9; an integral float such as 40.0 is
// accepted, as some configs write them); absent or null fields take the caller's fallback. Every
// error names the file and the field: `cfg.json: "head_dim" must be even`.
// Thread-safety: a reader over a JSON object it does not own. Cost: a lookup per field.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zipmoe {

struct ModelConfig;

class ConfigFields {
 public:
  // `config` and `what` (the file, for errors) must outlive the reader.
  ConfigFields(const nlohmann::json& config, const std::string& what) : c_(config), what_(what) {}

  bool has(const char* key) const { return c_.contains(key) && !c_[key].is_null(); }
  bool present(const char* key) const { return c_.contains(key); }  // even when null

  int integer(const char* key, int minValue = 1) const;
  int integerOr(const char* key, int fallback, int minValue = 1) const;
  double number(const nlohmann::json& v, const char* key) const;  // finite
  double numberOr(const char* key, double fallback) const;
  double positiveOr(const char* key, double fallback) const;
  bool flagOr(const char* key, bool fallback) const;
  std::string stringOr(const char* key, const std::string& fallback) const;
  std::vector<int> integerListOr(const char* key) const;  // each at least 0
  // An integer or a list of integers (eos_token_id).
  std::vector<int> tokenIds(const char* key) const;
  const nlohmann::json& at(const char* key) const { return c_[key]; }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;

 private:
  int integerValue(const char* key, const nlohmann::json& v, int minValue) const;
  int checkRange(const char* key, int64_t v, int minValue) const;

  const nlohmann::json& c_;
  const std::string& what_;
};

// The number of routed experts (under `expertsKey`) and num_experts_per_tok, which may not exceed it.
void readRoutedExperts(const ConfigFields& f, ModelConfig& m, const char* expertsKey);
// Grouped-query attention's head_dim (default hidden_size / num_attention_heads), which must be even;
// unless `independentHeadDim`, heads × head_dim must equal hidden_size.
void readGqaHeadDim(const ConfigFields& f, ModelConfig& m, bool independentHeadDim);
// The expert fields of the Qwen MoE configs (qwen2_moe, qwen3_moe): intermediate_size (dense layers),
// num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob, and which layers have
// experts — layer i unless listed in mlp_only_layers or (i + 1) is not a multiple of decoder_sparse_step.
void readQwenMoeExperts(const ConfigFields& f, ModelConfig& m);

}  // namespace zipmoe
