// qwen2_moe — Alibaba's Qwen1.5-MoE / Qwen2-MoE (Qwen2MoeForCausalLM; transformers' Qwen2MoeConfig).
//
// Grouped-query attention whose q/k/v projections carry biases (qkv_bias, default true) and o_proj
// none. A layer has routed experts unless it is listed in mlp_only_layers or falls off
// decoder_sparse_step (then a dense mlp of intermediate_size); every MoE layer also has one shared
// expert of shared_expert_intermediate_size behind a one-output sigmoid gate, shared_expert_gate.
// The router renormalises its top-k weights only with norm_topk_prob and casts them to the compute
// dtype. Synthetic models use a byte-level BPE tokenizer with ChatML's <|im_start|>/<|im_end|>.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "hf/checkpoint_tensors.h"
#include "hf/config_fields.h"
#include "hf/family_description.h"
#include "hf/synthetic_tokenizer.h"
#include "zipmoe/hf/model_config.h"

namespace zipmoe {
namespace {

using nlohmann::json;

std::vector<SafetensorsWriter::Declared> tensors(const CheckpointConfig& c) {
  LlamaStyleLayout layout = readLlamaStyleLayout(c);
  layout.attention.qkvBias = c.flagOr("qkv_bias", true);
  layout.experts = c.integer("num_experts");
  layout.moeLayers = sparseStepLayers(c, layout.layers, layout.experts);
  layout.expertWidth = c.integer("moe_intermediate_size");
  if (std::find(layout.moeLayers.begin(), layout.moeLayers.end(), true) != layout.moeLayers.end())
    layout.sharedExpertWidth = c.integer("shared_expert_intermediate_size");
  const FamilyDescription& qwen2 = qwen2MoeFamily();
  return llamaStyleTensors(c, layout, qwen2.forward->names, qwen2.expertKinds);
}

void readConfig(const ConfigFields& f, ModelConfig& m) {
  readGqaHeadDim(f, m, false);
  readQwenMoeExperts(f, m);
  m.attentionBias = f.flagOr("qkv_bias", true);  // q/k/v carry biases, o_proj none
  m.sharedExpertIntermediateSize = f.integerOr("shared_expert_intermediate_size", 0, 0);
  m.sharedExpertGated = m.sharedExpertIntermediateSize > 0;
}

json syntheticConfig(const SyntheticShape& s, bool real) {
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

const char* kChatMlTemplate =
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Qwen's tokenizer (Qwen2Tokenizer), which qwen3_moe shares: <|endoftext|> at bos_token_id, then
// <|im_start|> and <|im_end|>.
hf::SyntheticTokenizerFiles syntheticTokenizer(const json& config, int64_t vocabSize, const std::string& what) {
  const int64_t endOfText = hf::configTokenId(config, "bos_token_id", vocabSize - 3);
  hf::SyntheticTokenizerFiles out;
  out.tokenizer = hf::byteLevelTokenizer(
      {{"<|endoftext|>", endOfText}, {"<|im_start|>", endOfText + 1}, {"<|im_end|>", endOfText + 2}}, vocabSize, what);
  out.tokenizerConfig = {{"add_prefix_space", false},
                         {"additional_special_tokens", {"<|im_start|>", "<|im_end|>"}},
                         {"bos_token", nullptr},
                         {"chat_template", kChatMlTemplate},
                         {"clean_up_tokenization_spaces", false},
                         {"eos_token", "<|im_end|>"},
                         {"errors", "replace"},
                         {"pad_token", "<|endoftext|>"},
                         {"split_special_tokens", false},
                         {"tokenizer_class", "Qwen2Tokenizer"},
                         {"unk_token", nullptr}};
  out.generationConfig = {{"bos_token_id", endOfText},
                          {"pad_token_id", endOfText},
                          {"eos_token_id", {endOfText + 2, endOfText}},
                          {"do_sample", true}, {"temperature", 0.7}, {"top_p", 0.8}, {"top_k", 20},
                          {"repetition_penalty", 1.05}};
  return out;
}

}  // namespace

const FamilyDescription& qwen2MoeFamily() {
  static const DecoderLayerNames names{
      .router = "mlp.gate.weight",
      .routedExperts = "mlp.experts.",
      .sharedExperts = "mlp.shared_expert.",
      .sharedExpertGate = "mlp.shared_expert_gate.weight",
  };
  static const FamilyDescription family{
      .family = ModelFamily::Qwen2Moe,
      .name = "qwen2_moe",
      .expertKinds = {"gate_proj", "up_proj", "down_proj"},
      .expertNames = {{"model.layers.", names.routedExperts}},
      .tensors = tensors,
      .forward = ForwardPass{.defaultMaxPositions = 32768,
                             .readConfig = readConfig,
                             .attention = AttentionKind::GroupedQuery,
                             .attentionBiasOnOutput = false,
                             .router = RouterRule::SoftmaxTopK,
                             .names = names},
      //                         hidden inter expertW layers heads kv hdim experts topK vocab maxPos
      .synthetic = {.presets = {{"tiny", {64, 128, 32, 2, 4, 4, 16, 8, 4, 512, 2048}},
                                {"small", {256, 512, 128, 2, 8, 8, 32, 8, 4, 1024, 4096}},
                                {"qwen1.5-moe-a2.7b", {2048, 5632, 1408, 24, 16, 16, 128, 60, 4, 151936, 32768}}},
                    .config = syntheticConfig,
                    .tokenizer = syntheticTokenizer},
  };
  return family;
}

}  // namespace zipmoe
