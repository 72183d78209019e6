// OffloadingRuntime (experts/offloading_runtime.h): what it reports, from any thread — stats() (the
// counters the runtime keeps as it works, with the pools', pages' and prefetch figures read now) and
// the trace's events (drainTrace).
#include <mutex>
#include <vector>

#include "experts/offloading_runtime.h"

namespace zipmoe::experts {

RuntimeStats OffloadingRuntime::stats() const {
  RuntimeStats s;
  {
    std::lock_guard lock(statsMutex_);
    s = stats_;
  }
  std::lock_guard lock(cacheMutex_);
  const auto used = cache_->usedBytesPerPool();
  const auto resident = cache_->residentPerPool();
  for (size_t p = 0; p < kNumPools; ++p) {
    s.pools[p].usedBytes = used[p];
    s.pools[p].residentExperts = resident[p];
  }
  strategy_->poolStats(*cache_, plan_, s);
  s.poolMask = plan_.pools;
  s.workingSetBytes = workingSet_;
  s.budgetBytes = plan_.budget;
  s.heldBytes = workingSet_ + cache_->totalUsedBytes();
  s.lentBytes = cache_->lentBytes();
  if (pages_) {
    const io::PagePoolStats ps = pages_->stats();
    s.pooledPageBytes = ps.pooledBytes;
    s.reusedPageBytes = ps.reusedBytes;
    s.freshPageBytes = ps.freshBytes;
    s.reservedPageBytes = ps.reservedBytes;
    s.heldBytes += ps.pooledBytes;
  }
  s.droppedTraceEvents = trace_ ? trace_->dropped() : 0;
  const sched::PrefetchCounters pc = executor_->prefetchCounters();
  s.prefetchedBytes = pc.bytesRead;
  s.prefetchFailedReads = pc.failures;
  s.prefetchDenseSeconds = pc.secondsOutsideJobs;
  return s;
}

size_t OffloadingRuntime::drainTrace(std::vector<TraceEvent>& out) {
  if (!trace_) return 0;
  std::lock_guard lock(drainMutex_);
  return trace_->drain(out);
}

}  // namespace zipmoe::experts
