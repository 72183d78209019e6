// The server's JSON answers (see openai_responses.h).
#include "serve/openai_responses.h"

#include <nlohmann/json.hpp>

namespace zipmoe::serve {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const char* objectName(Endpoint e, bool chunk) {
  if (e == Endpoint::Completions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

// OpenAI's usage object, and beyond it (as llama.cpp adds its own fields) how many of the
// conversation's oldest messages were left out to fit the context window.
json usage(const GenerationStats& info) {
  return {{"prompt_tokens", info.promptTokens},
          {"completion_tokens", info.generatedTokens},
          {"total_tokens", info.promptTokens + info.generatedTokens},
          {"prompt_tokens_details", {{"cached_tokens", info.reusedTokens}}},
          {"dropped_messages", info.droppedMessages}};
}

json chunk(Endpoint e, const ResponseIds& ids, json choice, bool withUsageField) {
  json j = {{"id", ids.id}, {"object", objectName(e, true)}, {"created", ids.created}, {"model", ids.model},
            {"choices", json::array({std::move(choice)})}};
  if (withUsageField) j["usage"] = nullptr;
  return j;
}

json choice(Endpoint e, json delta, const std::string& text, json finish) {
  if (e == Endpoint::Completions)
    return {{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", std::move(finish)}};
  return {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", std::move(finish)}};
}

// The assistant's message: its text (null when it only called tools) and its calls.
json message(const std::string& text, const GenerationStats& info) {
  json m = {{"role", "assistant"}, {"content", text.empty() && !info.toolCalls.empty() ? json(nullptr) : json(text)}};
  if (!info.toolCalls.empty()) {
    json calls = json::array();
    for (const ToolCall& c : info.toolCalls)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.argumentsJson}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

}  // namespace

std::string completionJson(Endpoint e, const ResponseIds& ids, const std::string& text, const GenerationStats& info) {
  json c = e == Endpoint::Completions
               ? json{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", openAiFinishReason(info.stopReason)}}
               : json{{"index", 0},
                      {"message", message(text, info)},
                      {"logprobs", nullptr},
                      {"finish_reason", openAiFinishReason(info.stopReason)}};
  return dump({{"id", ids.id},
               {"object", objectName(e, false)},
               {"created", ids.created},
               {"model", ids.model},
               {"choices", json::array({c})},
               {"usage", usage(info)}});
}

std::string openingChunk(Endpoint e, const ResponseIds& ids, bool withUsageField) {
  return dump(chunk(e, ids, choice(e, {{"role", "assistant"}, {"content", ""}}, "", nullptr), withUsageField));
}

std::string textChunk(Endpoint e, const ResponseIds& ids, const std::string& text, bool withUsageField) {
  return dump(chunk(e, ids, choice(e, {{"content", text}}, text, nullptr), withUsageField));
}

std::string toolCallChunk(const ResponseIds& ids, const RequestTicket::Event& event, bool withUsageField) {
  json call = {{"index", event.toolIndex}};
  if (event.kind == RequestTicket::Event::Kind::ToolCallBegin) {
    call["id"] = event.call.id;
    call["type"] = "function";
    call["function"] = {{"name", event.call.name}, {"arguments", ""}};
  } else {
    call["function"] = {{"arguments", event.text}};
  }
  const json delta = {{"tool_calls", json::array({std::move(call)})}};
  return dump(chunk(Endpoint::ChatCompletions, ids, choice(Endpoint::ChatCompletions, delta, "", nullptr), withUsageField));
}

std::string closingChunk(Endpoint e, const ResponseIds& ids, const GenerationStats& info, bool withUsageField) {
  return dump(chunk(e, ids, choice(e, json::object(), "", openAiFinishReason(info.stopReason)), withUsageField));
}

std::string usageChunk(Endpoint e, const ResponseIds& ids, const GenerationStats& info) {
  return dump({{"id", ids.id},
               {"object", objectName(e, true)},
               {"created", ids.created},
               {"model", ids.model},
               {"choices", json::array()},
               {"usage", usage(info)}});
}

std::string modelJson(const std::string& model, int64_t created) {
  return dump({{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "zipmoe"}});
}

std::string modelListJson(const std::string& model, int64_t created) {
  return dump({{"object", "list"},
               {"data", json::array({json{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "zipmoe"}}})}});
}

}  // namespace zipmoe::serve
