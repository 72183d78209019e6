// BudgetFollower (see zipmoe/plan/memory_follower.h).
#include "zipmoe/plan/memory_follower.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr size_t kMaxMoves = 4096;

std::string mib(uint64_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / kMiB);
  return buf;
}

// The value in kB of "Name:   1234 kB" in /proc/meminfo, in bytes.
std::optional<uint64_t> meminfoField(const std::string& text, const std::string& field, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size() + 1, field + ":") != 0) continue;
    std::istringstream values(line.substr(field.size() + 1));
    uint64_t kb = 0;
    std::string unit;
    if (!(values >> kb)) throw Error(name + ": field " + field + " has no number: '" + line + "'");
    values >> unit;
    if (!unit.empty() && unit != "kB") throw Error(name + ": field " + field + " is in '" + unit + "', expected kB");
    return kb * 1024;
  }
  return std::nullopt;
}

}  // namespace

MemoryReading parseMeminfo(const std::string& text, const std::string& name) {
  MemoryReading r;
  const auto total = meminfoField(text, "MemTotal", name);
  const auto available = meminfoField(text, "MemAvailable", name);
  if (!total) throw Error(name + ": no MemTotal field");
  if (!available)
    throw Error(name + ": no MemAvailable field (a kernel older than 3.14?): the budget cannot follow free memory");
  r.totalBytes = *total;
  r.availableBytes = std::min(*available, *total);
  return r;
}

std::optional<double> parsePressureSome10(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 5, "some ") != 0) continue;
    const size_t at = line.find("avg10=");
    if (at == std::string::npos) return std::nullopt;
    try {
      size_t used = 0;
      const double v = std::stod(line.substr(at + 6), &used);
      if (used == 0 || !(v >= 0) || v > 100) return std::nullopt;
      return v;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

ProcMemorySource::ProcMemorySource(std::filesystem::path meminfo, std::filesystem::path pressure)
    : meminfo_(std::move(meminfo)), pressure_(std::move(pressure)) {}

MemoryReading ProcMemorySource::read() {
  auto slurp = [](const std::filesystem::path& p, std::string& out) {
    std::ifstream f(p);
    if (!f) return false;
    std::ostringstream s;
    s << f.rdbuf();
    out = s.str();
    return true;
  };
  std::string text;
  if (!slurp(meminfo_, text)) throw Error(meminfo_.string() + ": cannot be read: the budget cannot follow free memory");
  MemoryReading r = parseMeminfo(text, meminfo_.string());
  if (slurp(pressure_, text)) r.pressureSome10 = parsePressureSome10(text);
  return r;
}

uint64_t FollowPolicy::margin(uint64_t totalBytes) const {
  return marginBytes > 0 ? marginBytes : std::max<uint64_t>(512 * kMiB, totalBytes / 16);
}

uint64_t FollowPolicy::minMove() const {
  if (minMoveBytes > 0) return minMoveBytes;
  const uint64_t range = ceilingBytes > floorBytes ? ceilingBytes - floorBytes : 0;
  return std::max<uint64_t>(16 * kMiB, range / 100);
}

uint64_t BudgetFollower::initialBudget(const MemoryReading& reading, const FollowPolicy& policy) {
  const uint64_t margin = policy.margin(reading.totalBytes);
  const uint64_t room = reading.availableBytes > margin ? reading.availableBytes - margin : 0;
  return std::clamp(room, policy.floorBytes, std::max(policy.floorBytes, policy.ceilingBytes));
}

BudgetFollower::BudgetFollower(std::shared_ptr<MemorySource> source, FollowPolicy policy, uint64_t budgetBytes,
                               std::function<uint64_t(uint64_t)> apply, std::function<uint64_t()> held)
    : source_(std::move(source)), policy_(policy), apply_(std::move(apply)), held_(std::move(held)), budget_(budgetBytes) {
  if (!source_ || !apply_) throw Error("budget follower: a memory source and a way to move the budget are needed");
  if (policy_.ceilingBytes < policy_.floorBytes)
    throw Error("budget follower: the ceiling (" + std::to_string(policy_.ceilingBytes) + " bytes) is below the floor (" +
                std::to_string(policy_.floorBytes) + " bytes)");
}

BudgetFollower::~BudgetFollower() { stop(); }

std::optional<BudgetMove> BudgetFollower::poll() {
  std::lock_guard one(pollMutex_);
  MemoryReading reading;
  try {
    reading = source_->read();
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    error_ = e.what();
    return std::nullopt;
  }
  uint64_t held = 0, budget = 0;
  bool cooling = false;
  {
    std::lock_guard lock(mutex_);
    last_ = reading;
    budget = budget_;
    if (pressureCooldown_ > 0) --pressureCooldown_;
    cooling = pressureCooldown_ > 0;
    if (!enabled_) {
      roomReadings_ = 0;
      return std::nullopt;
    }
  }
  held = held_ ? std::min(held_(), budget) : budget;
  // What the runtime can hold and still leave the margin: what it holds now plus the room above the
  // margin (negative room: the shortfall another program has made).
  const uint64_t margin = policy_.margin(reading.totalBytes);
  const int64_t room = static_cast<int64_t>(reading.availableBytes) - static_cast<int64_t>(margin);
  const int64_t sustainable = std::max<int64_t>(0, static_cast<int64_t>(held) + room);
  const uint64_t minMove = policy_.minMove();
  const bool pressured = !cooling && reading.pressureSome10 && *reading.pressureSome10 >= policy_.pressureLimit &&
                         reading.availableBytes < 2 * margin;
  uint64_t target = budget;
  std::string reason;
  if (static_cast<uint64_t>(sustainable) + minMove <= budget) {
    target = static_cast<uint64_t>(sustainable);
    reason = room < 0 ? "another program needs " + mib(static_cast<uint64_t>(-room)) + " (" + mib(reading.availableBytes) +
                            " available, margin " + mib(margin) + ")"
                      : "only " + mib(static_cast<uint64_t>(room)) + " free above the margin for the caches still filling";
  } else if (pressured) {
    target = std::min<uint64_t>(static_cast<uint64_t>(sustainable),
                                budget - static_cast<uint64_t>(static_cast<double>(budget) * policy_.pressureShrink));
    char buf[96];
    std::snprintf(buf, sizeof buf, "memory pressure %.1f %% with %s available", *reading.pressureSome10,
                  mib(reading.availableBytes).c_str());
    reason = buf;
    std::lock_guard lock(mutex_);
    pressureCooldown_ = policy_.pressureCooldownReadings;
  } else if (static_cast<uint64_t>(sustainable) >= budget + minMove &&
             !(reading.pressureSome10 && *reading.pressureSome10 >= policy_.pressureLimit / 2)) {
    std::lock_guard lock(mutex_);
    if (++roomReadings_ >= policy_.growAfterReadings) {
      const uint64_t free = static_cast<uint64_t>(sustainable) - budget;
      target = budget + std::max<uint64_t>(minMove, static_cast<uint64_t>(static_cast<double>(free) * policy_.growShare));
      reason = mib(free) + " free above the margin";
    }
  } else {
    std::lock_guard lock(mutex_);
    roomReadings_ = 0;
  }
  target = std::clamp(target, policy_.floorBytes, std::max(policy_.floorBytes, policy_.ceilingBytes));
  if (target == budget || (target > budget ? target - budget : budget - target) < std::min(minMove, budget / 64 + 1))
    return std::nullopt;
  uint64_t resolved = 0;
  try {
    resolved = apply_(target);
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    error_ = e.what();
    return std::nullopt;
  }
  BudgetMove move;
  move.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  move.fromBytes = budget;
  move.toBytes = resolved;
  move.reading = reading;
  move.reason = std::move(reason);
  std::function<void(const BudgetMove&)> onMove;
  {
    std::lock_guard lock(mutex_);
    budget_ = resolved;
    roomReadings_ = 0;
    error_.clear();
    if (moves_.size() == kMaxMoves) moves_.erase(moves_.begin());
    moves_.push_back(move);
    onMove = onMove_;
  }
  if (onMove) onMove(move);
  return move;
}

void BudgetFollower::start(std::chrono::milliseconds interval) {
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this, interval] {
    std::unique_lock sleeping(mutex_);
    while (!stopping_) {
      sleeping.unlock();
      poll();
      sleeping.lock();
      wake_.wait_for(sleeping, interval, [this] { return stopping_; });
    }
  });
}

void BudgetFollower::stop() {
  std::thread t;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    t = std::move(thread_);
  }
  wake_.notify_all();
  if (t.joinable()) t.join();
}

void BudgetFollower::setEnabled(bool enabled) {
  std::lock_guard one(pollMutex_);  // a poll applying its move finishes first
  std::lock_guard lock(mutex_);
  enabled_ = enabled;
  roomReadings_ = 0;
}

bool BudgetFollower::enabled() const {
  std::lock_guard lock(mutex_);
  return enabled_;
}

void BudgetFollower::budgetMovedTo(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  budget_ = bytes;
  roomReadings_ = 0;
}

uint64_t BudgetFollower::budget() const {
  std::lock_guard lock(mutex_);
  return budget_;
}

std::vector<BudgetMove> BudgetFollower::moves() const {
  std::lock_guard lock(mutex_);
  return moves_;
}

std::optional<BudgetMove> BudgetFollower::lastMove() const {
  std::lock_guard lock(mutex_);
  if (moves_.empty()) return std::nullopt;
  return moves_.back();
}

std::optional<MemoryReading> BudgetFollower::lastReading() const {
  std::lock_guard lock(mutex_);
  return last_;
}

std::string BudgetFollower::lastError() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void BudgetFollower::setOnMove(std::function<void(const BudgetMove&)> onMove) {
  std::lock_guard lock(mutex_);
  onMove_ = std::move(onMove);
}

}  // namespace zipmoe
