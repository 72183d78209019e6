// TokenCorpus: split and windows of the tokenised corpus. See token_corpus.h.
// Thread-safety: const methods are safe concurrently. Cost: O(batch × context) per batch.
#include "token_corpus.h"

#include <algorithm>
#include <string>

#include "zipmoe/base/error.h"

namespace zipmoe::train {

TokenCorpus::TokenCorpus(std::vector<int32_t> tokens, int32_t bos, double valFraction, int64_t context)
    : tokens_(std::move(tokens)), bos_(bos), context_(context) {
  const auto n = static_cast<int64_t>(tokens_.size());
  split_ = n - static_cast<int64_t>(static_cast<double>(n) * valFraction);
  // A window reads context-1 inputs plus one more token as the last target.
  if (split_ < context_ || n - split_ < context_)
    throw Error("corpus of " + std::to_string(n) + " tokens is too short for windows of " + std::to_string(context_) +
                " tokens in both the training and the validation split");
}

void TokenCorpus::appendWindow(TokenBatch& b, int64_t start) const {
  // inputs: bos, t[start .. start+context-2]; targets: t[start .. start+context-1]
  b.inputs.push_back(bos_);
  for (int64_t k = 0; k < context_ - 1; ++k) b.inputs.push_back(tokens_[static_cast<size_t>(start + k)]);
  for (int64_t k = 0; k < context_; ++k) b.targets.push_back(tokens_[static_cast<size_t>(start + k)]);
  ++b.batch;
}

TokenBatch TokenCorpus::sampleBatch(std::mt19937_64& rng, int64_t batch) const {
  TokenBatch b;
  b.context = context_;
  std::uniform_int_distribution<int64_t> pick(0, split_ - context_);
  for (int64_t i = 0; i < batch; ++i) appendWindow(b, pick(rng));
  return b;
}

int64_t TokenCorpus::valWindowCount() const { return valTokens() / context_; }

TokenBatch TokenCorpus::valBatch(int64_t first, int64_t count) const {
  TokenBatch b;
  b.context = context_;
  for (int64_t w = first; w < std::min(first + count, valWindowCount()); ++w) appendWindow(b, split_ + w * context_);
  return b;
}

int64_t TokenCorpus::corpusWindowCount() const { return static_cast<int64_t>(tokens_.size()) / context_; }

TokenBatch TokenCorpus::corpusBatch(int64_t first, int64_t count) const {
  TokenBatch b;
  b.context = context_;
  for (int64_t w = first; w < std::min(first + count, corpusWindowCount()); ++w) appendWindow(b, w * context_);
  return b;
}

}  // namespace zipmoe::train
