// Executor (see executor.h): prefetch reads. The runtime queues speculative reads and settles them
// per slot; the I/O thread runs one only when no operation of the current job is ready.
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
    if (read.dst->size() < read.bytes)
      *read.dst = memory_.allocate(static_cast<size_t>(read.bytes), backend::Placement::Host);
    if (read.sm)
      store_->readChunk(ChunkKey{read.layer, read.expert, read.kind, kSmShard}, {read.dst->data(), static_cast<size_t>(read.bytes)}, mode_);
    else
      store_->readTensorChunks(read.layer, read.expert, read.kind, {read.dst->data(), static_cast<size_t>(read.bytes)}, {}, mode_);
  } catch (const std::exception&) {
    ok = false;  // the layer reads it itself when it comes
  }
  const auto b = Clock::now();
  if (trace_ && ok) {
    TraceEvent ev;
    ev.startNs = ns(a);
    ev.endNs = ns(b);
    ev.bytes = read.bytes;
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
  if (ok) prefetchCounters_.bytesRead += read.bytes;
  else ++prefetchCounters_.failures;
  if (outsideJob) prefetchCounters_.secondsOutsideJobs += seconds(b - a);
}

}  // namespace zipmoe::sched
