// AnthropicRoutes — the Anthropic Messages API on the server's cpp-httplib server (OpenAiServer,
// zipmoe/serve/openai_server.h), so that agents written for Anthropic's API run on a local model:
// POST /v1/messages (a whole message object, or with "stream": true Anthropic's server-sent events,
// serve/anthropic_stream.h) and POST /v1/messages/count_tokens ({"input_tokens": N}: the prompt
// rendered and encoded as the real request's, ServeScheduler::renderPrompt). Bodies are read by
// parseAnthropicRequest (zipmoe/serve/anthropic_request.h); every error on these paths has
// Anthropic's shape (serve/anthropic_responses.h), in a stream an `error` event. The key (when the
// server has one) comes as `x-api-key: KEY` or `Authorization: Bearer KEY`; `anthropic-version` is
// accepted and not required. Internal to serve/. Docs: docs/SERVER.md.
// Thread-safety: the handlers run on the server's worker threads and share only the scheduler
// (thread-safe) and an atomic counter. Cost: one worker thread per open request.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serve/anthropic_responses.h"
#include "zipmoe/serve/anthropic_request.h"
#include "zipmoe/serve/openai_server.h"
#include "zipmoe/serve/serve_metrics.h"

namespace zipmoe::serve {

class AnthropicRoutes {
 public:
  // REQUIRES: all of them outlive the routes (OpenAiServer::Impl holds them together). `metrics`
  // counts these requests as the OpenAI endpoints' are; `openRequests` counts the ones open, which
  // OpenAiServer::stop() waits for.
  AnthropicRoutes(ServeScheduler& scheduler, const ServerOptions& options, const std::atomic<bool>& stopping,
                  ServeMetrics& metrics, std::atomic<int>& openRequests);

  // Whether `path` is one of these routes' (/v1/messages and below): its errors take Anthropic's shape.
  static bool handles(const std::string& path);
  void addTo(httplib::Server& server);
  // The pre-routing key check for these paths: Handled (answered 401) or Unhandled (go on).
  httplib::Server::HandlerResponse authorize(const httplib::Request& req, httplib::Response& res) const;
  static void sendError(httplib::Response& res, const ApiError& error);

 private:
  struct StreamState;
  GenerationRequest parse(AnthropicEndpoint endpoint, const httplib::Request& req) const;
  void messages(const httplib::Request& req, httplib::Response& res);
  void countTokens(const httplib::Request& req, httplib::Response& res) const;
  void answerWhole(const MessageIds& ids, const std::vector<std::string>& stops,
                   const std::shared_ptr<RequestTicket>& ticket, ReplyObserver& observer, httplib::Response& res) const;
  bool pump(StreamState& s, httplib::DataSink& sink) const;
  std::optional<std::string> stopSequence(const std::vector<std::string>& stops, const GenerationStats& info) const;

  ServeScheduler& scheduler_;
  const ServerOptions& options_;
  const std::atomic<bool>& stopping_;
  ServeMetrics& metrics_;
  std::atomic<int>& openRequests_;
  std::atomic<uint64_t> nextMessage_{1};
  const int64_t started_;
};

}  // namespace zipmoe::serve
