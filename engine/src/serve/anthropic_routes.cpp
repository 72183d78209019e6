// AnthropicRoutes (see anthropic_routes.h): the Messages endpoints around the scheduler's tickets.
#include "serve/anthropic_routes.h"

#include "serve/connection_stream.h"

#include <chrono>
#include <string_view>

#include "serve/anthropic_stream.h"
#include "serve/api_key.h"

namespace zipmoe::serve {

using Event = RequestTicket::Event;
using nlohmann::json;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);
constexpr const char* kJson = "application/json";
constexpr std::string_view kPath = "/v1/messages";

int64_t unixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// A stream's state, shared by httplib's content provider and its releaser.
struct AnthropicRoutes::StreamState {
  StreamState(std::shared_ptr<RequestTicket> t, AnthropicStream stream, int tokens, ReplyObserver o,
              std::unique_ptr<OpenRequest> request)
      : ticket(std::move(t)), sse(std::move(stream)), promptTokens(tokens), observer(std::move(o)), open(std::move(request)) {}
  std::shared_ptr<RequestTicket> ticket;
  AnthropicStream sse;
  int promptTokens = 0;
  ReplyObserver observer;
  std::unique_ptr<OpenRequest> open;
  bool opened = false, ended = false;
  std::chrono::steady_clock::time_point lastWrite = std::chrono::steady_clock::now();
};

AnthropicRoutes::AnthropicRoutes(ServeScheduler& scheduler, const ServerOptions& options, const std::atomic<bool>& stopping,
                                 ServeMetrics& metrics, std::atomic<int>& openRequests)
    : scheduler_(scheduler), options_(options), stopping_(stopping), metrics_(metrics), openRequests_(openRequests),
      started_(unixNow()) {
  metrics_.trackEndpoint(std::string(kPath));
}

bool AnthropicRoutes::handles(const std::string& path) {
  return path.rfind(kPath, 0) == 0 && (path.size() == kPath.size() || path[kPath.size()] == '/');
}

void AnthropicRoutes::sendError(httplib::Response& res, const ApiError& error) {
  res.status = error.status();
  res.set_content(anthropicErrorJson(error), kJson);
}

httplib::Server::HandlerResponse AnthropicRoutes::authorize(const httplib::Request& req, httplib::Response& res) const {
  if (options_.apiKey.empty()) return httplib::Server::HandlerResponse::Unhandled;
  std::string key = req.get_header_value("x-api-key");
  const std::string auth = req.get_header_value("Authorization");
  if (key.empty() && auth.rfind("Bearer ", 0) == 0) key = auth.substr(7);
  if (key.empty()) {
    sendError(res, ApiError(401, "authentication_error",
                            "No API key: send it as 'x-api-key: KEY' (or 'Authorization: Bearer KEY')."));
    return httplib::Server::HandlerResponse::Handled;
  }
  if (!sameKey(key, options_.apiKey)) {
    sendError(res, ApiError(401, "authentication_error", "Invalid API key."));
    return httplib::Server::HandlerResponse::Handled;
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

void AnthropicRoutes::addTo(httplib::Server& server) {
  server.Post(std::string(kPath), [this](const httplib::Request& req, httplib::Response& res) { messages(req, res); });
  server.Post(std::string(kPath) + "/count_tokens",
              [this](const httplib::Request& req, httplib::Response& res) { countTokens(req, res); });
}

GenerationRequest AnthropicRoutes::parse(AnthropicEndpoint endpoint, const httplib::Request& req) const {
  GenerationRequest r = parseAnthropicRequest(endpoint, req.body);
  if (r.model != options_.modelId)
    throw ApiError(404, "not_found_error",
                   "The model '" + r.model + "' does not exist; this server serves '" + options_.modelId + "'.", "model");
  return r;
}

void AnthropicRoutes::countTokens(const httplib::Request& req, httplib::Response& res) const {
  try {
    const GenerationRequest r = parse(AnthropicEndpoint::CountTokens, req);
    res.set_content(dumpJson({{"input_tokens", scheduler_.renderPrompt(r).size()}}), kJson);
  } catch (const ApiError& e) {
    sendError(res, e);
  }
}

// The stop sequence that ended a reply: the only one, or the one its decoded tokens go on with.
std::optional<std::string> AnthropicRoutes::stopSequence(const std::vector<std::string>& stops,
                                                         const GenerationStats& info) const {
  if (info.stopReason != StopReason::StopString || stops.empty()) return std::nullopt;
  if (stops.size() == 1) return stops.front();
  return matchedStopSequence(stops, info.text, scheduler_.decodeReply(info.tokens));
}

void AnthropicRoutes::messages(const httplib::Request& req, httplib::Response& res) {
  ReplyObserver observer(metrics_, req.path);
  auto open = std::make_unique<OpenRequest>(openRequests_);  // counted before `stopping` is read
  const auto refuse = [&](const ApiError& e) {
    observer.end(RequestOutcome::Refused, e.status());
    sendError(res, e);
  };
  if (stopping_) {
    refuse(ApiError(503, "overloaded_error", "The server is shutting down."));
    return;
  }
  GenerationRequest request;
  int promptTokens = 0;
  std::shared_ptr<RequestTicket> ticket;
  try {
    request = parse(AnthropicEndpoint::Messages, req);
    // A stream announces its input tokens in message_start, before the engine renders the request;
    // a conversation that cannot run is refused here, with an HTTP status, rather than in the stream.
    if (request.stream) promptTokens = static_cast<int>(scheduler_.renderPrompt(request).size());
  } catch (const ApiError& e) {
    refuse(e);
    return;
  }
  const bool stream = request.stream;
  const std::vector<std::string> stops = request.sampling.stopStrings;
  try {
    ticket = scheduler_.submit(std::move(request));
  } catch (const ApiError& e) {
    refuse(e);
    return;
  }
  const MessageIds ids{"msg_" + std::to_string(started_) + "_" + std::to_string(nextMessage_++), options_.modelId};
  if (!stream) {
    answerWhole(ids, stops, ticket, observer, res);
    return;
  }
  auto state = std::make_shared<StreamState>(
      ticket, AnthropicStream(ids, [this, stops](const GenerationStats& info) { return stopSequence(stops, info); }),
      promptTokens, std::move(observer), std::move(open));
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, state](size_t, httplib::DataSink& sink) { return pump(*state, sink); },
      [state](bool success) {
        if (!success || !state->ended) {  // the client went away: free its sequence
          state->ticket->cancel();
          state->observer.end(RequestOutcome::Cancelled, kClientClosedRequest);
        }
        state->open.reset();
      });
}

// A non-streaming request: waits for the reply's final event (or for the server to stop).
void AnthropicRoutes::answerWhole(const MessageIds& ids, const std::vector<std::string>& stops,
                                  const std::shared_ptr<RequestTicket>& ticket, ReplyObserver& observer,
                                  httplib::Response& res) const {
  std::vector<Event> events;
  for (;;) {
    if (clientGone()) {  // nobody will read the reply: free its sequence at the next step
      ticket->cancel();
      observer.end(RequestOutcome::Cancelled, kClientClosedRequest);
      return;
    }
    events.clear();
    const bool more = ticket->wait(events, kPoll);
    observer.observe(events);
    for (const Event& e : events) {
      if (e.kind == Event::Kind::Failed) {
        sendError(res, *e.error);
        return;
      }
      if (e.kind != Event::Kind::Finished) continue;  // the Finished event holds the text and calls whole
      try {
        res.set_content(anthropicMessageJson(ids, e.finish, stopSequence(stops, e.finish)), kJson);
      } catch (const ApiError& error) {
        sendError(res, error);
      }
      return;
    }
    if (!more || stopping_) break;
  }
  observer.end(RequestOutcome::Failed, 503);
  ticket->cancel();
  sendError(res, ApiError(503, "overloaded_error", "The server is shutting down."));
}

// One call of httplib's content provider: waits a little for events and writes them.
bool AnthropicRoutes::pump(StreamState& s, httplib::DataSink& sink) const {
  const auto write = [&](const std::string& text) {
    if (text.empty()) return true;
    if (!sink.write(text.data(), text.size())) return false;  // the client is gone (the releaser cancels)
    s.lastWrite = std::chrono::steady_clock::now();
    return true;
  };
  if (!s.opened) {
    s.opened = true;
    if (!write(s.sse.open(s.promptTokens))) return false;
  }
  if (clientGone()) return false;  // the releaser cancels
  std::vector<Event> events;
  const bool more = s.ticket->wait(events, kPoll);
  s.observer.observe(events);
  for (const Event& e : events) {
    if (!write(s.sse.onEvent(e))) return false;
    if (s.sse.ended()) {
      s.ended = true;
      sink.done();
      return true;
    }
  }
  if (!more) {  // closed without a final event taken here: nothing more will come
    s.ended = true;
    s.observer.end(RequestOutcome::Failed, 500);
    sink.done();
    return true;
  }
  if (stopping_) {  // an error event: the client knows the reply is cut, and why
    s.ended = true;
    s.ticket->cancel();
    s.observer.end(RequestOutcome::Failed, 503);
    Event failed;
    failed.kind = Event::Kind::Failed;
    failed.error = ApiError(503, "overloaded_error", "The server is shutting down.");
    const bool ok = write(s.sse.onEvent(failed));
    if (ok) sink.done();
    return ok;
  }
  if (std::chrono::steady_clock::now() - s.lastWrite >= std::chrono::milliseconds(options_.heartbeatMs))
    return write(AnthropicStream::ping());
  return true;
}

}  // namespace zipmoe::serve
