// RuntimeHandle — the expert runtime of the model the worker has open, shared with the GUI thread.
//
// The worker thread sets it when a model opens and clears it when the model closes; the GUI thread
// takes a reference to read stats, drain trace events and move the memory budget (all thread-safe
// on ExpertRuntime). A reference taken keeps that runtime alive while it is used, even if the worker
// replaces it meanwhile. Thread-safety: every function from any thread. Cost: a mutex and a
// shared_ptr copy.
#pragma once

#include <memory>
#include <mutex>

#include "zipmoe/experts/expert_runtime.h"

namespace zipmoe::app {

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

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<ExpertRuntime> runtime_;
  unsigned long generation_ = 0;
};

}  // namespace zipmoe::app
