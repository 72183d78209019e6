// RoutingOverride — replaces the router's choice of experts in every MoE layer of a model.
//
// Set through ModelOptions::routing. For each MoE layer of each forward, the model calls choose()
// once with the number of tokens of that forward (every step of a batch together, in step order);
// the override writes the experts of each token, the model weights them by its family's own rule
// applied to the router's scores of exactly those experts, and requests exactly those experts from
// the ExpertProvider. Its purpose is realistic load: a generated model with a random router spreads
// tokens almost uniformly over experts, while a replayed activation trace (TraceRouting, see
// activation_trace.h) has the skew of a real model.
// Thread-safety: called only from the thread that drives the model. Cost: set by the implementation.
#pragma once

#include <cstdint>
#include <span>

namespace zipmoe {

class RoutingOverride {
 public:
  virtual ~RoutingOverride() = default;
  // `moeLayer` is the MoE layer index (0 .. number of MoE layers − 1), as for ExpertProvider.
  // REQUIRES: out.size() == tokens × k.
  // Writes out[t × k + j], j = 0 .. k−1: the k distinct experts of token t, ascending. The model
  // throws zipmoe::Error when they are not (out of range, repeated or unsorted).
  virtual void choose(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) = 0;
  // Look-ahead for an oracle prefetch predictor: writes what the next choose() at `moeLayer` with
  // the same `tokens` will write (and that choose() then writes exactly that), without changing
  // anything else. Returns false when the override cannot look ahead (the default).
  virtual bool peek(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) {
    (void)moeLayer;
    (void)tokens;
    (void)k;
    (void)out;
    return false;
  }
};

}  // namespace zipmoe
