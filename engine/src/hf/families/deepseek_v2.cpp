// deepseek_v2 — DeepSeek-V2 and V2-Lite (DeepseekV2ForCausalLM; transformers' DeepseekV2Config).
//
// Multi-head latent attention: q_proj, or q_a_proj → q_a_layernorm → q_b_proj when q_lora_rank is
// set; kv_a_proj_with_mqa (kv_lora_rank + qk_rope_head_dim), kv_a_layernorm, kv_b_proj; o_proj. The
// first first_k_dense_replace layers (and those off moe_layer_freq) are dense; MoE layers have
// n_routed_experts experts and n_shared_experts shared ones as one gated MLP of n_shared_experts ×
// moe_intermediate_size (no gate on it). The router computes in fp32 and picks greedily or by
// group-limited greedy top-k (topk_method), scales by routed_scaling_factor and keeps fp32 weights.
// Synthetic models use a byte-level BPE tokenizer with DeepSeek's "User: … Assistant:" format.
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
  const FamilyDescription& deepseek = deepseekV2Family();
  const DecoderLayerNames& names = deepseek.forward->names;
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
    // The checkpoints list the routed experts before the router.
    addRoutedExperts(out, deepseek.expertKinds, prefix + names.routedExperts, experts, hidden, expertWidth);
    out.add(prefix + names.router, {experts, hidden});
    const int64_t shared = c.integerOr("n_shared_experts", 0);
    if (shared > 0) addGatedMlp(out, prefix + names.sharedExperts, hidden, expertWidth * shared);
  }
  addEmbeddingAndHead(out, c, true, hidden);
  return out.take();
}

void readConfig(const ConfigFields& f, ModelConfig& m) {
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
  readRoutedExperts(f, m, "n_routed_experts");
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
}

// DeepSeek-V2's MLA dimensions: the Lite's for the real preset; for tiny/small, nope = v = head_dim,
// rope = head_dim / 2 and kv_lora_rank = hidden / 2 (the Lite's ratios are 128 : 64 and 2048 : 512;
// a larger rank keeps the latent from being the tiny models' bottleneck). One dense layer first, as in
// the Lite, unless only one layer is left (a synthetic model must keep at least one MoE layer).
json syntheticConfig(const SyntheticShape& s, bool real) {
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

const char* kChatTemplate =
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\\n\\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}"
    "{% elif message['role'] == 'system' %}{{ message['content'] + '\\n\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}";

hf::SyntheticTokenizerFiles syntheticTokenizer(const json& config, int64_t vocabSize, const std::string& what) {
  const int64_t bos = hf::configTokenId(config, "bos_token_id", 0), eos = hf::configTokenId(config, "eos_token_id", 1);
  const std::string bosText = "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  const std::string eosText = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  hf::SyntheticTokenizerFiles out;
  out.tokenizer = hf::byteLevelTokenizer({{bosText, bos}, {eosText, eos}}, vocabSize, what);
  out.tokenizerConfig = {{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", bosText},
                         {"chat_template", kChatTemplate}, {"clean_up_tokenization_spaces", false},
                         {"eos_token", eosText}, {"legacy", true}, {"pad_token", eosText}, {"unk_token", nullptr},
                         {"tokenizer_class", "LlamaTokenizerFast"}};
  out.generationConfig = {{"bos_token_id", bos}, {"eos_token_id", eos}, {"do_sample", true},
                          {"temperature", 0.3}, {"top_p", 0.95}};
  return out;
}

}  // namespace

const FamilyDescription& deepseekV2Family() {
  static const DecoderLayerNames names{
      .router = "mlp.gate.weight",
      .routedExperts = "mlp.experts.",
      .sharedExperts = "mlp.shared_experts.",
  };
  static const FamilyDescription family{
      .family = ModelFamily::DeepseekV2,
      .name = "deepseek_v2",
      .expertKinds = {"gate_proj", "up_proj", "down_proj"},
      .expertNames = {{"model.layers.", names.routedExperts}},
      .tensors = tensors,
      .forward = ForwardPass{.defaultMaxPositions = 2048,
                             .readConfig = readConfig,
                             .attention = AttentionKind::MultiHeadLatent,
                             .router = RouterRule::ScaledGroupLimitedTopK,
                             .names = names},
      //                         hidden inter expertW layers heads kv hdim experts topK vocab maxPos
      .synthetic = {.presets = {{"tiny", {64, 128, 32, 2, 4, 4, 16, 8, 2, 512, 2048}},
                                {"small", {256, 512, 128, 2, 8, 8, 32, 8, 2, 1024, 4096}},
                                {"deepseek-v2-lite", {2048, 10944, 1408, 27, 16, 16, 128, 64, 6, 102400, 163840}}},
                    .config = syntheticConfig,
                    .tokenizer = syntheticTokenizer},
  };
  return family;
}

}  // namespace zipmoe
