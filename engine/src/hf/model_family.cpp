// The family registry: the list of family descriptions (hf/families/, one file each) and the
// lookups of zipmoe/hf/model_family.h built on it.
//
// Classifying a tensor name is a strict parse against the family's ExpertNamePatterns, not a substring
// search: shared experts, routers, biases and any name with extra or missing parts must stay dense,
// because a false positive would make the store split a tensor that the runtime then cannot find
// where it expects it.
#include "zipmoe/hf/model_family.h"

#include <array>
#include <nlohmann/json.hpp>

#include "hf/family_description.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

// Listing order: supportedFamilyList() and allFamilies() follow it.
const std::array<const FamilyDescription*, 6>& registry() {
  static const std::array<const FamilyDescription*, 6> kFamilies{
      &mixtralFamily(), &qwen2MoeFamily(), &qwen3MoeFamily(),
      &olmoeFamily(),   &deepseekV2Family(), &switchTransformersFamily(),
  };
  return kFamilies;
}

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

std::optional<ExpertTensorName> parse(const ExpertNamePattern& pattern, int stack,
                                      const std::vector<std::string>& kinds, std::string_view name) {
  ExpertTensorName out;
  out.stack = stack;
  NameParser p(name);
  if (p.literal(pattern.beforeBlock) && p.index(out.block) && p.literal(".") && p.literal(pattern.beforeExpert) &&
      p.index(out.expert) && p.literal(".") && p.kindThenEnd(kinds, ".weight", out.kind)) {
    return out;
  }
  return std::nullopt;
}

const FamilyDescription* find(ModelFamily family) {
  for (const FamilyDescription* description : registry())
    if (description->family == family) return description;
  return nullptr;
}

}  // namespace

const FamilyDescription& describe(ModelFamily family) {
  if (const FamilyDescription* description = find(family)) return *description;
  throw Error("unknown model family " + std::to_string(static_cast<int>(family)));
}

const ForwardPass& forwardPass(ModelFamily family) {
  const FamilyDescription& description = describe(family);
  if (!description.forward)
    throw Error(std::string(description.name) + " has no forward pass (" + description.withoutForwardPass + ")");
  return *description.forward;
}

std::string forwardFamilyList() {
  std::string out;
  for (const FamilyDescription* description : registry()) {
    if (!description->forward) continue;
    if (!out.empty()) out += ", ";
    out += description->name;
  }
  return out;
}

const char* familyName(ModelFamily family) {
  const FamilyDescription* description = find(family);
  return description ? description->name : "unknown";
}

std::vector<ModelFamily> allFamilies() {
  std::vector<ModelFamily> out;
  for (const FamilyDescription* description : registry()) out.push_back(description->family);
  return out;
}

std::string supportedFamilyList() {
  std::string out;
  for (const FamilyDescription* description : registry()) {
    if (!out.empty()) out += ", ";
    out += description->name;
  }
  return out;
}

std::optional<ModelFamily> familyFromName(std::string_view modelType) {
  for (const FamilyDescription* description : registry())
    if (modelType == description->name) return description->family;
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

const std::vector<std::string>& expertTensorKinds(ModelFamily family) { return describe(family).expertKinds; }

std::optional<ExpertTensorName> classifyTensor(ModelFamily family, std::string_view name) {
  const FamilyDescription& description = describe(family);
  for (size_t stack = 0; stack < description.expertNames.size(); ++stack)
    if (auto parsed = parse(description.expertNames[stack], static_cast<int>(stack), description.expertKinds, name))
      return parsed;
  return std::nullopt;
}

}  // namespace zipmoe
