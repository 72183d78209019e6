// ConnectionGate — the connections no worker holds. Each waits here, on one poll() thread, until its
// request head (request line and headers, up to the blank line) has fully arrived; only then is it
// handed to a worker. A head not complete by its deadline gets 408 and is closed; a connection that
// closes meanwhile is dropped; past `maxWaiting` connections a new one gets 503 and is closed. So a
// slow client (one byte every few seconds: slowloris) costs a file descriptor here, never one of the
// server's worker threads, and /health and real requests go on being served.
// A refused request's connection can also linger here: its write side shut, its input read and
// dropped until the client closes (at most kLingerTime), so that the client reads the refusal before
// the close instead of a reset.
// Thread-safety: admit/linger from any thread; stop from one. Cost: one thread; a poll over the
// waiting connections per event; each holds the bytes read so far (at most kMaxHead).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zipmoe::serve {

struct PendingConnection {
  int fd = -1;
  std::string buffered;                              // bytes read so far: a complete head once ready
  std::chrono::steady_clock::time_point deadline{};  // the head must be complete by then
};

class ConnectionGate {
 public:
  static constexpr size_t kMaxHead = 64 * 1024;  // larger heads get 431
  static constexpr std::chrono::milliseconds kLingerTime{2000};

  // `ready` runs on the gate's thread with each connection whose head is complete; it owns the fd.
  ConnectionGate(std::function<void(PendingConnection)> ready, size_t maxWaiting);
  ~ConnectionGate();  // stop()
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // Takes the connection's fd; a head already in `buffered` goes to `ready` at once. After stop(),
  // closes it.
  void admit(PendingConnection c);
  // Takes the fd of a connection whose reply is written: shuts its write side, drops its input, closes.
  void linger(int fd);
  // Closes every connection it holds and joins its thread. Idempotent.
  void stop();

 private:
  struct Entry {
    PendingConnection c;
    bool lingering = false;
  };
  bool enqueue(Entry e);  // false after stop(): the caller closes the fd
  void run();
  // Reads what arrived; false when the entry is done (handed over or closed).
  bool advance(Entry& e);

  std::function<void(PendingConnection)> ready_;
  size_t maxWaiting_;
  int wake_ = -1;  // an eventfd: admit/linger/stop wake the poll
  std::mutex mutex_;
  std::vector<Entry> incoming_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace zipmoe::serve
