// Conversation rendering and the context policy (see zipmoe/generation/conversation.h), and the names of the
// reply's enums (zipmoe/generation/reply.h).
#include "zipmoe/generation/conversation.h"

#include "generation/tool_prompt.h"

#include <algorithm>

namespace zipmoe {

const char* stopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::None: return "";
    case StopReason::Eos: return "eos";
    case StopReason::StopString: return "stop_string";
    case StopReason::MaxTokens: return "max_tokens";
    case StopReason::ContextWindow: return "context_window";
    case StopReason::Stopped: return "stopped";
    case StopReason::ToolCalls: return "tool_calls";
  }
  return "";
}

StopReason parseStopReason(std::string_view name) {
  for (StopReason r : {StopReason::Eos, StopReason::StopString, StopReason::MaxTokens, StopReason::ContextWindow,
                       StopReason::Stopped, StopReason::ToolCalls})
    if (name == stopReasonName(r)) return r;
  return StopReason::None;
}

const char* openAiFinishReason(StopReason reason) {
  if (reason == StopReason::ToolCalls) return "tool_calls";
  return reason == StopReason::MaxTokens || reason == StopReason::ContextWindow ? "length" : "stop";
}

const char* contextOverflowName(ContextOverflow policy) {
  return policy == ContextOverflow::Error ? "error" : "drop-oldest";
}

ContextOverflow parseContextOverflow(const std::string& text) {
  if (text == "drop-oldest") return ContextOverflow::DropOldest;
  if (text == "error") return ContextOverflow::Error;
  throw Error("unknown context overflow policy '" + text + "' (expected drop-oldest or error)");
}

ContextOverflowError::ContextOverflowError(int promptTokens, int context, ContextOverflow policy)
    : Error("The conversation is too long for this model: " + std::to_string(promptTokens) + " tokens" +
            (policy == ContextOverflow::DropOldest ? " even with its oldest turns left out" : "") +
            ", and its context holds " + std::to_string(context) + " tokens with at least one left for the reply" +
            (policy == ContextOverflow::Error ? " (context overflow policy 'error'; 'drop-oldest' leaves out the oldest turns)"
                                              : "") +
            "."),
      promptTokens_(promptTokens),
      context_(context) {}

int replyReserve(int maxTokens, int context) { return context > 0 ? std::min(maxTokens, context / 2) : maxTokens; }

namespace {

// The ids of the system message (if first) and the messages from `first` on.
std::vector<int32_t> render(const Tokenizer& tokenizer, const ChatTemplate* chatTemplate,
                            const std::vector<ChatMessage>& messages, size_t system, size_t first,
                            const std::vector<ToolSpec>& tools) {
  std::vector<ChatMessage> shown;
  shown.reserve(messages.size() - first + system);
  if (system) shown.push_back(messages.front());
  shown.insert(shown.end(), messages.begin() + static_cast<std::ptrdiff_t>(first), messages.end());
  if (chatTemplate) return tokenizer.encode(renderWithTools(*chatTemplate, shown, tools), false);  // the template writes bos
  if (usesTools(shown, tools)) shown = genericToolMessages(shown, tools);
  std::string text;
  for (size_t i = 0; i < shown.size(); ++i) {
    if (i) text += '\n';
    text += shown[i].content;
  }
  return tokenizer.encode(text, true);
}

}  // namespace

RenderedConversation renderConversation(const Tokenizer& tokenizer, const ChatTemplate* chatTemplate,
                                        const std::vector<ChatMessage>& messages, const ContextFit& fit,
                                        const std::vector<ToolSpec>& tools) {
  if (messages.empty()) throw Error("the conversation has no messages");
  const size_t system = messages.front().role == "system" ? 1 : 0;
  // Where the last turn starts: its user message (a conversation that ends otherwise keeps its last message).
  size_t lastTurn = messages.size() - 1;
  for (size_t i = messages.size(); i-- > system;)
    if (messages[i].role == "user") {
      lastTurn = i;
      break;
    }
  lastTurn = std::max(lastTurn, system);
  RenderedConversation out;
  size_t first = system;
  out.ids = render(tokenizer, chatTemplate, messages, system, first, tools);
  const auto size = [&] { return static_cast<int>(out.ids.size()); };
  if (fit.overflow == ContextOverflow::DropOldest) {
    const int reserve = std::min(fit.replyReserve, fit.context > 0 ? fit.context - 1 : fit.replyReserve);
    while (fit.context > 0 && size() + reserve > fit.context && first < lastTurn) {
      do ++first;  // the whole turn: up to the next user message
      while (first < lastTurn && messages[first].role != "user");
      out.ids = render(tokenizer, chatTemplate, messages, system, first, tools);
    }
  }
  out.droppedMessages = static_cast<int>(first - system);
  if (fit.context > 0 && size() >= fit.context) throw ContextOverflowError(size(), fit.context, fit.overflow);
  return out;
}

}  // namespace zipmoe
