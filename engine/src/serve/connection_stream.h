// ConnectionStream — one client connection as cpp-httplib's Stream, with what httplib 0.11 lacks: an
// overall deadline for reading a request (httplib only bounds each recv), a way for a handler to see
// that its client went away (the handler gets a Request, never the socket), and a flag that closes
// the connection after a reply whose request body was left unread.
// The worker serving a connection makes its stream current() for the thread (a Scope), so handlers
// on that worker reach it. Thread-safety: one worker at a time; current() is per thread.
// Cost: a 4 KiB read buffer; poll() before each read and write.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <string>

namespace zipmoe::serve {

class ConnectionStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;

  // `buffered`: bytes already read from the socket (by the ConnectionGate), served first.
  ConnectionStream(int fd, std::string buffered, std::chrono::milliseconds writeTimeout);
  ConnectionStream(const ConnectionStream&) = delete;
  ConnectionStream& operator=(const ConnectionStream&) = delete;

  // Reads fail (return -1) once `deadline` has passed; readTimedOut() then says so.
  void setReadDeadline(Clock::time_point deadline) { readDeadline_ = deadline; }
  bool readTimedOut() const { return timedOut_; }
  // The bytes read from the socket but not yet taken: the start of the next request.
  std::string takeBuffered();
  // The client closed its side or the connection broke (POLLRDHUP/POLLHUP/POLLERR): nobody reads a reply.
  bool peerClosed() const;
  void closeAfterReply() { closeAfterReply_ = true; }
  bool closingAfterReply() const { return closeAfterReply_; }

  // The stream the calling thread serves, or null (not on a connection's worker).
  static ConnectionStream* current();
  class Scope {
   public:
    explicit Scope(ConnectionStream& s);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  // httplib::Stream
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return fd_; }

 private:
  // Waits for `events` on the socket until `deadline`; false when it passed or the socket failed.
  bool waitFor(short events, Clock::time_point deadline) const;

  int fd_;
  std::string buffer_;
  size_t taken_ = 0;  // bytes of buffer_ already read
  std::chrono::milliseconds writeTimeout_;
  Clock::time_point readDeadline_ = Clock::time_point::max();
  mutable bool timedOut_ = false;
  bool closeAfterReply_ = false;
};

// nginx's status for a request whose client went away first (metrics count it so).
inline constexpr int kClientClosedRequest = 499;

// The client of the request this worker serves closed its connection: nobody will read the reply.
inline bool clientGone() {
  const ConnectionStream* s = ConnectionStream::current();
  return s != nullptr && s->peerClosed();
}

// Counts a generation request from its handler's start until its reply is written (a stream's state
// holds one): OpenAiServer::stop() waits for them to end before the listener stops.
struct OpenRequest {
  explicit OpenRequest(std::atomic<int>& n) : count(n) { ++count; }
  ~OpenRequest() { --count; }
  OpenRequest(const OpenRequest&) = delete;
  OpenRequest& operator=(const OpenRequest&) = delete;
  std::atomic<int>& count;
};

}  // namespace zipmoe::serve
