// Shared by the distributed-experts suites: stores of the demo model and a generated model, greedy
// runs compared bit for bit, and expert lists for nodes.
#pragma once

#include <QtTest>

#include <cstring>
#include <functional>

#include "test_support.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/model/model.h"
#include "tools/synthetic/synthetic_model.h"

namespace zipmoe::testing {

inline const std::string kTestToken = "test-token-0123456789abcdef";

struct GreedyRun {
  std::vector<std::vector<float>> logits;  // prefill (all positions), then one per decode step
  std::vector<int32_t> tokens;
};

// `beforeStep(s)` runs before decode step s.
inline GreedyRun greedyRun(MoeModel& model, int steps, const std::function<void(int)>& beforeStep = {}) {
  GreedyRun r;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 12; ++i) prompt.push_back(static_cast<int32_t>((37 * i + 11) % model.config().vocabSize));
  const auto seq = model.addSequence();
  r.logits.push_back(model.forward({{seq, prompt}}, true)[0]);
  const int64_t vocab = model.config().vocabSize;
  for (int s = 0; s < steps; ++s) {
    if (beforeStep) beforeStep(s);
    const float* last = r.logits.back().data() + (r.logits.back().size() - static_cast<size_t>(vocab));
    const auto next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
    r.tokens.push_back(next);
    r.logits.push_back(model.forward({{seq, {next}}})[0]);
  }
  model.removeSequence(seq);
  return r;
}

inline bool identical(const GreedyRun& a, const GreedyRun& b) {
  if (a.tokens != b.tokens || a.logits.size() != b.logits.size()) return false;
  for (size_t i = 0; i < a.logits.size(); ++i)
    if (a.logits[i].size() != b.logits[i].size() ||
        std::memcmp(a.logits[i].data(), b.logits[i].data(), a.logits[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// The demo model (Mixtral) and a generated DeepSeek-V2 (a dense first layer, shared experts), as stores.
inline std::filesystem::path demoStore(const TempDir& dir) {
  const auto store = dir / "demo-store";
  if (!std::filesystem::exists(store / "manifest.json"))
    convertCheckpoint(std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model", store, ConvertOptions{});
  return store;
}

inline std::filesystem::path generatedStore(const TempDir& dir) {
  const auto store = dir / "deepseek-store";
  if (!std::filesystem::exists(store / "manifest.json")) {
    SyntheticModelOptions o;
    o.family = ModelFamily::DeepseekV2;
    o.preset = "tiny";
    o.layers = 3;
    generateSyntheticModel(dir / "deepseek-hf", o);
    convertCheckpoint(dir / "deepseek-hf", store, ConvertOptions{});
  }
  return store;
}

// Per layer, the experts e with e % modulus in `residues`.
inline std::vector<std::vector<int>> expertsWhere(int layers, int experts, int modulus, std::vector<int> residues) {
  std::vector<std::vector<int>> out(static_cast<size_t>(layers));
  for (int l = 0; l < layers; ++l)
    for (int e = 0; e < experts; ++e)
      if (std::find(residues.begin(), residues.end(), e % modulus) != residues.end()) out[static_cast<size_t>(l)].push_back(e);
  return out;
}

}  // namespace zipmoe::testing
