// OpenAiServer (see zipmoe/serve/openai_server.h): cpp-httplib routes around the scheduler's tickets.
#include "zipmoe/serve/openai_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "serve/connection_stream.h"
#include "serve/gated_http_server.h"
#include "serve/http_guard.h"
#include "serve/anthropic_routes.h"
#include "serve/api_key.h"
#include "serve/openai_responses.h"
#include "zipmoe/base/error.h"

namespace zipmoe {

using Event = RequestTicket::Event;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);
constexpr const char* kJson = "application/json";
constexpr const char* kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";
constexpr int kListenBacklog = 1024;  // pending connections the kernel queues before accept
constexpr auto kDrainTime = std::chrono::seconds(10);  // stop() waits this long at most for open requests

int64_t unixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void sendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(e.toJson(), kJson);
}

ApiError shuttingDown() { return ApiError(503, "server_error", "The server is shutting down.", {}, "shutting_down"); }

using serve::clientGone;
using serve::kClientClosedRequest;
using serve::OpenRequest;

serve::GatedServerOptions gateOptions(const ServerOptions& o) {
  const int workers = std::max(o.maxConnections, 4);
  return serve::GatedServerOptions{workers, std::chrono::seconds(o.readTimeoutSeconds), 64 * 1024,
                                   static_cast<size_t>(std::max(256, 4 * workers)), std::chrono::milliseconds(5000)};
}

// A stream's state, shared by httplib's content provider and its releaser.
struct Stream {
  std::shared_ptr<RequestTicket> ticket;
  Endpoint endpoint = Endpoint::ChatCompletions;
  serve::ResponseIds ids;
  bool includeUsage = false;
  bool opened = false, ended = false;
  std::optional<ReplyObserver> observer;
  std::chrono::steady_clock::time_point lastWrite = std::chrono::steady_clock::now();
  std::unique_ptr<OpenRequest> open;
};

bool sendEvent(httplib::DataSink& sink, const std::string& payload) {
  const std::string frame = "data: " + payload + "\n\n";
  return sink.write(frame.data(), frame.size());
}

}  // namespace

struct OpenAiServer::Impl {
  ServeScheduler& scheduler;
  ServerOptions options;
  serve::GatedHttpServer server;
  const serve::HttpGuard guard;
  std::thread listener;
  std::atomic<bool> stopping{false};
  std::atomic<int> openRequests{0};
  std::atomic<uint64_t> nextResponse{1};
  int port = 0;
  int listenFd = -1;  // the bound socket: httplib's socket-options hook reports it, inside start()
  const int64_t created = unixNow();
  std::shared_ptr<ServeMetrics> metrics;
  serve::AnthropicRoutes anthropic;  // /v1/messages (anthropic_routes.h)

  Impl(ServeScheduler& s, ServerOptions o)
      : scheduler(s),
        options(std::move(o)),
        server(gateOptions(options)),
        guard(serve::HttpGuardOptions{options.host, options.allowedHosts, options.corsOrigins, options.maxBodyBytes}),
        metrics(options.metrics ? options.metrics : std::make_shared<ServeMetrics>()),
        anthropic(scheduler, options, stopping, *metrics, openRequests) {}

  bool needsKey(const std::string& path) const {
    return path.rfind("/v1/", 0) == 0 || (path == "/metrics" && !options.metricsPublic);
  }
  // An error answered before the request reached its handler (counted at generation endpoints).
  void refuse(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
    if (metrics->tracksEndpoint(req.path)) metrics->recordRequest(req.path, RequestOutcome::Refused, e.status());
    fail(req, res, e);
  }

  void routes() {
    server.set_payload_max_length(options.maxBodyBytes);
    server.set_keep_alive_timeout(2);
    // httplib's own options (SO_REUSEPORT) would let a second server share the port; SO_REUSEADDR
    // only allows a restart over connections in TIME_WAIT. The hook also tells start() the socket.
    server.set_socket_options([this](int sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      listenFd = sock;
    });
    // Before the body is read (docs/SERVER.md, "Safety on a desktop"): Host, Content-Type, the
    // declared length, CORS; then the key.
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (const auto refusal = guard.refusal(req)) {
        refuse(req, res, *refusal);
        serve::ConnectionStream* s = serve::ConnectionStream::current();
        if (s != nullptr && serve::bodyLeftUnread(req)) s->closeAfterReply();
        return httplib::Server::HandlerResponse::Handled;
      }
      if (guard.answerCors(req, res)) return httplib::Server::HandlerResponse::Handled;
      if (serve::AnthropicRoutes::handles(req.path)) return anthropic.authorize(req, res);
      if (options.apiKey.empty() || !needsKey(req.path)) return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      if (auth.empty()) {
        refuse(req, res, ApiError(401, "invalid_request_error",
                                "You didn't provide an API key: send it as 'Authorization: Bearer KEY'.", {},
                                "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
      }
      if (auth.rfind("Bearer ", 0) != 0 || !serve::sameKey(auth.substr(7), options.apiKey)) {
        refuse(req, res, ApiError(401, "invalid_request_error", "Incorrect API key provided.", {}, "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });

    server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      serve::ConnectionStream* s = serve::ConnectionStream::current();
      if (s != nullptr && res.status == 400) s->closeAfterReply();  // httplib could not read the request
      if (s != nullptr && s->readTimedOut()) {
        refuse(req, res, ApiError(408, "invalid_request_error",
                                "The request body did not arrive in time (" + std::to_string(options.readTimeoutSeconds) +
                                    " s, plus 1 s per 64 KiB it declares).",
                                "body", "request_timeout"));
      } else if (res.status == 413) {
        refuse(req, res, ApiError(413, "invalid_request_error",
                                "The request body is larger than this server accepts (" +
                                    std::to_string(options.maxBodyBytes) + " bytes).",
                                "body", "request_too_large"));
      } else if (res.status == 404) {
        fail(req, res, ApiError(404, "invalid_request_error", "Unknown request URL: " + req.method + " " + req.path + ".",
                                {}, "unknown_url"));
      } else {
        fail(req, res, ApiError(res.status, res.status >= 500 ? "server_error" : "invalid_request_error",
                                "The request failed with HTTP status " + std::to_string(res.status) + "."));
      }
    });

    server.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const ApiError& e) {
        fail(req, res, e);
        return;
      } catch (const std::exception& e) {
        fail(req, res, ApiError(500, "server_error", std::string("Internal error: ") + e.what()));
        return;
      } catch (...) {
      }
      fail(req, res, ApiError(500, "server_error", "Internal error."));
    });

    server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const ServeCounters c = scheduler.counters();
      const nlohmann::json j = {{"status", stopping ? "stopping" : "ok"},
                                {"model", options.modelId},
                                {"schedule", schedulePolicyName(scheduler.options().policy)},
                                {"running", c.running},
                                {"waiting", c.waiting},
                                {"cached_sequences", c.cachedSequences},
                                {"live_sequences", c.liveSequences},
                                {"completed", c.completed},
                                {"cancelled", c.cancelled},
                                {"failed", c.failed},
                                {"steps", c.steps},
                                {"generated_tokens", c.generatedTokens},
                                {"reused_prompt_tokens", c.reusedPromptTokens},
                                {"prompt_cache_hits", c.promptCacheHits},
                                {"aged_admissions", c.agedAdmissions},
                                {"memory",
                                 {{"budget_bytes", c.budgetBytes},
                                  {"peak_used_bytes", c.peakUsedBytes},
                                  {"over_budget_steps", c.overBudgetSteps}}}};
      res.set_content(j.dump(), kJson);
    });
    server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(serve::modelListJson(options.modelId, created), kJson);
    });
    server.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string id = req.matches[1];
      if (id != options.modelId) {
        sendError(res, ApiError(404, "invalid_request_error", "The model '" + id + "' does not exist.", "model",
                                "model_not_found"));
        return;
      }
      res.set_content(serve::modelJson(options.modelId, created), kJson);
    });
    const auto generation = [this](const char* path, Endpoint endpoint) {
      metrics->trackEndpoint(path);
      server.Post(path, [this, endpoint](const httplib::Request& req, httplib::Response& res) { generate(endpoint, req, res); });
    };
    generation("/v1/chat/completions", Endpoint::ChatCompletions);
    generation("/v1/completions", Endpoint::Completions);
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics->render(scheduler.counters()), kPrometheusText);
    });
    anthropic.addTo(server);
  }

  // The server's own errors (unknown path, body too large, an exception) in the shape of the API the
  // path belongs to.
  void fail(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
    if (serve::AnthropicRoutes::handles(req.path)) {
      serve::AnthropicRoutes::sendError(res, e);
    } else {
      sendError(res, e);
    }
  }

  void generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    ReplyObserver observer(*metrics, req.path);
    auto open = std::make_unique<OpenRequest>(openRequests);  // counted before `stopping` is read: see stop()
    if (stopping) {
      observer.end(RequestOutcome::Refused, 503);
      sendError(res, shuttingDown());
      return;
    }
    GenerationRequest request;
    try {
      request = parseGenerationRequest(endpoint, req.body);
      if (request.model != options.modelId)
        throw ApiError(404, "invalid_request_error",
                       "The model '" + request.model + "' does not exist; this server serves '" + options.modelId + "'.",
                       "model", "model_not_found");
    } catch (const ApiError& e) {
      observer.end(RequestOutcome::Refused, e.status());
      sendError(res, e);
      return;
    }
    const bool stream = request.stream;
    const bool includeUsage = request.includeUsage;
    std::shared_ptr<RequestTicket> ticket;
    try {
      ticket = scheduler.submit(std::move(request));
    } catch (const ApiError& e) {
      observer.end(RequestOutcome::Refused, e.status());
      sendError(res, e);
      return;
    }
    serve::ResponseIds ids{std::string(endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") +
                               std::to_string(created) + "-" + std::to_string(nextResponse++),
                           unixNow(), options.modelId};
    if (!stream) {
      answerWhole(endpoint, ids, ticket, observer, res);
      return;
    }
    auto state = std::make_shared<Stream>();
    state->ticket = ticket;
    state->endpoint = endpoint;
    state->ids = ids;
    state->includeUsage = includeUsage;
    state->observer = std::move(observer);
    state->open = std::move(open);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, state](size_t, httplib::DataSink& sink) { return pump(*state, sink); },
        [state](bool success) {
          if (!success || !state->ended) {  // the client went away: free its sequence
            state->ticket->cancel();
            state->observer->end(RequestOutcome::Cancelled, kClientClosedRequest);
          }
        });
  }

  // A non-streaming request: waits for the whole reply, for the server to stop (503), or for its
  // client to go away (the ticket is cancelled: its sequence is freed at the next step).
  void answerWhole(Endpoint endpoint, const serve::ResponseIds& ids, const std::shared_ptr<RequestTicket>& ticket,
                   ReplyObserver& observer, httplib::Response& res) {
    std::string text;
    std::vector<Event> events;
    for (;;) {
      if (clientGone()) {
        ticket->cancel();
        observer.end(RequestOutcome::Cancelled, kClientClosedRequest);
        sendError(res, ApiError(kClientClosedRequest, "invalid_request_error", "The client closed the request.", {}, "cancelled"));
        return;
      }
      events.clear();
      const bool more = ticket->wait(events, kPoll);
      observer.observe(events);
      for (Event& e : events) {
        if (e.kind == Event::Kind::Text) {
          text += e.text;
        } else if (e.kind == Event::Kind::Failed) {
          sendError(res, *e.error);
          return;
        } else if (e.kind == Event::Kind::Finished) {
          res.set_content(serve::completionJson(endpoint, ids, text, e.finish), kJson);
          return;
        }
      }
      if (!more || stopping) break;
    }
    observer.end(RequestOutcome::Failed, 503);
    ticket->cancel();
    sendError(res, shuttingDown());
  }

  // One call of httplib's content provider: waits a little for events and writes them.
  bool pump(Stream& s, httplib::DataSink& sink) {
    const auto wrote = [&](bool ok) {
      if (ok) s.lastWrite = std::chrono::steady_clock::now();
      return ok;
    };
    if (!s.opened) {
      s.opened = true;
      if (!wrote(sendEvent(sink, serve::openingChunk(s.endpoint, s.ids, s.includeUsage)))) return false;
    }
    if (clientGone()) return false;  // the releaser cancels
    std::vector<Event> events;
    const bool more = s.ticket->wait(events, kPoll);
    s.observer->observe(events);
    for (Event& e : events) {
      bool ok = true;
      if (e.kind == Event::Kind::Text) {
        ok = sendEvent(sink, serve::textChunk(s.endpoint, s.ids, e.text, s.includeUsage));
      } else if (e.kind == Event::Kind::ToolCallBegin || e.kind == Event::Kind::ToolCallDelta) {
        ok = sendEvent(sink, serve::toolCallChunk(s.ids, e, s.includeUsage));
      } else if (e.kind == Event::Kind::Failed) {
        s.ended = true;
        ok = sendEvent(sink, e.error->toJson());
        if (ok) sink.done();
        return ok;
      } else {
        s.ended = true;
        ok = sendEvent(sink, serve::closingChunk(s.endpoint, s.ids, e.finish, s.includeUsage));
        if (ok && s.includeUsage) ok = sendEvent(sink, serve::usageChunk(s.endpoint, s.ids, e.finish));
        if (ok) ok = sink.write("data: [DONE]\n\n", 14);
        if (ok) sink.done();
        return ok;
      }
      if (!wrote(ok)) return false;  // the client is gone (the releaser cancels)
    }
    if (!more) {  // closed without a final event taken here: nothing more will come
      s.ended = true;
      s.observer->end(RequestOutcome::Failed, 500);
      sink.done();
      return true;
    }
    if (stopping) {  // an error event, then [DONE]: the client knows the reply is cut, and why
      s.ended = true;
      s.ticket->cancel();
      bool ok = sendEvent(sink, shuttingDown().toJson());
      if (ok) ok = sink.write("data: [DONE]\n\n", 14);
      if (ok) sink.done();
      return ok;
    }
    if (std::chrono::steady_clock::now() - s.lastWrite >= std::chrono::milliseconds(options.heartbeatMs)) {
      static constexpr char kBeat[] = ": keep-alive\n\n";
      if (!wrote(sink.write(kBeat, sizeof kBeat - 1))) return false;
    }
    return true;
  }
};

OpenAiServer::OpenAiServer(ServeScheduler& scheduler, ServerOptions options)
    : impl_(std::make_unique<Impl>(scheduler, std::move(options))) {
  impl_->routes();
}

OpenAiServer::~OpenAiServer() { stop(); }

int OpenAiServer::start() {
  Impl& m = *impl_;
  if (m.listener.joinable()) return m.port;
  const std::string where = m.options.host + ":" + std::to_string(m.options.port);
  if (m.options.port == 0) {
    m.port = m.server.bind_to_any_port(m.options.host);
    if (m.port <= 0) throw Error("serve: cannot bind " + where + " (any free port)");
  } else {
    if (m.options.port < 0 || m.options.port > 65535) throw Error("serve: port " + std::to_string(m.options.port) + " is out of range");
    if (!m.server.bind_to_port(m.options.host, m.options.port))
      throw Error("serve: cannot bind " + where + " (in use, or the host is not an address of this machine)");
    m.port = m.options.port;
  }
  // Debian's httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed in its shared
  // library): 32 clients connecting at once overflowed it, and the kernel's SYN cookies then reset
  // some connections (the load test saw "Connection reset by peer"). Listening again on the bound
  // socket raises the backlog (the kernel caps it at net.core.somaxconn).
  if (m.listenFd >= 0) ::listen(m.listenFd, kListenBacklog);
  m.listener = std::thread([&m] { m.server.listen_after_bind(); });
  return m.port;
}

void OpenAiServer::stop() {
  Impl& m = *impl_;
  m.stopping = true;
  // Open requests now answer 503 and streams end with a shutting_down event and [DONE], within a poll
  // interval; the listener must not stop before (httplib stops writing a stream once it does).
  const auto until = std::chrono::steady_clock::now() + kDrainTime;
  while (m.openRequests > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(kPoll / 10);
  if (m.listener.joinable()) {
    m.server.stop();
    m.listener.join();
  }
}

int OpenAiServer::port() const { return impl_->port; }
const ServerOptions& OpenAiServer::options() const { return impl_->options; }

std::string generateApiKey() {
  std::random_device rd;
  std::string key = "zm-";
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) key += kHex[rd() % 16];
  return key;
}

}  // namespace zipmoe
