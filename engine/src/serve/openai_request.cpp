// parseGenerationRequest and ApiError (see zipmoe/serve/openai_request.h).
#include "zipmoe/serve/openai_request.h"

#include <cctype>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "generation/token_constraint.h"
#include "zipmoe/base/error.h"
#include "serve/request_fields.h"

namespace zipmoe {

using nlohmann::json;

std::string ApiError::toJson() const {
  json e = {{"message", message_}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) e["param"] = param_;
  if (!code_.empty()) e["code"] = code_;
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

ApiError invalidField(const std::string& param, const std::string& message) {
  return ApiError(400, "invalid_request_error", message, param);
}

namespace serve {  // the helpers request_fields.h shares with the Anthropic parser

json parseBodyObject(std::string_view bodyText) {
  json body;
  try {
    body = json::parse(bodyText.begin(), bodyText.end());
  } catch (const json::exception& e) {
    throw ApiError(400, "invalid_request_error",
                   std::string("The request body is not valid JSON: ") + e.what() + ".", "body");
  }
  if (!body.is_object()) throw ApiError(400, "invalid_request_error", "The request body must be a JSON object.", "body");
  return body;
}

const char* typeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float:
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "a number";
    default: return "an unsupported value";
  }
}

ApiError wrongType(const std::string& field, const char* expected, const json& v) {
  return invalidField(field, "'" + field + "' must be " + expected + ", got " + typeName(v) + ".");
}

// A JSON number as a double (integers too), else an error naming the field.
double number(const json& body, const std::string& field) {
  const json& v = body.at(field);
  if (!v.is_number()) throw wrongType(field, "a number", v);
  const double d = v.get<double>();
  if (!std::isfinite(d)) throw invalidField(field, "'" + field + "' must be a finite number.");
  return d;
}

// A JSON integer (a float with no fraction counts), range-checked.
int64_t integer(const json& body, const std::string& field, int64_t min, int64_t max) {
  const json& v = body.at(field);
  int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    x = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                       : static_cast<int64_t>(u);
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) throw wrongType(field, "an integer", v);
    if (d < -9.0e18 || d > 9.0e18)
      throw invalidField(field, "'" + field + "' must be between " + std::to_string(min) + " and " +
                                    std::to_string(max) + ".");
    x = static_cast<int64_t>(d);
  } else {
    throw wrongType(field, "an integer", v);
  }
  if (x < min || x > max)
    throw invalidField(field, "'" + field + "' must be between " + std::to_string(min) + " and " + std::to_string(max) +
                                  ", got " + std::to_string(x) + ".");
  return x;
}

bool present(const json& body, const char* field) {
  const auto it = body.find(field);
  return it != body.end() && !it->is_null();
}

std::string stringField(const json& body, const std::string& field) {
  const json& v = body.at(field);
  if (!v.is_string()) throw wrongType(field, "a string", v);
  return v.get<std::string>();
}

// Text of a message's content: a string, or an array of {"type": "text", "text": …} parts.
std::string messageContent(const json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return {};
  if (!content.is_array()) throw wrongType(field, "a string or an array of content parts", content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string where = field + "[" + std::to_string(i) + "]";
    if (!part.is_object()) throw wrongType(where, "an object", part);
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string())
      throw invalidField(where + ".type", "'" + where + ".type' is required and must be a string.");
    if (*type != "text")
      throw invalidField(where + ".type", "Content parts of type '" + type->get<std::string>() +
                                              "' are not supported by this server; only 'text'.");
    const auto t = part.find("text");
    if (t == part.end() || !t->is_string()) throw invalidField(where + ".text", "'" + where + ".text' must be a string.");
    text += t->get<std::string>();
  }
  return text;
}

std::vector<std::string> stopStrings(const json& s, const std::string& field, const RequestLimits& limits,
                                     bool allowString) {
  std::vector<std::string> stops;
  if (allowString && s.is_string()) {
    stops.push_back(s.get<std::string>());
  } else if (s.is_array()) {
    for (size_t i = 0; i < s.size(); ++i) {
      if (!s[i].is_string()) throw wrongType(field + "[" + std::to_string(i) + "]", "a string", s[i]);
      stops.push_back(s[i].get<std::string>());
    }
  } else {
    throw wrongType(field, allowString ? "a string or an array of strings" : "an array of strings", s);
  }
  if (stops.size() > limits.maxStopStrings)
    throw invalidField(field, "'" + field + "' holds " + std::to_string(stops.size()) + " strings; at most " +
                                  std::to_string(limits.maxStopStrings) + " are accepted.");
  for (const auto& x : stops) {
    if (x.empty()) throw invalidField(field, "'" + field + "' strings must not be empty.");
    if (x.size() > limits.maxStopLength)
      throw invalidField(field, "'" + field + "' strings must be at most " + std::to_string(limits.maxStopLength) + " bytes.");
  }
  return stops;
}

const json& messageList(const json& body, const RequestLimits& limits) {
  if (!body.contains("messages")) throw invalidField("messages", "'messages' is a required property.");
  const json& messages = body.at("messages");
  if (!messages.is_array()) throw wrongType("messages", "an array", messages);
  if (messages.empty()) throw invalidField("messages", "'messages' must hold at least one message.");
  if (messages.size() > limits.maxMessages)
    throw invalidField("messages", "'messages' holds " + std::to_string(messages.size()) + " messages; at most " +
                                       std::to_string(limits.maxMessages) + " are accepted.");
  return messages;
}

}  // namespace serve

using namespace serve;

namespace {

// An assistant message's earlier calls: [{"id", "type": "function", "function": {"name", "arguments"}}].
std::vector<ToolCall> parseToolCalls(const json& calls, const std::string& field) {
  if (!calls.is_array()) throw wrongType(field, "an array", calls);
  std::vector<ToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string where = field + "[" + std::to_string(i) + "]";
    const json& c = calls[i];
    if (!c.is_object()) throw wrongType(where, "an object", c);
    if (!present(c, "function")) throw invalidField(where + ".function", "'" + where + ".function' is a required property.");
    const json& f = c.at("function");
    if (!f.is_object()) throw wrongType(where + ".function", "an object", f);
    ToolCall call;
    call.id = present(c, "id") ? stringField(c, "id") : std::string();
    if (!present(f, "name")) throw invalidField(where + ".function.name", "'" + where + ".function.name' is a required property.");
    call.name = stringField(f, "name");
    call.argumentsJson = present(f, "arguments") ? stringField(f, "arguments") : "{}";
    out.push_back(std::move(call));
  }
  return out;
}

// The name of the tool whose call `id` an earlier assistant message made (empty when none did).
std::string toolNameOf(const std::vector<ChatMessage>& earlier, const std::string& id) {
  for (auto m = earlier.rbegin(); m != earlier.rend(); ++m)
    for (const ToolCall& c : m->toolCalls)
      if (c.id == id) return c.name;
  return {};
}

void parseMessages(const json& body, const RequestLimits& limits, GenerationRequest& r) {
  const json& messages = messageList(body, limits);
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json& m = messages[i];
    if (!m.is_object()) throw wrongType(where, "an object", m);
    if (!m.contains("role")) throw invalidField(where + ".role", "'" + where + ".role' is a required property.");
    std::string role = stringField(m, "role");
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      throw invalidField(where + ".role", "Role '" + role + "' is not supported by this server (system, developer, " +
                                              "user, assistant and tool are).");
    const bool calls = role == "assistant" && present(m, "tool_calls");
    if (!calls && !m.contains("content"))
      throw invalidField(where + ".content", "'" + where + ".content' is a required property.");
    ChatMessage message(role, m.contains("content") ? messageContent(m.at("content"), where + ".content") : std::string());
    if (calls) message.toolCalls = parseToolCalls(m.at("tool_calls"), where + ".tool_calls");
    if (role != "assistant" && present(m, "tool_calls"))
      throw invalidField(where + ".tool_calls", "Only assistant messages carry 'tool_calls'.");
    if (role == "tool") {
      if (!m.contains("tool_call_id")) throw invalidField(where + ".tool_call_id", "'" + where + ".tool_call_id' is a required property.");
      message.toolCallId = stringField(m, "tool_call_id");
      message.name = toolNameOf(r.messages, message.toolCallId);
    }
    r.messages.push_back(std::move(message));
  }
  if (r.messages.back().role == "assistant")
    throw invalidField("messages", "The last message must be the user's (or the system's): continuing an assistant "
                                   "message is not supported.");
}

void parsePrompt(const json& body, GenerationRequest& r) {
  if (!body.contains("prompt")) throw invalidField("prompt", "'prompt' is a required property.");
  const json& p = body.at("prompt");
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array()) {
    if (p.size() != 1 || !p[0].is_string())
      throw invalidField("prompt", "'prompt' must be a string or an array of exactly one string (batches and token "
                                   "arrays are not supported by this server).");
    r.prompt = p[0].get<std::string>();
  } else {
    throw wrongType("prompt", "a string", p);
  }
  if (r.prompt.empty()) throw invalidField("prompt", "'prompt' must not be empty.");
}

void parseStop(const json& body, const RequestLimits& limits, GenerationRequest& r) {
  if (present(body, "stop")) r.sampling.stopStrings = stopStrings(body.at("stop"), "stop", limits, true);
}

bool validToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

// A JSON schema given as an object (or true), kept as its text.
std::string schemaText(const json& schema, const std::string& field) {
  if (!schema.is_object() && !schema.is_boolean()) throw wrongType(field, "an object (a JSON schema)", schema);
  return schema.dump();
}

std::vector<ToolSpec> parseTools(const json& tools) {
  if (!tools.is_array()) throw wrongType("tools", "an array", tools);
  if (tools.size() > 128) throw invalidField("tools", "'tools' holds " + std::to_string(tools.size()) + " tools; at most 128 are accepted.");
  std::vector<ToolSpec> out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object()) throw wrongType(where, "an object", t);
    if (!present(t, "type") || !t.at("type").is_string() || t.at("type") != "function")
      throw invalidField(where + ".type", "'" + where + ".type' must be \"function\".");
    if (!present(t, "function")) throw invalidField(where + ".function", "'" + where + ".function' is a required property.");
    const json& f = t.at("function");
    if (!f.is_object()) throw wrongType(where + ".function", "an object", f);
    ToolSpec spec;
    if (!present(f, "name")) throw invalidField(where + ".function.name", "'" + where + ".function.name' is a required property.");
    spec.name = stringField(f, "name");
    if (!validToolName(spec.name))
      throw invalidField(where + ".function.name", "'" + spec.name + "' is not a valid function name: 1 to 64 of a-z, A-Z, 0-9, _ and -.");
    for (const ToolSpec& other : out)
      if (other.name == spec.name) throw invalidField(where + ".function.name", "Two tools are named '" + spec.name + "'.");
    if (present(f, "description")) spec.description = stringField(f, "description");
    if (present(f, "parameters")) spec.parametersJson = schemaText(f.at("parameters"), where + ".function.parameters");
    if (present(f, "strict")) {
      if (!f.at("strict").is_boolean()) throw wrongType(where + ".function.strict", "a boolean", f.at("strict"));
      spec.strict = f.at("strict").get<bool>();
    }
    out.push_back(std::move(spec));
  }
  return out;
}

ToolChoice parseToolChoice(const json& c, const std::vector<ToolSpec>& tools) {
  ToolChoice choice;
  if (c.is_string()) {
    const std::string mode = c.get<std::string>();
    if (mode == "none") choice.mode = ToolChoiceMode::None;
    else if (mode == "auto") choice.mode = ToolChoiceMode::Auto;
    else if (mode == "required") choice.mode = ToolChoiceMode::Required;
    else throw invalidField("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a function, not '" + mode + "'.");
  } else if (c.is_object()) {
    if (!present(c, "function") || !c.at("function").is_object() || !present(c.at("function"), "name"))
      throw invalidField("tool_choice.function.name", "'tool_choice.function.name' is a required property.");
    choice.mode = ToolChoiceMode::Named;
    choice.name = stringField(c.at("function"), "name");
  } else {
    throw wrongType("tool_choice", "a string or an object", c);
  }
  if (choice.mode != ToolChoiceMode::None && tools.empty())
    throw invalidField("tool_choice", "'tool_choice' needs 'tools'.");
  if (choice.mode == ToolChoiceMode::Named) {
    bool found = false;
    for (const ToolSpec& t : tools) found = found || t.name == choice.name;
    if (!found) throw invalidField("tool_choice.function.name", "No tool is named '" + choice.name + "'.");
  }
  return choice;
}

ResponseFormat parseResponseFormat(const json& f) {
  if (!f.is_object()) throw wrongType("response_format", "an object", f);
  if (!present(f, "type") || !f.at("type").is_string())
    throw invalidField("response_format.type", "'response_format.type' is a required property.");
  const std::string type = f.at("type").get<std::string>();
  ResponseFormat out;
  if (type == "text") return out;
  if (type == "json_object") {
    out.kind = ResponseFormatKind::JsonObject;
    return out;
  }
  if (type != "json_schema")
    throw invalidField("response_format.type", "'response_format.type' must be text, json_object or json_schema, not '" + type + "'.");
  if (!present(f, "json_schema")) throw invalidField("response_format.json_schema", "'response_format.json_schema' is a required property.");
  const json& js = f.at("json_schema");
  if (!js.is_object()) throw wrongType("response_format.json_schema", "an object", js);
  out.kind = ResponseFormatKind::JsonSchema;
  if (!present(js, "name")) throw invalidField("response_format.json_schema.name", "'response_format.json_schema.name' is a required property.");
  out.name = stringField(js, "name");
  if (!validToolName(out.name))
    throw invalidField("response_format.json_schema.name", "'" + out.name + "' is not a valid name: 1 to 64 of a-z, A-Z, 0-9, _ and -.");
  out.schemaJson = present(js, "schema") ? schemaText(js.at("schema"), "response_format.json_schema.schema") : "{}";
  if (present(js, "strict")) {
    if (!js.at("strict").is_boolean()) throw wrongType("response_format.json_schema.strict", "a boolean", js.at("strict"));
    out.strict = js.at("strict").get<bool>();
  }
  return out;
}

// tools, tool_choice, parallel_tool_calls and response_format; the schemas are compiled here once so
// that one the core cannot enforce is refused now, naming its path.
OutputSpec parseOutputSpec(const json& body) {
  OutputSpec out;
  if (present(body, "tools")) out.tools = parseTools(body.at("tools"));
  if (present(body, "tool_choice")) out.toolChoice = parseToolChoice(body.at("tool_choice"), out.tools);
  if (present(body, "parallel_tool_calls")) {
    if (!body.at("parallel_tool_calls").is_boolean())
      throw wrongType("parallel_tool_calls", "a boolean", body.at("parallel_tool_calls"));
    out.parallelToolCalls = body.at("parallel_tool_calls").get<bool>();
  }
  if (present(body, "response_format")) out.responseFormat = parseResponseFormat(body.at("response_format"));
  try {
    constrain::ConstraintSpec::compile(out);
  } catch (const Error& e) {
    const std::string message = e.what();
    const size_t end = message.find_first_of(".[:/ ");
    throw invalidField(message.substr(0, end), "Cannot constrain the reply: " + message);
  }
  return out;
}

// Fields this server refuses unless they hold their neutral value.
void refuseUnsupported(const json& body, Endpoint endpoint) {
  for (const char* f : {"presence_penalty", "frequency_penalty"})
    if (present(body, f) && number(body, f) != 0.0)
      throw invalidField(f, std::string("'") + f + "' is not supported by this server (only 0); use " +
                                "'repetition_penalty' (1 = off) instead.");
  for (const char* f : {"logit_bias", "functions", "suffix"})
    if (present(body, f) && !(body.at(f).is_array() && body.at(f).empty()) && !(body.at(f).is_object() && body.at(f).empty()))
      throw invalidField(f, std::string("'") + f + "' is not supported by this server" +
                                (std::string(f) == "functions" ? " (use 'tools')." : "."));
  if (present(body, "function_call") && !(body.at("function_call").is_string() && body.at("function_call") == "none"))
    throw invalidField("function_call", "'function_call' is not supported by this server (use 'tool_choice').");
  if (endpoint == Endpoint::Completions)
    for (const char* f : {"tools", "tool_choice", "response_format"})
      if (present(body, f)) throw invalidField(f, std::string("'") + f + "' is only supported on /v1/chat/completions.");
  for (const char* f : {"logprobs", "echo"}) {
    if (!present(body, f)) continue;
    const json& v = body.at(f);
    const bool neutral = (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v.get<double>() == 0.0);
    if (!neutral) throw invalidField(f, std::string("'") + f + "' is not supported by this server.");
  }
  if (present(body, "top_logprobs") && number(body, "top_logprobs") != 0.0)
    throw invalidField("top_logprobs", "'top_logprobs' is not supported by this server.");
  if (present(body, "best_of") && integer(body, "best_of", 1, 1) != 1)
    throw invalidField("best_of", "'best_of' must be 1 on this server.");
}

}  // namespace

GenerationRequest parseGenerationRequest(Endpoint endpoint, std::string_view bodyText, const RequestLimits& limits) {
  const json body = parseBodyObject(bodyText);
  GenerationRequest r;
  r.endpoint = endpoint;
  r.sampling.temperature = 1.0;  // OpenAI's default
  r.sampling.maxTokens = limits.defaultMaxTokens;
  if (!body.contains("model")) throw invalidField("model", "'model' is a required property.");
  r.model = stringField(body, "model");
  if (endpoint == Endpoint::ChatCompletions) {
    parseMessages(body, limits, r);
  } else {
    parsePrompt(body, r);
  }
  refuseUnsupported(body, endpoint);
  if (endpoint == Endpoint::ChatCompletions) r.output = parseOutputSpec(body);

  if (present(body, "n") && integer(body, "n", 1, std::numeric_limits<int64_t>::max()) != 1)
    throw invalidField("n", "'n' must be 1 on this server (one choice per request).");
  for (const char* f : {"max_completion_tokens", "max_tokens"})
    if (present(body, f)) {
      r.sampling.maxTokens = static_cast<int>(integer(body, f, 1, limits.maxTokensCeiling));
      r.maxTokensGiven = true;
    }
  if (present(body, "temperature")) {
    const double t = number(body, "temperature");
    if (t < 0.0 || t > 2.0) throw invalidField("temperature", "'temperature' must be between 0 and 2.");
    r.sampling.temperature = t;
  }
  if (present(body, "top_p")) {
    const double p = number(body, "top_p");
    if (!(p > 0.0 && p <= 1.0)) throw invalidField("top_p", "'top_p' must be greater than 0 and at most 1.");
    r.sampling.topP = p;
  }
  if (present(body, "top_k")) r.sampling.topK = static_cast<int>(integer(body, "top_k", 0, 1 << 20));
  if (present(body, "min_p")) {
    const double p = number(body, "min_p");
    if (!(p >= 0.0 && p < 1.0)) throw invalidField("min_p", "'min_p' must be at least 0 and below 1.");
    r.sampling.minP = p;
  }
  if (present(body, "repetition_penalty")) {
    const double p = number(body, "repetition_penalty");
    if (!(p > 0.0 && p <= 10.0)) throw invalidField("repetition_penalty", "'repetition_penalty' must be in (0, 10].");
    r.sampling.repetitionPenalty = p;
  }
  if (present(body, "seed"))
    r.sampling.seed = static_cast<uint64_t>(
        integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  parseStop(body, limits, r);
  if (present(body, "ignore_eos")) {  // llama.cpp's server: generate max_tokens whatever the model says
    const json& v = body.at("ignore_eos");
    if (!v.is_boolean()) throw wrongType("ignore_eos", "a boolean", v);
    r.ignoreEos = v.get<bool>();
  }
  if (present(body, "stream")) {
    const json& s = body.at("stream");
    if (!s.is_boolean()) throw wrongType("stream", "a boolean", s);
    r.stream = s.get<bool>();
  }
  if (present(body, "stream_options")) {
    const json& o = body.at("stream_options");
    if (!o.is_object()) throw wrongType("stream_options", "an object", o);
    if (!r.stream) throw invalidField("stream_options", "'stream_options' is only allowed when 'stream' is true.");
    if (present(o, "include_usage")) {
      if (!o.at("include_usage").is_boolean())
        throw wrongType("stream_options.include_usage", "a boolean", o.at("include_usage"));
      r.includeUsage = o.at("include_usage").get<bool>();
    }
  }
  if (present(body, "user") && !body.at("user").is_string()) throw wrongType("user", "a string", body.at("user"));
  return r;
}

}  // namespace zipmoe
