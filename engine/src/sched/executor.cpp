// Executor and LayerBatch (see executor.h).
#include "sched/executor.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sched/tensor_codes.h"
#include "zipmoe/bf16_split.h"
#include "zipmoe/error.h"

namespace zipmoe::sched {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

class LayerBatch : public ExpertBatch {
 public:
  LayerBatch(Executor& ex, std::shared_ptr<LayerJob> job, std::function<void(LayerJob&)> onEnd)
      : ex_(ex), job_(std::move(job)), onEnd_(std::move(onEnd)) {}

  ~LayerBatch() override {
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

  std::optional<ReadyExpert> next() override {
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

 private:
  // Under the mutex: the model has finished the expert it was computing.
  void releaseCurrent() {
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

  Executor& ex_;
  std::shared_ptr<LayerJob> job_;
  std::function<void(LayerJob&)> onEnd_;
};

Executor::Executor(const Store* store, int workers, ReadMode mode, TraceBuffer* trace, Clock::time_point epoch,
                   const SlotLayout& staging, const SlotLayout& output)
    : store_(store), workers_(workers), mode_(mode), trace_(trace), epoch_(epoch), staging_(staging), output_(output) {
  for (int i = 0; i < staging_.count; ++i) stagingSlots_.emplace_back(static_cast<size_t>(staging_.slotBytes));
  for (int i = 0; i < output_.count; ++i) outputSlots_.emplace_back(static_cast<size_t>(output_.slotBytes));
  stagingFree_.assign(static_cast<size_t>(staging_.count), 1);
  outputFree_.assign(static_cast<size_t>(output_.count), 1);
  threads_.emplace_back([this] { loop(Role::Io, 0); });
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this, i] { loop(Role::Worker, i); });
  if (workers_ > 0) threads_.emplace_back([this] { loop(Role::Recovery, 0); });
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
  const std::string name = role == Role::Io ? "zipmoe-io" : role == Role::Worker ? "zipmoe-dec" + std::to_string(index) : "zipmoe-recover";
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
    --job->running;
    if (!failure.empty()) {
      if (job->error.empty()) job->error = failure;
    } else {
      op->state = 2;
      JobTask& t = job->tasks[static_cast<size_t>(op->task)];
      switch (op->kind) {
        case ExecKind::ReadE:
          if (op->shard == kAllShards) std::fill(t.eRead.begin(), t.eRead.end(), uint8_t{1});
          else t.eRead[static_cast<size_t>(op->shard)] = 1;
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
}

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
    if (read.dst->size() < read.bytes) *read.dst = io::AlignedBuffer(static_cast<size_t>(read.bytes));
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

// Shard s of t's E-chunks decoded into its plane.
void Executor::decompressShard(JobTask& t, size_t s) const {
  const ChunkRef& c = t.entry->eChunks[s];
  uint64_t planeOffset = 0;
  for (size_t i = 0; i < s; ++i) planeOffset += t.entry->eChunks[i].count;
  try {
    store_->codec().decompress(t.eBuf + t.eOffsets[s], static_cast<size_t>(c.size), t.plane + planeOffset,
                               static_cast<size_t>(c.count));
  } catch (const Error& err) {
    throw Error("E-chunk " + std::to_string(s) + " of '" + t.entry->name + "' in " +
                (store_->dir() / "experts.bin").string() + ": " + err.what());
  }
}

void Executor::finishIfSplit(JobTask& t) {
  if (t.split && !t.recovered && t.decompressLeft == 0 && (t.smResident || t.smRead)) finishTask(t);
}

void Executor::finishTask(JobTask& t) {
  LayerJob& job = *job_;
  JobExpert& e = job.experts[static_cast<size_t>(t.expertIndex)];
  t.recovered = true;
  bool holdsStaging = false;
  if (t.split) {
    const auto kind = static_cast<size_t>(t.kind);
    if (e.exponents.size() < e.tensors.size()) {
      e.exponents.resize(e.tensors.size(), nullptr);
      e.signMantissa.resize(e.tensors.size(), nullptr);
    }
    e.exponents[kind] = t.indexed ? nullptr : t.plane;
    e.signMantissa[kind] = t.smBuf;
    e.tensors[kind] = nullptr;
    if (t.indexed) {
      if (e.nibble.size() < e.tensors.size()) {
        e.nibble.resize(e.tensors.size());
        e.nibbleSignMantissa.resize(e.tensors.size(), nullptr);
      }
      e.nibble[kind] = t.nibble;
      e.nibbleSignMantissa[kind] = t.smBuf;
    }
  } else {
    e.tensors[static_cast<size_t>(t.kind)] = t.result;
  }
  if (--e.tasksLeft == 0) {
    e.ready = true;
    // Planes handed to the model stay in the staging slot until it has computed the expert; codes
    // (indexed) are in kept buffers. (Read once every task is done: a worker sets `indexed` unlocked.)
    for (const JobTask& other : job.tasks)
      if (other.expertIndex == t.expertIndex && other.split && !other.indexed) holdsStaging = true;
    if (e.stagingSlot >= 0 && !holdsStaging) {
      stagingFree_[static_cast<size_t>(e.stagingSlot)] = 1;
      e.stagingSlot = -1;
      admit();
    }
  }
}

void Executor::traceOp(TraceOp op, int lane, const LayerJob& job, const JobTask& t, int shard, uint64_t bytes,
                       Clock::time_point a, Clock::time_point b) {
  if (!trace_ || !job.traced) return;
  TraceEvent ev;
  ev.startNs = ns(a);
  ev.endNs = ns(b);
  ev.bytes = bytes;
  ev.token = job.token;
  ev.layer = static_cast<int16_t>(t.key.layer);
  ev.expert = static_cast<int16_t>(t.key.expert);
  ev.tensor = static_cast<int8_t>(t.kind);
  ev.shard = static_cast<int8_t>(shard);
  ev.op = op;
  ev.lane = static_cast<uint8_t>(lane);
  trace_->record(ev);
}

// Runs one operation without the lock. The job's other threads never touch the buffers it writes
// until it is marked done under the lock.
io::AlignedBuffer Executor::keptBuffer(uint64_t bytes) const {
  return pages_ ? pages_->allocate(static_cast<size_t>(bytes)) : io::AlignedBuffer(static_cast<size_t>(bytes));
}

uint8_t* Executor::keptData(io::AlignedBuffer& keep, uint64_t bytes) const {
  if (keep.size() < bytes) keep = keptBuffer(bytes);
  return keep.data();
}

void Executor::execute(LayerJob& jobRef, int index, ExecOp& op) {
  LayerJob* job = &jobRef;
  JobTask& t = job->tasks[static_cast<size_t>(op.task)];
  JobExpert& e = job->experts[static_cast<size_t>(t.expertIndex)];
  const auto a = Clock::now();
  switch (op.kind) {
    case ExecKind::ReadE: {
      // First shard only (a recycled buffer's eBuf is set at admission): the workers read eBuf
      // after it, while later shards are still being read.
      if (t.keepE && t.keepE->size() < t.eBytes) t.eBuf = keptData(*t.keepE, t.eBytes);
      uint64_t bytes = 0;
      if (op.shard == kAllShards) {
        bytes = store_->readTensorChunks(t.key.layer, t.key.expert, t.kind, {t.eBuf, static_cast<size_t>(t.eBytes)}, {}, mode_);
      } else {
        const ChunkRef& c = t.entry->eChunks[static_cast<size_t>(op.shard)];
        ChunkKey key = t.key;
        key.shard = op.shard;
        store_->readChunk(key, {t.eBuf + t.eOffsets[static_cast<size_t>(op.shard)], static_cast<size_t>(c.paddedSize)}, mode_);
        bytes = mode_ == ReadMode::Direct ? c.paddedSize : c.size;
      }
      const auto b = Clock::now();
      t.readESeconds += seconds(b - a);
      traceOp(TraceOp::ReadE, 0, *job, t, op.shard, bytes, a, b);
      std::lock_guard lock(mutex_);
      job->bytesRead += bytes;
      break;
    }
    case ExecKind::ReadSM: {
      if (t.keepSM) t.smBuf = keptData(*t.keepSM, t.entry->smChunk.paddedSize);
      ChunkKey key = t.key;
      key.shard = kSmShard;
      store_->readChunk(key, {t.smBuf, static_cast<size_t>(t.entry->smChunk.paddedSize)}, mode_);
      const auto b = Clock::now();
      const uint64_t bytes = mode_ == ReadMode::Direct ? t.entry->smChunk.paddedSize : t.entry->smChunk.size;
      t.readSMSeconds = seconds(b - a);
      traceOp(TraceOp::ReadSM, 0, *job, t, -1, bytes, a, b);
      std::lock_guard lock(mutex_);
      job->bytesRead += bytes;
      break;
    }
    case ExecKind::ReadTensor: {
      // Kept parts go straight into their buffers (one preadv), the rest into the staging slot.
      const uint64_t smBytes = t.entry->smChunk.paddedSize, total = t.eBytes + smBytes;
      if (t.keepE) t.eBuf = keptData(*t.keepE, t.eBytes);
      if (t.keepSM) t.smBuf = keptData(*t.keepSM, smBytes);
      const uint64_t bytes = store_->readTensorChunks(t.key.layer, t.key.expert, t.kind, {t.eBuf, static_cast<size_t>(t.eBytes)},
                                                      {t.smBuf, static_cast<size_t>(smBytes)}, mode_);
      const auto b = Clock::now();
      // Attribute the time to E and SM by their share of the bytes (for the lower bound).
      const double share = static_cast<double>(t.eBytes) / static_cast<double>(total);
      t.readESeconds += seconds(b - a) * share;
      t.readSMSeconds = seconds(b - a) * (1 - share);
      traceOp(TraceOp::ReadTensor, 0, *job, t, -1, bytes, a, b);
      std::lock_guard lock(mutex_);
      job->bytesRead += bytes;
      break;
    }
    case ExecKind::ReadFull: {
      uint8_t* dst = nullptr;
      if (t.keepFull) {
        if (t.keepFull->size() < t.fullRange.length) *t.keepFull = keptBuffer(t.fullRange.length);
        dst = t.keepFull->data();
      } else {
        int slot;
        {
          std::lock_guard lock(mutex_);
          slot = e.outputSlot;
        }
        dst = outputSlots_[static_cast<size_t>(slot)].data() + output_.outOffset[static_cast<size_t>(t.kind)];
      }
      try {
        t.fullRange.file->readUpTo(dst, static_cast<size_t>(t.fullRange.length), t.fullRange.offset);
      } catch (const Error& err) {
        throw Error(std::string(err.what()) + " (expert tensor '" + t.entry->name + "')");
      }
      if (t.dataOffset % 2 != 0) std::memmove(dst, dst + t.dataOffset, static_cast<size_t>(t.tensorBytes));
      t.result = reinterpret_cast<const uint16_t*>(dst + fullReadTensorOffset(t.dataOffset));
      const auto b = Clock::now();
      t.readSMSeconds = seconds(b - a);
      traceOp(TraceOp::ReadFull, 0, *job, t, -1, t.fullRange.length, a, b);
      std::lock_guard lock(mutex_);
      job->bytesRead += t.fullRange.length;
      break;
    }
    case ExecKind::Decompress: {
      const auto s = static_cast<size_t>(op.shard);
      uint64_t symbols = t.entry->eChunks[s].count;
      if (t.indexCodes) {
        // Shard 0 indexes the whole tensor (its E-chunks came in one read); the other shards' ops
        // have nothing to do.
        if (s != 0) break;
        auto shards = indexTensorCodes(*t.entry, t.eBuf, static_cast<size_t>(t.eBytes),
                                       "'" + t.entry->name + "' in " + (store_->dir() / "experts.bin").string());
        if (shards) {
          t.nibble = std::move(*shards);
          t.indexed = true;
        } else {
          for (size_t i = 0; i < t.entry->eChunks.size(); ++i) decompressShard(t, i);
        }
        symbols = t.entry->numel;
      } else {
        decompressShard(t, s);
      }
      const auto b = Clock::now();
      {
        std::lock_guard lock(mutex_);
        t.decompressSeconds += seconds(b - a);
      }
      traceOp(TraceOp::Decompress, 1 + index, *job, t, op.shard, symbols, a, b);
      break;
    }
    case ExecKind::Recover: {
      uint16_t* out = nullptr;
      if (t.keepFull) {
        const uint64_t bytes = t.entry->numel * 2;
        if (t.keepFull->size() < bytes) *t.keepFull = keptBuffer(bytes);
        out = reinterpret_cast<uint16_t*>(t.keepFull->data());
      } else {
        int slot;
        {
          std::lock_guard lock(mutex_);
          slot = e.outputSlot;
        }
        out = reinterpret_cast<uint16_t*>(outputSlots_[static_cast<size_t>(slot)].data() +
                                          output_.outOffset[static_cast<size_t>(t.kind)]);
      }
      bf16::merge(t.plane, t.smBuf, static_cast<size_t>(t.entry->numel), out);
      t.result = out;
      const auto b = Clock::now();
      t.recoverSeconds = seconds(b - a);
      traceOp(TraceOp::Recover, workers_ + 1, *job, t, -1, t.entry->numel * 2, a, b);
      break;
    }
  }
}

}  // namespace zipmoe::sched
