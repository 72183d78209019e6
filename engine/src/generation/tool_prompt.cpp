// Tool prompts (see tool_prompt.h).
#include "generation/tool_prompt.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

using json = nlohmann::ordered_json;

json parsedOr(const std::string& text, const json& fallback) {
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    return fallback;
  }
}

json toolsJson(const std::vector<ToolSpec>& tools) {
  json list = json::array();
  for (const ToolSpec& t : tools) {
    json f = {{"name", t.name}};
    if (!t.description.empty()) f["description"] = t.description;
    f["parameters"] = parsedOr(t.parametersJson, json::object());
    list.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return list;
}

// A call in exactly the format the model writes it (token_constraint.h), its arguments as they came:
// the reply the model generated renders back byte for byte, so the next turn reuses its KV cache.
std::string callText(const ToolCall& c) {
  const bool isJson = !json::parse(c.argumentsJson, nullptr, false).is_discarded();
  return "<tool_call>\n{\"name\": " + json(c.name).dump() + ", \"arguments\": " +
         (isJson ? c.argumentsJson : json(c.argumentsJson).dump()) + "}\n</tool_call>";
}

// A schema as a short type: string, number, "a"|"b", string[], {k: type, k2?: type}.
std::string typeOf(const json& schema, int depth) {
  if (!schema.is_object() || depth > 4) return "any";
  if (schema.contains("enum") && schema.at("enum").is_array()) {
    std::string out;
    for (const json& v : schema.at("enum")) out += (out.empty() ? "" : "|") + v.dump();
    return out;
  }
  if (schema.contains("const")) return schema.at("const").dump();
  for (const char* key : {"anyOf", "oneOf"})
    if (schema.contains(key) && schema.at(key).is_array()) {
      std::string out;
      for (const json& alt : schema.at(key)) out += (out.empty() ? "" : "|") + typeOf(alt, depth + 1);
      return out;
    }
  const json type = schema.value("type", json());
  if (type.is_array()) {
    std::string out;
    for (const json& t : type) {
      json one = schema;
      one["type"] = t;
      out += (out.empty() ? "" : "|") + typeOf(one, depth + 1);
    }
    return out;
  }
  const std::string name = type.is_string() ? type.get<std::string>() : (schema.contains("properties") ? "object" : "any");
  if (name == "array") return typeOf(schema.value("items", json::object()), depth + 1) + "[]";
  if (name != "object") return name;
  const json props = schema.value("properties", json::object());
  if (!props.is_object() || props.empty()) return "object";
  std::vector<std::string> required;
  for (const json& r : schema.value("required", json::array()))
    if (r.is_string()) required.push_back(r.get<std::string>());
  std::string out = "{";
  for (const auto& [key, value] : props.items()) {
    const bool needed = std::find(required.begin(), required.end(), key) != required.end();
    out += (out.size() > 1 ? ", " : "") + key + (needed ? ": " : "?: ") + typeOf(value, depth + 1);
  }
  return out + "}";
}

// Short on purpose: a small model's context (the demo holds 256 tokens) must fit tools and a reply.
// Each tool as a signature, name({arguments}) - description; the constraint holds the call to the
// full schema anyway.
std::string instructions(const std::vector<ToolSpec>& tools) {
  std::string text = "You may call these functions:";
  for (const ToolSpec& t : tools) {
    text += "\n" + t.name + "(" + typeOf(parsedOr(t.parametersJson, json::object()), 0) + ")";
    if (!t.description.empty()) text += " - " + t.description;
  }
  text += "\nTo call one, reply with <tool_call>\n{\"name\": NAME, \"arguments\": {...}}\n</tool_call>";
  return text;
}

json nativeMessages(const std::vector<ChatMessage>& messages) {
  json list = json::array();
  for (const ChatMessage& m : messages) {
    json j = {{"role", m.role}, {"content", m.content}};
    if (!m.toolCalls.empty()) {
      json calls = json::array();
      for (const ToolCall& c : m.toolCalls)
        calls.push_back({{"id", c.id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", parsedOr(c.argumentsJson, json(c.argumentsJson))}}}});
      j["tool_calls"] = std::move(calls);
    }
    if (m.role == "tool") {
      j["tool_call_id"] = m.toolCallId;
      if (!m.name.empty()) j["name"] = m.name;
    }
    list.push_back(std::move(j));
  }
  return list;
}

std::string renderNative(const ChatTemplate& t, const std::vector<ChatMessage>& messages, const json& tools) {
  json vars = json::object();
  vars["messages"] = nativeMessages(messages);
  if (!tools.empty()) vars["tools"] = tools;
  vars["add_generation_prompt"] = true;
  return t.renderContext(vars);
}

// Whether the template's rendering changes when it is given a tool.
bool rendersTools(const ChatTemplate& t) {
  const std::vector<ChatMessage> probe = {ChatMessage("user", "ping")};
  const json tool = toolsJson({ToolSpec{"zipmoe_probe", "probe", "{\"type\":\"object\",\"properties\":{}}", false}});
  try {
    return renderNative(t, probe, tool) != renderNative(t, probe, json::array());
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

bool usesTools(const std::vector<ChatMessage>& messages, const std::vector<ToolSpec>& tools) {
  if (!tools.empty()) return true;
  for (const ChatMessage& m : messages)
    if (!m.toolCalls.empty() || m.role == "tool") return true;
  return false;
}

std::vector<ChatMessage> genericToolMessages(const std::vector<ChatMessage>& messages, const std::vector<ToolSpec>& tools) {
  std::vector<ChatMessage> out;
  if (!tools.empty()) {
    const bool system = !messages.empty() && messages.front().role == "system";
    const std::string head = system ? messages.front().content + "\n\n" : std::string();
    out.emplace_back("system", head + instructions(tools));
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (i == 0 && m.role == "system" && !tools.empty()) continue;
    if (m.role == "tool") {
      const std::string block = "<tool_response>\n" + m.content + "\n</tool_response>";
      if (i > 0 && messages[i - 1].role == "tool" && !out.empty()) {
        out.back().content += "\n" + block;
      } else {
        out.emplace_back("user", block);
      }
      continue;
    }
    ChatMessage plain(m.role, m.content);
    for (const ToolCall& c : m.toolCalls) plain.content += (plain.content.empty() ? "" : "\n") + callText(c);
    out.push_back(std::move(plain));
  }
  return out;
}

std::string renderWithTools(const ChatTemplate& chatTemplate, const std::vector<ChatMessage>& messages,
                            const std::vector<ToolSpec>& tools) {
  if (!usesTools(messages, tools)) return chatTemplate.render(messages, true);
  if (rendersTools(chatTemplate)) {
    try {
      return renderNative(chatTemplate, messages, toolsJson(tools));
    } catch (const Error&) {
      // A template that renders tools but refuses these messages: the generic format below.
    }
  }
  return chatTemplate.render(genericToolMessages(messages, tools), true);
}

}  // namespace zipmoe
