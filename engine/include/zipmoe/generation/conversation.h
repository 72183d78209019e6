// Conversation rendering — the one place that turns a conversation into the token ids a model reads
// before its reply, and fits it to the context window (ContextOverflow, zipmoe/generation/reply.h). ChatSession
// (zipmoe generate/chat, the app) and the serving scheduler (zipmoe serve, the app's local server)
// both render through it, so the same conversation gives the same ids, the same dropped turns and
// the same error through every door.
//
// With a chat template, the messages are rendered with it (add_generation_prompt) and encoded
// without the tokenizer's special tokens (the template writes bos); without one, their texts are
// joined by newlines and encoded with them (plain completion). A system message first is always
// kept. When the ids and `replyReserve` tokens do not fit `context`, DropOldest leaves out the
// oldest whole turns — a user message and every message after it up to the next user message — but
// never the last turn; Error changes nothing. Either way, a rendering that leaves no room for one
// generated token throws ContextOverflowError.
// Thread-safety: pure (the tokenizer and template are const). Cost: one render and encode per
// dropped turn, microseconds beside a prefill.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zipmoe/text/chat_template.h"
#include "zipmoe/base/error.h"
#include "zipmoe/generation/reply.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe {

// The conversation does not fit the context window (the message names both sizes and the policy).
class ContextOverflowError : public Error {
 public:
  ContextOverflowError(int promptTokens, int context, ContextOverflow policy);
  int promptTokens() const { return promptTokens_; }
  int context() const { return context_; }

 private:
  int promptTokens_, context_;
};

struct ContextFit {
  int context = 0;        // the model's window in tokens (max_position_embeddings); 0 = unbounded
  int replyReserve = 0;   // tokens DropOldest keeps free for the reply (at most what the window allows)
  ContextOverflow overflow = ContextOverflow::DropOldest;
};

struct RenderedConversation {
  std::vector<int32_t> ids;
  int droppedMessages = 0;  // messages left out (whole turns), counted after the system message
};

// REQUIRES: `messages` is not empty. `chatTemplate` may be null (plain completion). `tools`: the
// functions the model is offered (generation/tool_prompt.h: the template's own rendering of tools
// when it has one, else the generic format's instructions in the system message); earlier tool
// calls and tool results are rendered the same way. Throws ContextOverflowError (above), or
// zipmoe::Error from a template that refuses the conversation.
RenderedConversation renderConversation(const Tokenizer& tokenizer, const ChatTemplate* chatTemplate,
                                        const std::vector<ChatMessage>& messages, const ContextFit& fit,
                                        const std::vector<ToolSpec>& tools = {});

// The reply reserve every door uses: the reply's token limit, but at most half the window, so that
// a long chat on a short-context model (the demo holds 256 tokens) keeps its newest turns.
int replyReserve(int maxTokens, int context);

}  // namespace zipmoe
