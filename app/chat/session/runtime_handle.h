// RuntimeHandle — the expert runtime of the model the worker has open, shared with the GUI thread.
//
// The worker thread sets it when a model opens and clears it when the model closes; the GUI thread
// takes a reference to read stats, drain trace events and move the memory budget (all thread-safe
// on ExpertRuntime). A reference taken keeps that runtime alive while it is used, even if the worker
// replaces it meanwhile.
// The handle also carries the engine's "follow free memory" control (Engine::followFreeMemory and
// its BudgetFollower) and its budget (Engine::setBudget), which the engine owns, not the runtime: the worker sets it with the runtime
// and clears it before the engine goes, and the handle calls it under its mutex, so a call from the
// GUI thread either reaches the live engine or finds no model — never a destroyed one.
// Thread-safety: every function from any thread. Cost: a mutex and a shared_ptr copy; the follow
// calls hold the mutex while the engine starts or reads its follower (a /proc read at most).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/plan/memory_follower.h"

namespace zipmoe::app {

// What the engine's budget follower is doing, read in one go.
struct FollowStatus {
  bool enabled = false;                   // a follower exists and moves the budget
  std::optional<MemoryReading> reading;   // its last reading (none before the first)
  uint64_t marginBytes = 0;               // left to other programs under that reading
  std::optional<BudgetMove> lastMove;     // its last move (none yet)
  std::string error;                      // its last failed reading or move ("" when none)
};

// The engine's side of following and of the budget, as the worker hands it over.
struct FollowControl {
  std::function<void(bool)> follow;             // Engine::followFreeMemory: throws zipmoe::Error
  std::function<FollowStatus()> status;
  // Engine::setBudget: the runtime's budget, or the whole one while the local server serves
  // within it. Throws zipmoe::Error.
  std::function<uint64_t(const MemoryBudget&)> setBudget;
  std::function<uint64_t()> budget;  // Engine::budget: the user's budget, as above
};

class RuntimeHandle {
 public:
  void set(std::shared_ptr<ExpertRuntime> runtime) {
    std::lock_guard lock(mutex_);
    runtime_ = std::move(runtime);
    ++generation_;
  }
  std::shared_ptr<ExpertRuntime> get() const {
    std::lock_guard lock(mutex_);
    return runtime_;
  }
  // Changes whenever set() is called: a reader notices a new runtime (new trace lanes, new clock).
  unsigned long generation() const {
    std::lock_guard lock(mutex_);
    return generation_;
  }

  // REQUIRES (worker): the functions stay valid until setFollowControl({}) returns.
  void setFollowControl(FollowControl control) {
    std::lock_guard lock(mutex_);
    follow_ = std::move(control);
  }
  // Turns following on or off; false when no model with a runtime is open. Throws what the engine
  // throws (zipmoe::Error: the machine's memory cannot be read).
  bool follow(bool on) {
    std::lock_guard lock(mutex_);
    if (!follow_.follow) return false;
    follow_.follow(on);
    return true;
  }
  // Moves the user's budget through the engine (FollowControl::setBudget); false when no model with
  // a runtime is open. Throws what the engine throws (zipmoe::Error).
  bool setBudget(const MemoryBudget& budget) {
    std::lock_guard lock(mutex_);
    if (!follow_.setBudget) return false;
    follow_.setBudget(budget);
    return true;
  }
  // The user's budget (FollowControl::budget); none when no model with a runtime is open.
  std::optional<uint64_t> budget() const {
    std::lock_guard lock(mutex_);
    if (!follow_.budget) return std::nullopt;
    return follow_.budget();
  }
  std::optional<FollowStatus> followStatus() const {
    std::lock_guard lock(mutex_);
    if (!follow_.status) return std::nullopt;
    return follow_.status();
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<ExpertRuntime> runtime_;
  unsigned long generation_ = 0;
  FollowControl follow_;
};

}  // namespace zipmoe::app
