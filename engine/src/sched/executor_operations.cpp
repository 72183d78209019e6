// Executor (see executor.h): one job operation run and recorded — a read, a decompression (or the
// indexing of a tensor's codes), a recovery — into staging, output or kept buffers, traced; and,
// under the lock, a task finished and its expert made ready.
#include <cstring>
#include <mutex>
#include <string>

#include "sched/executor.h"
#include "sched/tensor_codes.h"
#include "zipmoe/base/error.h"

namespace zipmoe::sched {

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
  return pages_ ? pages_->allocate(static_cast<size_t>(bytes))
                : memory_.allocate(static_cast<size_t>(bytes), backend::Placement::Host);
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
        bytes = store_->readTensorChunks(t.key.layer, t.key.expert, t.kind, {t.eBuf, static_cast<size_t>(t.eBytes)}, {}, mode_,
                                         Store::Verify::Later);
      } else {
        const ChunkRef& c = t.entry->eChunks[static_cast<size_t>(op.shard)];
        ChunkKey key = t.key;
        key.shard = op.shard;
        store_->readChunk(key, {t.eBuf + t.eOffsets[static_cast<size_t>(op.shard)], static_cast<size_t>(c.paddedSize)}, mode_,
                          Store::Verify::Later);
        bytes = mode_ == ReadMode::Direct ? c.paddedSize : c.size;
      }
      const auto b = Clock::now();
      const auto [lane, end] = endRead(*job, bytes, a, b);
      t.readESeconds += seconds(end - lane);
      traceOp(TraceOp::ReadE, 0, *job, t, op.shard, bytes, lane, end);
      break;
    }
    case ExecKind::ReadSM: {
      if (t.keepSM) t.smBuf = keptData(*t.keepSM, t.entry->smChunk.paddedSize);
      ChunkKey key = t.key;
      key.shard = kSmShard;
      store_->readChunk(key, {t.smBuf, static_cast<size_t>(t.entry->smChunk.paddedSize)}, mode_, Store::Verify::Later);
      const auto b = Clock::now();
      const uint64_t bytes = mode_ == ReadMode::Direct ? t.entry->smChunk.paddedSize : t.entry->smChunk.size;
      const auto [lane, end] = endRead(*job, bytes, a, b);
      t.readSMSeconds = seconds(end - lane);
      traceOp(TraceOp::ReadSM, 0, *job, t, -1, bytes, lane, end);
      break;
    }
    case ExecKind::ReadTensor: {
      // Kept parts go straight into their buffers (one preadv), the rest into the staging slot.
      const uint64_t smBytes = t.entry->smChunk.paddedSize, total = t.eBytes + smBytes;
      if (t.keepE) t.eBuf = keptData(*t.keepE, t.eBytes);
      if (t.keepSM) t.smBuf = keptData(*t.keepSM, smBytes);
      const uint64_t bytes = store_->readTensorChunks(t.key.layer, t.key.expert, t.kind, {t.eBuf, static_cast<size_t>(t.eBytes)},
                                                      {t.smBuf, static_cast<size_t>(smBytes)}, mode_, Store::Verify::Later);
      const auto b = Clock::now();
      const auto [lane, end] = endRead(*job, bytes, a, b);
      // Attribute the time to E and SM by their share of the bytes (for the lower bound).
      const double share = static_cast<double>(t.eBytes) / static_cast<double>(total);
      t.readESeconds += seconds(end - lane) * share;
      t.readSMSeconds = seconds(end - lane) * (1 - share);
      traceOp(TraceOp::ReadTensor, 0, *job, t, -1, bytes, lane, end);
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
      const auto [lane, end] = endRead(*job, t.fullRange.length, a, b);
      t.readSMSeconds = seconds(end - lane);
      traceOp(TraceOp::ReadFull, 0, *job, t, -1, t.fullRange.length, lane, end);
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
      memory_.recover(t.plane, t.smBuf, static_cast<size_t>(t.entry->numel), out);
      t.result = out;
      const auto b = Clock::now();
      t.recoverSeconds = seconds(b - a);
      traceOp(TraceOp::Recover, workers_ + 1, *job, t, -1, t.entry->numel * 2, a, b);
      break;
    }
  }
}

}  // namespace zipmoe::sched
