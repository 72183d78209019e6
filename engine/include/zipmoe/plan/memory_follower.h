// BudgetFollower — the memory budget that follows the machine's free memory (`--budget auto`, the
// app's "Follow free memory" switch).
//
// A local assistant shares its machine with the user's other programs. Instead of a fixed budget it
// reads the memory the kernel says is available without swapping (MemAvailable in /proc/meminfo)
// and, where the kernel has it, how much of the recent time tasks stalled waiting for memory
// (/proc/pressure/memory, "some avg10"), and moves its own budget so that `margin` bytes stay
// available to everyone else:
//   - down at once when another program takes memory: by the whole shortfall below the margin
//     (from what the runtime really holds, so that the shrink frees memory), or by a share of the
//     budget when the kernel reports memory pressure while little is available;
//   - up when memory has stayed free for a few readings, by half the room above the margin at a
//     time (what the caches take counts against MemAvailable once they fill, so the budget
//     approaches the free memory without overshooting it, and a program that is starting up and
//     has not yet allocated is not crowded out at once).
// Every move goes through the callback the engine gives (ExpertRuntime::setBudget: a live replan,
// as the app's slider does) and is logged (moves(), onMove) with the reading that caused it.
// The decision is one reading at a time (poll), so a test drives it with a scripted MemorySource;
// start() runs the same poll on a thread every `interval`.
// Thread-safety: every function from any thread (one mutex for the state, one that lets one poll run);
// the apply callback runs on the polling thread, outside it. Cost: two small /proc reads per poll.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace zipmoe {

struct MemoryReading {
  uint64_t availableBytes = 0;            // MemAvailable: what can be allocated without swapping
  uint64_t totalBytes = 0;                // MemTotal
  std::optional<double> pressureSome10;   // % of the last 10 s some task stalled on memory; none without PSI
};

class MemorySource {
 public:
  virtual ~MemorySource() = default;
  // Throws zipmoe::Error naming what could not be read.
  virtual MemoryReading read() = 0;
};

// The kernel's view: /proc/meminfo and /proc/pressure/memory (absent on kernels without PSI, or
// unreadable in some containers: then no pressure figure). The paths are parameters for tests.
class ProcMemorySource : public MemorySource {
 public:
  explicit ProcMemorySource(std::filesystem::path meminfo = "/proc/meminfo",
                            std::filesystem::path pressure = "/proc/pressure/memory");
  MemoryReading read() override;

 private:
  std::filesystem::path meminfo_, pressure_;
};

// Parsers of the two files' text. `name` is the file named in errors. A meminfo without MemTotal or
// MemAvailable (kernels before 3.14) is an error that says so; a pressure text without a
// "some … avg10=" field is nullopt.
MemoryReading parseMeminfo(const std::string& text, const std::string& name);
std::optional<double> parsePressureSome10(const std::string& text);

struct FollowPolicy {
  // Bytes left available to the other programs. 0: the larger of 512 MiB and 1/16 of MemTotal.
  uint64_t marginBytes = 0;
  // The budget's range: the runtime's minimum and the working set plus every expert (set by the
  // engine from the runtime; a user cap may lower the ceiling).
  uint64_t floorBytes = 0;
  uint64_t ceilingBytes = 0;
  // A move smaller than this is not made (no replans for noise). 0: the larger of 16 MiB and 1 % of
  // the range.
  uint64_t minMoveBytes = 0;
  // PSI "some avg10" (%) at which memory counts as under pressure: the budget shrinks by
  // `pressureShrink` of itself while less than twice the margin is available, and does not grow.
  double pressureLimit = 10.0;
  double pressureShrink = 0.125;
  // After a shrink for pressure, the readings before the next one: avg10 is a 10-second average, so
  // it stays high for a while after the cause is gone (40 readings = 10 s at the thread's 250 ms).
  int pressureCooldownReadings = 40;
  // Share of the room above the margin a grow step takes, and the readings in a row with room that
  // come before it.
  double growShare = 0.5;
  int growAfterReadings = 2;

  // The margin, the least move resolved for a machine with `totalBytes` of memory.
  uint64_t margin(uint64_t totalBytes) const;
  uint64_t minMove() const;
};

struct BudgetMove {
  double seconds = 0;      // since the follower was made
  uint64_t fromBytes = 0;  // the budget before
  uint64_t toBytes = 0;    // the budget the runtime resolved
  MemoryReading reading;   // what caused it
  std::string reason;      // "another program needs 300 MiB", "1.2 GiB free", "memory pressure 23 %"
};

class BudgetFollower {
 public:
  // `apply` moves the budget to the given bytes and returns what it resolved to; `held` returns the
  // bytes the runtime holds now (a shrink frees from there). Neither is called under the mutex.
  BudgetFollower(std::shared_ptr<MemorySource> source, FollowPolicy policy, uint64_t budgetBytes,
                 std::function<uint64_t(uint64_t)> apply, std::function<uint64_t()> held);
  ~BudgetFollower();
  BudgetFollower(const BudgetFollower&) = delete;
  BudgetFollower& operator=(const BudgetFollower&) = delete;

  // The budget to start with under this reading: the available bytes above the margin, within the
  // policy's range.
  static uint64_t initialBudget(const MemoryReading& reading, const FollowPolicy& policy);

  // One reading and at most one move (none while disabled). A failed reading is logged once in
  // lastError() and changes nothing; a failed apply (zipmoe::Error) likewise.
  std::optional<BudgetMove> poll();
  // Runs poll() every `interval` on a thread until stop() or destruction.
  void start(std::chrono::milliseconds interval = std::chrono::milliseconds(250));
  void stop();

  // Off: readings go on being taken, no move is made; a move already being applied has been when it
  // returns, so none lands after a budget the caller sets next.
  void setEnabled(bool enabled);
  bool enabled() const;
  // Someone else moved the budget (the user's slider while following is off): follow from there.
  void budgetMovedTo(uint64_t bytes);
  uint64_t budget() const;
  std::vector<BudgetMove> moves() const;  // the event log, oldest first (the last 4096)
  std::optional<BudgetMove> lastMove() const;
  std::optional<MemoryReading> lastReading() const;
  std::string lastError() const;
  // Called on the polling thread after each move.
  void setOnMove(std::function<void(const BudgetMove&)> onMove);
  const FollowPolicy& policy() const { return policy_; }

 private:
  std::shared_ptr<MemorySource> source_;
  const FollowPolicy policy_;
  const std::function<uint64_t(uint64_t)> apply_;
  const std::function<uint64_t()> held_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable std::mutex mutex_;
  uint64_t budget_;
  bool enabled_ = true;
  int roomReadings_ = 0;  // readings in a row with room to grow
  int pressureCooldown_ = 0;  // readings before the next shrink for pressure
  std::vector<BudgetMove> moves_;
  std::optional<MemoryReading> last_;
  std::string error_;
  std::function<void(const BudgetMove&)> onMove_;
  std::mutex pollMutex_;  // one poll at a time (the thread's and a caller's)
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace zipmoe
