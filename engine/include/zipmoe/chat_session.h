// ChatSession — one conversation on an Engine: a system prompt and the turns, rendered with the
// model's chat template, encoded, and answered by generation with streaming text, keeping the KV
// cache of its own sequence from one turn to the next.
//
// Every reply renders the whole conversation again and compares its token ids with the ids the
// sequence already holds: the cache is rolled back to the longest common prefix and only the rest
// is prefilled. So a new user turn prefills its own tokens (and the template's framing of them);
// regenerating a reply, or editing a message and sending again (truncate() or setMessages(), then
// reply()), rolls back to where the conversation changed instead of starting over. When the
// conversation no longer fits the context window with room for the reply, the oldest turns after
// the system prompt are left out of the rendering (the turn says how many; the conversation keeps
// them) — the rendering then changes near its start and is prefilled again, only then.
// Each turn reports how many prompt tokens it had, how many it reused from the cache and how many
// it prefilled, besides the generation's own figures.
//
// Thread-safety: several sessions may share one Engine (each has its own sequence and cache), but
// the model is not re-entrant: one thread at a time drives all of an engine's sessions (send,
// reply and the conversation's setters). The stop flag may be set from any thread.
// Cost: a turn costs the prefill of the tokens not reused plus its decode steps; rendering and
// encoding the conversation again is microseconds beside it. Memory: the sequence's KV cache.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "zipmoe/chat_template.h"
#include "zipmoe/engine.h"
#include "zipmoe/generator.h"
#include "zipmoe/sampler.h"

namespace zipmoe {

struct TurnStats {
  int promptTokens = 0;     // the rendered conversation
  int reusedTokens = 0;     // of them, already in the session's cache
  int prefilledTokens = 0;  // promptTokens − reusedTokens: what this turn ran through the model first
  int droppedMessages = 0;  // oldest turns left out of the rendering to fit the context window
  GenerationStats generation;
};

struct ChatSessionOptions {
  // Render with the model's chat template (when it has one). Off, or without a template, the
  // messages' texts are joined by newlines and encoded with the tokenizer's special tokens (bos):
  // plain completion of the text (`zipmoe generate --raw`).
  bool useChatTemplate = true;
};

class ChatSession {
 public:
  // REQUIRES: the engine outlives the session.
  explicit ChatSession(Engine& engine, ChatSessionOptions options = {});
  ~ChatSession();  // frees the sequence and its cache
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
  // On an exception the conversation is as before the call. Throws zipmoe::Error for a message that
  // does not fit the context window even alone, a template that refuses the conversation, or a
  // failed forward step (e.g. an expert that could not be read).
  TurnStats send(const std::string& userMessage, const SamplingParams& params, const TextCallback& onText,
                 const std::atomic<bool>* stop = nullptr);
  // Replies to the conversation as it is; its last turn must be the user's.
  TurnStats reply(const SamplingParams& params, const TextCallback& onText, const std::atomic<bool>* stop = nullptr);

  // The ids the session's sequence holds (for tests and statistics).
  const std::vector<int32_t>& cachedTokens() const { return cached_; }

 private:
  std::vector<int32_t> render(size_t firstTurn) const;

  Engine& engine_;
  ChatSessionOptions options_;
  MoeModel::SequenceId seq_;
  std::string system_;
  std::vector<ChatMessage> messages_;
  std::vector<int32_t> cached_;  // exactly the ids in the sequence
};

}  // namespace zipmoe
