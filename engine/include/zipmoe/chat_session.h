// ChatSession — one conversation on an Engine: a system prompt and the turns, answered by the
// engine's generation core (Engine::scheduler(), the continuous-batching scheduler every door
// shares) with streaming text, keeping the KV cache of the conversation from one turn to the next.
//
// Each reply posts the whole conversation to the core, which renders it with the model's chat
// template, fits it to the context window (zipmoe/generation/conversation.h) and compares its token ids with
// the sequence this session left cached there (the session is the cache's owner: no other session
// or HTTP client reuses it): the cache is rolled back to the longest common prefix and only the
// rest is prefilled. So a new user turn prefills its own tokens (and the template's framing of
// them); regenerating a reply, or editing a message and sending again (truncate() or setMessages(),
// then reply()), rolls back to where the conversation changed instead of starting over. When the
// conversation no longer fits the context window with room for the reply, the oldest whole turns
// after the system prompt are left out of the rendering (the reply says how many; the
// conversation keeps them) — or, with ContextOverflow::Error, the reply is refused.
// Each reply reports how many prompt tokens it had, how many it reused from the cache and how many
// it prefilled, besides the generation's own figures (GenerationStats, zipmoe/generation/reply.h).
//
// Thread-safety: one thread at a time drives a session (send, reply and the conversation's
// setters); sessions on one engine may be driven from different threads (the core batches them).
// The stop and pause flags may be set from any thread. Cost: a turn costs the prefill of the tokens
// not reused plus its decode steps. Memory: the conversation's KV cache, in the core's cache of
// finished sequences (freed when the session is destroyed, or earlier when the core needs room).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "zipmoe/text/chat_template.h"
#include "zipmoe/generation/conversation.h"
#include "zipmoe/engine.h"
#include "zipmoe/generation/reply.h"
#include "zipmoe/generation/sampler.h"

namespace zipmoe {

struct ChatSessionOptions {
  // Render with the model's chat template (when it has one). Off, or without a template, the
  // messages' texts are joined by newlines and encoded with the tokenizer's special tokens (bos):
  // plain completion of the text (`zipmoe generate --raw`).
  bool useChatTemplate = true;
  // A conversation that outgrows the context window: its oldest turns are left out (the reply says
  // how many), or the reply is refused with ContextOverflowError.
  ContextOverflow contextOverflow = ContextOverflow::DropOldest;
  // Generate through end-of-sequence tokens up to the token limit (benchmarks: a fixed length).
  bool ignoreEos = false;
};

class ChatSession {
 public:
  // REQUIRES: the engine outlives the session.
  explicit ChatSession(Engine& engine, ChatSessionOptions options = {});
  ~ChatSession();  // frees its cached sequence in the core
  ChatSession(const ChatSession&) = delete;
  ChatSession& operator=(const ChatSession&) = delete;

  void setSystemPrompt(std::string text);  // empty: none
  const std::string& systemPrompt() const { return system_; }
  // The turns (roles "user" and "assistant"), without the system prompt.
  const std::vector<ChatMessage>& messages() const { return messages_; }
  // Replaces the turns (a chat loaded from history, an edited one). The cache is kept for whatever
  // prefix of the next rendering still matches.
  void setMessages(std::vector<ChatMessage> messages);
  // Keeps the first `count` turns (regenerate: drop the last reply; edit: drop from the edited message).
  void truncate(size_t count);
  void clear();  // forgets the turns (the system prompt stays)

  // Appends the user's message and replies to it (the reply is appended too, also a stopped one).
  // `stop` ends the reply (StopReason::Stopped) and `pause` holds it after its latest token while
  // set; both are polled while the reply streams. On an exception the conversation is as before the call. Throws ContextOverflowError for a
  // conversation that does not fit the context window (even its last turn alone, with drop-oldest), a template that refuses the conversation, or a
  // failed forward step (e.g. an expert that could not be read).
  GenerationStats send(const std::string& userMessage, const SamplingParams& params, const TextCallback& onText,
                       const std::atomic<bool>* stop = nullptr, const std::atomic<bool>* pause = nullptr);
  // Replies to the conversation as it is; its last turn must be the user's.
  GenerationStats reply(const SamplingParams& params, const TextCallback& onText, const std::atomic<bool>* stop = nullptr,
                        const std::atomic<bool>* pause = nullptr);

 private:
  Engine& engine_;
  ChatSessionOptions options_;
  uint64_t owner_;  // GenerationRequest::cacheOwner of this session's requests
  std::string system_;
  std::vector<ChatMessage> messages_;
};

}  // namespace zipmoe
