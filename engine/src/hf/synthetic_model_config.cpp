// Synthetic-model presets and their config.json, one builder per family.
//
// Field names and meanings are those of Hugging Face transformers' configuration classes and of the
// published checkpoints' config.json files (rope_theta at the top level, as checkpoints write it), so
// that transformers, vLLM and this project's own loader read a generated directory exactly like a
// downloaded one. Presets:
//   every family   "tiny"  (hidden 64, 2 layers, 4–8 experts, vocab 512: well under 1 MB of weights)
//                  "small" (hidden 256, 2 layers, 8 experts: a few MB)
//   qwen2_moe      "qwen1.5-moe-a2.7b"  Qwen1.5-MoE-A2.7B's published shapes
//   deepseek_v2    "deepseek-v2-lite"   DeepSeek-V2-Lite's published shapes (MLA, YaRN)
//   mixtral        "mixtral-8x7b", qwen3_moe "qwen3-30b-a3b", olmoe "olmoe-1b-7b",
//   switch_transformers "switch-base-8"  — the published shapes of those models
// `layers` overrides the number of layers; the builders keep dependent fields (deepseek's dense
// prefix, qwen's max_window_layers, switch's sparse-layer counts) consistent with it.
#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/hf_directory.h"
#include "zipmoe/error.h"
#include "zipmoe/synthetic_model.h"

namespace zipmoe {
namespace {

using nlohmann::json;

// The shape parameters a preset chooses; each family's builder maps them onto its own field names.
struct Shape {
  int hidden = 64;
  int intermediate = 128;     // dense MLP / shared expert width (family dependent, see builders)
  int expertWidth = 32;       // routed expert intermediate size
  int layers = 2;
  int heads = 4;
  int kvHeads = 4;
  int headDim = 16;
  int experts = 8;
  int topK = 2;
  int vocab = 512;
  int maxPositions = 2048;
};

struct Preset {
  const char* name;
  Shape shape;
};

int layerCount(const SyntheticModelOptions& options, int presetLayers) {
  if (!options.layers) return presetLayers;
  if (*options.layers < 1)
    throw Error("synthetic model " + options.preset + ": layers must be at least 1, got " +
                std::to_string(*options.layers));
  return *options.layers;
}

json mixtralConfig(const Shape& s, bool) {
  hf::MixtralShape m;
  m.vocab = s.vocab;
  m.hidden = s.hidden;
  m.intermediate = s.expertWidth;
  m.layers = s.layers;
  m.heads = s.heads;
  m.kvHeads = s.kvHeads;
  m.experts = s.experts;
  m.topK = s.topK;
  m.maxPositions = s.maxPositions;
  return hf::mixtralConfig(m);
}

json qwen2MoeConfig(const Shape& s, bool real) {
  return {
      {"architectures", {"Qwen2MoeForCausalLM"}},
      {"model_type", "qwen2_moe"},
      {"attention_dropout", 0.0},
      {"bos_token_id", real ? 151643 : s.vocab - 3},
      {"eos_token_id", real ? 151645 : s.vocab - 1},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", s.intermediate},
      {"max_position_embeddings", s.maxPositions},
      {"max_window_layers", std::min(real ? 21 : s.layers, s.layers)},
      {"num_attention_heads", s.heads},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kvHeads},
      {"rms_norm_eps", 1e-06},
      {"rope_theta", 1000000.0},
      {"sliding_window", s.maxPositions},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", s.vocab},
      {"decoder_sparse_step", 1},
      {"mlp_only_layers", json::array()},
      {"moe_intermediate_size", s.expertWidth},
      {"shared_expert_intermediate_size", s.intermediate},
      {"num_experts_per_tok", s.topK},
      {"num_experts", s.experts},
      {"norm_topk_prob", false},
      {"output_router_logits", false},
      {"router_aux_loss_coef", 0.001},
  };
}

json qwen3MoeConfig(const Shape& s, bool real) {
  return {
      {"architectures", {"Qwen3MoeForCausalLM"}},
      {"model_type", "qwen3_moe"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", real ? 151643 : s.vocab - 3},
      {"eos_token_id", real ? 151645 : s.vocab - 1},
      {"head_dim", s.headDim},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", s.intermediate},
      {"max_position_embeddings", s.maxPositions},
      {"max_window_layers", s.layers},
      {"num_attention_heads", s.heads},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kvHeads},
      {"rms_norm_eps", 1e-06},
      {"rope_scaling", nullptr},
      {"rope_theta", 1000000.0},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", s.vocab},
      {"decoder_sparse_step", 1},
      {"mlp_only_layers", json::array()},
      {"moe_intermediate_size", s.expertWidth},
      {"num_experts_per_tok", s.topK},
      {"num_experts", s.experts},
      {"norm_topk_prob", true},
      {"output_router_logits", false},
      {"router_aux_loss_coef", 0.001},
  };
}

json olmoeConfig(const Shape& s, bool real) {
  return {
      {"architectures", {"OlmoeForCausalLM"}},
      {"model_type", "olmoe"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", nullptr},
      {"clip_qkv", nullptr},
      {"eos_token_id", real ? 50279 : s.vocab - 2},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", s.expertWidth},  // OLMoE's experts use intermediate_size
      {"max_position_embeddings", s.maxPositions},
      {"norm_topk_prob", false},
      {"num_attention_heads", s.heads},
      {"num_experts", s.experts},
      {"num_experts_per_tok", s.topK},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kvHeads},
      {"output_router_logits", false},
      {"pad_token_id", real ? 1 : s.vocab - 1},
      {"rms_norm_eps", 1e-05},
      {"rope_scaling", nullptr},
      {"rope_theta", 10000.0},
      {"router_aux_loss_coef", 0.01},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"vocab_size", s.vocab},
  };
}

// DeepSeek-V2's MLA dimensions: the Lite's for the real preset; for tiny/small, nope = v = head_dim,
// rope = head_dim / 2 and kv_lora_rank = hidden / 2 (the Lite's ratios are 128 : 64 and 2048 : 512;
// a larger rank keeps the latent from being the tiny models' bottleneck). One dense layer first, as in
// the Lite, unless only one layer is left (a synthetic model must keep at least one MoE layer).
json deepseekV2Config(const Shape& s, bool real) {
  const int firstDense = s.layers > 1 ? 1 : 0;  // at least one MoE layer must remain
  const int nope = real ? 128 : s.headDim, rope = real ? 64 : s.headDim / 2, rank = real ? 512 : s.hidden / 2;
  return {
      {"architectures", {"DeepseekV2ForCausalLM"}},
      {"model_type", "deepseek_v2"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"aux_loss_alpha", 0.001},
      {"bos_token_id", real ? 100000 : 0},
      {"eos_token_id", real ? 100001 : 1},
      {"first_k_dense_replace", firstDense},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", s.intermediate},
      {"kv_lora_rank", rank},
      {"max_position_embeddings", s.maxPositions},
      {"moe_intermediate_size", s.expertWidth},
      {"moe_layer_freq", 1},
      {"n_group", 1},
      {"n_routed_experts", s.experts},
      {"n_shared_experts", 2},
      {"norm_topk_prob", false},
      {"num_attention_heads", s.heads},
      {"num_experts_per_tok", s.topK},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kvHeads},
      {"pretraining_tp", 1},
      {"q_lora_rank", nullptr},
      {"qk_nope_head_dim", nope},
      {"qk_rope_head_dim", rope},
      {"rms_norm_eps", 1e-06},
      {"rope_scaling",
       {{"beta_fast", 32},
        {"beta_slow", 1},
        {"factor", real ? 40 : 4},
        {"mscale", 0.707},
        {"mscale_all_dim", 0.707},
        {"original_max_position_embeddings", real ? 4096 : s.maxPositions / 4},
        {"type", "yarn"}}},
      {"rope_theta", 10000},
      {"routed_scaling_factor", 1.0},
      {"scoring_func", "softmax"},
      {"seq_aux", true},
      {"tie_word_embeddings", false},
      {"topk_group", 1},
      {"topk_method", "greedy"},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"v_head_dim", nope},
      {"vocab_size", s.vocab},
  };
}

// Switch blocks alternate dense and sparse (step 2) like every published Switch checkpoint; HF's
// config derives the step from num_sparse_*_layers, so those are written to match.
json switchConfig(const Shape& s, bool) {
  const int sparseLayers = std::max(1, s.layers / 2);
  return {
      {"add_router_probs", false},
      {"architectures", {"SwitchTransformersForConditionalGeneration"}},
      {"model_type", "switch_transformers"},
      {"d_ff", s.intermediate},
      {"d_kv", s.headDim},
      {"d_model", s.hidden},
      {"decoder_sparse_step", s.layers / sparseLayers},
      {"decoder_start_token_id", 0},
      {"dense_act_fn", "relu"},
      {"dropout_rate", 0.1},
      {"encoder_sparse_step", s.layers / sparseLayers},
      {"eos_token_id", 1},
      {"expert_capacity", 64},
      {"feed_forward_proj", "relu"},
      {"initializer_factor", 1.0},
      {"is_encoder_decoder", true},
      {"is_gated_act", false},
      {"layer_norm_epsilon", 1e-06},
      {"num_decoder_layers", s.layers},
      {"num_experts", s.experts},
      {"num_heads", s.heads},
      {"num_layers", s.layers},
      {"num_sparse_decoder_layers", sparseLayers},
      {"num_sparse_encoder_layers", sparseLayers},
      {"pad_token_id", 0},
      {"relative_attention_max_distance", 128},
      {"relative_attention_num_buckets", 32},
      {"router_aux_loss_coef", 0.001},
      {"router_bias", false},
      {"router_dtype", "float32"},
      {"router_ignore_padding_tokens", false},
      {"router_jitter_noise", 0.01},
      {"router_type", "tokens_masked"},
      {"router_z_loss_coef", 0.001},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"vocab_size", s.vocab},
  };
}

struct FamilyPresets {
  ModelFamily family;
  json (*build)(const Shape&, bool real);
  std::vector<Preset> presets;  // the first two are "tiny" and "small"; the rest are real shapes
};

const std::vector<FamilyPresets>& families() {
  //                          hidden inter expertW layers heads kv hdim experts topK vocab  maxPos
  static const Shape kTinyGqa{64, 128, 32, 2, 4, 2, 16, 8, 2, 512, 2048};
  static const Shape kSmall{256, 512, 128, 2, 8, 4, 32, 8, 2, 1024, 4096};
  static const std::vector<FamilyPresets> kAll{
      {ModelFamily::Mixtral, mixtralConfig,
       {{"tiny", {64, 128, 128, 2, 4, 2, 16, 4, 2, 512, 2048}},
        {"small", {256, 256, 256, 2, 8, 4, 32, 8, 2, 1024, 4096}},
        {"mixtral-8x7b", {4096, 14336, 14336, 32, 32, 8, 128, 8, 2, 32000, 32768}}}},
      {ModelFamily::Qwen2Moe, qwen2MoeConfig,
       {{"tiny", {64, 128, 32, 2, 4, 4, 16, 8, 4, 512, 2048}},
        {"small", {256, 512, 128, 2, 8, 8, 32, 8, 4, 1024, 4096}},
        {"qwen1.5-moe-a2.7b", {2048, 5632, 1408, 24, 16, 16, 128, 60, 4, 151936, 32768}}}},
      {ModelFamily::Qwen3Moe, qwen3MoeConfig,
       {{"tiny", kTinyGqa},
        {"small", kSmall},
        {"qwen3-30b-a3b", {2048, 6144, 768, 48, 32, 4, 128, 128, 8, 151936, 40960}}}},
      {ModelFamily::Olmoe, olmoeConfig,
       {{"tiny", {64, 32, 32, 2, 4, 4, 16, 8, 2, 512, 2048}},
        {"small", {256, 128, 128, 2, 8, 8, 32, 8, 2, 1024, 4096}},
        {"olmoe-1b-7b", {2048, 1024, 1024, 16, 16, 16, 128, 64, 8, 50304, 4096}}}},
      {ModelFamily::DeepseekV2, deepseekV2Config,
       {{"tiny", {64, 128, 32, 2, 4, 4, 16, 8, 2, 512, 2048}},
        {"small", {256, 512, 128, 2, 8, 8, 32, 8, 2, 1024, 4096}},
        {"deepseek-v2-lite", {2048, 10944, 1408, 27, 16, 16, 128, 64, 6, 102400, 163840}}}},
      {ModelFamily::SwitchTransformers, switchConfig,
       {{"tiny", {64, 128, 128, 2, 4, 4, 16, 4, 1, 512, 512}},
        {"small", {256, 256, 256, 2, 8, 8, 32, 8, 1, 1024, 512}},
        {"switch-base-8", {768, 3072, 3072, 12, 12, 12, 64, 8, 1, 32128, 512}}}},
  };
  return kAll;
}

const FamilyPresets& presetsOf(ModelFamily family) {
  for (const auto& f : families())
    if (f.family == family) return f;
  throw Error(std::string("synthetic model: unknown family ") + familyName(family));
}

}  // namespace

std::vector<std::string> syntheticModelPresets(ModelFamily family) {
  std::vector<std::string> out;
  for (const auto& preset : presetsOf(family).presets) out.emplace_back(preset.name);
  return out;
}

nlohmann::json syntheticModelConfig(const SyntheticModelOptions& options) {
  const FamilyPresets& family = presetsOf(options.family);
  for (size_t i = 0; i < family.presets.size(); ++i) {
    if (options.preset != family.presets[i].name) continue;
    Shape shape = family.presets[i].shape;
    shape.layers = layerCount(options, shape.layers);
    return family.build(shape, i >= 2);
  }
  std::string known;
  for (const auto& preset : family.presets) known += (known.empty() ? "" : ", ") + std::string(preset.name);
  throw Error("synthetic model: unknown preset \"" + options.preset + "\" for family " +
              familyName(options.family) + "; known presets: " + known);
}

}  // namespace zipmoe
