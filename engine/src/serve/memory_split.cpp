// MemorySplit (see memory_split.h).
#include "serve/memory_split.h"

#include <algorithm>
#include <cmath>

#include "model/attention_bounds.h"
#include "zipmoe/base/error.h"

namespace zipmoe::serve {

uint64_t activationBytes(const ModelConfig& c, int tokens, int sequences, int context) {
  const auto n = static_cast<uint64_t>(std::max(tokens, 1));
  const auto rows = std::min(n, static_cast<uint64_t>(std::max(sequences, 1)));
  const auto queries = std::min(n, static_cast<uint64_t>(kAttentionQueryChunk));
  const auto hidden = static_cast<uint64_t>(c.hiddenSize);
  const auto heads = static_cast<uint64_t>(std::max(c.numHeads, 1));
  const auto headDim = static_cast<uint64_t>(std::max({c.headDim, c.qkNopeHeadDim + c.qkRopeHeadDim, c.vHeadDim, 1}));
  const auto k = static_cast<uint64_t>(std::max(c.numExpertsPerTok, 1));
  const auto ffn = static_cast<uint64_t>(std::max({c.moeIntermediateSize, c.intermediateSize, 1}));
  const auto shared = static_cast<uint64_t>(std::max(c.sharedExpertIntermediateSize, 0));
  const auto ctx = static_cast<uint64_t>(std::max(context, 1));
  uint64_t perToken = 0;
  perToken += 8 * hidden;                 // residual, norms, attention output, MoE input / output
  perToken += 4 * heads * headDim;        // q, k, v, context
  perToken += 2 * k * hidden;             // the [tokens × k, hidden] contributions and gathered rows
  perToken += 3 * k * ffn + 3 * shared;   // gate / up / act of each expert it visits
  perToken += static_cast<uint64_t>(std::max(c.numExperts, 0));  // router scores
  uint64_t values = n * perToken;
  values += 2 * heads * queries * ctx;    // one query chunk's scores over the context, and its softmax
  values += rows * static_cast<uint64_t>(c.vocabSize);  // the logits of each step's last row
  return 2 * 4 * values;
}

uint64_t minKvBytesPerToken(const ModelConfig& c) {
  const auto layers = static_cast<uint64_t>(std::max(c.numLayers, 1));
  const uint64_t width = c.kvLoraRank > 0 ? static_cast<uint64_t>(c.kvLoraRank + c.qkRopeHeadDim)
                                          : 2 * static_cast<uint64_t>(std::max(c.numKvHeads, 1)) * std::max(c.headDim, 1);
  return layers * width * 2;  // BF16, the narrowest compute type
}

uint64_t servingActivationBytes(const ModelConfig& c, int stepTokens, int maxBatch, int context, uint64_t total,
                                double expertFloorShare) {
  // A sequence holds at most what the KV room beside the activations' context-free part and the
  // experts' floor can take, at the least KV per token: the longest context a forward can see.
  const uint64_t fixed = activationBytes(c, stepTokens, 2 * maxBatch, 1);
  uint64_t longest = static_cast<uint64_t>(std::max(context, 1));
  if (total > fixed) {
    const double kvRoom = static_cast<double>(total - fixed) * std::clamp(1.0 - expertFloorShare, 0.0, 1.0);
    longest = std::min(longest, static_cast<uint64_t>(kvRoom / static_cast<double>(minKvBytesPerToken(c))) + 1);
  }
  return activationBytes(c, stepTokens, 2 * maxBatch, static_cast<int>(longest));
}

uint64_t minimumServingBudget(const ModelConfig& c, int stepTokens, int maxBatch, int context, uint64_t expertMinimum,
                              double expertFloorShare) {
  // The reserve grows with the budget (a longer context fits), more slowly than the budget: a few
  // rounds reach the fixed point from below.
  uint64_t total = activationBytes(c, stepTokens, 2 * maxBatch, 1) + expertMinimum + 1;
  for (int round = 0; round < 16; ++round) {
    const uint64_t need =
        servingActivationBytes(c, stepTokens, maxBatch, context, total, expertFloorShare) + expertMinimum + 1;
    if (need <= total) break;
    total = need;
  }
  return total;
}

MemorySplit::MemorySplit(uint64_t total, uint64_t activations, uint64_t expertMinimum, double expertFloorShare)
    : total_(total), activations_(activations) {
  if (!(expertFloorShare >= 0.0 && expertFloorShare <= 1.0))
    throw Error("serve: the experts' floor share must be in [0, 1], got " + std::to_string(expertFloorShare));
  if (total <= activations || total - activations < expertMinimum)
    throw Error("serve: the memory budget of " + std::to_string(total) + " bytes cannot hold the forward's " +
                std::to_string(activations) + " bytes of activations and the expert runtime's minimum of " +
                std::to_string(expertMinimum) + " bytes; give at least " +
                std::to_string(activations + expertMinimum + 1) +
                " bytes, or fewer tokens per forward step (zipmoe serve --step-tokens; the activations grow with them)");
  const uint64_t room = total - activations;
  floor_ = std::max(expertMinimum, static_cast<uint64_t>(std::floor(static_cast<double>(room) * expertFloorShare)));
  floor_ = std::min(floor_, room);
}

std::string MemorySplit::describe() const {
  if (!limited()) return "no memory budget (KV cache bounded by the context window only)";
  const auto mib = [](uint64_t b) { return std::to_string(b / 1024) + " KiB"; };
  return "total " + mib(total_) + " = activations " + mib(activations_) + " + KV " + mib(kv_) + " + experts " +
         mib(experts()) + " (experts' floor " + mib(floor_) + ")";
}

}  // namespace zipmoe::serve
