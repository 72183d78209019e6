// ConnectionGate (see connection_gate.h): one poll() loop over an eventfd and the waiting sockets.
#include "serve/connection_gate.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "zipmoe/base/error.h"
#include "zipmoe/serve/openai_request.h"

namespace zipmoe::serve {
namespace {

using Clock = std::chrono::steady_clock;

void closeSocket(int fd) {
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

// A last reply to a connection the gate gives up on, sent without waiting (the socket's buffer is
// empty: nothing was written to it yet), then the close.
void refuse(int fd, int status, const char* reason, const ApiError& error) {
  const std::string body = error.toJson();
  const std::string reply =
      "HTTP/1.1 " + std::to_string(status) + " " + reason +
      "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  [[maybe_unused]] const ssize_t n = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}

bool headComplete(const std::string& bytes) { return bytes.find("\r\n\r\n") != std::string::npos; }

}  // namespace

ConnectionGate::ConnectionGate(std::function<void(PendingConnection)> ready, size_t maxWaiting)
    : ready_(std::move(ready)), maxWaiting_(maxWaiting) {
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_ < 0) throw Error("serve: cannot create the connection gate's eventfd");
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "zipmoe-gate");
    run();
  });
}

ConnectionGate::~ConnectionGate() {
  stop();
  ::close(wake_);
}

bool ConnectionGate::enqueue(Entry e) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    incoming_.push_back(std::move(e));
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_, &one, sizeof one);
  return true;
}

void ConnectionGate::admit(PendingConnection c) {
  const int fd = c.fd;
  if (!enqueue(Entry{std::move(c), false})) closeSocket(fd);
}

void ConnectionGate::linger(int fd) {
  ::shutdown(fd, SHUT_WR);
  if (!enqueue(Entry{PendingConnection{fd, {}, Clock::now() + kLingerTime}, true})) ::close(fd);
}

void ConnectionGate::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

bool ConnectionGate::advance(Entry& e) {
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::recv(e.c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n == 0 && !e.lingering && headComplete(e.c.buffered)) break;  // sent, then closed: a worker sees it gone
    if (n <= 0) {  // closed (or broken) before a whole head came, or a lingering client is done
      closeSocket(e.c.fd);
      return false;
    }
    if (!e.lingering) e.c.buffered.append(chunk, static_cast<size_t>(n));
    if (!e.lingering && e.c.buffered.size() > kMaxHead) break;
  }
  if (e.lingering) return true;
  if (headComplete(e.c.buffered)) {
    ready_(std::move(e.c));
    return false;
  }
  if (e.c.buffered.size() > kMaxHead) {
    refuse(e.c.fd, 431, "Request Header Fields Too Large",
           ApiError(431, "invalid_request_error",
                    "The request head is larger than " + std::to_string(kMaxHead) + " bytes.", {}, "head_too_large"));
    return false;
  }
  return true;
}

void ConnectionGate::run() {
  std::vector<Entry> waiting;
  std::vector<pollfd> fds;
  for (;;) {
    std::vector<Entry> arrived;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) break;
      arrived.swap(incoming_);
    }
    for (Entry& e : arrived) {
      if (!e.lingering && headComplete(e.c.buffered)) {
        ready_(std::move(e.c));  // the next head was read with the last request: it goes on at once
      } else if (!e.lingering && waiting.size() >= maxWaiting_) {
        refuse(e.c.fd, 503, "Service Unavailable",
               ApiError(503, "server_error", "Too many connections are waiting for their request; try again.", {},
                        "too_many_connections"));
      } else {
        waiting.push_back(std::move(e));
      }
    }
    Clock::time_point next = Clock::now() + std::chrono::seconds(1);
    fds.assign(1, pollfd{wake_, POLLIN, 0});
    for (const Entry& e : waiting) {
      fds.push_back(pollfd{e.c.fd, static_cast<short>(POLLIN | POLLRDHUP), 0});
      next = std::min(next, e.c.deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(wait, 0, 1000)));
    if (n < 0 && errno != EINTR) {  // cannot happen with valid fds; admit() then closes what comes
      std::lock_guard lock(mutex_);
      stopping_ = true;
      break;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t count = 0;
      [[maybe_unused]] const ssize_t r = ::read(wake_, &count, sizeof count);
    }
    const Clock::time_point now = Clock::now();
    std::vector<Entry> still;
    still.reserve(waiting.size());
    for (size_t i = 0; i < waiting.size(); ++i) {
      Entry& e = waiting[i];
      if (fds[i + 1].revents != 0 && !advance(e)) continue;
      if (now < e.c.deadline) {
        still.push_back(std::move(e));
      } else if (e.lingering || e.c.buffered.empty()) {
        closeSocket(e.c.fd);  // an idle keep-alive connection, or a refused client that did not close
      } else {
        refuse(
            e.c.fd, 408, "Request Timeout",
            ApiError(408, "invalid_request_error", "The request head did not arrive in time.", {}, "request_timeout"));
      }
    }
    waiting.swap(still);
  }
  std::lock_guard lock(mutex_);
  for (Entry& e : waiting) closeSocket(e.c.fd);
  for (Entry& e : incoming_) closeSocket(e.c.fd);
  incoming_.clear();
}

}  // namespace zipmoe::serve
