// ActivationTrace — the expert-activation counts of a real model, and TraceRouting, which replays them.
//
// A trace file (tab-separated) has a '#' comment line naming the model and its shape,
//   # expert-activation trace: model=Qwen1.5-MoE-A2.7B top_k=4 experts=60 layers=24; ...
// a header line `prompt  layer  e0 … e{N−1}`, then one row per (prompt, layer): how many of that
// prompt's tokens each expert of that layer served. Rows run through layers 0 .. layers−1 for prompt
// 0, then prompt 1, and so on. A row sums to tokens × top_k (zero for a dense layer, such as
// DeepSeek-V2-Lite's layer 0); no expert serves more than every token. The traces give realistic
// rank-frequency skew and per-prompt variation, not token order. load() validates all of this and
// throws zipmoe::Error naming file:line, the field and the value.
//
// TraceRouting is a RoutingOverride that forces each token's experts from a trace prompt's rows, so
// that a generated model (whose random router spreads tokens evenly) sees a real model's load. MoE
// layer l replays the trace's activeLayers()[l mod their count]. For each MoE layer it keeps the
// multiset of the current row's counts that is still to be drawn and gives each token k distinct
// experts drawn without replacement with probability proportional to the remaining counts; an expert
// whose remaining count equals the number of tokens the multiset still covers is taken in any case,
// so that over the prompt's token count (row sum / k) the per-expert counts reproduce the row
// exactly. When fewer than k experts have counts left, the multiset restarts from the row. A row
// that cannot give k distinct experts at all (a model k above the trace's top_k, an all-zero row) is
// topped up with experts drawn in proportion to that layer's counts over all prompts, plus one.
// Continuation (setContinuation, off by default): the restart makes a long generation repeat the
// prompt's experts — on the Qwen1.5-MoE trace, 99.9 % of 24 decode steps' activations after a
// 16-token prefill go to experts the prefill routed to, where the trace's own prompts send 27 % of
// their later activations to experts their first 16 tokens did not route to. With continuation,
// once the row has been drawn a token's k experts are drawn instead from a Pólya urn: in proportion
// to the counts this prompt has routed so far plus priorTokens tokens' worth of the layer's counts
// over all prompts. Its priorTokens is fitted on the trace itself (scripts/dev/fit_session_weight.py:
// the held-out likelihood of a prompt's later tokens given its first ones).
// Draws use a private xoshiro256** generator seeded from (seed, prompt, MoE layer): the same seed
// gives the same experts on every platform and standard library, and a prompt replays the same way
// whatever was replayed before it.
// Thread-safety: an ActivationTrace is immutable and may be shared; a TraceRouting is used by the one
// thread that drives the model. Cost: load parses the file once (~30 ms for 12,000 rows); choose()
// is O(k × experts) per token.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "zipmoe/model/routing_override.h"

namespace zipmoe {

class ActivationTrace {
 public:
  // Throws zipmoe::Error naming file:line and the offending field and value.
  static std::shared_ptr<const ActivationTrace> load(const std::filesystem::path& path);

  const std::string& model() const { return model_; }  // the comment's model=
  int topK() const { return topK_; }
  int numExperts() const { return numExperts_; }
  int numLayers() const { return numLayers_; }
  int numPrompts() const { return numPrompts_; }

  // The row of (prompt, layer): numExperts() counts. Throws zipmoe::Error when out of range.
  std::span<const uint32_t> counts(int prompt, int layer) const;
  // The prompt's number of tokens (every non-zero row sums to it × topK()).
  int64_t tokens(int prompt) const;
  // The layers with a non-zero count in some prompt, ascending.
  const std::vector<int>& activeLayers() const { return activeLayers_; }

 private:
  ActivationTrace() = default;

  std::string model_;
  int topK_ = 0, numExperts_ = 0, numLayers_ = 0, numPrompts_ = 0;
  std::vector<uint32_t> counts_;       // [prompt][layer][expert]
  std::vector<int64_t> promptTokens_;  // [prompt]
  std::vector<int> activeLayers_;
};

class TraceRouting : public RoutingOverride {
 public:
  // `moeLayers`, `experts` and `k` are the model's. Throws zipmoe::Error when experts differs from
  // the trace's, k is not in 1 .. experts, moeLayers < 1, or the trace has no active layer.
  TraceRouting(std::shared_ptr<const ActivationTrace> trace, int moeLayers, int experts, int k, uint64_t seed);
  TraceRouting(const TraceRouting&) = delete;
  TraceRouting& operator=(const TraceRouting&) = delete;

  // Selects the trace prompt that later tokens replay (prompt 0 at construction) and restarts every
  // layer's multiset and generator. Throws zipmoe::Error when out of range.
  void setPrompt(int prompt);
  int prompt() const { return prompt_; }
  const ActivationTrace& trace() const { return *trace_; }
  // Once a layer's row has been drawn, later tokens come from the Pólya urn above with this many
  // tokens of prior (0: the row restarts, the default). Applies to the draws after the call; a
  // setPrompt() restarts every layer at its row. Throws zipmoe::Error unless 0 ≤ priorTokens ≤ 1e6.
  void setContinuation(double priorTokens);
  double continuation() const { return continuation_; }
  // The trace layer that MoE layer `moeLayer` replays.
  int traceLayer(int moeLayer) const;

  // See RoutingOverride. Throws zipmoe::Error for a layer out of range, a k other than the
  // constructor's, or out.size() != tokens × k.
  void choose(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) override;
  // Draws the next choice of the layer now and keeps it for its choose() (same draws as without).
  bool peek(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) override;

 private:
  void draw(int moeLayer, int64_t tokens, int k, std::span<int64_t> out);
  struct Pool {
    std::vector<uint32_t> remaining;  // the counts still to be drawn; empty = restart from the row
    uint64_t total = 0;               // their sum
    int positive = 0;                 // experts with a count left
    std::vector<uint64_t> seen;       // [expert]: tokens this prompt routed to it so far
    bool rowDrawn = false;            // the row was loaded once: a restart continues instead
    uint64_t rng[4] = {0, 0, 0, 0};   // xoshiro256** state
  };
  void chooseOne(Pool& pool, int moeLayer, int rowLayer, std::span<int64_t> out);

  std::shared_ptr<const ActivationTrace> trace_;
  int moeLayers_, experts_, k_;
  uint64_t seed_;
  int prompt_ = 0;
  std::vector<Pool> pools_;                      // [MoE layer]
  std::vector<std::vector<uint64_t>> fallback_;  // [MoE layer][expert]: all prompts' counts + 1
  double continuation_ = 0;
  std::vector<std::vector<uint64_t>> urnPrior_;  // [MoE layer][expert]: the urn's prior, × kUrnScale
  std::vector<char> picked_;                     // scratch, [expert]
  std::vector<std::vector<int64_t>> peeked_;     // [MoE layer]: a drawn choice not yet chosen
};

}  // namespace zipmoe
