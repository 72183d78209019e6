// Internal: the expert runtime's planner thread. request() records what changed — a new budget, a
// pool subset, or only more history — and wakes the thread; it asks the runtime for a snapshot
// (activation counts, the budget and pools in force), computes a plan off the model's critical path
// and hands it to `apply`, which the runtime runs under its cache lock: a plan takes effect as soon
// as it is ready, also in the middle of a layer. Requests that arrive while a plan is computed are
// merged into the next one. A plan that fails (anything thrown by beforeReplan, snapshot, compute
// or apply) goes to `onFailure` and the previous plan stays in force: nothing escapes this thread.
// Thread-safety: request and waitForPlan from any thread; the callbacks run on the planner thread.
// Cost: a plan's computation (tens of milliseconds at most, docs/RUNTIME.md).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "experts/offload_strategy.h"

namespace zipmoe::experts {

class Replanner {
 public:
  struct Snapshot {
    ActivationCounts counts;
    uint64_t budget = 0;
    PoolMask pools = kAllPools;
  };
  struct Callbacks {
    std::function<Snapshot()> snapshot;
    std::function<Plan(uint64_t budget, PoolMask pools, const ActivationCounts& counts)> compute;
    std::function<void(Plan)> apply;
    std::function<void(const std::string& error)> onFailure;
    std::function<void()> beforeReplan;  // optional: a test's hook (RuntimeOptions::beforeReplan)
  };

  explicit Replanner(Callbacks callbacks);
  ~Replanner();  // stops the thread after the plan in progress
  Replanner(const Replanner&) = delete;
  Replanner& operator=(const Replanner&) = delete;

  // A replan for this budget and/or pool subset (unset: the ones in force).
  void request(std::optional<uint64_t> budget, std::optional<PoolMask> pools);
  // Blocks until no replan is pending or running.
  void waitForPlan();

 private:
  void loop();

  Callbacks callbacks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool requested_ = false, planning_ = false, stopping_ = false;
  std::optional<uint64_t> budget_;
  std::optional<PoolMask> pools_;
  std::thread thread_;  // last: starts once everything above is ready
};

}  // namespace zipmoe::experts
