// olmoe — AI2's OLMoE (OlmoeForCausalLM; transformers' OlmoeConfig).
//
// Grouped-query attention with an RMSNorm over the whole q and k projections (q_norm of heads ×
// head_dim, k_norm of kv heads × head_dim), an optional clamp of q, k and v (clip_qkv), and
// attention_bias on q/k/v and o_proj. Every layer is a MoE layer, mlp.{gate, experts.{E}.*}, its
// num_experts experts intermediate_size wide. The router renormalises its top-k weights only with
// norm_topk_prob and casts them to the compute dtype. Synthetic models use a byte-level BPE tokenizer
// (GPT-NeoX style) and the Tulu chat format.
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
  layout.attention.qkvBias = layout.attention.outBias = c.flagOr("attention_bias", false);
  layout.attention.norm = AttentionShape::Norm::FullWidth;
  layout.experts = c.integer("num_experts");
  layout.moeLayers.assign(static_cast<size_t>(layout.layers), layout.experts > 0);
  layout.expertWidth = c.integer("intermediate_size");  // OLMoE sizes its experts with intermediate_size
  const FamilyDescription& olmoe = olmoeFamily();
  return llamaStyleTensors(c, layout, olmoe.forward->names, olmoe.expertKinds);
}

void readConfig(const ConfigFields& f, ModelConfig& m) {
  readGqaHeadDim(f, m, false);
  readRoutedExperts(f, m, "num_experts");
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
}

json syntheticConfig(const SyntheticShape& s, bool real) {
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

const char* kChatTemplate =
    "{{ eos_token }}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ '<|system|>\\n' + message['content'] + '\\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

hf::SyntheticTokenizerFiles syntheticTokenizer(const json& config, int64_t vocabSize, const std::string& what) {
  const int64_t eos = hf::configTokenId(config, "eos_token_id", vocabSize - 2),
                pad = hf::configTokenId(config, "pad_token_id", vocabSize - 1);
  hf::SyntheticTokenizerFiles out;
  out.tokenizer = hf::byteLevelTokenizer({{"<|endoftext|>", eos}, {"<|padding|>", pad}}, vocabSize, what);
  out.tokenizerConfig = {{"add_bos_token", false}, {"add_eos_token", false}, {"bos_token", nullptr},
                         {"chat_template", kChatTemplate}, {"clean_up_tokenization_spaces", true},
                         {"eos_token", "<|endoftext|>"}, {"pad_token", "<|padding|>"}, {"unk_token", nullptr},
                         {"tokenizer_class", "GPTNeoXTokenizer"}};
  out.generationConfig = {{"eos_token_id", eos}, {"pad_token_id", pad}};
  return out;
}

}  // namespace

const FamilyDescription& olmoeFamily() {
  static const DecoderLayerNames names{
      .router = "mlp.gate.weight",
      .routedExperts = "mlp.experts.",
  };
  static const FamilyDescription family{
      .family = ModelFamily::Olmoe,
      .name = "olmoe",
      .expertKinds = {"gate_proj", "up_proj", "down_proj"},
      .expertNames = {{"model.layers.", names.routedExperts}},
      .tensors = tensors,
      .forward = ForwardPass{.defaultMaxPositions = 4096,
                             .defaultRmsNormEps = 1e-5,
                             .readConfig = readConfig,
                             .attention = AttentionKind::GroupedQuery,
                             .attentionBiasOnOutput = true,
                             .router = RouterRule::SoftmaxTopK,
                             .names = names},
      //                         hidden inter expertW layers heads kv hdim experts topK vocab maxPos
      .synthetic = {.presets = {{"tiny", {64, 32, 32, 2, 4, 4, 16, 8, 2, 512, 2048}},
                                {"small", {256, 128, 128, 2, 8, 8, 32, 8, 2, 1024, 4096}},
                                {"olmoe-1b-7b", {2048, 1024, 1024, 16, 16, 16, 128, 64, 8, 50304, 4096}}},
                    .config = syntheticConfig,
                    .tokenizer = syntheticTokenizer},
  };
  return family;
}

}  // namespace zipmoe
