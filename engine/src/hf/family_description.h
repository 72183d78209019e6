// Internal: FamilyDescription — everything the engine knows about one Hugging Face MoE architecture.
//
// Each family has one file under hf/families/ that defines its description, and the registry in
// model_family.cpp lists them. The converter, the store, the forward pass and the synthetic test models
// ask a family's description instead of switching on ModelFamily. A description holds the family's
// facts: its config.json model_type, where its routed-expert tensors sit, its whole checkpoint tensor
// table, how its config.json fills a ModelConfig, its router rule and attention kind, and the presets,
// config.json and tokenizer of its synthetic test models. The arithmetic some facts select (a router's
// top-k, multi-head latent attention) stays in model/, chosen by the RouterRule and AttentionKind fields.
//
// Adding a family: a new file under hf/families/ (copy the closest one), its accessor below and in the
// registry's list, a ModelFamily enumerator, and its test. Store manifests name a family by its
// model_type, so a name, once released, never changes.
// Thread-safety: descriptions are immutable function-local statics. Cost: describe() scans six entries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "zipmoe/hf/model_family.h"
#include "zipmoe/hf/safetensors.h"

namespace zipmoe {

struct ModelConfig;
class ConfigFields;      // hf/config_fields.h
class CheckpointConfig;  // hf/checkpoint_tensors.h
namespace hf {
struct SyntheticTokenizerFiles;  // hf/synthetic_tokenizer.h
}

// Where routed-expert weights sit: "{beforeBlock}{B}.{beforeExpert}{E}.{kind}.weight", B and E
// canonical decimal indices and kind one of the family's expert kinds.
struct ExpertNamePattern {
  std::string beforeBlock;   // "model.layers."
  std::string beforeExpert;  // "mlp.experts."
};

// How a MoE layer's router picks its top-k experts and weighs them (model/router.h has the arithmetic).
enum class RouterRule {
  // Softmax over the gate's logits (computed in the compute dtype), top-k, renormalised with
  // norm_topk_prob; the weights are cast to the compute dtype (qwen2_moe, qwen3_moe, olmoe).
  SoftmaxTopK,
  // The same, but the weights stay fp32 until they scale the experts' outputs (mixtral).
  SoftmaxTopKFp32Weights,
  // fp32 gate and logits; greedy or group-limited greedy top-k (topk_method); renormalised with
  // norm_topk_prob when k > 1; × routed_scaling_factor; fp32 weights (deepseek_v2).
  ScaledGroupLimitedTopK,
};

enum class AttentionKind {
  GroupedQuery,      // Llama-style q/k/v/o projections (model/attention.h)
  MultiHeadLatent,   // DeepSeek-V2's MLA (model/mla_attention.h)
};

// Where a decoder layer's MoE tensors sit, relative to "model.layers.{L}.". The rest of a layer
// (input_layernorm, self_attn., post_attention_layernorm, a dense layer's mlp.{gate,up,down}_proj)
// is spelled the same by every family with a forward pass.
struct DecoderLayerNames {
  std::string router;                 // [experts, hidden]
  std::string routedExperts;          // followed by "{E}.{kind}.weight"
  std::string sharedExperts = {};     // a gated MLP ("" = none)
  std::string sharedExpertGate = {};  // [1, hidden], a sigmoid gate on the shared experts ("" = none)
};

// What the forward pass (model/) needs to know of a decoder-only family.
struct ForwardPass {
  // The configuration class's defaults, where config.json leaves these out.
  int defaultMaxPositions = 4096;
  double defaultRmsNormEps = 1e-6;
  double defaultRopeTheta = 10000.0;
  // Reads the family's own fields of config.json into `config`, after parseModelConfig has read the
  // shared ones (vocab_size, hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
  // rope and token ids). Throws zipmoe::Error naming the field.
  void (*readConfig)(const ConfigFields& fields, ModelConfig& config) = nullptr;
  AttentionKind attention = AttentionKind::GroupedQuery;
  // GQA: whether attention biases (ModelConfig::attentionBias) include o_proj, not only q/k/v.
  bool attentionBiasOnOutput = false;
  RouterRule router = RouterRule::SoftmaxTopK;
  DecoderLayerNames names;
};

// The shape parameters of a synthetic model's preset; each family's config builder maps them onto
// its own config.json fields (which of them it uses, and for what, is the family's business).
struct SyntheticShape {
  int hidden = 64;
  int intermediate = 128;  // dense MLP / shared expert width
  int expertWidth = 32;    // routed expert intermediate size
  int layers = 2;
  int heads = 4;
  int kvHeads = 4;
  int headDim = 16;
  int experts = 8;
  int topK = 2;
  int vocab = 512;
  int maxPositions = 2048;
};

struct SyntheticPreset {
  const char* name;
  SyntheticShape shape;
};

// The family's synthetic test models (zipmoe/synthetic_model.h).
struct SyntheticModels {
  std::vector<SyntheticPreset> presets;  // "tiny", "small", then published models' shapes
  // config.json for a shape; `publishedShape` is true for the presets after "tiny" and "small", whose
  // special-token ids are the real checkpoint's.
  nlohmann::json (*config)(const SyntheticShape& shape, bool publishedShape) = nullptr;
  // tokenizer.json, tokenizer_config.json (without model_max_length and added_tokens_decoder, which
  // makeSyntheticTokenizer adds) and generation_config.json in the family's style. `what` names the
  // tokenizer in errors.
  hf::SyntheticTokenizerFiles (*tokenizer)(const nlohmann::json& config, int64_t vocabSize,
                                           const std::string& what) = nullptr;
};

struct FamilyDescription {
  ModelFamily family;
  const char* name;  // config.json's model_type; also the store manifest's "family"
  // The per-expert tensor kinds in store order, e.g. {"gate_proj", "up_proj", "down_proj"}.
  std::vector<std::string> expertKinds;
  // One pattern per stack (ExpertTensorName::stack): decoder-only families have one.
  std::vector<ExpertNamePattern> expertNames;
  // Every tensor of a checkpoint of this config, in module order (checkpointTensors()).
  std::vector<SafetensorsWriter::Declared> (*tensors)(const CheckpointConfig& config) = nullptr;
  // std::nullopt: the converter stores the family but nothing runs it, for the reason given.
  std::optional<ForwardPass> forward;
  const char* withoutForwardPass = nullptr;
  SyntheticModels synthetic;
};

// The registry (model_family.cpp).
const FamilyDescription& describe(ModelFamily family);
// The families with a forward pass, comma-separated: "mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2".
std::string forwardFamilyList();
// describe(family).forward; throws zipmoe::Error naming the family when it has no forward pass.
const ForwardPass& forwardPass(ModelFamily family);

// The descriptions, one file each under hf/families/.
const FamilyDescription& mixtralFamily();
const FamilyDescription& qwen2MoeFamily();
const FamilyDescription& qwen3MoeFamily();
const FamilyDescription& olmoeFamily();
const FamilyDescription& deepseekV2Family();
const FamilyDescription& switchTransformersFamily();

}  // namespace zipmoe
