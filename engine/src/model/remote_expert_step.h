// RemoteExpertStep — the part of one MoE layer step whose experts the provider computes elsewhere
// (ExpertProvider::computedElsewhere / computeElsewhere, e.g. on other machines): it gathers their
// input rows, starts the calls before the model computes its own experts, and afterwards weighs each
// output into the slots it belongs to, exactly as the model weighs the experts it computes itself
// (output × router weight, cast to the compute type), so the fixed-order sum does not change.
// Internal to the MoE block. Thread-safety: the model's thread. Cost: one gather of the rows.
#pragma once

#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "zipmoe/experts/expert_provider.h"

namespace zipmoe {

class RemoteExpertStep {
 public:
  // Takes the experts computed elsewhere out of `requests` and starts their calls. `slots[e]` are the
  // flat slots (token × k + j) routed to expert e.
  RemoteExpertStep(ExpertProvider& provider, int layer, const at::Tensor& x,
                   const std::vector<std::vector<int64_t>>& slots, int64_t k, std::vector<ExpertRequest>& requests);
  RemoteExpertStep(const RemoteExpertStep&) = delete;
  RemoteExpertStep& operator=(const RemoteExpertStep&) = delete;

  bool active() const { return outputs_ != nullptr; }
  // Writes every output computed elsewhere into `contributions` (rows at the expert's slots). Throws
  // zipmoe::Error for an output it did not ask for, a missing one, or a request the provider failed.
  void collect(at::Tensor& contributions, const at::Tensor& flatWeights, at::ScalarType dtype);

 private:
  int layer_;
  const std::vector<std::vector<int64_t>>& slots_;
  std::vector<ExpertRequest> remote_;
  std::vector<at::Tensor> rows_;  // kept alive while the calls read them
  std::unique_ptr<ExpertOutputs> outputs_;
};

}  // namespace zipmoe
