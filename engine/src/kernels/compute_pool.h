// ComputePool — the threads that split decoding's matrix products, built for a machine whose cores
// are shared with the expert runtime's I/O, decompression and recovery threads.
//
// A fork-join team (OpenMP, what at::parallel_for uses) splits a product into one static share per
// thread and waits at a barrier for every share: when the operating system has preempted one of
// its threads to run a decompression worker, the whole product waits a scheduler slice (milliseconds)
// for that one share. Here the caller never waits for a thread that has not started: run(count, fn)
// publishes `count` items, the caller claims and computes items itself, helpers that are awake claim
// items too, and the caller waits only for the items a helper has already claimed and not finished
// (at most one per helper, each a few microseconds of work). A helper that is descheduled, asleep or
// busy elsewhere simply takes no part. Results never depend on who computed an item.
// Helpers spin briefly after each product (the dense part of a layer issues products back to back)
// and then sleep on a condition variable, so that an idle model leaves the cores to the runtime.
// Thread-safety: run() may be called from any thread; while one caller's product holds the pool,
// another caller computes its product alone on its own thread (same result), and nested calls (an
// item that calls run()) compute alone too. setThreads() must not race with run(). Cost: a few atomic operations per item; a wake-up (microseconds) when the
// helpers sleep.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zipmoe::kernels {

class ComputePool {
 public:
  // The process's pool, started with one thread (the caller's) until setThreads says more.
  static ComputePool& instance();

  explicit ComputePool(int threads = 1);
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  // Threads that take part, the caller's included (≥ 1): threads − 1 helpers.
  // REQUIRES: no run() in progress.
  void setThreads(int threads);
  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

  // Calls fn(i) for every i in [0, count), each exactly once, on the caller's thread and on helpers
  // that are awake; returns when all have returned. REQUIRES: count < 2^20; fn does not throw.
  void run(int64_t count, const std::function<void(int64_t)>& fn);

  // Items computed by helpers since the pool started (for tests: the helpers do take part).
  uint64_t helperItems() const { return helperItems_.load(std::memory_order_relaxed); }

 private:
  void helperLoop(int index);
  // Claims the next item of the published job; false when none is left (or the job changed).
  bool claim(uint64_t& word, int64_t& item);
  void work(bool isHelper);

  // The job word: generation (24 bits) | item count (20 bits) | next item (20 bits). Claiming an item
  // is a compare-and-swap on the whole word, so a helper can never claim an item of a job other
  // than the one whose generation it read.
  std::atomic<uint64_t> word_{0};
  std::atomic<int64_t> done_{0};
  const std::function<void(int64_t)>* fn_ = nullptr;  // valid while the job has unfinished items
  std::atomic<uint64_t> helperItems_{0};
  std::atomic<bool> busy_{false};  // a caller's product holds the helpers

  std::mutex sleepMutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> helpers_;
};

}  // namespace zipmoe::kernels
