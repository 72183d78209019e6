#include "io/page_reserve.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <new>

namespace zipmoe::io {

PageReserve::PageReserve(std::function<bool()> claim, std::function<bool(const PagePool::Run&)> commit)
    : claim_(std::move(claim)), commit_(std::move(commit)), thread_([this] { loop(); }) {}

PageReserve::~PageReserve() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void PageReserve::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  cv_.notify_all();
}

void PageReserve::loop() {
  // The lowest priority a thread may give itself: it runs on a core the model leaves idle (a stall)
  // and yields to everything else. Failing that, it runs at the default priority.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return woken_ || stop_; });
    if (stop_) return;
    woken_ = false;
    while (!stop_) {
      lock.unlock();
      bool adopted = false;
      if (claim_()) {
        try {
          const PagePool::Run run = PagePool::faultIn(kRunBytes);
          adopted = commit_(run);
          if (!adopted) PagePool::freeRun(run);
        } catch (const std::bad_alloc&) {
          // No memory to spare (adopted stays false): the caches' own buffers will fault theirs in.
        }
      }
      lock.lock();
      if (!adopted) break;
    }
  }
}

}  // namespace zipmoe::io
