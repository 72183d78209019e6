// ChatTemplate: the public face of the Jinja interpreter (jinja_*.cpp) for chat templates.
//
// Parsing happens once in the constructor (syntax errors become zipmoe::Error with line:column);
// render() builds the variables transformers passes to a chat template — messages, add_generation_prompt,
// tools=None, documents=None and the special tokens that are set — and runs the evaluator. Runtime
// errors carry the template place; a template's own raise_exception('msg') surfaces as an Error whose
// message contains msg. fromTokenizerConfig understands both forms of `chat_template` (a string, or a
// list of {name, template} from which "default" is used) and both forms of special tokens (a string, or
// an AddedToken object with "content").
#include "zipmoe/text/chat_template.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "text/jinja_ast.h"
#include "text/jinja_eval.h"
#include "zipmoe/base/error.h"

namespace zipmoe {

struct ChatTemplate::Impl {
  std::string source;
  std::string bosToken, eosToken;
  jinja::Body body;
};

namespace {

std::string place(int line, int column) {
  return "line " + std::to_string(line) + ":" + std::to_string(column);
}

std::string specialToken(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return {};
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

nlohmann::json readConfig(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(systemErrorMessage("cannot open " + path.string(), errno));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": not valid JSON: " + e.what());
  }
}

// The template source in a tokenizer_config.json, or empty when there is none.
std::string templateSource(const nlohmann::json& config, const std::string& what) {
  if (!config.is_object() || !config.contains("chat_template") || config["chat_template"].is_null()) return {};
  const auto& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& entry : t)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
    throw Error(what + ": chat_template is a list without a \"default\" entry");
  }
  throw Error(what + ": chat_template must be a string or a list of {name, template}, found " +
              std::string(t.type_name()));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string bosToken, std::string eosToken)
    : impl_(std::make_unique<Impl>()) {
  impl_->source = std::move(source);
  impl_->bosToken = std::move(bosToken);
  impl_->eosToken = std::move(eosToken);
  try {
    impl_->body = jinja::parseTemplate(impl_->source);
  } catch (const jinja::SyntaxError& e) {
    throw Error("chat template syntax error at " + place(e.line, e.column) + ": " + e.message);
  }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

ChatTemplate ChatTemplate::fromTokenizerConfig(const std::filesystem::path& tokenizerConfigJson) {
  const nlohmann::json config = readConfig(tokenizerConfigJson);
  const std::string what = tokenizerConfigJson.string();
  std::string source = templateSource(config, what);
  if (source.empty()) throw Error(what + " has no chat_template");
  try {
    return ChatTemplate(std::move(source), specialToken(config, "bos_token"), specialToken(config, "eos_token"));
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
}

bool ChatTemplate::hasChatTemplate(const std::filesystem::path& tokenizerConfigJson) {
  try {
    return !templateSource(readConfig(tokenizerConfigJson), tokenizerConfigJson.string()).empty();
  } catch (const Error&) {
    return false;
  }
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool addGenerationPrompt) const {
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  variables["messages"] = std::move(list);
  variables["add_generation_prompt"] = addGenerationPrompt;
  return renderContext(variables);
}

std::string ChatTemplate::renderContext(const nlohmann::ordered_json& variables) const {
  if (!variables.is_object()) throw Error("chat template variables must be a JSON object");
  std::vector<std::pair<std::string, jinja::Value>> vars;
  vars.emplace_back("tools", jinja::None{});
  vars.emplace_back("documents", jinja::None{});
  if (!impl_->bosToken.empty()) vars.emplace_back("bos_token", impl_->bosToken);
  if (!impl_->eosToken.empty()) vars.emplace_back("eos_token", impl_->eosToken);
  for (const auto& [key, value] : variables.items()) {
    bool replaced = false;
    for (auto& [name, v] : vars)
      if (name == key) {
        v = jinja::fromJson(value);
        replaced = true;
      }
    if (!replaced) vars.emplace_back(key, jinja::fromJson(value));
  }
  try {
    return jinja::render(impl_->body, vars);
  } catch (const jinja::RenderError& e) {
    if (e.raised)
      throw Error("chat template raised an exception: " + e.message + " (at " + place(e.line, e.column) + ")");
    throw Error("chat template error at " + place(e.line, e.column) + ": " + e.message);
  }
}

}  // namespace zipmoe
