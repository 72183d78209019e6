// Sampler — picks the next token from a row of logits: greedy, temperature, top-k, top-p, min-p,
// repetition penalty (the CTRL/HF rule: divide positive logits, multiply negative ones), seeded.
// Applied in the order transformers applies its logits processors: repetition penalty, temperature,
// top-k, top-p, min-p. temperature == 0 means greedy (argmax, lowest id on ties).
// Thread-safety: a Sampler is used by one thread (it owns its random state). Cost: O(vocab log k).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace zipmoe {

struct SamplingParams {
  double temperature = 0.8;
  int topK = 0;            // 0 = off
  double topP = 1.0;       // 1 = off
  double minP = 0.0;       // 0 = off
  double repetitionPenalty = 1.0;  // 1 = off
  uint64_t seed = 0;
  int maxTokens = 256;
  std::vector<std::string> stopStrings;
};

// Throws zipmoe::Error naming the field for out-of-range values (and for an empty stop string).
void validate(const SamplingParams& params);

// The repetition penalty alone, in place: each distinct id of `history` inside the row has its logit
// divided by `penalty` when positive, multiplied when negative; ids outside the row are ignored.
void applyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> history, double penalty);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // Validates params (see validate()).
  // `history` holds the ids already in the sequence (prompt and generated), for the penalty.
  // NaN logits count as -inf; a row that is all -inf yields id 0.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> work_;
  std::vector<int32_t> order_;
};

}  // namespace zipmoe
