// GatedHttpServer (see gated_http_server.h): a task queue that admits sockets to the gate and serves
// complete heads on a thread pool, one request per job.
#include "serve/gated_http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "serve/connection_stream.h"

namespace zipmoe::serve {

using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kQuickWorkers = 2;

// GET, HEAD and OPTIONS carry no body here and are answered at once (/health, /v1/models, a CORS
// preflight): they have workers of their own, so that they are answered while every other worker
// serves a long generation or a slow body.
bool quickRequest(const std::string& head) {
  for (const char* method : {"GET ", "HEAD ", "OPTIONS "})
    if (head.rfind(method, 0) == 0) return true;
  return false;
}

}  // namespace

class GatedHttpServer::Connections final : public httplib::TaskQueue {
 public:
  explicit Connections(GatedHttpServer& server)
      : server_(server),
        workers_(static_cast<size_t>(server.options_.workers)),
        quickWorkers_(kQuickWorkers),
        gate_(
            [this](PendingConnection c) {
              httplib::ThreadPool& pool = quickRequest(c.buffered) ? quickWorkers_ : workers_;
              pool.enqueue([this, c = std::move(c)]() mutable { server_.serve(std::move(c), gate_); });
            },
            server.options_.maxWaiting) {}

  // httplib's listener hands each accepted socket over as a job that calls process_and_close_socket:
  // it runs here, on the listener, and only admits the socket to the gate.
  void enqueue(std::function<void()> job) override { job(); }
  // After the listener stopped accepting: the waiting connections are closed, the workers finish
  // the requests they serve and are joined.
  void shutdown() override {
    server_.connections_ = nullptr;
    gate_.stop();
    workers_.shutdown();
    quickWorkers_.shutdown();
  }
  ConnectionGate& gate() { return gate_; }

 private:
  GatedHttpServer& server_;
  httplib::ThreadPool workers_;
  httplib::ThreadPool quickWorkers_;
  ConnectionGate gate_;
};

GatedHttpServer::GatedHttpServer(GatedServerOptions options) : options_(options) {
  new_task_queue = [this] {
    auto* c = new Connections(*this);
    connections_ = c;
    return c;
  };
}

bool GatedHttpServer::process_and_close_socket(socket_t sock) {
  Connections* c = connections_;
  if (c == nullptr) {
    ::close(sock);
    return false;
  }
  c->gate().admit(PendingConnection{sock, {}, Clock::now() + options_.readTimeout});
  return true;
}

void GatedHttpServer::serve(PendingConnection c, ConnectionGate& gate) {
  ConnectionStream stream(c.fd, std::move(c.buffered), options_.writeTimeout);
  stream.setReadDeadline(c.deadline);
  bool keepAlive = false;
  {
    const ConnectionStream::Scope current(stream);
    const bool stopping = svr_sock_ == INVALID_SOCKET;
    bool closed = false;
    const bool ok = process_request(stream, stopping, closed, [&](httplib::Request& req) {
      // The body's deadline: readTimeout, plus a second for each minBodyRate bytes it declares.
      const unsigned long long length = std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10);
      stream.setReadDeadline(Clock::now() + options_.readTimeout +
                             std::chrono::seconds(length / std::max<size_t>(options_.minBodyRate, 1)));
    });
    keepAlive = ok && !closed && !stopping && !stream.closingAfterReply() && !stream.readTimedOut();
  }
  if (keepAlive) {
    gate.admit(PendingConnection{c.fd, stream.takeBuffered(), Clock::now() + options_.readTimeout});
  } else if (stream.closingAfterReply()) {
    gate.linger(c.fd);
  } else {
    ::shutdown(c.fd, SHUT_RDWR);
    ::close(c.fd);
  }
}

}  // namespace zipmoe::serve
