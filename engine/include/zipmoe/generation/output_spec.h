// OutputSpec — what a request asks the shape of the model's reply to be: tools the model may call
// (OpenAI's `tools` / `tool_choice` / `parallel_tool_calls`, Anthropic's `tools` / `tool_choice`) and
// structured output (`response_format`: a JSON object, or JSON that follows a schema). Every door
// fills the same struct; the generation core enforces it by constrained decoding (a per-step token
// mask from the schema's grammar) and reports the calls it produced as ToolCalls.
// Schemas travel as JSON text so that this header needs no JSON library.
// Thread-safety: plain values. Cost: none.
#pragma once

#include <string>
#include <vector>

namespace zipmoe {

// One function the model may call.
struct ToolSpec {
  std::string name;                  // [A-Za-z0-9_-]{1,64}
  std::string description;
  std::string parametersJson = "{\"type\":\"object\",\"properties\":{}}";  // a JSON schema (object)
  bool strict = false;               // OpenAI's `strict`; the core constrains arguments either way
};

enum class ToolChoiceMode {
  Auto,      // the model chooses between text and calls
  None,      // no calls (the tools are still shown to the model)
  Required,  // at least one call, to any tool
  Named,     // exactly the tool ToolChoice::name
};

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::Auto;
  std::string name;  // Named: the tool's name
};

// A call the model made: its arguments are a JSON object (as text) that follows the tool's schema.
struct ToolCall {
  std::string id;             // "call_…" (OpenAI) / "toolu_…" (Anthropic), unique in the reply
  std::string name;
  std::string argumentsJson;
};

enum class ResponseFormatKind {
  Text,        // free text (the default)
  JsonObject,  // any JSON object
  JsonSchema,  // JSON that follows `schemaJson`
};

struct ResponseFormat {
  ResponseFormatKind kind = ResponseFormatKind::Text;
  std::string name;        // json_schema.name
  std::string schemaJson;  // json_schema.schema
  bool strict = false;     // json_schema.strict
};

struct OutputSpec {
  std::vector<ToolSpec> tools;
  ToolChoice toolChoice;          // Auto when tools are given, else unused
  bool parallelToolCalls = true;  // false: at most one call per reply
  ResponseFormat responseFormat;
  bool constrained() const { return responseFormat.kind != ResponseFormatKind::Text || (!tools.empty() && toolChoice.mode != ToolChoiceMode::None); }
};

}  // namespace zipmoe
