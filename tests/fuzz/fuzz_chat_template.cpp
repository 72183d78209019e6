// Fuzzes chat-template rendering, the Jinja program a downloaded model brings in its
// tokenizer_config.json: any bytes must either parse and render, or throw zipmoe::Error — never
// crash, hang, recurse without bound or grow its output without bound. A template that parses is
// rendered with a short conversation (system, user, assistant, user; with and without the generation
// prompt) and with an empty one.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "zipmoe/text/chat_template.h"
#include "zipmoe/base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<zipmoe::ChatMessage> kConversation = {
      {"system", "You are a helpful assistant."},
      {"user", "Hello {{ not a template }} <|im_start|>"},
      {"assistant", "Hi! \xE4\xBD\xA0\xE5\xA5\xBD"},
      {"user", "Tell me more."},
  };
  try {
    const zipmoe::ChatTemplate tpl(std::string(reinterpret_cast<const char*>(data), size), "<s>", "</s>");
    for (bool prompt : {true, false}) {
      try {
        (void)tpl.render(kConversation, prompt);
      } catch (const zipmoe::Error&) {
      }
    }
    try {
      (void)tpl.render({}, true);
    } catch (const zipmoe::Error&) {
    }
  } catch (const zipmoe::Error&) {
  }
  return 0;
}
