// Internal: the model's expert predictor for speculative prefetch (zipmoe/experts/expert_prefetch.h). Each
// MoE block calls afterAcquire() right after it has asked the provider for its experts: the
// predictor scores the prediction it made for this layer, records history (the previous step's
// experts, an ExpertTokenTable when asked) and hints the provider with the next MoE layer's
// probable experts. It only reads the hidden state and the routing: the model's results are the
// same whatever it predicts.
// Thread-safety: the model's thread only. Cost: `router` one router product per MoE layer (hidden ×
// experts), the others O(tokens × k).
#pragma once

#include <ATen/ATen.h>

#include <span>
#include <vector>

#include "zipmoe/experts/expert_prefetch.h"
#include "zipmoe/experts/expert_provider.h"
#include "zipmoe/hf/model_config.h"
#include "zipmoe/model/routing_override.h"

namespace zipmoe {

class Router;

class ExpertPredictor {
 public:
  // Throws zipmoe::Error when the predictor lacks what it needs (a table of this model's shape;
  // oracle: a routing override).
  ExpertPredictor(const ModelConfig& config, const PrefetchOptions& options, RoutingOverride* routing,
                  ExpertProvider& experts);
  // Validates and takes new options; restarts the accuracy count and forgets standing predictions.
  void setOptions(const PrefetchOptions& options);
  void addRouter(int moeLayer, const Router* router);
  void beginForward(std::span<const int64_t> tokenIds);
  // x: the layer's MoE input [N, hidden]; chosen: its experts [N, k] (int64).
  void afterAcquire(int moeLayer, const at::Tensor& x, const at::Tensor& chosen);
  const PrefetchAccuracy& accuracy() const { return accuracy_; }
  // When on, each forward's routing is kept: per MoE layer, the k experts of every token (rows in
  // the forward's token order), for the serving scheduler's per-request expert usage.
  void setRecordRouting(bool on);
  const std::vector<std::vector<int32_t>>& lastRouting() const { return routingLog_; }

 private:
  std::vector<int> predict(int next, int moeLayer, const at::Tensor& x, int64_t tokens);

  const ModelConfig& c_;
  PrefetchOptions options_;
  RoutingOverride* routing_;
  ExpertProvider& experts_;
  int moeLayers_ = 0;
  std::vector<const Router*> routers_;       // [MoE layer]
  std::vector<std::vector<int>> previous_;   // [MoE layer]: the experts it requested last
  std::vector<std::vector<int>> predicted_;  // [MoE layer]: the standing prediction, if any
  std::vector<char> hasPrediction_;
  std::vector<int64_t> tokenIds_;
  bool recordRouting_ = false;
  std::vector<std::vector<int32_t>> routingLog_;  // [MoE layer]: tokens × k expert ids
  uint64_t draws_ = 0;
  PrefetchAccuracy accuracy_;
};

}  // namespace zipmoe
