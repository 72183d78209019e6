// TokenCorpus — the tokenised training text, its train/validation split and random training windows.
//
// The corpus is encoded once; the last `valFraction` of the tokens is the validation split. A training
// example is a window of `context` tokens whose first position is the bos token (every sequence the
// model sees starts with bos, as chat prompts do) followed by context-1 corpus tokens; the targets are
// the window shifted by one. Training windows start at uniformly random positions of the training split;
// validation windows tile the validation split without overlap.
// Thread-safety: const methods may run concurrently; sampleBatch() uses the caller's generator.
// Cost: O(batch × context) per batch.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace zipmoe::train {

struct TokenBatch {
  int64_t batch = 0, context = 0;
  std::vector<int64_t> inputs;   // [batch * context], row-major
  std::vector<int64_t> targets;  // [batch * context]
};

class TokenCorpus {
 public:
  // Throws zipmoe::Error when either split is too short for one window of `context` tokens.
  TokenCorpus(std::vector<int32_t> tokens, int32_t bos, double valFraction, int64_t context);

  const std::vector<int32_t>& all() const { return tokens_; }
  int64_t trainTokens() const { return split_; }
  int64_t valTokens() const { return static_cast<int64_t>(tokens_.size()) - split_; }
  int32_t bos() const { return bos_; }

  TokenBatch sampleBatch(std::mt19937_64& rng, int64_t batch) const;
  // Validation windows [first, first + count) (count clipped to what exists); valWindowCount() of them.
  int64_t valWindowCount() const;
  TokenBatch valBatch(int64_t first, int64_t count) const;
  // Windows tiling the whole corpus (for routing statistics), same layout.
  int64_t corpusWindowCount() const;
  TokenBatch corpusBatch(int64_t first, int64_t count) const;

 private:
  void appendWindow(TokenBatch& b, int64_t start) const;

  std::vector<int32_t> tokens_;
  int32_t bos_;
  int64_t split_;
  int64_t context_;
};

}  // namespace zipmoe::train
