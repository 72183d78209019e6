// Fuzzes the request body → generation parameters path of the OpenAI-compatible server
// (parseGenerationRequest): any bytes must either give a request whose sampling parameters the
// sampler accepts, or throw ApiError — a 400 naming the field — and nothing else (no other
// exception, crash, hang or out-of-bounds read). The first byte picks the endpoint.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "zipmoe/base/error.h"
#include "zipmoe/serve/openai_request.h"
#include "zipmoe/generation/sampler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto endpoint = (data[0] & 1) ? zipmoe::Endpoint::Completions : zipmoe::Endpoint::ChatCompletions;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const zipmoe::GenerationRequest r = zipmoe::parseGenerationRequest(endpoint, body);
    zipmoe::validate(r.sampling);  // what the parser accepts, the sampler must accept
    if (r.model.empty() && r.endpoint != endpoint) std::abort();
    if (endpoint == zipmoe::Endpoint::ChatCompletions && r.messages.empty()) std::abort();
  } catch (const zipmoe::ApiError& e) {
    if (e.status() != 400 || e.param().empty() || e.message().empty()) std::abort();
    (void)e.toJson();
  } catch (const zipmoe::Error&) {
    std::abort();  // validate() refused what the parser let through
  }
  return 0;
}
