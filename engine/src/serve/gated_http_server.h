// GatedHttpServer — cpp-httplib's Server (0.11) with its connections served so that slow clients
// cannot lock others out. httplib gives each accepted connection a worker thread that waits for the
// request with a per-recv timeout only: four clients sending a byte every two seconds held four
// workers for as long as they liked. Here:
//   - an accepted connection waits in a ConnectionGate (one poll thread) until its whole request head
//     has arrived, at most `readTimeout` (then 408); only then does it take a worker;
//   - the body must arrive by readTimeout + Content-Length / minBodyRate after the head (then 408);
//   - GET, HEAD and OPTIONS requests (/health, /v1/models, preflights: no body, answered at once)
//     are served by two workers of their own, so they are answered even while every one of the
//     `workers` serves a long generation or waits for a slow body;
//   - after a reply the connection goes back to the gate to wait for its next request (keep-alive),
//     and a connection whose request body was left unread lingers there until the client closes.
// The worker serving a connection makes its ConnectionStream current() for handlers. httplib's own
// accept loop, routing, handlers and stop() are used as they are: the server's task queue admits each
// accepted socket to the gate (on the listener thread) and owns the worker pool.
// Thread-safety: as httplib::Server. Cost: `workers` + 2 threads + the gate's thread while listening.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>

#include "serve/connection_gate.h"

namespace zipmoe::serve {

struct GatedServerOptions {
  int workers = 64;                              // requests served at once
  std::chrono::seconds readTimeout{10};          // a request head must arrive within this
  size_t minBodyRate = 64 * 1024;                // bytes/s a body may not fall below
  size_t maxWaiting = 256;                       // connections waiting for a head; more get 503
  std::chrono::milliseconds writeTimeout{5000};  // each write to a client that does not read
};

class GatedHttpServer : public httplib::Server {
 public:
  explicit GatedHttpServer(GatedServerOptions options);
  const GatedServerOptions& gateOptions() const { return options_; }

 private:
  class Connections;
  bool process_and_close_socket(socket_t sock) override;
  // One request of a connection whose head is complete, on a worker; then back to the gate or closed.
  void serve(PendingConnection c, ConnectionGate& gate);

  GatedServerOptions options_;
  std::atomic<Connections*> connections_{nullptr};  // while listening
};

}  // namespace zipmoe::serve
