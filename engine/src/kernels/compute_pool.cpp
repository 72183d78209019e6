// ComputePool (see compute_pool.h).
#include "kernels/compute_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace zipmoe::kernels {
namespace {

constexpr int kCountBits = 20, kNextBits = 20;
constexpr uint64_t kFieldMask = (uint64_t{1} << kCountBits) - 1;
constexpr int64_t kMaxItems = int64_t{1} << kCountBits;

uint64_t generationOf(uint64_t w) { return w >> (kCountBits + kNextBits); }
int64_t countOf(uint64_t w) { return static_cast<int64_t>((w >> kNextBits) & kFieldMask); }
int64_t nextOf(uint64_t w) { return static_cast<int64_t>(w & kFieldMask); }
uint64_t pack(uint64_t generation, int64_t count, int64_t next) {
  return (generation << (kCountBits + kNextBits)) | (static_cast<uint64_t>(count) << kNextBits) |
         static_cast<uint64_t>(next);
}

inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// How long a helper keeps looking for the next product before it sleeps: the dense part of a layer
// issues its products a few microseconds apart; an expert load takes milliseconds.
constexpr auto kSpin = std::chrono::microseconds(60);

thread_local bool inPool = false;  // this thread is computing an item (or is a helper)

}  // namespace

ComputePool& ComputePool::instance() {
  static ComputePool pool(1);
  return pool;
}

ComputePool::ComputePool(int threads) { setThreads(threads); }

ComputePool::~ComputePool() { setThreads(1); }

void ComputePool::setThreads(int threads) {
  threads = std::max(1, threads);
  if (threads == this->threads()) return;
  stopping_.store(true);
  {
    std::lock_guard lock(sleepMutex_);
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
  helpers_.clear();
  stopping_.store(false);
  for (int i = 0; i + 1 < threads; ++i) helpers_.emplace_back([this, i] { helperLoop(i); });
}

bool ComputePool::claim(uint64_t& w, int64_t& item) {
  while (nextOf(w) < countOf(w)) {
    if (word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      item = nextOf(w);
      return true;
    }
  }
  return false;
}

void ComputePool::work(bool isHelper) {
  uint64_t w = word_.load(std::memory_order_acquire);
  int64_t item;
  while (claim(w, item)) {
    (*fn_)(item);  // the job cannot end while this item is unfinished, so fn_ is this job's
    if (isHelper) helperItems_.fetch_add(1, std::memory_order_relaxed);
    done_.fetch_add(1, std::memory_order_release);
    w = word_.load(std::memory_order_acquire);
  }
}

void ComputePool::run(int64_t count, const std::function<void(int64_t)>& fn) {
  if (count <= 0) return;
  if (count >= kMaxItems) {  // more items than the word holds: each item a run of consecutive ones
    const int64_t group = (count + kMaxItems - 2) / (kMaxItems - 1);
    run((count + group - 1) / group, [&](int64_t g) {
      for (int64_t i = g * group, end = std::min(count, (g + 1) * group); i < end; ++i) fn(i);
    });
    return;
  }
  // Nested, alone, nothing to share, or another thread's product holds the pool (an in-process
  // expert node's call, say): computed here, alone — the same result.
  if (inPool || helpers_.empty() || count == 1 || busy_.exchange(true, std::memory_order_acquire)) {
    for (int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
  inPool = true;
  fn_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t generation = generationOf(word_.load(std::memory_order_relaxed)) + 1;
  word_.store(pack(generation & ((uint64_t{1} << 24) - 1), count, 0), std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard lock(sleepMutex_); }
    wake_.notify_all();
  }
  work(false);
  // Only items a helper has claimed are left: each is a few microseconds of work, unless the
  // helper was preempted in the middle of one, when yielding lets it finish on this core.
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0; done_.load(std::memory_order_acquire) < count; ++spins) {
    pause();
    if ((spins & 63) == 63 && std::chrono::steady_clock::now() - start > kSpin) sched_yield();
  }
  inPool = false;
  busy_.store(false, std::memory_order_release);
}

void ComputePool::helperLoop(int index) {
  const std::string name = "zipmoe-gemv" + std::to_string(index + 1);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  inPool = true;
  uint64_t seen = word_.load(std::memory_order_acquire);
  while (!stopping_.load(std::memory_order_relaxed)) {
    work(true);
    seen = word_.load(std::memory_order_acquire);
    // Spin for the next product, then sleep until one is published.
    const auto start = std::chrono::steady_clock::now();
    bool fresh = false;
    for (int spins = 0; !fresh; ++spins) {
      pause();
      const uint64_t w = word_.load(std::memory_order_acquire);
      fresh = w != seen && nextOf(w) < countOf(w);
      if (!fresh && (spins & 63) == 63 && std::chrono::steady_clock::now() - start > kSpin) break;
      if (stopping_.load(std::memory_order_relaxed)) return;
    }
    if (fresh) continue;
    std::unique_lock lock(sleepMutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    wake_.wait(lock, [&] {
      const uint64_t w = word_.load(std::memory_order_seq_cst);
      return stopping_.load(std::memory_order_relaxed) || (w != seen && nextOf(w) < countOf(w));
    });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace zipmoe::kernels
