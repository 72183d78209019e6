// Executor (see executor.h): its threads and what they take. A job's start, the admission of its
// experts into staging slots, and each thread's loop: pick the first ready operation of its list
// (the I/O thread: else a prefetch read), run it unlocked, and record what it completed. The
// operations themselves: executor_operations.cpp; prefetch reads: executor_prefetch.cpp; the
// model's side of a job: layer_batch.h.
#include "sched/executor.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>

#include "backend/host_memory.h"
#include "sched/layer_batch.h"
#include "zipmoe/base/error.h"

namespace zipmoe::sched {

Executor::Executor(const Store* store, int workers, ReadMode mode, TraceBuffer* trace, Clock::time_point epoch,
                   const SlotLayout& staging, const SlotLayout& output)
    : store_(store), memory_(backend::defaultMemory()), workers_(workers), mode_(mode), trace_(trace), epoch_(epoch),
      staging_(staging), output_(output) {
  // Staging slots take O_DIRECT reads of planes; output slots take recovered words, which the model
  // computes from (host memory on every backend today: the model's products read them in place).
  for (int i = 0; i < staging_.count; ++i)
    stagingSlots_.push_back(memory_.allocate(static_cast<size_t>(staging_.slotBytes), backend::Placement::Host));
  for (int i = 0; i < output_.count; ++i)
    outputSlots_.push_back(memory_.allocate(static_cast<size_t>(output_.slotBytes), backend::Placement::Host));
  stagingFree_.assign(static_cast<size_t>(staging_.count), 1);
  outputFree_.assign(static_cast<size_t>(output_.count), 1);
  for (int i = 0; i < kIoThreads; ++i) threads_.emplace_back([this, i] { loop(Role::Io, i); });
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this, i] { loop(Role::Worker, i); });
  if (workers_ > 0) threads_.emplace_back([this] { loop(Role::Recovery, 0); });
  threads_.emplace_back([this] { verifyLoop(); });
}

Executor::~Executor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  for (auto& t : threads_) t.join();
}

int64_t Executor::ns(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch_).count();
}

std::unique_ptr<ExpertBatch> Executor::run(std::shared_ptr<LayerJob> job, std::function<void(LayerJob&)> onEnd) {
  {
    std::lock_guard lock(mutex_);
    if (job_) throw Error("expert runtime: a layer was acquired while the previous layer's batch is still alive");
    for (auto& e : job->experts) {
      e.tasksLeft = 0;
      e.ready = false;
      e.returned = false;
      e.stagingSlot = e.outputSlot = -1;
      e.exponents.clear();
      e.signMantissa.clear();
    }
    for (auto& t : job->tasks) {
      if (output_.count == 0 && !t.split && !t.keepFull)  // it would wait for a slot forever
        throw Error("expert runtime: layer " + std::to_string(t.key.layer) + " expert " + std::to_string(t.key.expert) +
                    " tensor " + std::to_string(t.kind) + " needs an output slot, and the runtime has none");
      ++job->experts[static_cast<size_t>(t.expertIndex)].tasksLeft;
      const size_t k = t.entry ? t.entry->eChunks.size() : 0;
      t.eRead.assign(k, 0);
      t.decompressed.assign(k, 0);
      t.decompressLeft = t.fullRead ? 0 : static_cast<int>(k);
      if (t.eResident) t.eBuf = const_cast<uint8_t*>(t.eResident);
      if (t.smResident) t.smBuf = const_cast<uint8_t*>(t.smResident);
      if (t.keepE && t.keepE->size() >= t.eBytes) t.eBuf = t.keepE->data();  // a recycled buffer
    }
    for (auto& e : job->experts) e.ready = e.tasksLeft == 0;  // all in the F pool
    job_ = job;
    admit();
  }
  work_.notify_all();
  return std::make_unique<LayerBatch>(*this, std::move(job), std::move(onEnd));
}

void Executor::admit() {
  LayerJob& job = *job_;
  while (job.nextAdmission < job.admissionOrder.size()) {
    JobExpert& e = job.experts[static_cast<size_t>(job.admissionOrder[job.nextAdmission])];
    if (e.needsStaging && e.tasksLeft > 0) {
      int slot = -1;
      for (size_t i = 0; i < stagingFree_.size(); ++i)
        if (stagingFree_[i]) {
          slot = static_cast<int>(i);
          break;
        }
      if (slot < 0) return;
      stagingFree_[static_cast<size_t>(slot)] = 0;
      e.stagingSlot = slot;
      uint8_t* base = stagingSlots_[static_cast<size_t>(slot)].data();
      const int idx = job.admissionOrder[job.nextAdmission];
      for (JobTask& t : job.tasks) {
        if (t.expertIndex != idx) continue;
        const auto kind = static_cast<size_t>(t.kind);
        if (!t.eResident && !t.keepE) t.eBuf = base + staging_.eOffset[kind];
        if (!t.smResident && !t.keepSM) t.smBuf = base + staging_.smOffset[kind];
        if (t.wholeRead && !t.keepE && !t.keepSM) t.smBuf = t.eBuf + t.eBytes;  // the file's layout: one range
        t.plane = base + staging_.planeOffset[kind];
      }
    }
    ++job.nextAdmission;
  }
}

bool Executor::ready(const ExecOp& op) {
  LayerJob& job = *job_;
  JobTask& t = job.tasks[static_cast<size_t>(op.task)];
  JobExpert& e = job.experts[static_cast<size_t>(t.expertIndex)];
  const bool admitted = !e.needsStaging || e.stagingSlot >= 0;
  auto outputAvailable = [&] {
    if (e.outputSlot >= 0) return true;
    for (size_t i = 0; i < outputFree_.size(); ++i)
      if (outputFree_[i]) return true;
    return false;
  };
  switch (op.kind) {
    case ExecKind::ReadE:
    case ExecKind::ReadSM:
    case ExecKind::ReadTensor: return admitted;
    case ExecKind::ReadFull: return t.keepFull || outputAvailable();
    case ExecKind::Decompress:
      return admitted && (t.eResident || t.eRead[static_cast<size_t>(op.shard)]);
    case ExecKind::Recover:
      return admitted && t.decompressLeft == 0 && (t.smResident || t.smRead) && (t.keepFull || outputAvailable());
  }
  return false;
}

ExecOp* Executor::pick(Role role) {
  if (!job_ || job_->cancelled || !job_->error.empty()) return nullptr;
  auto& list = role == Role::Io ? job_->io : role == Role::Worker ? job_->decompress : job_->recover;
  for (ExecOp& op : list) {
    if (op.state != 0 || !ready(op)) continue;
    JobTask& t = job_->tasks[static_cast<size_t>(op.task)];
    if (role == Role::Io && t.ioRunning) continue;
    if (role == Role::Io) t.ioRunning = true;
    JobExpert& e = job_->experts[static_cast<size_t>(t.expertIndex)];
    if ((op.kind == ExecKind::Recover || op.kind == ExecKind::ReadFull) && !t.keepFull && e.outputSlot < 0) {
      for (size_t i = 0; i < outputFree_.size(); ++i)
        if (outputFree_[i]) {
          outputFree_[i] = 0;
          e.outputSlot = static_cast<int>(i);
          break;
        }
    }
    op.state = 1;
    ++job_->running;
    return &op;
  }
  return nullptr;
}

void Executor::loop(Role role, int index) {
  const std::string name = role == Role::Io ? "zipmoe-io" + std::to_string(index) : role == Role::Worker ? "zipmoe-dec" + std::to_string(index) : "zipmoe-recover";
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  std::unique_lock lock(mutex_);
  for (;;) {
    ExecOp* op = nullptr;
    PrefetchRead* speculative = nullptr;
    work_.wait(lock, [&] {
      if (stopping_) return true;
      if ((op = pick(role)) != nullptr) return true;
      return role == Role::Io && (speculative = pickPrefetch()) != nullptr;
    });
    if (stopping_) return;
    if (!op) {  // a prefetch read: only when no demand read of the job is ready
      const PrefetchRead read = *speculative;
      const bool outsideJob = !job_;
      lock.unlock();
      executePrefetch(read, outsideJob);
      lock.lock();
      model_.notify_all();
      continue;
    }
    const std::shared_ptr<LayerJob> job = job_;  // keeps the job alive while unlocked
    lock.unlock();
    std::string failure;
    try {
      execute(*job, index, *op);
    } catch (const std::exception& err) {
      failure = err.what();
    }
    lock.lock();
    if (failure.empty() && role == Role::Io && verifiedLater(*op)) {
      unverified_.push_back(Unverified{job, op});  // completed by the verify thread
      work_.notify_all();
      continue;
    }
    complete(*job, *op, failure);
  }
}

void Executor::verifyLoop() {
  pthread_setname_np(pthread_self(), "zipmoe-verify");
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !unverified_.empty(); });
    if (unverified_.empty()) return;  // stopping, nothing left to check
    const Unverified item = unverified_.front();
    unverified_.pop_front();
    lock.unlock();
    std::string failure;
    try {
      verify(*item.job, *item.op);
    } catch (const std::exception& err) {
      failure = err.what();
    }
    lock.lock();
    complete(*item.job, *item.op, failure);
  }
}

void Executor::verify(const LayerJob& job, const ExecOp& op) const {
  const JobTask& t = job.tasks[static_cast<size_t>(op.task)];
  switch (op.kind) {
    case ExecKind::ReadE:
      if (op.shard == kAllShards) {
        store_->verifyTensorChunks(t.key.layer, t.key.expert, t.kind, t.eBuf, nullptr);
      } else {
        ChunkKey key = t.key;
        key.shard = op.shard;
        store_->verifyChunk(key, t.eBuf + t.eOffsets[static_cast<size_t>(op.shard)]);
      }
      break;
    case ExecKind::ReadSM: {
      ChunkKey key = t.key;
      key.shard = kSmShard;
      store_->verifyChunk(key, t.smBuf);
      break;
    }
    case ExecKind::ReadTensor: store_->verifyTensorChunks(t.key.layer, t.key.expert, t.kind, t.eBuf, t.smBuf); break;
    default: break;
  }
}

Executor::LaneSpan Executor::endRead(LayerJob& job, uint64_t bytes, Clock::time_point a, Clock::time_point b) {
  std::lock_guard lock(mutex_);
  job.bytesRead += bytes;
  return laneSpan(a, b);
}

Executor::LaneSpan Executor::laneSpan(Clock::time_point a, Clock::time_point b) {
  const LaneSpan span{std::max(a, ioLaneEnd_), std::max(b, ioLaneEnd_)};
  ioLaneEnd_ = span.end;
  return span;
}

void Executor::complete(LayerJob& job, ExecOp& op, const std::string& failure) {
  --job.running;
  if (op.kind != ExecKind::Decompress && op.kind != ExecKind::Recover)
    job.tasks[static_cast<size_t>(op.task)].ioRunning = false;
  if (!failure.empty()) {
    if (job.error.empty()) job.error = failure;
  } else {
    op.state = 2;
    JobTask& t = job.tasks[static_cast<size_t>(op.task)];
    switch (op.kind) {
      case ExecKind::ReadE:
        if (op.shard == kAllShards) std::fill(t.eRead.begin(), t.eRead.end(), uint8_t{1});
        else t.eRead[static_cast<size_t>(op.shard)] = 1;
        break;
      case ExecKind::ReadSM:
        t.smRead = true;
        finishIfSplit(t);
        break;
      case ExecKind::ReadTensor:
        std::fill(t.eRead.begin(), t.eRead.end(), uint8_t{1});
        t.smRead = true;
        finishIfSplit(t);
        break;
      case ExecKind::Decompress:
        --t.decompressLeft;
        finishIfSplit(t);
        break;
      case ExecKind::ReadFull:
      case ExecKind::Recover: finishTask(t); break;
    }
  }
  model_.notify_all();
  work_.notify_all();
}

}  // namespace zipmoe::sched
