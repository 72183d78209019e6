// BudgetSlider: a thread that moves an expert runtime's memory budget back and forth, as a user
// dragging the app's slider does, for tests that check what holds *while* the budget moves.
//
// Each move is setMemoryBudget followed by waitForPlan, so every move is a plan computed on the
// runtime's planner thread and applied while the model thread runs layers; the slider moves again
// at once, as fast as the runtime takes moves. Nothing is timed: a test that needs the slider to
// have moved during generation calls waitForMoves(n) between steps (a condition the model thread
// waits for), so the interleaving is guaranteed whatever the machine's load. Thread-safety: the
// constructor starts the thread, stop()/the destructor join it; waitForMoves from one other thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zipmoe/experts/expert_runtime.h"

namespace zipmoe::testing {

class BudgetSlider {
 public:
  BudgetSlider(ExpertRuntime& runtime, std::vector<uint64_t> budgets)
      : runtime_(runtime), budgets_(std::move(budgets)), thread_([this] { run(); }) {}
  ~BudgetSlider() { stop(); }
  BudgetSlider(const BudgetSlider&) = delete;
  BudgetSlider& operator=(const BudgetSlider&) = delete;

  // Blocks until the slider has made at least n moves (or failed: see error()).
  void waitForMoves(int n) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return moves_ >= n || !error_.empty(); });
  }
  // Stops the slider after its current move; returns the number of moves made.
  int stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mutex_);
    return moves_;
  }
  // What a move threw, if one did (empty otherwise).
  std::string error() const {
    std::lock_guard lock(mutex_);
    return error_;
  }

 private:
  void run() {
    for (size_t i = 0;; ++i) {
      {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
      }
      try {
        runtime_.setBudget(MemoryBudget::bytes(budgets_[i % budgets_.size()]));
        runtime_.waitForPlan();
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex_);
        error_ = e.what();
        cv_.notify_all();
        return;
      }
      std::lock_guard lock(mutex_);
      ++moves_;
      cv_.notify_all();
    }
  }

  ExpertRuntime& runtime_;
  const std::vector<uint64_t> budgets_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int moves_ = 0;
  bool stopping_ = false;
  std::string error_;
  std::thread thread_;  // last: starts once everything above is ready
};

}  // namespace zipmoe::testing
