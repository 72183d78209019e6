// OpenAiServer — the HTTP face of a ServeScheduler: an OpenAI-compatible API on cpp-httplib.
//
// Endpoints: GET /v1/models (and /v1/models/ID), POST /v1/chat/completions, POST /v1/completions
// (both also streaming: server-sent events of chunks, ending in `data: [DONE]`; with
// stream_options.include_usage a last chunk carries the usage), GET /health (no key needed: the
// scheduler's counters), GET /metrics (Prometheus text: zipmoe/serve/serve_metrics.h; it needs the
// key unless metricsPublic), and Anthropic's Messages API — POST /v1/messages and
// /v1/messages/count_tokens, with Anthropic's errors and events (serve/anthropic_routes.h). OpenAI
// bodies are read by parseGenerationRequest (zipmoe/serve/openai_request.h); every other error is
// an OpenAI error object with its status (400 naming the field, 401 for a wrong or
// missing key, 404 for an unknown model or path, 413 for a body over maxBodyBytes, 503 while
// shutting down or when the queue is full). A client that goes away, streaming or not, is noticed
// while its request waits (a poll of its socket, and for a stream a failed write of a token or of
// the SSE comment sent every heartbeat) and its request is cancelled: the scheduler frees its
// sequence at its next step boundary.
// Safety on a desktop (docs/SERVER.md): before a body is read, the Host header must name this server,
// a POST must be application/json with a Content-Length within maxBodyBytes, and CORS is off unless
// corsOrigins names origins (serve/http_guard.h); a connection takes a worker only once its request
// head has arrived, within readTimeoutSeconds, and its body must follow at a least rate
// (serve/gated_http_server.h). stop() answers open requests 503 shutting_down and ends open streams
// with a shutting_down error event and `data: [DONE]` before the listener stops.
// Thread-safety: start/stop from one thread; requests are served on the server's own worker pool
// (maxConnections threads), which talks to the scheduler's engine thread through RequestTickets.
// Cost: one thread per request being served, one for the connections waiting for a request head.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zipmoe/serve/serve_metrics.h"
#include "zipmoe/serve/serve_scheduler.h"

namespace zipmoe {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8080;                 // 0 = any free port (start() returns it)
  std::string apiKey;              // empty = no key; else every /v1 request needs "Authorization: Bearer KEY"
                                   // (/v1/messages: or "x-api-key: KEY")
  std::string modelId;             // what /v1/models lists and requests must name
  size_t maxBodyBytes = 1 << 20;
  int maxConnections = 64;         // worker threads: streams each hold one
  int heartbeatMs = 1000;          // an SSE comment this often while a stream waits
  bool metricsPublic = false;      // GET /metrics without the key (else it needs it when there is one)
  // What GET /metrics renders; null: the server keeps its own (without the step metrics and sources).
  std::shared_ptr<ServeMetrics> metrics;
  std::vector<std::string> allowedHosts;  // more names the Host header may give (--allowed-host)
  std::vector<std::string> corsOrigins;   // web origins allowed to call (--cors); none: CORS off
  int readTimeoutSeconds = 10;     // a request head within this; its body within this + 1 s per 64 KiB
};

class OpenAiServer {
 public:
  // REQUIRES: the scheduler outlives the server.
  OpenAiServer(ServeScheduler& scheduler, ServerOptions options);
  ~OpenAiServer();  // stop()
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  // Binds and starts listening on its own thread; returns the port. Throws zipmoe::Error naming the
  // host and port when it cannot bind.
  int start();
  // Ends open streams, stops listening and joins the listener (which joins the worker pool).
  // Idempotent.
  void stop();
  int port() const;
  const ServerOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A key for --api-key / the app's local server: 32 random hex digits from the system's entropy.
std::string generateApiKey();

}  // namespace zipmoe
