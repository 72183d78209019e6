// FullTensorStrategy (see full_tensor_strategy.h).
#include "experts/full_tensor_strategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace zipmoe::experts {

FullTensorStrategy::FullTensorStrategy(const Store& store, const ExpertSizes& sizes, const RuntimeOptions& options)
    : store_(store), sizes_(sizes), options_(options), source_(store, options.checkpointDir, options.readMode) {}

sched::SlotLayout FullTensorStrategy::outputLayout() const {
  sched::SlotLayout output;
  output.count = options_.outputSlots;
  for (int kind = 0; kind < sizes_.kinds(); ++kind) {
    output.outOffset.push_back(output.slotBytes);
    output.slotBytes += source_.maxReadBytes(kind);
  }
  return output;
}

Plan FullTensorStrategy::plan(uint64_t poolBytes, PoolMask, const ActivationCounts&, const ObservedCosts&) const {
  const auto start = std::chrono::steady_clock::now();
  Plan p;
  p.pools = poolBit(Pool::F);
  plan::LayerPlan lp;
  lp.ratio = {1, 0, 0, 0};
  const double all = static_cast<double>(sizes_.layers()) * sizes_.experts();
  lp.capacity = {static_cast<int>(std::min(all, std::floor(static_cast<double>(poolBytes) / sizes_.bytesPerExpert()[0]))),
                 0, 0, 0};
  p.layers.push_back(lp);
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

void FullTensorStrategy::applyPlan(cache::ExpertCache& cache, const Plan& plan, uint64_t poolBytes) const {
  cache.setCapacity(0, 0, poolBytes, plan.layers[0].capacity[0]);
}

double FullTensorStrategy::buildJob(cache::ExpertCache& cache, const LayerRequest& request, sched::LayerJob& job,
                                    std::vector<Keep>& kept, JobCounts& counts) const {
  const int layer = request.layer, kinds = sizes_.kinds();
  pinRequested(cache, layer, request.requests);
  uint64_t reserved = 0;
  std::vector<cache::TensorParts> recycled;
  for (const ExpertRequest& r : request.requests) {
    const int idx = static_cast<int>(job.experts.size());
    sched::JobExpert je = startExpert(r, kinds, counts);
    cache::Entry& entry = cache.entry(layer, r.expert);
    if (entry.pool != cache::kNoPool) {
      ++counts.hits[0];
      for (int kind = 0; kind < kinds; ++kind)
        je.tensors[static_cast<size_t>(kind)] = reinterpret_cast<const uint16_t*>(
            entry.tensors[static_cast<size_t>(kind)].full.data() +
            sched::fullReadTensorOffset(source_.tensor(layer, r.expert, kind).dataOffset));
      cache.touch(layer, r.expert, request.useClock);
      job.experts.push_back(std::move(je));
      job.computeOrder.push_back(idx);
      continue;
    }
    ++counts.misses;
    uint64_t need = 0;
    for (int kind = 0; kind < kinds; ++kind) need += source_.tensor(layer, r.expert, kind).range.length;
    const bool keep = cache.makeRoom(layer, 0, reserved + need, cache.usage(layer, r.expert), &recycled);
    if (keep) reserved += need;
    Keep& kp = kept.emplace_back();
    kp.expert = r.expert;
    kp.pool = keep ? 0 : cache::kNoPool;
    kp.parts.resize(static_cast<size_t>(kinds));
    for (int kind = 0; kind < kinds; ++kind) {
      sched::ExecOp op;
      op.kind = sched::ExecKind::ReadFull;
      op.task = static_cast<int>(job.tasks.size());
      job.io.push_back(op);
      job.tasks.push_back(fullReadTask(store_, source_, layer, r.expert, kind, idx, keep ? &kp : nullptr, recycled));
    }
    job.experts.push_back(std::move(je));
    job.computeOrder.push_back(idx);
  }
  return 0;
}

std::vector<int> FullTensorStrategy::warmSet(const cache::ExpertCache& cache, const Plan&, int layer) const {
  // The cache's capacity, filled with the most used experts over all layers (use = activations per
  // step of the expert's layer; at equal use, expert ids in turn across layers) while their reads fit
  // its bytes (a read is the tensors' aligned ranges, a little more than the BF16 words).
  struct Candidate {
    double use;
    int expert, layer;
  };
  std::vector<Candidate> all;
  for (int l = 0; l < sizes_.layers(); ++l) {
    const double steps = static_cast<double>(cache.steps(l));
    for (int e = 0; e < sizes_.experts(); ++e)
      all.push_back({steps > 0 ? static_cast<double>(cache.count(l, e)) / steps : 0.0, e, l});
  }
  std::sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.use != b.use) return a.use > b.use;
    return a.expert != b.expert ? a.expert < b.expert : a.layer < b.layer;
  });
  std::vector<int> experts;
  uint64_t bytes = 0;
  int count = 0;
  for (const Candidate& c : all) {
    for (int kind = 0; kind < sizes_.kinds(); ++kind) bytes += source_.tensor(c.layer, c.expert, kind).range.length;
    if (++count > cache.capacityExperts(0, 0) || bytes > cache.capacityBytes(0, 0)) break;
    if (c.layer == layer && cache.entry(layer, c.expert).pool == cache::kNoPool) experts.push_back(c.expert);
  }
  return experts;
}

void FullTensorStrategy::poolStats(const cache::ExpertCache& cache, const Plan&, RuntimeStats& stats) const {
  for (Pool p : kPools) {
    PoolState& pool = stats.pools[static_cast<size_t>(poolIndex(p))];
    pool.capacityBytes = p == Pool::F ? cache.capacityBytes(0, 0) : 0;
    pool.ratio = p == Pool::F ? 1.0 : 0.0;
  }
}

}  // namespace zipmoe::experts
