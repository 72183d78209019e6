// Reply — what every door (zipmoe generate/chat, ChatSession, the app, zipmoe serve) says about one
// reply of the model: why it ended (StopReason, one enum for all of them), what the conversation
// cost (prompt, reused, prefilled and dropped counts) and how fast it came (GenerationStats), and how
// a conversation that outgrows the context window is shortened (ContextOverflow, one policy for all).
// Thread-safety: plain values and pure functions. Cost: none.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "zipmoe/generation/output_spec.h"

namespace zipmoe {

// Why a reply ended. The names are stable: the app keeps them in its database.
enum class StopReason {
  None,           // not ended (yet)
  Eos,            // the model's end-of-sequence token
  StopString,     // one of the request's stop strings
  MaxTokens,      // the request's token limit
  ContextWindow,  // the sequence filled the model's context window
  Stopped,        // the caller stopped it (a stop flag, a callback that refused, a client gone)
  ToolCalls,      // the reply ended with one or more tool calls (GenerationStats::toolCalls)
};
// "", "eos", "stop_string", "max_tokens", "context_window", "stopped", "tool_calls".
const char* stopReasonName(StopReason reason);
// The inverse; StopReason::None for an unknown name (a database written by a newer version).
StopReason parseStopReason(std::string_view name);
// OpenAI's finish_reason: "stop" (EOS, a stop string, stopped), "length" (max tokens, the context),
// "tool_calls".
const char* openAiFinishReason(StopReason reason);

// What to do when a conversation does not fit the context window with room for the reply.
enum class ContextOverflow {
  DropOldest,  // leave out the oldest whole turns (a user message and the replies after it); the
               // system message and the last turn always stay (the default on every door)
  Error,       // refuse the conversation with an error naming the limit
};
const char* contextOverflowName(ContextOverflow policy);  // "drop-oldest", "error"
// Throws zipmoe::Error naming `text` and the accepted values.
ContextOverflow parseContextOverflow(const std::string& text);

// One reply, as every door reports it.
struct GenerationStats {
  int promptTokens = 0;     // the rendered conversation (or the raw prompt)
  int reusedTokens = 0;     // of them, already in a cached sequence's KV cache
  int prefilledTokens = 0;  // promptTokens − reusedTokens: what this reply ran through the model first
  int droppedMessages = 0;  // oldest messages left out of the rendering to fit the context window
  int generatedTokens = 0;          // == tokens.size()
  double timeToFirstTokenMs = 0;    // from the request to the first token's text being available
  double timePerOutputTokenMs = 0;  // mean over the decode steps after the first token (0 with one token)
  uint64_t weightBytesPerToken = 0; // weight bytes the last decode step read (MoeModel::lastForwardWeightBytes)
  StopReason stopReason = StopReason::None;
  std::vector<int32_t> tokens;      // the generated ids, including the EOS or the stop string's tokens
  std::string text;                 // everything passed to the callback, concatenated
  std::vector<ToolCall> toolCalls;  // the calls the reply made (then stopReason == ToolCalls)
};

// Called with each new piece of text (never empty, always complete UTF-8); return false to stop.
using TextCallback = std::function<bool(std::string_view text)>;

}  // namespace zipmoe
