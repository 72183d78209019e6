// parseGenerationRequest and ApiError (see zipmoe/serve/openai_request.h).
#include "zipmoe/serve/openai_request.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

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

}  // namespace serve

using namespace serve;

namespace {

void parseMessages(const json& body, const RequestLimits& limits, GenerationRequest& r) {
  if (!body.contains("messages")) throw invalidField("messages", "'messages' is a required property.");
  const json& messages = body.at("messages");
  if (!messages.is_array()) throw wrongType("messages", "an array", messages);
  if (messages.empty()) throw invalidField("messages", "'messages' must hold at least one message.");
  if (messages.size() > limits.maxMessages)
    throw invalidField("messages", "'messages' holds " + std::to_string(messages.size()) + " messages; at most " +
                                       std::to_string(limits.maxMessages) + " are accepted.");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json& m = messages[i];
    if (!m.is_object()) throw wrongType(where, "an object", m);
    if (!m.contains("role")) throw invalidField(where + ".role", "'" + where + ".role' is a required property.");
    std::string role = stringField(m, "role");
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant")
      throw invalidField(where + ".role", "Role '" + role + "' is not supported by this server (system, developer, " +
                                              "user and assistant are; tools are not).");
    if (m.contains("tool_calls") && !m.at("tool_calls").is_null())
      throw invalidField(where + ".tool_calls", "Tool calls are not supported by this server.");
    if (!m.contains("content")) throw invalidField(where + ".content", "'" + where + ".content' is a required property.");
    r.messages.push_back({role, messageContent(m.at("content"), where + ".content")});
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

// Fields this server refuses unless they hold their neutral value.
void refuseUnsupported(const json& body, Endpoint endpoint) {
  for (const char* f : {"presence_penalty", "frequency_penalty"})
    if (present(body, f) && number(body, f) != 0.0)
      throw invalidField(f, std::string("'") + f + "' is not supported by this server (only 0); use " +
                                "'repetition_penalty' (1 = off) instead.");
  for (const char* f : {"logit_bias", "tools", "functions", "suffix"})
    if (present(body, f) && !(body.at(f).is_array() && body.at(f).empty()) && !(body.at(f).is_object() && body.at(f).empty()))
      throw invalidField(f, std::string("'") + f + "' is not supported by this server.");
  for (const char* f : {"tool_choice", "function_call"})
    if (present(body, f) && !(body.at(f).is_string() && body.at(f) == "none"))
      throw invalidField(f, std::string("'") + f + "' is not supported by this server (only \"none\").");
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
  if (present(body, "response_format")) {
    const json& f = body.at("response_format");
    if (!f.is_object()) throw wrongType("response_format", "an object", f);
    const auto t = f.find("type");
    if (t == f.end() || !t->is_string() || *t != "text")
      throw invalidField("response_format", "Only 'response_format': {\"type\": \"text\"} is supported by this server.");
  }
  (void)endpoint;
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
