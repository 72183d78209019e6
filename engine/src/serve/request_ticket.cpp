// RequestTicket (see zipmoe/serve/serve_scheduler.h): a mutex, a condition variable and a queue of events.
#include "zipmoe/serve/serve_scheduler.h"

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

// Sets a flag the engine reads at its next step boundary, and wakes the engine when it changed.
void RequestTicket::setFlag(bool& flag, bool value) {
  {
    std::lock_guard lock(mutex_);
    if (flag == value || closed_) return;
    flag = value;
  }
  if (wake_) wake_();
}

bool RequestTicket::readFlag(const bool& flag) const {
  std::lock_guard lock(mutex_);
  return flag;
}

void RequestTicket::cancel() { setFlag(cancelled_, true); }
bool RequestTicket::cancelled() const { return readFlag(cancelled_); }
void RequestTicket::stop() { setFlag(stopRequested_, true); }
bool RequestTicket::stopRequested() const { return readFlag(stopRequested_); }
void RequestTicket::setPaused(bool paused) { setFlag(paused_, paused); }
bool RequestTicket::paused() const { return readFlag(paused_); }

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

void RequestTicket::pushToolCallBegin(int index, std::string id, std::string name) {
  Event e;
  e.kind = Event::Kind::ToolCallBegin;
  e.toolIndex = index;
  e.call.id = std::move(id);
  e.call.name = std::move(name);
  push(std::move(e), false);
}

void RequestTicket::pushToolCallDelta(int index, std::string arguments) {
  Event e;
  e.kind = Event::Kind::ToolCallDelta;
  e.toolIndex = index;
  e.text = std::move(arguments);
  push(std::move(e), false);
}

void RequestTicket::finish(GenerationStats info) {
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
