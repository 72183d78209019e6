// Fuzzes tokenizer.json loading, the file a downloaded model brings: any bytes must either load into
// a tokenizer or throw zipmoe::Error — never crash, hang, overflow the stack or allocate without
// bound. A tokenizer that loads then encodes and decodes a few strings (plain, whitespace runs, CJK
// and combining marks, literal special tokens, a long word), which runs its normalizers,
// pre-tokenizers (Split regexes included), model and decoder on real text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "zipmoe/base/error.h"
#include "zipmoe/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kTexts[] = {
      "Hello, world! It's 2026.",
      "  leading and   inner\t\ttabs\n\n\nand newlines  ",
      "\xE4\xB8\xAD\xE6\x96\x87 \xC3\xBC\x6D\x6C\x61\x75\x74 e\xCC\x81 \xF0\x9F\x98\x80 123456",
      "<|im_start|>user\nhi<|im_end|><s></s>[INST]",
      std::string(300, 'a') + " " + std::string(200, ' ') + std::string(100, '9'),
  };
  try {
    const auto tok = zipmoe::Tokenizer::fromJson(std::string_view(reinterpret_cast<const char*>(data), size),
                                                  "fuzz tokenizer.json");
    for (const std::string& text : kTexts) {
      for (bool special : {false, true}) {
        try {
          const auto ids = tok->encode(text, special);
          (void)tok->decode(ids, false);
          (void)tok->decode(ids, true);
          zipmoe::StreamingDecoder stream(*tok, true);
          for (int32_t id : ids) (void)stream.push(id);
          (void)stream.finish();
        } catch (const zipmoe::Error&) {
          // A pattern over its step limit, an unknown token without unk: reported, not a crash.
        }
      }
    }
    (void)tok->idToToken(-1);
    (void)tok->idToToken(tok->vocabSize());
  } catch (const zipmoe::Error&) {
  }
  return 0;
}
