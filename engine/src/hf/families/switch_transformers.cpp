// switch_transformers — Google's Switch Transformers (SwitchTransformersForConditionalGeneration).
//
// An encoder-decoder T5: the converter stores it (its experts split like any family's), but there is
// no forward pass. `shared`, both stacks' `embed_tokens` and `lm_head` are all stored; only block 0 of
// each stack has relative_attention_bias; the MLP is sub-layer 1 of an encoder block (after
// self-attention) and sub-layer 2 of a decoder block (after self- and cross-attention); sparse blocks
// have mlp.router.classifier and experts mlp.experts.expert_{E}.{wi,wo}. The expert tensors' stack
// (ExpertTensorName::stack) is 0 for the encoder and 1 for the decoder. Synthetic models use T5's
// Unigram tokenizer and have no chat template.
#include <nlohmann/json.hpp>

#include "hf/checkpoint_tensors.h"
#include "hf/family_description.h"
#include "hf/synthetic_tokenizer.h"

namespace zipmoe {
namespace {

using nlohmann::json;

// HF's SwitchTransformersConfig recomputes the sparse step from the number of sparse layers; a block i
// is sparse when i % step == 1 (or every block when step == 1).
int64_t switchSparseStep(const CheckpointConfig& c, const char* sparseLayersKey, const char* stepKey,
                         int64_t layers) {
  if (!c.has(sparseLayersKey)) return c.integerOr(stepKey, 1);
  const int64_t sparseLayers = c.integer(sparseLayersKey);
  return sparseLayers > 0 ? layers / sparseLayers : layers;
}

std::vector<SafetensorsWriter::Declared> tensors(const CheckpointConfig& c) {
  const FamilyDescription& family = switchTransformersFamily();
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
    const ExpertNamePattern& expertNames = family.expertNames[decoder ? 1 : 0];
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
        addRoutedExperts(out, family.expertKinds,
                         expertNames.beforeBlock + std::to_string(block) + "." + expertNames.beforeExpert, experts,
                         model, ff);
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

// Switch blocks alternate dense and sparse (step 2) like every published Switch checkpoint; HF's
// config derives the step from num_sparse_*_layers, so those are written to match.
json syntheticConfig(const SyntheticShape& s, bool) {
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

hf::SyntheticTokenizerFiles syntheticTokenizer(const json&, int64_t vocabSize, const std::string& what) {
  hf::SyntheticTokenizerFiles out;
  int extraIds = 0;
  out.tokenizer = hf::t5UnigramTokenizer(vocabSize, extraIds, what);
  json sentinels = json::array();
  for (int n = 0; n < extraIds; ++n) sentinels.push_back("<extra_id_" + std::to_string(n) + ">");
  out.tokenizerConfig = {{"additional_special_tokens", sentinels}, {"eos_token", "</s>"}, {"extra_ids", extraIds},
                         {"pad_token", "<pad>"}, {"unk_token", "<unk>"}, {"tokenizer_class", "T5Tokenizer"}};
  out.generationConfig = {{"decoder_start_token_id", 0}, {"eos_token_id", 1}, {"pad_token_id", 0}};
  return out;
}

}  // namespace

const FamilyDescription& switchTransformersFamily() {
  static const FamilyDescription family{
      .family = ModelFamily::SwitchTransformers,
      .name = "switch_transformers",
      .expertKinds = {"wi", "wo"},
      .expertNames = {{"encoder.block.", "layer.1.mlp.experts.expert_"},
                      {"decoder.block.", "layer.2.mlp.experts.expert_"}},
      .tensors = tensors,
      .forward = std::nullopt,
      .withoutForwardPass = "switch_transformers is encoder-decoder",
      //                         hidden inter expertW layers heads kv hdim experts topK vocab maxPos
      .synthetic = {.presets = {{"tiny", {64, 128, 128, 2, 4, 4, 16, 4, 1, 512, 512}},
                                {"small", {256, 256, 256, 2, 8, 8, 32, 8, 1, 1024, 512}},
                                {"switch-base-8", {768, 3072, 3072, 12, 12, 12, 64, 8, 1, 32128, 512}}},
                    .config = syntheticConfig,
                    .tokenizer = syntheticTokenizer},
  };
  return family;
}

}  // namespace zipmoe
