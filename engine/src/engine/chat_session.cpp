// ChatSession (see zipmoe/chat_session.h).
#include "zipmoe/chat_session.h"

#include <algorithm>

#include "zipmoe/error.h"

namespace zipmoe {

ChatSession::ChatSession(Engine& engine, ChatSessionOptions options)
    : engine_(engine), options_(options), seq_(engine.model().addSequence()) {}

ChatSession::~ChatSession() {
  try {
    engine_.model().removeSequence(seq_);
  } catch (...) {  // a destructor must not throw; the sequence goes with the model anyway
  }
}

void ChatSession::setSystemPrompt(std::string text) { system_ = std::move(text); }
void ChatSession::setMessages(std::vector<ChatMessage> messages) { messages_ = std::move(messages); }
void ChatSession::truncate(size_t count) { messages_.resize(std::min(count, messages_.size())); }
void ChatSession::clear() { messages_.clear(); }

// The ids of the conversation from turn `firstTurn` on (the system prompt always), as the model
// reads it before its reply.
std::vector<int32_t> ChatSession::render(size_t firstTurn) const {
  std::vector<ChatMessage> shown;
  const ChatTemplate* tpl = options_.useChatTemplate ? engine_.chatTemplate() : nullptr;
  if (!system_.empty()) shown.push_back({"system", system_});
  shown.insert(shown.end(), messages_.begin() + static_cast<std::ptrdiff_t>(firstTurn), messages_.end());
  if (tpl) return engine_.tokenizer().encode(tpl->render(shown, true), false);  // the template writes bos
  std::string text;
  for (size_t i = 0; i < shown.size(); ++i) text += (i ? "\n" : "") + shown[i].content;
  return engine_.tokenizer().encode(text, true);
}

TurnStats ChatSession::send(const std::string& userMessage, const SamplingParams& params, const TextCallback& onText,
                            const std::atomic<bool>* stop) {
  messages_.push_back({"user", userMessage});
  try {
    return reply(params, onText, stop);
  } catch (...) {
    messages_.pop_back();
    throw;
  }
}

TurnStats ChatSession::reply(const SamplingParams& params, const TextCallback& onText, const std::atomic<bool>* stop) {
  validate(params);
  if (messages_.empty() || messages_.back().role != "user")
    throw Error("chat: the conversation must end with the user's message to be replied to");
  MoeModel& model = engine_.model();
  const int context = model.config().maxPositionEmbeddings;

  // Keep the newest turns that fit with room for the reply: a long chat goes on with a model of a
  // short context (the demo's holds 256 tokens) instead of failing.
  const int reserve = context > 0 ? std::min(params.maxTokens, context / 2) : params.maxTokens;
  TurnStats turn;
  size_t first = 0;
  std::vector<int32_t> ids = render(first);
  while (context > 0 && static_cast<int>(ids.size()) + reserve > context && messages_.size() - first > 1) {
    ++first;
    ++turn.droppedMessages;
    ids = render(first);
  }
  if (context > 0 && static_cast<int>(ids.size()) >= context)
    throw Error("The message is too long for this model: " + std::to_string(ids.size()) +
                " tokens, and its context holds " + std::to_string(context) + ".");

  // Reuse the cache up to where the new rendering departs from it, and at least one token short of
  // the end (the model must run on the last prompt token to give the next one's logits).
  size_t keep = 0;
  while (keep < cached_.size() && keep < ids.size() && cached_[keep] == ids[keep]) ++keep;
  keep = std::min(keep, ids.size() - 1);
  model.truncateSequence(seq_, static_cast<int64_t>(keep));
  cached_.resize(keep);
  turn.promptTokens = static_cast<int>(ids.size());
  turn.reusedTokens = static_cast<int>(keep);
  turn.prefilledTokens = turn.promptTokens - turn.reusedTokens;

  SamplingParams p = params;
  if (context > 0) p.maxTokens = std::min(p.maxTokens, context - static_cast<int>(ids.size()));
  turn.generation = continueSequence(model, seq_, cached_, engine_.tokenizer(), ids, p, onText, stop);
  messages_.push_back({"assistant", turn.generation.text});
  return turn;
}

}  // namespace zipmoe
