// `zipmoe bench constrain` measurements (see constrain_bench.h).
#include "bench/kernels/constrain_bench.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>

#include "generation/token_constraint.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe {
namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

const char* kWeather =
    R"({"type":"object","properties":{"city":{"type":"string","maxLength":40},"unit":{"enum":["celsius","fahrenheit"]},)"
    R"("days":{"type":"integer"},"notes":{"type":"array","items":{"type":"string"},"maxItems":4}},"required":["city","unit"]})";

OutputSpec scenarioSpec(const std::string& name) {
  OutputSpec spec;
  if (name == "json_schema") {
    spec.responseFormat.kind = ResponseFormatKind::JsonSchema;
    spec.responseFormat.schemaJson = kWeather;
    return spec;
  }
  spec.tools = {{"get_weather", "", kWeather, false},
                {"add", "", R"({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]})", false}};
  spec.toolChoice.mode = name == "tool_auto" ? ToolChoiceMode::Auto : ToolChoiceMode::Required;
  return spec;
}

ConstraintStepFigure measure(const std::string& name, const std::shared_ptr<const constrain::TokenIndex>& index,
                             std::span<const int32_t> eos, int replies, uint64_t seed) {
  const auto spec = constrain::ConstraintSpec::compile(scenarioSpec(name));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 3.0f);
  std::vector<double> steps;
  std::vector<float> logits(static_cast<size_t>(index->vocab));
  constexpr int kLimit = 160;
  for (int r = 0; r < replies; ++r) {
    constrain::OutputConstraint c(spec, index, eos);
    for (int left = kLimit; left > 0; --left) {
      for (float& l : logits) l = noise(rng);
      const auto start = Clock::now();
      c.mask(logits, left);
      int32_t id = -1;
      for (int tries = 0; tries < 64; ++tries) {
        id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        if (c.allows(id, left)) break;
        logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
        if (tries == 16) c.mask(logits, left, true);
      }
      const bool end = std::find(eos.begin(), eos.end(), id) != eos.end() ||
                       logits[static_cast<size_t>(id)] == -std::numeric_limits<float>::infinity();
      if (!end) c.accept(id);
      steps.push_back(msSince(start));
      if (end) break;
    }
  }
  std::sort(steps.begin(), steps.end());
  ConstraintStepFigure f;
  f.scenario = name;
  f.replies = replies;
  f.steps = static_cast<int>(steps.size());
  double sum = 0;
  for (double s : steps) sum += s;
  f.meanMs = steps.empty() ? 0 : sum / static_cast<double>(steps.size());
  auto at = [&](double q) { return steps.empty() ? 0 : steps[std::min(steps.size() - 1, static_cast<size_t>(q * static_cast<double>(steps.size())))]; };
  f.p50Ms = at(0.5);
  f.p99Ms = at(0.99);
  f.maxMs = steps.empty() ? 0 : steps.back();
  return f;
}

}  // namespace

ConstraintFigures measureConstrainedDecoding(const Tokenizer& tokenizer, int replies, uint64_t seed) {
  ConstraintFigures out;
  const auto start = Clock::now();
  auto index = std::make_shared<const constrain::TokenIndex>(tokenizer);
  out.indexMs = msSince(start);
  out.vocab = index->vocab;
  // EOS: the tokenizer's first special token that looks like an end marker, else none.
  std::vector<int32_t> eos;
  for (const char* name : {"<|endoftext|>", "<|im_end|>", "</s>", "<｜end▁of▁sentence｜>"})
    if (auto id = tokenizer.tokenToId(name)) eos.push_back(*id);
  for (const char* name : {"json_schema", "tool_call", "tool_auto"}) out.scenarios.push_back(measure(name, index, eos, replies, seed));
  return out;
}

}  // namespace zipmoe
