// Anthropic Messages request bodies → generation requests: reads what a client sent to
// `POST /v1/messages` or `POST /v1/messages/count_tokens` and turns it into the GenerationRequest the
// serving scheduler runs (zipmoe/serve/openai_request.h), or refuses it with an ApiError (400) that
// names the field; the server shows it in Anthropic's error shape (serve/anthropic_responses.h).
//
// Mapped: model; system (a string or an array of text blocks) → a first system message; messages
// (roles user and assistant; content a string or an array of blocks): text blocks → the content,
// an assistant's tool_use blocks {id, name, input} → ChatMessage::toolCalls (argumentsJson = the
// input's JSON), a user's tool_result blocks {tool_use_id, content (a string or text blocks),
// is_error} → one "tool" message each, in block order, answering the call of that id (content
// prefixed "Error: " when is_error); max_tokens (required by /v1/messages, as Anthropic requires);
// stop_sequences; temperature (0–1); top_p; top_k; stream; metadata (ignored); tools
// [{name, description, input_schema}] → OutputSpec::tools; tool_choice {type: auto | any | tool
// (+name) | none, disable_parallel_tool_use} → OutputSpec::toolChoice (any → Required, tool →
// Named) and parallelToolCalls. cache_control marks are accepted and ignored (the server reuses
// cached prefixes by itself). Refused with a 400 naming the field: images, documents and other
// block types, thinking (unless disabled), server tools (tools[i].type), mcp_servers, container,
// a last message of the assistant (prefill). Unknown fields are ignored.
// Tool call ids: the core's "call_X" is shown to Anthropic clients as "toolu_X"
// (anthropicToolUseId) and mapped back when a tool_use or tool_result names it (coreToolCallId).
// Thread-safety: pure functions. Cost: O(body size).
#pragma once

#include <string>
#include <string_view>

#include "zipmoe/serve/openai_request.h"

namespace zipmoe {

enum class AnthropicEndpoint {
  Messages,     // POST /v1/messages: max_tokens required
  CountTokens,  // POST /v1/messages/count_tokens: max_tokens optional (it sizes the context fit)
};

// Parses a request body. Throws ApiError (400, naming the field) for a body that is not a JSON
// object, a missing or mistyped field, a value out of range, or a refused feature; never anything
// else (also for arbitrary bytes: the fuzz target checks it). The request's endpoint is
// ChatCompletions (the chat path of the scheduler).
GenerationRequest parseAnthropicRequest(AnthropicEndpoint endpoint, std::string_view body,
                                        const RequestLimits& limits = {});

// "call_X" → "toolu_X"; any other id unchanged.
std::string anthropicToolUseId(const std::string& coreId);
// "toolu_X" → "call_X"; any other id unchanged.
std::string coreToolCallId(const std::string& anthropicId);

}  // namespace zipmoe
