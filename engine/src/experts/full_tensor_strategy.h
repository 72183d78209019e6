// Internal: the full-tensor offloading baseline (what Accelerate- or MoE-Infinity-style offloading
// does): whole BF16 expert tensors read from the HF checkpoint (full_tensor_source.h) into one cache
// of full experts shared by every layer, replaced by LRU, FIFO, LFU or Marking. A hit needs nothing;
// a miss is one aligned read per tensor on the I/O thread, straight into the cache when the expert is
// kept, else into an output slot. Thread-safety and cost: as OffloadStrategy (offload_strategy.h).
#pragma once

#include "experts/expert_sizes.h"
#include "experts/full_tensor_source.h"
#include "experts/offload_strategy.h"
#include "zipmoe/experts/runtime_options.h"
#include "zipmoe/format/store.h"

namespace zipmoe::experts {

class FullTensorStrategy final : public OffloadStrategy {
 public:
  // Opens the checkpoint's files (see FullTensorSource for the errors).
  FullTensorStrategy(const Store& store, const ExpertSizes& sizes, const RuntimeOptions& options);

  sched::SlotLayout stagingLayout() const override { return {}; }
  sched::SlotLayout outputLayout() const override;
  int decompressWorkers() const override { return 0; }
  bool sharedCache() const override { return true; }
  Plan plan(uint64_t poolBytes, PoolMask pools, const ActivationCounts& counts,
            const ObservedCosts& observed) const override;
  void applyPlan(cache::ExpertCache& cache, const Plan& plan, uint64_t poolBytes) const override;
  double buildJob(cache::ExpertCache& cache, const LayerRequest& request, sched::LayerJob& job, std::vector<Keep>& kept,
                  JobCounts& counts) const override;
  std::vector<int> warmSet(const cache::ExpertCache& cache, const Plan& plan, int layer) const override;
  void poolStats(const cache::ExpertCache& cache, const Plan& plan, RuntimeStats& stats) const override;

 private:
  const Store& store_;
  const ExpertSizes& sizes_;
  const RuntimeOptions& options_;
  FullTensorSource source_;
};

}  // namespace zipmoe::experts
