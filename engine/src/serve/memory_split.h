// MemorySplit — one total memory budget shared by the expert runtime, the KV cache and the forward's
// activations (CoServe §4.4), as the serving scheduler moves it.
//
// total = activations (a fixed reserve for the largest forward the scheduler runs) + KV (by capacity:
// every live or cached sequence's reserved tokens × bytes per token) + experts (everything else,
// never below a floor). The floor is `expertFloorShare` of (total − activations), and at least the
// runtime's minimum: admission of a request whose KV reservation would push the experts below it
// waits (or evicts cached conversations) instead of running out of memory. The share is measured by
// `zipmoe bench serve --expert-floor` (docs/SERVER.md). The activation reserve is an upper estimate
// from the model's shapes (activationBytes), not a measurement.
// Thread-safety: none (the scheduler's engine thread). Cost: O(1).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "zipmoe/hf/model_config.h"

namespace zipmoe::serve {

// An upper estimate of the transient bytes of one forward of `tokens` tokens in `sequences` steps at
// context `context`: hidden states and norms, q/k/v, one query chunk's attention scores over the
// context (attention attends kAttentionQueryChunk queries at a time, model/attention_bounds.h), the
// MoE block's [tokens × k, hidden] buffer and its experts' intermediates, the logits of each step's
// last row, in fp32, times a safety factor of 2.
uint64_t activationBytes(const ModelConfig& config, int tokens, int sequences, int context);

// A lower bound of the KV bytes one token of one sequence holds (MoeModel::kvBytesPerToken), from the
// shapes alone, in BF16.
uint64_t minKvBytesPerToken(const ModelConfig& config);

// Serving's activation reserve under a memory budget of `total` bytes: activationBytes of a forward
// of `stepTokens` tokens over at most 2 × maxBatch steps (decoding slots and prefills ahead), at the
// longest context a sequence can reach — the model's window, or fewer where the KV room the budget
// leaves beside the experts' floor holds fewer tokens at minKvBytesPerToken. The engine (its first
// plan) and the scheduler compute the same figure.
uint64_t servingActivationBytes(const ModelConfig& config, int stepTokens, int maxBatch, int context, uint64_t total,
                                double expertFloorShare);

// The smallest budget a MemorySplit of servingActivationBytes and `expertMinimum` accepts (a few
// bytes above it at most).
uint64_t minimumServingBudget(const ModelConfig& config, int stepTokens, int maxBatch, int context,
                              uint64_t expertMinimum, double expertFloorShare);

class MemorySplit {
 public:
  MemorySplit() = default;  // no budget: everything fits
  // Throws zipmoe::Error naming the figures when the budget cannot hold the activations and the
  // experts' minimum.
  MemorySplit(uint64_t total, uint64_t activations, uint64_t expertMinimum, double expertFloorShare);

  bool limited() const { return total_ > 0; }
  uint64_t total() const { return total_; }
  uint64_t activations() const { return activations_; }
  uint64_t kv() const { return kv_; }
  uint64_t expertFloor() const { return floor_; }
  // What the experts get with the KV cache at its current size; their floor while the KV holds more
  // than kvLimit (a budget lowered below what live requests held).
  uint64_t experts() const { return limited() ? total_ - activations_ - std::min(kv_, kvLimit()) : 0; }
  // The most KV bytes the split allows (experts at their floor).
  uint64_t kvLimit() const { return limited() ? total_ - activations_ - floor_ : UINT64_MAX; }
  uint64_t kvRoom() const { return kvLimit() - std::min(kv_, kvLimit()); }  // what more KV fits
  bool fits(uint64_t moreKv) const { return !limited() || kv_ + moreKv <= kvLimit(); }
  // REQUIRES: fits(bytes) for add.
  void addKv(uint64_t bytes) { kv_ += bytes; }
  void releaseKv(uint64_t bytes) { kv_ -= bytes < kv_ ? bytes : kv_; }
  std::string describe() const;

 private:
  uint64_t total_ = 0, activations_ = 0, floor_ = 0, kv_ = 0;
};

}  // namespace zipmoe::serve
