// qwen3_moe — Alibaba's Qwen3 MoE models (Qwen3MoeForCausalLM; transformers' Qwen3MoeConfig).
//
// Qwen2-MoE's layer pattern (mlp_only_layers, decoder_sparse_step) without the shared expert.
// Grouped-query attention with an RMSNorm over head_dim on each head's q and k (q_norm, k_norm);
// attention_bias (default false) puts biases on q/k/v and o_proj; head_dim is independent of
// hidden_size / num_attention_heads. The router renormalises its top-k weights only with
// norm_topk_prob and casts them to the compute dtype. Synthetic models share qwen2_moe's tokenizer.
#include <nlohmann/json.hpp>

#include "hf/checkpoint_tensors.h"
#include "hf/config_fields.h"
#include "hf/family_description.h"
#include "zipmoe/hf/model_config.h"

namespace zipmoe {
namespace {

using nlohmann::json;

std::vector<SafetensorsWriter::Declared> tensors(const CheckpointConfig& c) {
  LlamaStyleLayout layout = readLlamaStyleLayout(c);
  layout.attention.qkvBias = layout.attention.outBias = c.flagOr("attention_bias", false);
  layout.attention.norm = AttentionShape::Norm::PerHead;
  layout.experts = c.integer("num_experts");
  layout.moeLayers = sparseStepLayers(c, layout.layers, layout.experts);
  layout.expertWidth = c.integer("moe_intermediate_size");
  const FamilyDescription& qwen3 = qwen3MoeFamily();
  return llamaStyleTensors(c, layout, qwen3.forward->names, qwen3.expertKinds);
}

void readConfig(const ConfigFields& f, ModelConfig& m) {
  readGqaHeadDim(f, m, true);
  readQwenMoeExperts(f, m);
  m.attentionBias = f.flagOr("attention_bias", false);
  m.qkNormPerHead = true;
}

json syntheticConfig(const SyntheticShape& s, bool real) {
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

}  // namespace

const FamilyDescription& qwen3MoeFamily() {
  static const DecoderLayerNames names{
      .router = "mlp.gate.weight",
      .routedExperts = "mlp.experts.",
  };
  static const FamilyDescription family{
      .family = ModelFamily::Qwen3Moe,
      .name = "qwen3_moe",
      .expertKinds = {"gate_proj", "up_proj", "down_proj"},
      .expertNames = {{"model.layers.", names.routedExperts}},
      .tensors = tensors,
      .forward = ForwardPass{.defaultMaxPositions = 32768,
                             .readConfig = readConfig,
                             .attention = AttentionKind::GroupedQuery,
                             .attentionBiasOnOutput = true,
                             .router = RouterRule::SoftmaxTopK,
                             .names = names},
      //                         hidden inter expertW layers heads kv hdim experts topK vocab maxPos
      .synthetic = {.presets = {{"tiny", {64, 128, 32, 2, 4, 2, 16, 8, 2, 512, 2048}},
                                {"small", {256, 512, 128, 2, 8, 4, 32, 8, 2, 1024, 4096}},
                                {"qwen3-30b-a3b", {2048, 6144, 768, 48, 32, 4, 128, 128, 8, 151936, 40960}}},
                    .config = syntheticConfig,
                    .tokenizer = qwen2MoeFamily().synthetic.tokenizer},
  };
  return family;
}

}  // namespace zipmoe
