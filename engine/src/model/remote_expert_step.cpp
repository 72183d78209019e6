// Experts of a MoE layer step computed elsewhere (see remote_expert_step.h).
#include "model/remote_expert_step.h"

#include <algorithm>
#include <string>

#include "zipmoe/base/error.h"

namespace zipmoe {

RemoteExpertStep::RemoteExpertStep(ExpertProvider& provider, int layer, const at::Tensor& x,
                                   const std::vector<std::vector<int64_t>>& slots, int64_t k,
                                   std::vector<ExpertRequest>& requests)
    : layer_(layer), slots_(slots) {
  const std::vector<int> elsewhere = provider.computedElsewhere(layer, requests);
  if (elsewhere.empty()) return;
  std::vector<ExpertRows> inputs;
  for (const int e : elsewhere) {
    const auto it = std::find_if(requests.begin(), requests.end(), [&](const ExpertRequest& r) { return r.expert == e; });
    if (it == requests.end())
      throw Error("MoE layer " + std::to_string(layer) + ": the expert provider would compute expert " +
                  std::to_string(e) + " elsewhere, which was not requested");
    remote_.push_back(*it);
    requests.erase(it);
    auto& list = slots[static_cast<size_t>(e)];
    const at::Tensor slotIndex =
        at::from_blob(const_cast<int64_t*>(list.data()), {static_cast<int64_t>(list.size())}, at::kLong);
    rows_.push_back(x.index_select(0, at::floor_divide(slotIndex, k)).contiguous());
    inputs.push_back({e, rows_.back().size(0), rows_.back().data_ptr()});
  }
  const ActivationType type = x.scalar_type() == at::kBFloat16 ? ActivationType::BFloat16 : ActivationType::Float32;
  outputs_ = provider.computeElsewhere(layer, inputs, type, x.size(1));
  if (!outputs_)
    throw Error("MoE layer " + std::to_string(layer) + ": the expert provider named experts to compute elsewhere "
                "but started no computation");
}

void RemoteExpertStep::collect(at::Tensor& contributions, const at::Tensor& flatWeights,
                                                     at::ScalarType dtype) {
  std::vector<bool> done(remote_.size(), false);
  size_t received = 0;
  const int64_t hidden = contributions.size(1);
  while (auto computed = outputs_->next()) {
    const auto it = std::find_if(remote_.begin(), remote_.end(),
                                 [&](const ExpertRequest& r) { return r.expert == computed->expert; });
    const auto i = static_cast<size_t>(it - remote_.begin());
    if (it == remote_.end() || done[i])
      throw Error("MoE layer " + std::to_string(layer_) + ": the expert provider returned the output of expert " +
                  std::to_string(computed->expert) + ", which was not sent or was already returned");
    done[i] = true;
    ++received;
    if (!computed->output)
      throw Error("MoE layer " + std::to_string(layer_) + ": the expert provider returned expert " +
                  std::to_string(computed->expert) + " without its output");
    auto& list = slots_[static_cast<size_t>(it->expert)];
    const at::Tensor slotIndex =
        at::from_blob(const_cast<int64_t*>(list.data()), {static_cast<int64_t>(list.size())}, at::kLong);
    const at::Tensor out = at::from_blob(const_cast<void*>(computed->output), {rows_[i].size(0), hidden},
                                         rows_[i].options());
    const at::Tensor weighted = (out * flatWeights.index_select(0, slotIndex).unsqueeze(1)).to(dtype);
    contributions.index_copy_(0, slotIndex, weighted);
  }
  if (received != remote_.size())
    throw Error("MoE layer " + std::to_string(layer_) + ": the expert provider returned " + std::to_string(received) +
                " of " + std::to_string(remote_.size()) + " experts computed elsewhere");
}

}  // namespace zipmoe
