// Internal: the ZipMoE expert provider (paper §3.2–3.4): four pools per MoE layer, planned by
// Algorithm 4 from activation history and the measured costs (planner_inputs.h); a requested
// expert's tensors are rebuilt from whatever its pool keeps — F nothing to do; C decompress and
// recover; S read the exponent chunks, decompress, recover; E read the SM-chunk, decompress,
// recover; a miss all of it — and it moves to a better pool when its rank says so (dispatch by
// rank with tolerance δ, room made by the eviction policy). The layer's operations are ordered by
// Algorithm 1 (or FIFO, for comparison) and the order's makespan simulated from the profile.
// Raw misses: with a checkpoint (RuntimeOptions::checkpointDir), a layer whose plan says so
// (LayerPlan::rawMisses, or RawMisses::Always) serves a miss that is kept nowhere or kept in F by one
// read of each whole BF16 tensor from the checkpoint (FullTensorSource, as the full-tensor baseline),
// with no decompression or recovery; a miss that dispatch keeps in C, S or E needs the split parts,
// so it is served from the store as before. The F pool then holds the checkpoint's aligned read
// (the tensor at its data offset; rawInF_ remembers which F members came that way).
// Thread-safety and cost: as OffloadStrategy (offload_strategy.h).
#pragma once

#include <memory>
#include <vector>

#include "experts/expert_sizes.h"
#include "experts/full_tensor_source.h"
#include "experts/offload_strategy.h"
#include "experts/planner_inputs.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/experts/runtime_options.h"
#include "zipmoe/format/store.h"

namespace zipmoe::experts {

// Whether C hits of this store are handed to the model as nibble codes read in place
// (RuntimeOptions::readCodesInPlace): ZipMoE mode, fused recovery, a `nibble` store.
bool readsCodesInPlace(const RuntimeOptions& options, const Store& store);

class ZipMoeStrategy final : public OffloadStrategy {
 public:
  // REQUIRES: store and sizes outlive the strategy; options.decompressWorkers is resolved (> 0).
  ZipMoeStrategy(const Store& store, const ExpertSizes& sizes, const RuntimeOptions& options, const CostProfile& profile);

  sched::SlotLayout stagingLayout() const override { return sizes_.stagingLayout(options_.stagingSlots); }
  sched::SlotLayout outputLayout() const override;
  int decompressWorkers() const override { return options_.decompressWorkers; }
  bool sharedCache() const override { return false; }
  Plan plan(uint64_t poolBytes, PoolMask pools, const ActivationCounts& counts,
            const ObservedCosts& observed) const override;
  bool replanLayerFromPrompt(Plan& plan, int layer, uint64_t poolBytes, const ActivationCounts& counts,
                             const ObservedCosts& observed) const override;
  void applyPlan(cache::ExpertCache& cache, const Plan& plan, uint64_t poolBytes) const override;
  double buildJob(cache::ExpertCache& cache, const LayerRequest& request, sched::LayerJob& job, std::vector<Keep>& kept,
                  JobCounts& counts) const override;
  std::vector<int> warmSet(const cache::ExpertCache& cache, const Plan& plan, int layer) const override;
  bool prepareWarm(cache::ExpertCache& cache, int layer, int expert) const override;
  void poolStats(const cache::ExpertCache& cache, const Plan& plan, RuntimeStats& stats) const override;

 private:
  // Turns the schedule of the job's tasks (Algorithm 1 or FIFO) into the executor's operation
  // lists; returns the simulated makespan.
  double order(sched::LayerJob& job) const;
  // A layer plan's raw-miss choice as the options and the checkpoint allow.
  void settleRawMisses(plan::LayerPlan& lp) const;

  const Store& store_;
  const ExpertSizes& sizes_;
  const RuntimeOptions& options_;
  const CostProfile profile_;
  const bool codesInPlace_;  // readsCodesInPlace(options_, store_), fixed for the strategy's life
  PoolPlanInputs planInputs_;
  std::unique_ptr<FullTensorSource> raw_;  // the checkpoint, when raw misses are possible
  // Guarded by the cache lock (applyPlan and buildJob): per layer, whether misses are raw reads;
  // per (layer, expert), whether its F-pool tensors came from a raw read (data at the read's offset).
  mutable std::vector<char> rawLayer_;
  mutable std::vector<char> rawInF_;
};

}  // namespace zipmoe::experts
