// Synthetic-model presets and their config.json: each family's presets and config builder are in its
// description (hf/families/); this file picks the preset and applies the options.
//
// Field names and meanings are those of Hugging Face transformers' configuration classes and of the
// published checkpoints' config.json files (rope_theta at the top level, as checkpoints write it), so
// that transformers, vLLM and this project's own loader read a generated directory exactly like a
// downloaded one. Presets:
//   every family   "tiny"  (hidden 64, 2 layers, 4–8 experts, vocab 512: well under 1 MB of weights)
//                  "small" (hidden 256, 2 layers, 8 experts: a few MB)
//   qwen2_moe      "qwen1.5-moe-a2.7b"  Qwen1.5-MoE-A2.7B's published shapes
//   deepseek_v2    "deepseek-v2-lite"   DeepSeek-V2-Lite's published shapes (MLA, YaRN)
//   mixtral        "mixtral-8x7b", qwen3_moe "qwen3-30b-a3b", olmoe "olmoe-1b-7b",
//   switch_transformers "switch-base-8"  — the published shapes of those models
// `layers` overrides the number of layers; the builders keep dependent fields (deepseek's dense
// prefix, qwen's max_window_layers, switch's sparse-layer counts) consistent with it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/family_description.h"
#include "zipmoe/base/error.h"
#include "tools/synthetic/synthetic_model.h"

namespace zipmoe {
namespace {

int layerCount(const SyntheticModelOptions& options, int presetLayers) {
  if (!options.layers) return presetLayers;
  if (*options.layers < 1)
    throw Error("synthetic model " + options.preset + ": layers must be at least 1, got " +
                std::to_string(*options.layers));
  return *options.layers;
}

}  // namespace

std::vector<std::string> syntheticModelPresets(ModelFamily family) {
  std::vector<std::string> out;
  for (const auto& preset : describe(family).synthetic.presets) out.emplace_back(preset.name);
  return out;
}

nlohmann::json syntheticModelConfig(const SyntheticModelOptions& options) {
  const SyntheticModels& family = describe(options.family).synthetic;
  for (size_t i = 0; i < family.presets.size(); ++i) {
    if (options.preset != family.presets[i].name) continue;
    SyntheticShape shape = family.presets[i].shape;
    shape.layers = layerCount(options, shape.layers);
    return family.config(shape, i >= 2);
  }
  std::string known;
  for (const auto& preset : family.presets) known += (known.empty() ? "" : ", ") + std::string(preset.name);
  throw Error("synthetic model: unknown preset \"" + options.preset + "\" for family " +
              familyName(options.family) + "; known presets: " + known);
}

}  // namespace zipmoe
