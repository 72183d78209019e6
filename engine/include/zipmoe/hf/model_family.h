// Model families: the supported HF architectures, and which tensors of a checkpoint are routed-expert weights.
//
// The store keeps dense tensors raw and splits routed-expert tensors into E- and SM-chunks. A family
// knows its experts' naming scheme; shared experts (qwen2_moe's `shared_expert`, deepseek_v2's
// `shared_experts`) and dense first layers stay dense. Everything else known about a family is in its
// description, one file per family under engine/src/hf/families/ (see hf/family_description.h).
// Thread-safety: immutable singletons. Cost: classification is a few string scans per tensor name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zipmoe {

enum class ModelFamily { Mixtral, Qwen2Moe, Qwen3Moe, Olmoe, DeepseekV2, SwitchTransformers };

// "mixtral", "qwen2_moe", ... (the config.json model_type).
const char* familyName(ModelFamily family);
std::vector<ModelFamily> allFamilies();
// "mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2, switch_transformers"
std::string supportedFamilyList();
std::optional<ModelFamily> familyFromName(std::string_view modelType);
// Reads "model_type" from a config; throws zipmoe::Error naming `what`, the value and the supported
// families when it is missing or unknown.
ModelFamily familyFromConfig(const nlohmann::json& config, const std::string& what);

// Where a routed-expert tensor sits. `layerKey` orders MoE layers: sorting expert tensors by it gives
// the store's dense layer numbering (encoder before decoder for switch_transformers).
struct ExpertTensorName {
  int stack = 0;     // 0 = decoder-only / encoder, 1 = decoder of an encoder-decoder model
  int block = 0;     // the transformer block number in the checkpoint
  int expert = 0;
  int kind = 0;      // index into expertTensorKinds(family)
};

// The per-expert tensor kinds in store order, e.g. {"gate_proj", "up_proj", "down_proj"}
// (mixtral: {"w1", "w3", "w2"}; switch_transformers: {"wi", "wo"}).
const std::vector<std::string>& expertTensorKinds(ModelFamily family);
// Recognises a routed-expert weight name; std::nullopt for every other tensor.
std::optional<ExpertTensorName> classifyTensor(ModelFamily family, std::string_view name);

}  // namespace zipmoe
