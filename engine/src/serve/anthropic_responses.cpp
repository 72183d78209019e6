// The Anthropic endpoints' JSON answers (see anthropic_responses.h).
#include "serve/anthropic_responses.h"

#include "zipmoe/serve/anthropic_request.h"

namespace zipmoe::serve {

using nlohmann::json;

std::string dumpJson(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const char* anthropicStopReason(StopReason reason) {
  switch (reason) {
    case StopReason::StopString: return "stop_sequence";
    case StopReason::MaxTokens:
    case StopReason::ContextWindow: return "max_tokens";
    case StopReason::ToolCalls: return "tool_use";
    case StopReason::None:
    case StopReason::Eos:
    case StopReason::Stopped: break;
  }
  return "end_turn";
}

std::optional<std::string> matchedStopSequence(const std::vector<std::string>& stops, const std::string& text,
                                               const std::string& decodedReply) {
  std::optional<std::string> best;
  for (const std::string& s : stops)
    if (decodedReply.size() >= text.size() && decodedReply.compare(text.size(), s.size(), s) == 0 &&
        (!best || s.size() < best->size()))
      best = s;
  return best;
}

json anthropicUsage(const GenerationStats& info) {
  return {{"input_tokens", info.promptTokens - info.reusedTokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", info.reusedTokens},
          {"output_tokens", info.generatedTokens}};
}

json toolUseBlock(const ToolCall& call, bool withInput) {
  json input = json::object();
  if (withInput) {
    input = json::parse(call.argumentsJson, nullptr, false);
    if (!input.is_object())
      throw ApiError(500, "server_error", "The model's call of the tool '" + call.name +
                                              "' has arguments that are not a JSON object: " + call.argumentsJson);
  }
  return {{"type", "tool_use"}, {"id", anthropicToolUseId(call.id)}, {"name", call.name}, {"input", std::move(input)}};
}

std::string anthropicMessageJson(const MessageIds& ids, const GenerationStats& info,
                                 const std::optional<std::string>& stopSequence) {
  json content = json::array();
  if (!info.text.empty()) content.push_back({{"type", "text"}, {"text", info.text}});
  for (const ToolCall& call : info.toolCalls) content.push_back(toolUseBlock(call, true));
  return dumpJson({{"id", ids.id},
                   {"type", "message"},
                   {"role", "assistant"},
                   {"model", ids.model},
                   {"content", std::move(content)},
                   {"stop_reason", anthropicStopReason(info.stopReason)},
                   {"stop_sequence", stopSequence ? json(*stopSequence) : json(nullptr)},
                   {"usage", anthropicUsage(info)}});
}

std::string anthropicErrorJson(const ApiError& error) {
  const int s = error.status();
  const char* type = s == 401 ? "authentication_error"
                     : s == 403 ? "permission_error"
                     : s == 404 ? "not_found_error"
                     : s == 413 ? "request_too_large"
                     : s == 429 ? "rate_limit_error"
                     : s == 503 || s == 529 ? "overloaded_error"
                     : s >= 500 ? "api_error"
                                : "invalid_request_error";
  const std::string message = error.param().empty() ? error.message() : error.param() + ": " + error.message();
  return dumpJson({{"type", "error"}, {"error", {{"type", type}, {"message", message}}}});
}

}  // namespace zipmoe::serve
