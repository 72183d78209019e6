// The job-building helpers both strategies share (see offload_strategy.h).
#include "experts/offload_strategy.h"

#include "zipmoe/store.h"

namespace zipmoe::experts {

sched::JobExpert startExpert(const ExpertRequest& request, int kinds, JobCounts& counts) {
  sched::JobExpert je;
  je.expert = request.expert;
  je.tokens = request.tokens;
  je.tensors.assign(static_cast<size_t>(kinds), nullptr);
  ++counts.activations;
  return je;
}

void pinRequested(cache::ExpertCache& cache, int layer, std::span<const ExpertRequest> requests) {
  for (const ExpertRequest& r : requests) cache.entry(layer, r.expert).pinned = true;
}

void reuseBuffer(std::vector<cache::TensorParts>& recycled, io::AlignedBuffer& dst, uint64_t bytes) {
  for (auto& parts : recycled)
    for (io::AlignedBuffer* b : {&parts.full, &parts.e, &parts.sm})
      if (b->size() >= bytes && b->size() < bytes + bytes / 8 + kChunkAlignment) {
        dst = std::move(*b);
        *b = io::AlignedBuffer();
        return;
      }
}

}  // namespace zipmoe::experts
