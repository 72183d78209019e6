// LayerBatch (see sched/layer_batch.h): handing a job's ready experts to the model, and the job's end.
#include "sched/layer_batch.h"

#include <chrono>
#include <mutex>
#include <vector>

#include "zipmoe/base/error.h"

namespace zipmoe::sched {

LayerBatch::~LayerBatch() {
  {
    std::unique_lock lock(ex_.mutex_);
    releaseCurrent();
    job_->cancelled = true;
    ex_.model_.wait(lock, [&] { return job_->running == 0; });
    if (ex_.job_ == job_) ex_.job_.reset();
    for (auto& e : job_->experts) {
      if (e.stagingSlot >= 0) ex_.stagingFree_[static_cast<size_t>(e.stagingSlot)] = 1;
      if (e.outputSlot >= 0) ex_.outputFree_[static_cast<size_t>(e.outputSlot)] = 1;
      e.stagingSlot = e.outputSlot = -1;
    }
  }
  job_->lastRelease = Clock::now();
  if (onEnd_) onEnd_(*job_);
}

std::optional<ReadyExpert> LayerBatch::next() {
  std::unique_lock lock(ex_.mutex_);
  releaseCurrent();
  LayerJob& job = *job_;
  if (job.returnedCount == static_cast<int>(job.experts.size())) return std::nullopt;
  const auto waitStart = Clock::now();
  int chosen = -1;
  ex_.model_.wait(lock, [&] {
    if (!job.error.empty()) return true;
    for (int idx : job.computeOrder) {
      const JobExpert& e = job.experts[static_cast<size_t>(idx)];
      if (e.ready && !e.returned) {
        chosen = idx;
        return true;
      }
    }
    return false;
  });
  const auto now = Clock::now();
  job.stallSeconds += seconds(now - waitStart);
  if (now - waitStart > std::chrono::microseconds(20) && ex_.trace_ && job.traced) {
    TraceEvent ev;
    ev.startNs = ex_.ns(waitStart);
    ev.endNs = ex_.ns(now);
    ev.token = job.token;
    ev.layer = static_cast<int16_t>(job.layer);
    ev.op = TraceOp::Stall;
    ev.lane = static_cast<uint8_t>(ex_.workers_ + 2);
    ex_.trace_->record(ev);
  }
  if (!job.error.empty()) {
    job.cancelled = true;
    ex_.work_.notify_all();
    throw Error(job.error);
  }
  JobExpert& e = job.experts[static_cast<size_t>(chosen)];
  e.returned = true;
  ++job.returnedCount;
  job.current = chosen;
  job.currentSince = now;
  if (e.nibble.empty()) return ReadyExpert{e.expert, e.tensors, e.exponents, e.signMantissa, {}};
  // Some kinds as nibble codes (a C hit read in place: all; an indexed miss: those indexed), the
  // others as planes.
  const size_t kinds = e.tensors.size();
  ReadyExpert ready{e.expert, e.tensors, std::vector<const uint8_t*>(kinds, nullptr),
                    std::vector<const uint8_t*>(kinds, nullptr), e.nibble};
  ready.nibble.resize(kinds);
  for (size_t k = 0; k < kinds; ++k) {
    if (!ready.nibble[k].empty()) {
      ready.signMantissa[k] = e.nibbleSignMantissa[k];
    } else {
      if (k < e.exponents.size()) ready.exponents[k] = e.exponents[k];
      if (k < e.signMantissa.size()) ready.signMantissa[k] = e.signMantissa[k];
    }
  }
  return ready;
}

void LayerBatch::releaseCurrent() {
  LayerJob& job = *job_;
  if (job.current < 0) return;
  JobExpert& e = job.experts[static_cast<size_t>(job.current)];
  const auto now = Clock::now();
  e.computeSeconds = seconds(now - job.currentSince);
  if (ex_.trace_ && job.traced) {
    TraceEvent ev;
    ev.startNs = ex_.ns(job.currentSince);
    ev.endNs = ex_.ns(now);
    ev.token = job.token;
    ev.layer = static_cast<int16_t>(job.layer);
    ev.expert = static_cast<int16_t>(e.expert);
    ev.op = TraceOp::ExpertCompute;
    ev.lane = static_cast<uint8_t>(ex_.workers_ + 2);
    ex_.trace_->record(ev);
  }
  if (e.outputSlot >= 0) {
    ex_.outputFree_[static_cast<size_t>(e.outputSlot)] = 1;
    e.outputSlot = -1;
    ex_.work_.notify_all();
  }
  if (e.stagingSlot >= 0) {  // split tensors: their planes were read from the staging slot
    ex_.stagingFree_[static_cast<size_t>(e.stagingSlot)] = 1;
    e.stagingSlot = -1;
    if (ex_.job_ == job_) ex_.admit();
    ex_.work_.notify_all();
  }
  job.current = -1;
}

}  // namespace zipmoe::sched
