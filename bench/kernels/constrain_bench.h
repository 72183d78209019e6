// Measurements behind `zipmoe bench constrain`: what constrained decoding (tool calls, structured
// output) adds to each decode step — building the vocabulary's byte index once, then per step the
// token mask, the exact completability check of the sampled token and taking it — on a real
// tokenizer, so that the figure can be set beside the model's time per token.
// Thread-safety: one measurement at a time. Cost: seconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zipmoe {

class Tokenizer;

struct ConstraintStepFigure {
  std::string scenario;  // "json_schema", "tool_call", "tool_auto"
  int replies = 0, steps = 0;
  double meanMs = 0, p50Ms = 0, p99Ms = 0, maxMs = 0;
};

struct ConstraintFigures {
  int32_t vocab = 0;
  double indexMs = 0;  // TokenIndex: every token's bytes, once per tokenizer
  std::vector<ConstraintStepFigure> scenarios;
};

// Random logits (seeded) drive `replies` replies per scenario through the mask until each ends.
ConstraintFigures measureConstrainedDecoding(const Tokenizer& tokenizer, int replies, uint64_t seed);

}  // namespace zipmoe
