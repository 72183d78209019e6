// ChatSession (see zipmoe/chat_session.h): a client of the engine's generation core.
#include "zipmoe/chat_session.h"

#include <chrono>

#include "zipmoe/base/error.h"
#include "zipmoe/serve/serve_scheduler.h"

namespace zipmoe {

ChatSession::ChatSession(Engine& engine, ChatSessionOptions options)
    : engine_(engine), options_(options), owner_(ServeScheduler::newCacheOwner()) {}

ChatSession::~ChatSession() {
  if (ServeScheduler* core = engine_.runningScheduler()) core->forget(owner_);
}

void ChatSession::setSystemPrompt(std::string text) { system_ = std::move(text); }
void ChatSession::setMessages(std::vector<ChatMessage> messages) { messages_ = std::move(messages); }
void ChatSession::truncate(size_t count) { messages_.resize(std::min(count, messages_.size())); }
void ChatSession::clear() { messages_.clear(); }

GenerationStats ChatSession::send(const std::string& userMessage, const SamplingParams& params,
                                  const TextCallback& onText, const std::atomic<bool>* stop,
                                  const std::atomic<bool>* pause) {
  messages_.push_back({"user", userMessage});
  try {
    return reply(params, onText, stop, pause);
  } catch (...) {
    messages_.pop_back();
    throw;
  }
}

GenerationStats ChatSession::reply(const SamplingParams& params, const TextCallback& onText,
                                   const std::atomic<bool>* stop, const std::atomic<bool>* pause) {
  validate(params);
  if (messages_.empty() || messages_.back().role != "user")
    throw Error("chat: the conversation must end with the user's message to be replied to");

  GenerationRequest request;
  request.endpoint = Endpoint::ChatCompletions;
  request.messages.reserve(messages_.size() + 1);
  if (!system_.empty()) request.messages.push_back({"system", system_});
  request.messages.insert(request.messages.end(), messages_.begin(), messages_.end());
  request.sampling = params;
  request.maxTokensGiven = true;
  request.useChatTemplate = options_.useChatTemplate && engine_.chatTemplate() != nullptr;
  request.cacheOwner = owner_;
  request.contextOverflow = options_.contextOverflow;
  request.ignoreEos = options_.ignoreEos;

  std::shared_ptr<RequestTicket> ticket;
  try {
    ticket = engine_.scheduler().submit(std::move(request), pause != nullptr && pause->load());
  } catch (const ApiError& e) {
    throw Error(e.message());
  }
  // The core streams the reply's pieces; this thread hands them to the callback and passes the
  // caller's stop and pause on. Text the callback refused to take is not part of the reply.
  GenerationStats result;
  std::string taken;
  bool open = true, finished = false;
  std::optional<ApiError> failure;
  std::vector<RequestTicket::Event> events;
  for (bool more = true; more;) {
    events.clear();
    more = ticket->wait(events, std::chrono::milliseconds(20));
    for (auto& e : events) {
      switch (e.kind) {
        case RequestTicket::Event::Kind::Text:
          if (!open) break;
          taken += e.text;
          if (onText && !onText(e.text)) {
            open = false;
            ticket->stop();
          }
          break;
        case RequestTicket::Event::Kind::Finished:
          result = std::move(e.finish);
          finished = true;
          break;
        case RequestTicket::Event::Kind::Failed:
          failure = std::move(e.error);
          break;
        case RequestTicket::Event::Kind::ToolCallBegin:
        case RequestTicket::Event::Kind::ToolCallDelta:
          break;  // a chat session offers no tools; the Finished event lists any calls whole
      }
    }
    if (stop != nullptr && stop->load()) ticket->stop();
    if (pause != nullptr) ticket->setPaused(pause->load());
  }
  if (!finished) throw Error(failure ? failure->message() : std::string("chat: the reply ended without an answer"));
  if (!open) result.stopReason = StopReason::Stopped;
  result.text = std::move(taken);
  messages_.push_back({"assistant", result.text});
  return result;
}

}  // namespace zipmoe
