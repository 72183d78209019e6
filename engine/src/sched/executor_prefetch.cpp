// Executor (see executor.h): prefetch reads. The runtime queues speculative reads and settles them
// per slot; an I/O thread runs one only when no operation of the current job is ready.
#include <algorithm>
#include <mutex>
#include <vector>

#include "sched/executor.h"

namespace zipmoe::sched {

void Executor::addPrefetch(std::vector<PrefetchRead> reads) {
  {
    std::lock_guard lock(mutex_);
    for (PrefetchRead& r : reads) {
      r.id = nextPrefetchId_++;
      r.state = 0;
      prefetch_.push_back(r);
    }
  }
  work_.notify_all();
}

std::vector<PrefetchRead> Executor::settlePrefetch(int slot) {
  std::unique_lock lock(mutex_);
  model_.wait(lock, [&] {
    return std::none_of(prefetch_.begin(), prefetch_.end(), [&](const PrefetchRead& r) { return r.slot == slot && r.state == 1; });
  });
  std::vector<PrefetchRead> done;
  for (auto it = prefetch_.begin(); it != prefetch_.end();) {
    if (it->slot != slot) {
      ++it;
      continue;
    }
    if (it->state == 2) done.push_back(*it);
    it = prefetch_.erase(it);
  }
  return done;
}

void Executor::waitForPrefetch() {
  std::unique_lock lock(mutex_);
  model_.wait(lock, [&] {
    return std::none_of(prefetch_.begin(), prefetch_.end(), [](const PrefetchRead& r) { return r.state < 2; });
  });
}

PrefetchCounters Executor::prefetchCounters() const {
  std::lock_guard lock(mutex_);
  return prefetchCounters_;
}

PrefetchRead* Executor::pickPrefetch() {
  for (PrefetchRead& r : prefetch_)
    if (r.state == 0) {
      r.state = 1;
      return &r;
    }
  return nullptr;
}

// Runs one prefetch read without the lock (the runtime leaves its buffer alone until it settles the
// slot, which waits for this read), then records its outcome under the lock.
void Executor::executePrefetch(PrefetchRead read, bool outsideJob) {
  const auto a = Clock::now();
  bool ok = true;
  try {
    // From the page pool's recycled pages where there are (keptBuffer), as a demand read's: fresh
    // memory is faulted in by the read, page by page, on this thread beside the model's.
    uint8_t* e = read.e ? keptData(*read.e, read.eBytes) : nullptr;
    uint8_t* sm = read.sm ? keptData(*read.sm, read.smBytes) : nullptr;
    if (e)
      store_->readTensorChunks(read.layer, read.expert, read.kind, {e, static_cast<size_t>(read.eBytes)},
                               {sm, sm ? static_cast<size_t>(read.smBytes) : 0}, mode_);
    else if (sm)
      store_->readChunk(ChunkKey{read.layer, read.expert, read.kind, kSmShard}, {sm, static_cast<size_t>(read.smBytes)}, mode_);
  } catch (const std::exception&) {
    ok = false;  // the layer reads it itself when it comes
  }
  const auto b = Clock::now();
  LaneSpan lane;
  {
    std::lock_guard lock(mutex_);
    lane = laneSpan(a, b);
  }
  if (trace_ && ok) {
    TraceEvent ev;
    ev.startNs = ns(lane.start);
    ev.endNs = ns(lane.end);
    ev.bytes = read.bytes();
    ev.token = read.token;
    ev.layer = static_cast<int16_t>(read.layer);
    ev.expert = static_cast<int16_t>(read.expert);
    ev.tensor = static_cast<int8_t>(read.kind);
    ev.op = TraceOp::Prefetch;
    ev.lane = 0;
    trace_->record(ev);
  }
  std::lock_guard lock(mutex_);
  for (PrefetchRead& r : prefetch_)
    if (r.id == read.id) r.state = ok ? 2 : 3;
  ++prefetchCounters_.reads;
  if (ok) prefetchCounters_.bytesRead += read.bytes();
  else ++prefetchCounters_.failures;
  if (outsideJob) prefetchCounters_.secondsOutsideJobs += seconds(lane.end - lane.start);
}

}  // namespace zipmoe::sched
