// TraceBuffer (a bounded multi-producer queue after D. Vyukov's design: one sequence number per
// cell; a producer claims a slot by CAS on the enqueue position) and the Chrome trace writer.
#include "zipmoe/trace/trace_events.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <ostream>

#include <nlohmann/json.hpp>

#include "zipmoe/base/error.h"

namespace zipmoe {

const char* traceOpName(TraceOp op) {
  switch (op) {
    case TraceOp::ReadSM: return "read SM";
    case TraceOp::ReadE: return "read E";
    case TraceOp::Decompress: return "decompress";
    case TraceOp::Recover: return "recover";
    case TraceOp::ReadFull: return "read BF16";
    case TraceOp::ReadTensor: return "read E+SM";
    case TraceOp::ExpertCompute: return "expert";
    case TraceOp::Dense: return "dense";
    case TraceOp::Stall: return "stall";
    case TraceOp::Prefetch: return "prefetch";
  }
  return "?";
}

std::string TraceLanes::name(int lane) const {
  if (lane == io()) return "I/O";
  if (lane == recovery()) return "recovery";
  if (lane == compute()) return "compute";
  return "decompress " + std::to_string(lane);
}

struct TraceBuffer::Cell {
  std::atomic<uint64_t> sequence{0};
  TraceEvent event;
};

TraceBuffer::TraceBuffer(size_t capacity) {
  size_t n = 2;
  while (n < capacity) n <<= 1;
  cells_ = std::make_unique<Cell[]>(n);
  for (size_t i = 0; i < n; ++i) cells_[i].sequence.store(i, std::memory_order_relaxed);
  mask_ = n - 1;
}

TraceBuffer::~TraceBuffer() = default;

bool TraceBuffer::record(const TraceEvent& event) noexcept {
  uint64_t pos = enqueue_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[pos & mask_];
    const uint64_t seq = cell.sequence.load(std::memory_order_acquire);
    const auto diff = static_cast<int64_t>(seq) - static_cast<int64_t>(pos);
    if (diff == 0) {
      if (enqueue_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        cell.event = event;
        cell.sequence.store(pos + 1, std::memory_order_release);
        return true;
      }
    } else if (diff < 0) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    } else {
      pos = enqueue_.load(std::memory_order_relaxed);
    }
  }
}

size_t TraceBuffer::drain(std::vector<TraceEvent>& out) {
  size_t n = 0;
  uint64_t pos = dequeue_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[pos & mask_];
    const uint64_t seq = cell.sequence.load(std::memory_order_acquire);
    if (static_cast<int64_t>(seq) - static_cast<int64_t>(pos + 1) < 0) break;  // not yet written
    out.push_back(cell.event);
    cell.sequence.store(pos + mask_ + 1, std::memory_order_release);
    ++pos;
    ++n;
  }
  dequeue_.store(pos, std::memory_order_relaxed);
  return n;
}

void writeChromeTrace(std::ostream& out, std::span<const TraceEvent> events, const TraceLanes& lanes) {
  nlohmann::json list = nlohmann::json::array();
  list.push_back({{"ph", "M"}, {"pid", 1}, {"name", "process_name"}, {"args", {{"name", "zipmoe"}}}});
  for (int lane = 0; lane < lanes.count(); ++lane) {
    list.push_back({{"ph", "M"}, {"pid", 1}, {"tid", lane}, {"name", "thread_name"}, {"args", {{"name", lanes.name(lane)}}}});
    list.push_back({{"ph", "M"}, {"pid", 1}, {"tid", lane}, {"name", "thread_sort_index"}, {"args", {{"sort_index", lane}}}});
  }
  for (const TraceEvent& e : events) {
    nlohmann::json args = {{"token", e.token}, {"layer", e.layer}, {"bytes", e.bytes}};
    if (e.expert >= 0) args["expert"] = e.expert;
    if (e.tensor >= 0) args["tensor"] = e.tensor;
    if (e.shard >= 0) args["shard"] = e.shard;
    list.push_back({{"ph", "X"},
                    {"pid", 1},
                    {"tid", e.lane},
                    {"name", traceOpName(e.op)},
                    {"cat", traceOpName(e.op)},
                    {"ts", static_cast<double>(e.startNs) / 1000.0},
                    {"dur", static_cast<double>(e.endNs - e.startNs) / 1000.0},
                    {"args", std::move(args)}});
  }
  out << nlohmann::json{{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}}.dump() << '\n';
}

void writeChromeTraceFile(const std::string& path, std::span<const TraceEvent> events, const TraceLanes& lanes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("trace file " + path + ": cannot open it for writing (" + std::strerror(errno) + ")");
  writeChromeTrace(out, events, lanes);
  out.close();
  if (!out) throw Error("trace file " + path + ": writing it failed");
}

}  // namespace zipmoe
