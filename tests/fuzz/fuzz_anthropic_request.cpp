// Fuzzes the request body → generation request path of the Anthropic Messages endpoints
// (parseAnthropicRequest): any bytes must either give a request whose sampling parameters the
// sampler accepts, whose tool choice names a listed tool and whose tool calls carry JSON objects,
// or throw ApiError — a 400 naming the field — and nothing else (no other exception, crash, hang or
// out-of-bounds read). The first byte picks the endpoint (messages or count_tokens).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "zipmoe/base/error.h"
#include "zipmoe/generation/sampler.h"
#include "zipmoe/serve/anthropic_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto endpoint = (data[0] & 1) ? zipmoe::AnthropicEndpoint::CountTokens : zipmoe::AnthropicEndpoint::Messages;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const zipmoe::GenerationRequest r = zipmoe::parseAnthropicRequest(endpoint, body);
    zipmoe::validate(r.sampling);  // what the parser accepts, the sampler must accept
    if (r.messages.empty() || r.messages.back().role == "assistant") std::abort();
    if (endpoint == zipmoe::AnthropicEndpoint::Messages && !r.maxTokensGiven) std::abort();
    if (r.output.toolChoice.mode == zipmoe::ToolChoiceMode::Named) {
      bool listed = false;
      for (const auto& t : r.output.tools) listed = listed || t.name == r.output.toolChoice.name;
      if (!listed) std::abort();
    }
    for (const auto& m : r.messages)
      for (const auto& call : m.toolCalls)
        if (!nlohmann::json::parse(call.argumentsJson, nullptr, false).is_object()) std::abort();
  } catch (const zipmoe::ApiError& e) {
    if (e.status() != 400 || e.param().empty() || e.message().empty()) std::abort();
    (void)e.toJson();
  } catch (const zipmoe::Error&) {
    std::abort();  // validate() refused what the parser let through
  }
  return 0;
}
