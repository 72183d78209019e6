// ChatTemplate — renders a conversation into the prompt text a model was trained on, from the Jinja
// `chat_template` in the model's tokenizer_config.json.
//
// A small Jinja interpreter covering what Hugging Face chat templates use: {{ }}, {% if/elif/else %},
// {% for %} with loop.index/first/last, {% set %} (with namespace()), {% macro %}, filters (trim,
// length, tojson, upper, lower, default, first, last, join, replace, safe, string, int), tests
// (defined, none, string, mapping, iterable, equalto), comparisons, `in`, `~`, slicing, methods
// (strip, startswith, endswith, split, items, get, keys, values), raise_exception. Output agrees
// with Python jinja2 (tests compare against fixtures it rendered). Whitespace control ({%- -%}) and
// trim_blocks/lstrip_blocks as transformers sets them.
// Thread-safety: render() is const. Cost: microseconds per message.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "zipmoe/generation/output_spec.h"

namespace zipmoe {

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  // assistant: the calls it made (rendered by templates that know tools, else in the generic format);
  // tool: the id of the call this message answers, and the tool's name.
  std::vector<ToolCall> toolCalls;
  std::string toolCallId;
  std::string name;
};

class ChatTemplate {
 public:
  // Parses the template source; throws zipmoe::Error with line and column on a syntax error.
  ChatTemplate(std::string source, std::string bosToken, std::string eosToken);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Reads chat_template (a string, or the list form's "default" entry) and bos/eos tokens from
  // tokenizer_config.json. Throws zipmoe::Error naming the file when it has no template.
  static ChatTemplate fromTokenizerConfig(const std::filesystem::path& tokenizerConfigJson);
  // Whether the file has a chat template (false also when it is missing or unreadable).
  static bool hasChatTemplate(const std::filesystem::path& tokenizerConfigJson);

  // Renders as transformers' apply_chat_template does: variables messages (dicts with role and
  // content), add_generation_prompt, tools = documents = None, bos_token and eos_token (left undefined
  // when empty, as transformers leaves a None special token out).
  // Throws zipmoe::Error for a runtime error (including the template's own raise_exception).
  std::string render(const std::vector<ChatMessage>& messages, bool addGenerationPrompt) const;
  // The same with arbitrary variables (a JSON object: messages with any fields, tools, custom flags);
  // bos_token/eos_token are added unless the object sets them.
  std::string renderContext(const nlohmann::ordered_json& variables) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zipmoe
