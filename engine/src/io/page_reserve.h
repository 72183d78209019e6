// Internal: PageReserve — a background thread that faults in, ahead of need, the pages the expert
// caches will fill, and adds them to their PagePool.
//
// Why: until the caches are full, nothing has been freed, so every buffer a pool keeps is fresh
// memory, faulted in 4 KiB at a time by the thread that writes it — the I/O thread's read or the
// recovery thread's merge, both on the model's critical path. On this project's 2-vCPU VM a 5.5 MiB
// merge into fresh memory took 15.4 ms (median) against 0.55 ms into reserved pages, and a 2.75 MiB
// read 8.7 against 2.1 ms (docs/RUNTIME.md, "The page reserve"). The room will be filled anyway;
// faulting it in while a core is idle (the thread runs at the lowest priority, nice 19) takes that
// cost off the critical path.
//
// The thread works in runs of kRunBytes: it asks its owner for room (`claim`, under the owner's lock:
// the budget minus what is held), faults a run in without any lock, and hands it to the owner to adopt
// (`commit`, which re-checks the room and returns false to have the run unmapped). So at most one run
// that is not yet counted as held exists at a time. It sleeps until wake() when no room is left.
// Thread-safety: wake() from any thread; the destructor stops and joins the thread (call it before
// the pool's owner goes). Cost: about 0.5 s of one core per GiB faulted here (a VM), once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "io/page_pool.h"

namespace zipmoe::io {

class PageReserve {
 public:
  static constexpr size_t kRunBytes = size_t{4} << 20;
  // claim(): whether a run of kRunBytes fits now. commit(run): adopt it if it still fits (true) or
  // refuse it (false: the reserve frees it and sleeps). Both are called on the reserve's thread.
  PageReserve(std::function<bool()> claim, std::function<bool(const PagePool::Run&)> commit);
  ~PageReserve();
  PageReserve(const PageReserve&) = delete;
  PageReserve& operator=(const PageReserve&) = delete;

  void wake();  // room may have grown (a new budget or plan)

 private:
  void loop();

  std::function<bool()> claim_;
  std::function<bool(const PagePool::Run&)> commit_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool woken_ = true, stop_ = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace zipmoe::io
