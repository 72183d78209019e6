// The JSON the OpenAI-compatible server answers with: completion objects, stream chunks, the model
// list. Internal to serve/ (openai_server.cpp). Thread-safety: pure functions. Cost: O(text).
#pragma once

#include <cstdint>
#include <string>

#include "zipmoe/serve/openai_request.h"
#include "zipmoe/serve/serve_scheduler.h"

namespace zipmoe::serve {

struct ResponseIds {
  std::string id;       // "chatcmpl-…" / "cmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// The whole answer of a non-streaming request.
std::string completionJson(Endpoint endpoint, const ResponseIds& ids, const std::string& text, const GenerationStats& info);
// One `data: …` payload of a stream (without the "data: " framing): the opening chunk (chat: the
// role), a text delta, the closing chunk (finish reason), the usage chunk (choices empty).
std::string openingChunk(Endpoint endpoint, const ResponseIds& ids, bool withUsageField);
std::string textChunk(Endpoint endpoint, const ResponseIds& ids, const std::string& text, bool withUsageField);
// A chat stream's tool call: its start (index, id, type, name) or the next piece of its arguments.
std::string toolCallChunk(const ResponseIds& ids, const RequestTicket::Event& event, bool withUsageField);
std::string closingChunk(Endpoint endpoint, const ResponseIds& ids, const GenerationStats& info, bool withUsageField);
std::string usageChunk(Endpoint endpoint, const ResponseIds& ids, const GenerationStats& info);
std::string modelJson(const std::string& model, int64_t created);
std::string modelListJson(const std::string& model, int64_t created);

}  // namespace zipmoe::serve
