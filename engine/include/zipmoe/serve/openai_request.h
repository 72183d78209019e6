// OpenAI request bodies → generation requests: the one place that reads what an HTTP client sent to
// `POST /v1/chat/completions` or `POST /v1/completions` and turns it into a GenerationRequest the
// serving scheduler runs (zipmoe/serve/serve_scheduler.h), or refuses it with an ApiError shaped like
// OpenAI's (`{"error": {"message", "type", "param", "code"}}`) that names the field.
//
// Mapped: model, messages (roles system / developer → system, user, assistant — with its earlier
// tool_calls — and tool with its tool_call_id; content a string or an array of {"type": "text"}
// parts), prompt (a string, or an array of exactly one string), max_tokens / max_completion_tokens,
// temperature (0–2; 0 = greedy), top_p, seed, stop (a string or up to 4), n (only 1), stream,
// stream_options.include_usage, user (ignored); chat only: tools, tool_choice (none, auto,
// required, a named function), parallel_tool_calls and response_format (text, json_object,
// json_schema), enforced by constrained decoding (OutputSpec) — a schema the core cannot enforce is
// refused naming its path; beyond OpenAI, as llama.cpp's server: top_k, min_p,
// repetition_penalty, ignore_eos. Refused when set to anything but their neutral value:
// presence_penalty, frequency_penalty (non-zero), logit_bias, logprobs, top_logprobs, functions,
// function_call, n > 1, echo, best_of, suffix. Unknown fields are ignored (as llama.cpp does).
// Docs: docs/SERVER.md.
// Thread-safety: pure functions. Cost: O(body size).
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zipmoe/text/chat_template.h"
#include "zipmoe/generation/output_spec.h"
#include "zipmoe/generation/reply.h"
#include "zipmoe/generation/sampler.h"

namespace zipmoe {

// An error a client gets as an OpenAI error object with this HTTP status.
class ApiError : public std::exception {
 public:
  ApiError(int status, std::string type, std::string message, std::string param = {}, std::string code = {})
      : status_(status), type_(std::move(type)), message_(std::move(message)), param_(std::move(param)),
        code_(std::move(code)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  int status() const { return status_; }
  const std::string& type() const { return type_; }     // "invalid_request_error", "server_error", …
  const std::string& message() const { return message_; }
  const std::string& param() const { return param_; }   // the field, or empty (JSON null)
  const std::string& code() const { return code_; }     // e.g. "invalid_api_key", or empty
  // {"error": {"message": …, "type": …, "param": … | null, "code": … | null}}
  std::string toJson() const;

 private:
  int status_;
  std::string type_, message_, param_, code_;
};

// A 400 invalid_request_error naming `param`.
ApiError invalidField(const std::string& param, const std::string& message);

enum class Endpoint { ChatCompletions, Completions };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::ChatCompletions;
  std::string model;
  std::vector<ChatMessage> messages;  // chat: system (at most the first), user and assistant turns
  std::string prompt;                 // completions: the text to continue
  SamplingParams sampling;            // OpenAI's defaults: temperature 1, top_p 1; maxTokens below
  bool maxTokensGiven = false;        // false: the scheduler fills what the context leaves (≤ default)
  bool stream = false;
  bool includeUsage = false;          // stream_options.include_usage
  // Beyond the API, for the engine's other doors (ChatSession):
  bool useChatTemplate = true;        // false: the messages' texts joined by newlines (plain completion)
  // Which cached sequences the request may reuse: those left by requests of the same owner (0: the
  // pool every HTTP client shares; ChatSession: its own, ServeScheduler::newCacheOwner()).
  uint64_t cacheOwner = 0;
  std::optional<ContextOverflow> contextOverflow;  // unset: the scheduler's (ServeOptions)
  // The prompt as token ids of the model's vocabulary, used as they are: no chat template, no
  // encoding (messages and prompt are not read). Benchmarks send synthetic ids this way; a client
  // that tokenizes itself could too. An empty list or an id outside the vocabulary is refused
  // (400 naming prompt_ids).
  std::optional<std::vector<int32_t>> promptIds;
  // Generate exactly maxTokens (or up to the context window): neither the model's EOS token nor a
  // stop string ends the reply (llama.cpp's ignore_eos). The EOS token is then an ordinary token.
  bool ignoreEos = false;
  // Tools and structured output (chat only): enforced by the core's constrained decoding.
  OutputSpec output;
};

struct RequestLimits {
  int defaultMaxTokens = 256;   // when the body names none
  int maxTokensCeiling = 1 << 20;
  size_t maxMessages = 1024;
  size_t maxStopStrings = 4;
  size_t maxStopLength = 256;   // bytes of one stop string
};

// Parses a request body. Throws ApiError (400, naming the field) for a body that is not a JSON
// object, a missing or mistyped field, a value out of range, or a refused feature; never anything
// else (also for arbitrary bytes: the fuzz target checks it).
GenerationRequest parseGenerationRequest(Endpoint endpoint, std::string_view body, const RequestLimits& limits = {});

}  // namespace zipmoe
