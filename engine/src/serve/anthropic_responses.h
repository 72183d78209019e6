// The JSON the Anthropic Messages endpoints answer with: the message object, its usage, the stop
// reason and which stop sequence matched, and Anthropic's error shape. Internal to serve/
// (anthropic_routes.cpp, anthropic_stream.cpp). Thread-safety: pure functions. Cost: O(the reply).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zipmoe/generation/reply.h"
#include "zipmoe/serve/openai_request.h"

namespace zipmoe::serve {

struct MessageIds {
  std::string id;     // "msg_…"
  std::string model;
};

// end_turn (EOS, stopped), max_tokens (the limit or the context window), stop_sequence, tool_use.
const char* anthropicStopReason(StopReason reason);

// Which of `stops` ended a reply that ended on a stop string: `text` is what the reply showed (cut
// before the stop string) and `decodedReply` its generated tokens decoded whole (special tokens
// skipped, as the reply decodes them), which go on with the stop string where `text` ends. Of
// several that fit (one a prefix of another) the shortest, which completed first. Nullopt when
// none fits (the reply did not end on a stop string).
std::optional<std::string> matchedStopSequence(const std::vector<std::string>& stops, const std::string& text,
                                               const std::string& decodedReply);

// Anthropic's usage: input_tokens (the prompt tokens prefilled: not found in the cache),
// cache_read_input_tokens (found: their sum is the whole prompt), cache_creation_input_tokens (0),
// output_tokens.
nlohmann::json anthropicUsage(const GenerationStats& info);
// A tool_use block {type, id ("toolu_…"), name, input}. Throws ApiError 500 (api_error) when the
// call's arguments are not a JSON object.
nlohmann::json toolUseBlock(const ToolCall& call, bool withInput);

// The non-streaming answer: {id, type: "message", role: "assistant", model, content: [text block if
// any text, a tool_use block per call], stop_reason, stop_sequence, usage}.
std::string anthropicMessageJson(const MessageIds& ids, const GenerationStats& info,
                                 const std::optional<std::string>& stopSequence);

// {"type": "error", "error": {"type": …, "message": …}}: the type follows the status (400
// invalid_request_error, 401 authentication_error, 403 permission_error, 404 not_found_error, 413
// request_too_large, 429 rate_limit_error, 503 / 529 overloaded_error, other 5xx api_error); the
// message starts with the field it names ("max_tokens: …"), as Anthropic's do.
std::string anthropicErrorJson(const ApiError& error);
// JSON without a trailing newline; invalid UTF-8 replaced.
std::string dumpJson(const nlohmann::json& j);

}  // namespace zipmoe::serve
