// Model families: the routed-expert naming scheme of each supported HF architecture.
//
// The names follow Hugging Face transformers' modeling code and the published checkpoints:
//   mixtral                 model.layers.{L}.block_sparse_moe.experts.{E}.{w1,w3,w2}.weight
//   qwen2_moe, qwen3_moe,
//   olmoe, deepseek_v2      model.layers.{L}.mlp.experts.{E}.{gate_proj,up_proj,down_proj}.weight
//   switch_transformers     encoder.block.{B}.layer.1.mlp.experts.expert_{E}.{wi,wo}.weight  (stack 0)
//                           decoder.block.{B}.layer.2.mlp.experts.expert_{E}.{wi,wo}.weight  (stack 1)
// Classification is a strict parse, not a substring search: shared experts, routers, biases and any
// name with extra or missing parts must stay dense, because a false positive would make the store
// split a tensor that the runtime then cannot find where it expects it.
#include "zipmoe/model_family.h"

#include <array>
#include <nlohmann/json.hpp>

#include "zipmoe/error.h"

namespace zipmoe {
namespace {

struct FamilyInfo {
  ModelFamily family;
  const char* name;
};

constexpr std::array<FamilyInfo, 6> kFamilies{{
    {ModelFamily::Mixtral, "mixtral"},
    {ModelFamily::Qwen2Moe, "qwen2_moe"},
    {ModelFamily::Qwen3Moe, "qwen3_moe"},
    {ModelFamily::Olmoe, "olmoe"},
    {ModelFamily::DeepseekV2, "deepseek_v2"},
    {ModelFamily::SwitchTransformers, "switch_transformers"},
}};

// A cursor over a tensor name; every step either consumes exactly what it expects or fails.
class NameParser {
 public:
  explicit NameParser(std::string_view text) : rest_(text) {}

  bool literal(std::string_view expected) {
    if (!rest_.starts_with(expected)) return false;
    rest_.remove_prefix(expected.size());
    return true;
  }

  // A canonical decimal index: digits only, no sign, no leading zero (so "01" is not "1"), and small
  // enough for an int — checkpoints never number blocks or experts beyond a few thousand.
  bool index(int& value) {
    size_t digits = 0;
    while (digits < rest_.size() && rest_[digits] >= '0' && rest_[digits] <= '9') ++digits;
    if (digits == 0 || digits > 6 || (digits > 1 && rest_[0] == '0')) return false;
    int parsed = 0;
    for (size_t i = 0; i < digits; ++i) parsed = parsed * 10 + (rest_[i] - '0');
    value = parsed;
    rest_.remove_prefix(digits);
    return true;
  }

  // Matches one of `kinds` followed by exactly `suffix` and the end of the name.
  bool kindThenEnd(const std::vector<std::string>& kinds, std::string_view suffix, int& kind) {
    for (size_t k = 0; k < kinds.size(); ++k) {
      const std::string_view candidate = kinds[k];
      if (rest_.size() == candidate.size() + suffix.size() && rest_.starts_with(candidate) &&
          rest_.substr(candidate.size()) == suffix) {
        kind = static_cast<int>(k);
        rest_ = {};
        return true;
      }
    }
    return false;
  }

 private:
  std::string_view rest_;
};

// "{prefix}{L}{middle}{E}.{kind}.weight" for the decoder-only families.
std::optional<ExpertTensorName> parseDecoderOnly(ModelFamily family, std::string_view name,
                                                 std::string_view middle) {
  ExpertTensorName out;
  NameParser p(name);
  if (p.literal("model.layers.") && p.index(out.block) && p.literal(middle) && p.index(out.expert) &&
      p.literal(".") && p.kindThenEnd(expertTensorKinds(family), ".weight", out.kind)) {
    return out;
  }
  return std::nullopt;
}

std::optional<ExpertTensorName> parseSwitch(std::string_view name) {
  const auto& kinds = expertTensorKinds(ModelFamily::SwitchTransformers);
  // The encoder block's MLP is sub-layer 1 (after self-attention); the decoder's is sub-layer 2
  // (after self-attention and cross-attention).
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 2> kStacks{{
      {"encoder.block.", ".layer.1.mlp.experts.expert_"},
      {"decoder.block.", ".layer.2.mlp.experts.expert_"},
  }};
  for (size_t stack = 0; stack < kStacks.size(); ++stack) {
    ExpertTensorName out;
    out.stack = static_cast<int>(stack);
    NameParser p(name);
    if (p.literal(kStacks[stack].first) && p.index(out.block) && p.literal(kStacks[stack].second) &&
        p.index(out.expert) && p.literal(".") && p.kindThenEnd(kinds, ".weight", out.kind)) {
      return out;
    }
  }
  return std::nullopt;
}

}  // namespace

const char* familyName(ModelFamily family) {
  for (const auto& info : kFamilies)
    if (info.family == family) return info.name;
  return "unknown";
}

std::vector<ModelFamily> allFamilies() {
  std::vector<ModelFamily> out;
  for (const auto& info : kFamilies) out.push_back(info.family);
  return out;
}

std::string supportedFamilyList() {
  std::string out;
  for (const auto& info : kFamilies) {
    if (!out.empty()) out += ", ";
    out += info.name;
  }
  return out;
}

std::optional<ModelFamily> familyFromName(std::string_view modelType) {
  for (const auto& info : kFamilies)
    if (modelType == info.name) return info.family;
  return std::nullopt;
}

ModelFamily familyFromConfig(const nlohmann::json& config, const std::string& what) {
  const std::string supported = "; supported model types: " + supportedFamilyList();
  if (!config.is_object() || !config.contains("model_type"))
    throw Error(what + ": \"model_type\" is missing" + supported);
  const nlohmann::json& value = config["model_type"];
  if (!value.is_string())
    throw Error(what + ": \"model_type\" is not a string (found " + value.dump() + ")" + supported);
  const std::string modelType = value.get<std::string>();
  if (auto family = familyFromName(modelType)) return *family;
  throw Error(what + ": model_type \"" + modelType + "\" is not supported" + supported);
}

const std::vector<std::string>& expertTensorKinds(ModelFamily family) {
  static const std::vector<std::string> kMixtral{"w1", "w3", "w2"};
  static const std::vector<std::string> kGatedProj{"gate_proj", "up_proj", "down_proj"};
  static const std::vector<std::string> kSwitch{"wi", "wo"};
  switch (family) {
    case ModelFamily::Mixtral:
      return kMixtral;
    case ModelFamily::SwitchTransformers:
      return kSwitch;
    case ModelFamily::Qwen2Moe:
    case ModelFamily::Qwen3Moe:
    case ModelFamily::Olmoe:
    case ModelFamily::DeepseekV2:
      break;
  }
  return kGatedProj;
}

std::optional<ExpertTensorName> classifyTensor(ModelFamily family, std::string_view name) {
  switch (family) {
    case ModelFamily::Mixtral:
      return parseDecoderOnly(family, name, ".block_sparse_moe.experts.");
    case ModelFamily::SwitchTransformers:
      return parseSwitch(name);
    case ModelFamily::Qwen2Moe:
    case ModelFamily::Qwen3Moe:
    case ModelFamily::Olmoe:
    case ModelFamily::DeepseekV2:
      break;
  }
  return parseDecoderOnly(family, name, ".mlp.experts.");
}

}  // namespace zipmoe
