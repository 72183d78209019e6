// Fuzzes constrained decoding's schema compiler and byte matcher (generation/json_grammar.h,
// json_matcher.h) with a request's untrusted JSON schema and the bytes a model might write. Input:
// SCHEMA \0 DOCUMENT. Any schema either compiles or is refused with zipmoe::Error (nothing else, no
// crash or hang, also for deep $ref recursion); then, byte by byte, whatever the matcher accepts as
// a complete value is JSON that parses, complete() holds exactly when minRemaining() is 0, and a
// refused byte leaves the matcher as it was.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "generation/json_grammar.h"
#include "generation/json_matcher.h"
#include "zipmoe/base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view schemaText = input.substr(0, split);
  const std::string_view doc = split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(schemaText);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  zipmoe::constrain::Grammar grammar;
  try {
    grammar = zipmoe::constrain::compileSchema(schema);
  } catch (const zipmoe::Error&) {
    return 0;
  }
  zipmoe::constrain::JsonMatcher m(grammar);
  std::string accepted;
  for (char c : doc) {
    const int before = m.minRemaining();
    if (!m.feed(std::string_view(&c, 1))) {
      if (m.minRemaining() != before) std::abort();  // a refused byte changed the state
      continue;
    }
    accepted += c;
    if (m.complete() != (m.minRemaining() == 0)) std::abort();
    if (m.complete()) {
      try {
        (void)nlohmann::json::parse(accepted);
      } catch (const nlohmann::json::exception&) {
        std::abort();  // the matcher took something that is not JSON
      }
    }
  }
  return 0;
}
