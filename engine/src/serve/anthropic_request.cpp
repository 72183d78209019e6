// parseAnthropicRequest (see zipmoe/serve/anthropic_request.h).
#include "zipmoe/serve/anthropic_request.h"

#include <map>
#include <set>

#include "serve/request_fields.h"

namespace zipmoe {

using nlohmann::json;
using namespace serve;

namespace {

constexpr std::string_view kCoreIdPrefix = "call_", kAnthropicIdPrefix = "toolu_";

std::string at(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }

// A block's "type", required.
std::string blockType(const json& block, const std::string& where) {
  if (!block.is_object()) throw wrongType(where, "an object", block);
  const auto t = block.find("type");
  if (t == block.end() || !t->is_string())
    throw invalidField(where + ".type", "'" + where + ".type' is required and must be a string.");
  return t->get<std::string>();
}

std::string requiredString(const json& object, const char* field, const std::string& where) {
  if (!present(object, field)) throw invalidField(where + "." + field, "'" + where + "." + field + "' is a required property.");
  const json& v = object.at(field);
  if (!v.is_string()) throw wrongType(where + "." + field, "a string", v);
  return v.get<std::string>();
}

ApiError unsupportedBlock(const std::string& where, const std::string& type, const char* role) {
  return invalidField(where + ".type", "Content blocks of type '" + type + "' are not supported in " + role +
                                           " messages by this server (text" +
                                           (std::string(role) == "user" ? " and tool_result" : " and tool_use") + " are).");
}

// One message of `messages`: appends it to r.messages (a user message with tool_result blocks
// becomes one "tool" message per result, in order). `toolNames`: the tools called so far, by id.
void parseMessage(const json& m, const std::string& where, GenerationRequest& r, std::map<std::string, std::string>& toolNames) {
  if (!m.is_object()) throw wrongType(where, "an object", m);
  const std::string role = requiredString(m, "role", where);
  if (role != "user" && role != "assistant")
    throw invalidField(where + ".role", "Role '" + role + "' is not supported: messages are 'user' or 'assistant' (the "
                                        "system prompt is the top-level 'system').");
  if (!present(m, "content")) throw invalidField(where + ".content", "'" + where + ".content' is a required property.");
  const json& content = m.at("content");
  if (content.is_string()) {
    r.messages.emplace_back(role, content.get<std::string>());
    return;
  }
  if (!content.is_array()) throw wrongType(where + ".content", "a string or an array of content blocks", content);
  ChatMessage message(role, {});
  bool pending = false;  // `message` holds text not appended yet
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string here = at(where + ".content", i);
    const json& block = content[i];
    const std::string type = blockType(block, here);
    if (type == "text") {
      message.content += requiredString(block, "text", here);
      pending = true;
    } else if (type == "tool_use" && role == "assistant") {
      ToolCall call;
      call.id = coreToolCallId(requiredString(block, "id", here));
      call.name = requiredString(block, "name", here);
      if (!present(block, "input")) throw invalidField(here + ".input", "'" + here + ".input' is a required property.");
      if (!block.at("input").is_object()) throw wrongType(here + ".input", "an object", block.at("input"));
      call.argumentsJson = block.at("input").dump(-1, ' ', false, json::error_handler_t::replace);
      toolNames[call.id] = call.name;
      message.toolCalls.push_back(std::move(call));
      pending = true;
    } else if (type == "tool_result" && role == "user") {
      if (pending) r.messages.push_back(std::exchange(message, ChatMessage(role, {})));
      pending = false;
      ChatMessage result("tool", {});
      result.toolCallId = coreToolCallId(requiredString(block, "tool_use_id", here));
      if (const auto name = toolNames.find(result.toolCallId); name != toolNames.end()) result.name = name->second;
      if (present(block, "content")) result.content = messageContent(block.at("content"), here + ".content");
      if (present(block, "is_error")) {
        if (!block.at("is_error").is_boolean()) throw wrongType(here + ".is_error", "a boolean", block.at("is_error"));
        if (block.at("is_error").get<bool>()) result.content = "Error: " + result.content;
      }
      r.messages.push_back(std::move(result));
    } else {
      throw unsupportedBlock(here, type, role == "user" ? "user" : "assistant");
    }
  }
  if (pending || content.empty()) r.messages.push_back(std::move(message));
}

void parseMessages(const json& body, const RequestLimits& limits, GenerationRequest& r) {
  const json& messages = messageList(body, limits);
  std::map<std::string, std::string> toolNames;
  for (size_t i = 0; i < messages.size(); ++i) parseMessage(messages[i], at("messages", i), r, toolNames);
  if (r.messages.back().role == "assistant")
    throw invalidField(at("messages", messages.size() - 1) + ".role",
                       "The last message must be the user's: continuing (prefilling) an assistant message is not "
                       "supported by this server.");
}

void parseSystem(const json& body, GenerationRequest& r) {
  if (!present(body, "system")) return;
  const json& s = body.at("system");
  if (!s.is_string() && !s.is_array()) throw wrongType("system", "a string or an array of text blocks", s);
  std::string text = messageContent(s, "system");
  if (!text.empty()) r.messages.insert(r.messages.begin(), ChatMessage("system", std::move(text)));
}

bool validToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

void parseTools(const json& body, GenerationRequest& r) {
  if (!present(body, "tools")) return;
  const json& tools = body.at("tools");
  if (!tools.is_array()) throw wrongType("tools", "an array", tools);
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = at("tools", i);
    const json& t = tools[i];
    if (!t.is_object()) throw wrongType(where, "an object", t);
    if (present(t, "type") && !(t.at("type").is_string() && t.at("type") == "custom"))
      throw invalidField(where + ".type", "Tools of type " + t.at("type").dump() + " (Anthropic's server and client "
                                          "tools) are not supported by this server; only custom tools "
                                          "{name, description, input_schema}.");
    ToolSpec spec;
    spec.name = requiredString(t, "name", where);
    if (!validToolName(spec.name))
      throw invalidField(where + ".name", "'" + where + ".name' must match ^[a-zA-Z0-9_-]{1,64}$, got '" + spec.name + "'.");
    if (!names.insert(spec.name).second)
      throw invalidField(where + ".name", "Tool names must be unique; '" + spec.name + "' appears twice.");
    if (present(t, "description")) spec.description = stringField(t, "description");
    if (!present(t, "input_schema"))
      throw invalidField(where + ".input_schema", "'" + where + ".input_schema' is a required property.");
    const json& schema = t.at("input_schema");
    if (!schema.is_object()) throw wrongType(where + ".input_schema", "an object (a JSON schema)", schema);
    if (present(schema, "type") && schema.at("type") != "object")
      throw invalidField(where + ".input_schema.type", "'" + where + ".input_schema.type' must be \"object\", got " +
                                                           schema.at("type").dump() + ".");
    spec.parametersJson = schema.dump(-1, ' ', false, json::error_handler_t::replace);
    r.output.tools.push_back(std::move(spec));
  }
}

void parseToolChoice(const json& body, GenerationRequest& r) {
  if (!present(body, "tool_choice")) return;
  const json& c = body.at("tool_choice");
  const std::string type = blockType(c, "tool_choice");
  OutputSpec& out = r.output;
  if (type == "auto") {
    out.toolChoice.mode = ToolChoiceMode::Auto;
  } else if (type == "any") {
    out.toolChoice.mode = ToolChoiceMode::Required;
  } else if (type == "none") {
    out.toolChoice.mode = ToolChoiceMode::None;
  } else if (type == "tool") {
    out.toolChoice.mode = ToolChoiceMode::Named;
    out.toolChoice.name = requiredString(c, "name", "tool_choice");
    bool known = false;
    for (const ToolSpec& t : out.tools) known = known || t.name == out.toolChoice.name;
    if (!known)
      throw invalidField("tool_choice.name", "'tool_choice.name' names the tool '" + out.toolChoice.name +
                                                 "', which is not in 'tools'.");
  } else {
    throw invalidField("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none, got '" + type + "'.");
  }
  if (type != "none" && out.tools.empty())
    throw invalidField("tool_choice", "'tool_choice' of type '" + type + "' needs 'tools'.");
  if (present(c, "disable_parallel_tool_use")) {
    const json& d = c.at("disable_parallel_tool_use");
    if (!d.is_boolean()) throw wrongType("tool_choice.disable_parallel_tool_use", "a boolean", d);
    out.parallelToolCalls = !d.get<bool>();
  }
}

// Top-level features of Anthropic's API this server does not have.
void refuseUnsupported(const json& body) {
  if (present(body, "thinking")) {
    const json& t = body.at("thinking");
    if (!(t.is_object() && t.contains("type") && t.at("type") == "disabled"))
      throw invalidField("thinking", "Extended thinking ('thinking') is not supported by this server (only "
                                     "{\"type\": \"disabled\"}).");
  }
  for (const char* f : {"mcp_servers", "container", "context_management"})
    if (present(body, f) && !(body.at(f).is_array() && body.at(f).empty()))
      throw invalidField(f, std::string("'") + f + "' is not supported by this server.");
}

}  // namespace

std::string anthropicToolUseId(const std::string& coreId) {
  if (coreId.rfind(kCoreIdPrefix, 0) != 0) return coreId;
  return std::string(kAnthropicIdPrefix) + coreId.substr(kCoreIdPrefix.size());
}

std::string coreToolCallId(const std::string& anthropicId) {
  if (anthropicId.rfind(kAnthropicIdPrefix, 0) != 0) return anthropicId;
  return std::string(kCoreIdPrefix) + anthropicId.substr(kAnthropicIdPrefix.size());
}

GenerationRequest parseAnthropicRequest(AnthropicEndpoint endpoint, std::string_view bodyText, const RequestLimits& limits) {
  const json body = parseBodyObject(bodyText);
  GenerationRequest r;
  r.endpoint = Endpoint::ChatCompletions;
  r.sampling.temperature = 1.0;  // Anthropic's default
  r.sampling.maxTokens = limits.defaultMaxTokens;
  if (!body.contains("model")) throw invalidField("model", "'model' is a required property.");
  r.model = stringField(body, "model");
  parseMessages(body, limits, r);
  parseSystem(body, r);
  refuseUnsupported(body);
  parseTools(body, r);
  parseToolChoice(body, r);

  if (present(body, "max_tokens")) {
    r.sampling.maxTokens = static_cast<int>(integer(body, "max_tokens", 1, limits.maxTokensCeiling));
    r.maxTokensGiven = true;
  } else if (endpoint == AnthropicEndpoint::Messages) {
    throw invalidField("max_tokens", "'max_tokens' is a required property.");
  }
  if (present(body, "temperature")) {
    const double t = number(body, "temperature");
    if (t < 0.0 || t > 1.0)
      throw invalidField("temperature", "'temperature' must be between 0 and 1, got " + body.at("temperature").dump() + ".");
    r.sampling.temperature = t;
  }
  if (present(body, "top_p")) {
    const double p = number(body, "top_p");
    if (!(p > 0.0 && p <= 1.0))
      throw invalidField("top_p", "'top_p' must be greater than 0 and at most 1, got " + body.at("top_p").dump() + ".");
    r.sampling.topP = p;
  }
  if (present(body, "top_k")) r.sampling.topK = static_cast<int>(integer(body, "top_k", 0, 1 << 20));
  if (present(body, "stop_sequences"))
    r.sampling.stopStrings = stopStrings(body.at("stop_sequences"), "stop_sequences", limits, false);
  if (present(body, "stream")) {
    const json& s = body.at("stream");
    if (!s.is_boolean()) throw wrongType("stream", "a boolean", s);
    r.stream = s.get<bool>();
  }
  if (present(body, "metadata") && !body.at("metadata").is_object())
    throw wrongType("metadata", "an object", body.at("metadata"));
  return r;
}

}  // namespace zipmoe
