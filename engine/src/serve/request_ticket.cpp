// RequestTicket (see zipmoe/serve_scheduler.h): a mutex, a condition variable and a queue of events.
#include "zipmoe/serve_scheduler.h"

namespace zipmoe {

bool RequestTicket::wait(std::vector<Event>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty() || drained_; });
  while (!events_.empty()) {
    out.push_back(std::move(events_.front()));
    events_.pop_front();
  }
  if (closed_) drained_ = true;
  return !drained_;
}

void RequestTicket::cancel() {
  {
    std::lock_guard lock(mutex_);
    if (cancelled_ || closed_) return;
    cancelled_ = true;
  }
  if (wake_) wake_();
}

bool RequestTicket::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

bool RequestTicket::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

void RequestTicket::push(Event e, bool last) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    events_.push_back(std::move(e));
    closed_ = last;
  }
  cv_.notify_all();
}

void RequestTicket::pushText(std::string text) {
  Event e;
  e.text = std::move(text);
  push(std::move(e), false);
}

void RequestTicket::finish(FinishInfo info) {
  Event e;
  e.kind = Event::Kind::Finished;
  e.finish = std::move(info);
  push(std::move(e), true);
}

void RequestTicket::fail(ApiError error) {
  Event e;
  e.kind = Event::Kind::Failed;
  e.error = std::move(error);
  push(std::move(e), true);
}

}  // namespace zipmoe
