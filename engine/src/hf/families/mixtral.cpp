// mixtral — Mistral AI's Mixtral (MixtralForCausalLM; transformers' MixtralConfig).
//
// Llama-style grouped-query attention without biases; every layer is a sparse MoE block,
// model.layers.{L}.block_sparse_moe.{gate, experts.{E}.{w1,w3,w2}}, whose experts are
// intermediate_size wide (num_local_experts of them). The router always renormalises its top-k
// weights and keeps them in fp32. head_dim may differ from hidden_size / num_attention_heads.
// Synthetic models use a SentencePiece BPE tokenizer and Mixtral's [INST] chat template.
#include <nlohmann/json.hpp>

#include "hf/checkpoint_tensors.h"
#include "hf/config_fields.h"
#include "hf/family_description.h"
#include "hf/hf_directory.h"
#include "hf/synthetic_tokenizer.h"
#include "zipmoe/hf/model_config.h"

namespace zipmoe {
namespace {

using nlohmann::json;

std::vector<SafetensorsWriter::Declared> tensors(const CheckpointConfig& c) {
  LlamaStyleLayout layout = readLlamaStyleLayout(c);
  layout.experts = c.integer("num_local_experts");
  layout.moeLayers.assign(static_cast<size_t>(layout.layers), true);
  layout.expertWidth = c.integer("intermediate_size");
  const FamilyDescription& mixtral = mixtralFamily();
  return llamaStyleTensors(c, layout, mixtral.forward->names, mixtral.expertKinds);
}

void readConfig(const ConfigFields& f, ModelConfig& m) {
  readGqaHeadDim(f, m, true);
  readRoutedExperts(f, m, "num_local_experts");
  m.moeIntermediateSize = f.integer("intermediate_size");
  m.intermediateSize = m.moeIntermediateSize;
  m.normTopkProb = true;  // Mixtral always renormalises its top-k weights
  m.layerIsMoe.assign(static_cast<size_t>(m.numLayers), true);
}

json syntheticConfig(const SyntheticShape& s, bool) {
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

const char* kChatTemplate =
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}";

hf::SyntheticTokenizerFiles syntheticTokenizer(const json& config, int64_t vocabSize, const std::string& what) {
  const int64_t bos = hf::configTokenId(config, "bos_token_id", 1), eos = hf::configTokenId(config, "eos_token_id", 2);
  hf::SyntheticTokenizerFiles out;
  out.tokenizer = hf::sentencePieceBpeTokenizer(bos, eos, vocabSize, what);
  out.tokenizerConfig = {{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<s>"},
                         {"chat_template", kChatTemplate}, {"clean_up_tokenization_spaces", false},
                         {"eos_token", "</s>"}, {"legacy", false}, {"pad_token", nullptr}, {"unk_token", "<unk>"},
                         {"spaces_between_special_tokens", false}, {"tokenizer_class", "LlamaTokenizer"}};
  out.generationConfig = {{"bos_token_id", bos}, {"eos_token_id", eos}};
  return out;
}

}  // namespace

const FamilyDescription& mixtralFamily() {
  static const DecoderLayerNames names{
      .router = "block_sparse_moe.gate.weight",
      .routedExperts = "block_sparse_moe.experts.",
  };
  static const FamilyDescription family{
      .family = ModelFamily::Mixtral,
      .name = "mixtral",
      .expertKinds = {"w1", "w3", "w2"},
      .expertNames = {{"model.layers.", names.routedExperts}},
      .tensors = tensors,
      .forward = ForwardPass{.defaultMaxPositions = 4096 * 32,
                             .defaultRmsNormEps = 1e-5,
                             .defaultRopeTheta = 1e6,
                             .readConfig = readConfig,
                             .attention = AttentionKind::GroupedQuery,
                             .router = RouterRule::SoftmaxTopKFp32Weights,
                             .names = names},
      //                         hidden inter expertW layers heads kv hdim experts topK vocab maxPos
      .synthetic = {.presets = {{"tiny", {64, 128, 128, 2, 4, 2, 16, 4, 2, 512, 2048}},
                                {"small", {256, 256, 256, 2, 8, 4, 32, 8, 2, 1024, 4096}},
                                {"mixtral-8x7b", {4096, 14336, 14336, 32, 32, 8, 128, 8, 2, 32000, 32768}}},
                    .config = syntheticConfig,
                    .tokenizer = syntheticTokenizer},
  };
  return family;
}

}  // namespace zipmoe
