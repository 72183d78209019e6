// The job-building helpers both strategies share (see offload_strategy.h).
#include "experts/offload_strategy.h"

#include "experts/full_tensor_source.h"
#include "zipmoe/format/store.h"

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

sched::JobTask fullReadTask(const Store& store, const FullTensorSource& source, int layer, int expert, int kind,
                            int expertIndex, Keep* keep, std::vector<cache::TensorParts>& recycled) {
  const FullTensorLocation& where = source.tensor(layer, expert, kind);
  sched::JobTask t;
  t.expertIndex = expertIndex;
  t.kind = kind;
  t.fullRead = true;
  t.key = ChunkKey{layer, expert, kind, 0};
  t.entry = &store.manifest().expert(layer, expert, kind);
  t.fullRange = where.range;
  t.dataOffset = where.dataOffset;
  t.tensorBytes = where.tensorBytes;
  if (keep) {
    io::AlignedBuffer& full = keep->parts[static_cast<size_t>(kind)].full;
    reuseBuffer(recycled, full, where.range.length);
    t.keepFull = &full;
  }
  return t;
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
