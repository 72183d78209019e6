// The planner thread (see replanner.h).
#include "experts/replanner.h"

#include <exception>
#include <utility>

namespace zipmoe::experts {

Replanner::Replanner(Callbacks callbacks) : callbacks_(std::move(callbacks)), thread_([this] { loop(); }) {}

Replanner::~Replanner() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Replanner::request(std::optional<uint64_t> budget, std::optional<PoolMask> pools) {
  {
    std::lock_guard lock(mutex_);
    if (budget) budget_ = *budget;
    if (pools) pools_ = *pools;
    requested_ = true;
  }
  cv_.notify_all();
}

void Replanner::waitForPlan() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return !requested_ && !planning_; });
}

void Replanner::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || requested_; });
    if (stopping_) return;
    requested_ = false;
    planning_ = true;
    const std::optional<uint64_t> budget = budget_;
    const std::optional<PoolMask> pools = pools_;
    lock.unlock();
    try {
      if (callbacks_.beforeReplan) callbacks_.beforeReplan();
      const Snapshot now = callbacks_.snapshot();
      callbacks_.apply(callbacks_.compute(budget.value_or(now.budget), pools.value_or(now.pools), now.counts));
    } catch (const std::exception& e) {
      callbacks_.onFailure(e.what());
    }
    lock.lock();
    planning_ = false;
    cv_.notify_all();
  }
}

}  // namespace zipmoe::experts
