// Trace events — what the expert runtime did, when, and on which lane.
//
// Every operation of the runtime (reading an SM- or E-chunk, decompressing, recovering a tensor,
// reading a whole BF16 tensor in the baselines, a speculative prefetch read, an expert's FFN, the dense part of a layer between
// two expert batches) is recorded as one TraceEvent into a TraceBuffer: a bounded, lock-free
// multi-producer ring that the app drains from its own thread. When the ring is full new events are
// dropped and counted (recording never blocks the runtime). writeChromeTrace turns drained events
// into Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev).
// Thread-safety: record() from any number of threads; drain() from one thread at a time.
// Cost: record() is a few atomic operations, no allocation.
#pragma once

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace zipmoe {

enum class TraceOp : uint8_t {
  ReadSM,         // one SM-chunk from the SSD
  ReadE,          // one E-chunk from the SSD
  Decompress,     // one E-chunk decompressed
  Recover,        // one tensor merged back into BF16
  ReadFull,       // one whole BF16 tensor from the SSD (full-tensor offloading baselines)
  ReadTensor,     // a tensor's E-chunks and SM-chunk in one request (coalesced reads)
  ExpertCompute,  // one expert's FFN over its tokens (model thread)
  Dense,          // attention, router and shared experts between two expert batches (model thread)
  Stall,          // the model thread waiting for an expert
  Prefetch,       // a speculative read of a later layer's expert tensor (E-chunks or SM-chunk)
};
const char* traceOpName(TraceOp op);

// Lanes: 0 = I/O thread, 1..L = decompression workers, L+1 = recovery stream, L+2 = compute.
struct TraceLanes {
  int workers = 1;
  int io() const { return 0; }
  int worker(int i) const { return 1 + i; }
  int recovery() const { return workers + 1; }
  int compute() const { return workers + 2; }
  int count() const { return workers + 3; }
  std::string name(int lane) const;  // "I/O", "decompress 1", "recovery", "compute"
};

struct TraceEvent {
  int64_t startNs = 0;  // steady-clock nanoseconds since the runtime started
  int64_t endNs = 0;
  uint64_t bytes = 0;   // bytes read, decompressed into, or recovered
  int32_t token = 0;    // forward step (0-based) of the runtime
  int16_t layer = -1;   // MoE layer
  int16_t expert = -1;
  int8_t tensor = -1;   // expert tensor kind
  int8_t shard = -1;    // E-chunk index
  TraceOp op = TraceOp::ReadSM;
  uint8_t lane = 0;
};

class TraceBuffer {
 public:
  explicit TraceBuffer(size_t capacity);  // rounded up to a power of two, at least 2
  ~TraceBuffer();
  TraceBuffer(const TraceBuffer&) = delete;
  TraceBuffer& operator=(const TraceBuffer&) = delete;

  // Never blocks; returns false (and counts a drop) when the buffer is full.
  bool record(const TraceEvent& event) noexcept;
  // Appends every event recorded so far (in record order per producer) to `out`; returns how many.
  size_t drain(std::vector<TraceEvent>& out);
  uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  size_t capacity() const noexcept { return mask_ + 1; }

 private:
  struct Cell;
  std::unique_ptr<Cell[]> cells_;
  size_t mask_ = 0;
  alignas(64) std::atomic<uint64_t> enqueue_{0};
  alignas(64) std::atomic<uint64_t> dequeue_{0};
  std::atomic<uint64_t> dropped_{0};
};

// Writes {"traceEvents": [...]} with one complete event ("ph":"X") per TraceEvent (microseconds),
// thread-name metadata per lane, and args {token, layer, expert, tensor, shard, bytes}.
void writeChromeTrace(std::ostream& out, std::span<const TraceEvent> events, const TraceLanes& lanes);

// writeChromeTrace into the file at path (created or truncated). Throws zipmoe::Error naming the
// path when it cannot be opened or the write fails.
void writeChromeTraceFile(const std::string& path, std::span<const TraceEvent> events, const TraceLanes& lanes);

}  // namespace zipmoe
