// Request fields — reading a request body's JSON with errors that name the field (ApiError 400,
// zipmoe/serve/openai_request.h): the helpers the OpenAI and the Anthropic request parsers share
// (openai_request.cpp, anthropic_request.cpp). Internal to serve/.
// Thread-safety: pure functions. Cost: O(the field).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "zipmoe/serve/openai_request.h"

namespace zipmoe::serve {

// The body as a JSON object, else 400 naming "body".
nlohmann::json parseBodyObject(std::string_view bodyText);
// "a string", "an array", … for error messages.
const char* typeName(const nlohmann::json& v);
// 400: "'FIELD' must be EXPECTED, got TYPE."
ApiError wrongType(const std::string& field, const char* expected, const nlohmann::json& v);
// body[field] as a finite number (integers too).
double number(const nlohmann::json& body, const std::string& field);
// body[field] as an integer in [min, max] (a float with no fraction counts).
int64_t integer(const nlohmann::json& body, const std::string& field, int64_t min, int64_t max);
// Whether body[field] is there and not null.
bool present(const nlohmann::json& body, const char* field);
std::string stringField(const nlohmann::json& body, const std::string& field);
// The text of a content value: a string, or an array of {"type": "text", "text": …} parts (any
// other part type is refused naming FIELD[i].type).
std::string messageContent(const nlohmann::json& content, const std::string& field);
// body["messages"]: present, an array, not empty, within limits.maxMessages (else the 400).
const nlohmann::json& messageList(const nlohmann::json& body, const RequestLimits& limits);
// Stop strings: an array of strings (or one string when `allowString`), at most limits.maxStopStrings,
// none empty or longer than limits.maxStopLength.
std::vector<std::string> stopStrings(const nlohmann::json& value, const std::string& field, const RequestLimits& limits,
                                     bool allowString);

}  // namespace zipmoe::serve
