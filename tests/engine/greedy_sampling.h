// Greedy sampling for the suites that compare replies token for token.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "zipmoe/generation/sampler.h"

namespace zipmoe::testing {

// Temperature 0 (the argmax, deterministic), at most `maxTokens` tokens, stopping at `stops`.
inline SamplingParams greedy(int maxTokens, std::vector<std::string> stops = {}) {
  SamplingParams p;
  p.temperature = 0;
  p.maxTokens = maxTokens;
  p.stopStrings = std::move(stops);
  return p;
}

}  // namespace zipmoe::testing
