// Executor — runs one sparse layer's operations on real threads: kIoThreads I/O threads (pread,
// O_DIRECT by default), L decompression workers and one recovery stream, each taking the first ready
// operation of its list in the schedule's priority order (work-conserving). The model thread takes
// experts from a LayerBatch as soon as each one's tensors are ready.
//
// The I/O lane is one lane with two reads in flight: while one thread waits for its read, the other
// has the next one queued at the device, so the disk does not idle while a thread that has just
// finished a read waits for a core (on a 2-vCPU machine whose cores the model and the decompression
// workers keep busy, that wait was about 0.7 ms after each 3–4 ms read: a sixth of a cold prompt's
// disk time). Each read is timed, traced and priced from where the lane's previous read ended, so
// the lane's events never overlap and its read costs stay what the planner's model means by them.
// The thread that read a chunk does not check its CRC-32C: the verify thread does, before the read
// counts as done (Store::Verify::Later).
//
// Memory is bounded: an expert whose chunks must be staged is admitted (in priority order) only when
// one of the fixed staging slots is free, and holds it until its tensors are recovered (or, when
// they are handed to the model split — JobTask::split, recovery fused into the model's compute —
// until the model has computed it); a recovered
// expert that the cache does not keep occupies one of the fixed output slots until the model moves
// on to the next expert. Parts that the cache will keep are written into buffers the job owns (they
// are allocated by the thread that first writes them) and handed to the cache when the batch ends.
// Errors (an unreadable or corrupted chunk) stop the job: next() throws a zipmoe::Error naming the
// chunk, the threads go on to later jobs, and nothing is committed to the cache.
// Thread-safety: one job at a time, submitted and consumed by the model thread. Cost: a mutex
// round trip per operation (operations take 0.1–20 ms).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/compute_backend.h"
#include "io/file_io.h"
#include "io/page_pool.h"
#include "sched/schedule.h"
#include "zipmoe/experts/expert_provider.h"
#include "zipmoe/format/nibble_shard.h"
#include "zipmoe/format/store.h"
#include "zipmoe/trace/trace_events.h"

namespace zipmoe::sched {

using Clock = std::chrono::steady_clock;

// A duration in seconds: the measured times of operations, waits and layers.
inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// ReadE with shard kAllShards reads all K E-chunks of the task in one request; ReadTensor reads the
// E-chunks and the SM-chunk in one (they are contiguous in the store): into the staging slot's one
// range (smBuf = eBuf + eBytes), or, for parts a pool keeps, into their kept buffers (preadv).
enum class ExecKind : uint8_t { ReadE, ReadSM, ReadTensor, ReadFull, Decompress, Recover };
inline constexpr int kAllShards = -2;

// Where one task's data lives. Null pointers are filled at admission from the staging slot, or by
// allocating the matching `keep` buffer.
struct JobTask {
  int expertIndex = 0;  // into LayerJob::experts
  int kind = 0;
  TaskState state = TaskState::Miss;
  bool fullRead = false;  // baseline: one ReadFull, no decompression or recovery
  bool split = false;     // handed to the model as its planes (plane + smBuf), no recovery: done when
                          // decompressed and its SM-chunk is in; the expert keeps its staging slot
                          // until the model has computed it
  bool wholeRead = false; // one ReadTensor (E-chunks + SM-chunk): a miss
  // A split miss that C keeps, from a `nibble` store (ZipMoeStrategy): its E-chunks, read whole into
  // the kept buffer, are indexed for reading in place (sched/tensor_codes.h) instead of decoded, by
  // shard 0's Decompress op (the others do nothing). When they cannot be, that op decodes every shard
  // into the plane as usual. Indexed, the tensor goes to the model as its codes and the expert leaves
  // its staging slot as soon as it is ready (it has no plane there).
  bool indexCodes = false;
  bool indexed = false;             // set by that op: `nibble` holds the tensor's shards
  std::vector<NibbleShard> nibble;  // in the kept E buffer
  ChunkKey key;           // layer, expert, kind (shard unused)
  const ExpertTensorEntry* entry = nullptr;
  std::vector<uint64_t> eOffsets;  // start of shard s in the E buffer (padded sizes)
  uint64_t eBytes = 0;             // Σ padded E-chunk sizes
  // Resident inputs (from the cache) or null.
  const uint8_t* eResident = nullptr;
  const uint8_t* smResident = nullptr;
  // Kept outputs: when set, reads / recovery write into these buffers (allocated on first use).
  io::AlignedBuffer* keepE = nullptr;
  io::AlignedBuffer* keepSM = nullptr;
  io::AlignedBuffer* keepFull = nullptr;
  // Full-tensor read (baseline): a range of a checkpoint file covering the tensor (aligned for
  // O_DIRECT), and where the tensor starts inside it.
  io::FileRange fullRange;
  uint64_t dataOffset = 0;
  uint64_t tensorBytes = 0;
  // Filled at run time.
  uint8_t* eBuf = nullptr;
  uint8_t* smBuf = nullptr;
  uint8_t* plane = nullptr;
  const uint16_t* result = nullptr;
  // Progress (guarded by the executor mutex).
  bool ioRunning = false;  // one read of the task at a time (a shard's read may allocate eBuf)
  std::vector<uint8_t> eRead, decompressed;
  bool smRead = false, recovered = false;
  int decompressLeft = 0;
  // Measured durations (seconds) for the lower bound.
  double readESeconds = 0, readSMSeconds = 0, decompressSeconds = 0, recoverSeconds = 0;
};

// Where a ReadFull leaves the tensor in its buffer: at its offset in the aligned read, or moved to
// the start when that offset is odd (BF16 words must be 2-byte aligned).
inline uint64_t fullReadTensorOffset(uint64_t dataOffset) { return dataOffset % 2 != 0 ? 0 : dataOffset; }

struct JobExpert {
  int expert = 0;
  int tokens = 0;
  bool needsStaging = false;
  bool needsOutputSlot = false;  // some tensor is recovered / read into an output slot
  int stagingSlot = -1, outputSlot = -1;
  int tasksLeft = 0;
  bool ready = false, returned = false;
  std::vector<const uint16_t*> tensors;  // BF16 per kind once ready (null for a split task's kind)
  std::vector<const uint8_t*> exponents, signMantissa;  // per kind, a split task's planes once ready
  // A C hit read in place (no tasks: ready at once): per kind its nibble shards (in the cache's
  // entry, valid while it is pinned) and its SM plane.
  std::vector<std::span<const NibbleShard>> nibble;
  std::vector<const uint8_t*> nibbleSignMantissa;
  double computeSeconds = 0;
};

// Fixed buffers reused by every job: `count` slots of `slotBytes`, each split per tensor kind.
struct SlotLayout {
  int count = 0;
  uint64_t slotBytes = 0;
  std::vector<uint64_t> eOffset, smOffset, planeOffset;  // staging: per kind
  std::vector<uint64_t> outOffset;                       // output: per kind
};

// A speculative read (prefetch): one expert tensor's K E-chunks, its SM-chunk, or both in one
// request, into buffers the runtime owns, for a layer that has not been acquired yet. An I/O thread
// runs one only when no operation of the current job is ready, so a demand read waits at most for
// the prefetch reads in flight (one per I/O thread). Prefetch reads are checked on the I/O thread.
// A failed prefetch read is only counted: the layer reads what it needs itself.
struct PrefetchRead {
  uint64_t id = 0;                   // set by addPrefetch
  int slot = 0;                      // the runtime's prefetch slot
  int layer = 0, expert = 0, kind = 0;
  int token = 0;                     // the forward step it was asked in (trace events)
  // The tensor's E-chunks into `e`, its SM-chunk into `sm` (null: not read); both in one preadv, as
  // a demand miss reads them. Each is grown by the I/O thread (from the page pool, when there is one)
  // to its padded bytes when smaller.
  io::AlignedBuffer* e = nullptr;
  io::AlignedBuffer* sm = nullptr;
  uint64_t eBytes = 0, smBytes = 0;
  uint64_t bytes() const { return (e ? eBytes : 0) + (sm ? smBytes : 0); }
  uint8_t state = 0;                 // 0 pending, 1 running, 2 done, 3 failed (executor mutex)
};

// What the I/O thread did for prefetching (totals since the executor started).
struct PrefetchCounters {
  uint64_t bytesRead = 0;
  uint64_t reads = 0, failures = 0;
  double secondsOutsideJobs = 0;  // reading while no layer job was running (the dense windows)
};

struct ExecOp {
  ExecKind kind = ExecKind::ReadE;
  int task = 0;
  int shard = -1;
  uint8_t state = 0;  // 0 pending, 1 running, 2 done
};

class LayerJob {
 public:
  int layer = 0;
  int token = 0;
  // Whether its operations go to the trace: a warm start's batches (ExpertRuntime::warmUp) are no
  // step of the model's, and neither its reads nor its waits are drawn as one.
  bool traced = true;
  std::vector<JobTask> tasks;
  std::vector<JobExpert> experts;
  std::vector<int> admissionOrder;  // expert indices
  std::vector<int> computeOrder;    // expert indices: the order the model prefers among ready ones
  std::vector<ExecOp> io, decompress, recover;
  Clock::time_point start;
  // Results (valid after the batch ends).
  std::string error;
  double stallSeconds = 0;
  uint64_t bytesRead = 0;
  Clock::time_point lastRelease;

 private:
  friend class Executor;
  friend class LayerBatch;
  size_t nextAdmission = 0;
  int running = 0;
  bool cancelled = false;
  int returnedCount = 0;
  int current = -1;  // expert index the model is computing
  Clock::time_point currentSince;
};

class Executor {
 public:
  Executor(const Store* store, int workers, ReadMode mode, TraceBuffer* trace, Clock::time_point epoch,
           const SlotLayout& staging, const SlotLayout& output);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Starts the job; the returned batch hands its experts to the model. `onEnd` runs on the model
  // thread in the batch's destructor, after every operation has stopped.
  std::unique_ptr<ExpertBatch> run(std::shared_ptr<LayerJob> job, std::function<void(LayerJob&)> onEnd);
  int workers() const { return workers_; }

  // Prefetching. Appends reads (in priority order) to the queue. REQUIRES: no pending or running read
  // writes any of their buffers, and the caller leaves those buffers alone until it settles the slot.
  void addPrefetch(std::vector<PrefetchRead> reads);
  // Drops the slot's pending reads, waits until none of its reads is running (at most one read),
  // removes its reads from the queue and returns those that completed.
  std::vector<PrefetchRead> settlePrefetch(int slot);
  PrefetchCounters prefetchCounters() const;
  // Blocks until no prefetch read is pending or running.
  void waitForPrefetch();
  uint64_t stagingBytes() const { return static_cast<uint64_t>(staging_.count) * staging_.slotBytes; }
  uint64_t outputBytes() const { return static_cast<uint64_t>(output_.count) * output_.slotBytes; }
  // Buffers the cache keeps (JobTask::keepE/keepSM/keepFull) come from this pool's recycled pages
  // (io/page_pool.h) instead of fresh memory. REQUIRES: no job or prefetch running.
  void setPagePool(std::shared_ptr<io::PagePool> pages) { pages_ = std::move(pages); }

 private:
  friend class LayerBatch;
  static constexpr int kIoThreads = 2;
  enum class Role { Io, Worker, Recovery };
  void loop(Role role, int index);
  // The verify thread: checks the CRC-32C of what the I/O thread read (Store::Verify::Later), then
  // completes the read (complete()), so nothing reads unchecked bytes and the disk never waits on a
  // check. A mismatch fails the job as a failed read does.
  void verifyLoop();
  // A read op whose chunks the verify thread checks (every read of the store; raw checkpoint reads
  // carry no checksums).
  static bool verifiedLater(const ExecOp& op) { return op.kind != ExecKind::ReadFull; }
  void verify(const LayerJob& job, const ExecOp& op) const;
  // An op ends (failure empty: it succeeded): its task's state moves on. REQUIRES: mutex_ held.
  void complete(LayerJob& job, ExecOp& op, const std::string& failure);
  // A read of `bytes` that ran from `a` to `b` on one of the I/O threads: counted in the job's
  // bytes; returns its interval on the I/O lane: from where the lane's previous read ended (or `a`,
  // if later) to `b` (or that end, if later: a read that finished while the other thread's later
  // one was being entered). Takes mutex_.
  struct LaneSpan {
    Clock::time_point start, end;
  };
  LaneSpan endRead(LayerJob& job, uint64_t bytes, Clock::time_point a, Clock::time_point b);
  LaneSpan laneSpan(Clock::time_point a, Clock::time_point b);  // REQUIRES: mutex_ held
  // Under the mutex: the first ready op of the role's list, marked running; nullptr if none.
  ExecOp* pick(Role role);
  PrefetchRead* pickPrefetch();
  void executePrefetch(PrefetchRead read, bool outsideJob);
  bool ready(const ExecOp& op);
  void admit();
  void execute(LayerJob& job, int index, ExecOp& op);
  io::AlignedBuffer keptBuffer(uint64_t bytes) const;
  // `keep` grown to hold `bytes` (a fresh kept buffer when it is smaller); its data.
  uint8_t* keptData(io::AlignedBuffer& keep, uint64_t bytes) const;
  void finishTask(JobTask& task);
  void decompressShard(JobTask& task, size_t shard) const;  // into its plane
  void finishIfSplit(JobTask& task);  // a split task is done once decompressed with its SM-chunk in
  void traceOp(TraceOp op, int lane, const LayerJob& job, const JobTask& t, int shard, uint64_t bytes, Clock::time_point a,
               Clock::time_point b);
  int64_t ns(Clock::time_point t) const;

  const Store* store_;
  // The device's memory (backend/host_memory.h, defaultMemory() when constructed): every staging,
  // output, kept and prefetch buffer not from the page pool, and the Recover operation.
  const backend::DeviceMemory& memory_;
  int workers_;
  ReadMode mode_;
  TraceBuffer* trace_;
  Clock::time_point epoch_;
  SlotLayout staging_, output_;
  std::shared_ptr<io::PagePool> pages_;
  std::vector<io::AlignedBuffer> stagingSlots_, outputSlots_;
  std::vector<char> stagingFree_, outputFree_;

  mutable std::mutex mutex_;
  std::condition_variable work_;   // threads: a job or an op became ready
  std::condition_variable model_;  // model thread: an expert became ready, or the job stopped
  std::shared_ptr<LayerJob> job_;
  std::deque<PrefetchRead> prefetch_;  // pending, running and completed-but-unsettled reads
  uint64_t nextPrefetchId_ = 1;
  PrefetchCounters prefetchCounters_;
  bool stopping_ = false;
  Clock::time_point ioLaneEnd_{};  // where the I/O lane's last read ended (laneSpan)
  struct Unverified {
    std::shared_ptr<LayerJob> job;  // alive until its read is checked
    ExecOp* op = nullptr;
  };
  std::deque<Unverified> unverified_;  // reads done, their checks not yet (verifyLoop)
  std::vector<std::thread> threads_;
};

}  // namespace zipmoe::sched
