// Constrained decoding — the per-step token mask that holds a reply to an OutputSpec
// (zipmoe/generation/output_spec.h): JSON that follows a schema (response_format), or tool calls in
// the generic format
//
//   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
//
// (several, separated by "\n", when parallel calls are allowed), with ARGS following the tool's
// parameters. With tool_choice auto the reply is free text until the model writes "<tool_call>";
// from there on it is held to the format. The mask is exact for the tokenizer's bytes: a token is
// allowed when all its bytes can follow the reply so far (tokens that span several grammar states
// included), and when the reply can still be completed within its token limit (each byte may need
// one token, so a value that needs n more bytes needs at most n more tokens); EOS only when the
// reply may end there.
//
// TokenIndex holds the vocabulary's bytes, built once per tokenizer. ConstraintSpec is compiled once
// per request. OutputConstraint is one reply's state.
// Thread-safety: TokenIndex and ConstraintSpec are immutable and shared; an OutputConstraint is used
// by one thread. Cost: mask() simulates only the tokens whose first byte fits (inside a string: only
// those holding a quote, backslash or control byte, the others pass on their character count; in
// free text: those holding '<') — typically a few thousand of a 150k vocabulary — O(bytes) each;
// `zipmoe bench constrain` measures it (docs/SERVER.md).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "generation/json_grammar.h"
#include "generation/json_matcher.h"
#include "zipmoe/generation/output_spec.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe::constrain {

struct TokenIndex {
  explicit TokenIndex(const Tokenizer& tokenizer);
  int32_t vocab = 0;
  std::vector<std::string> bytes;                 // empty: a special token (no bytes)
  std::vector<uint8_t> plainString;               // 1: may stand anywhere inside a string's content
  std::vector<uint16_t> chars;                    // plainString tokens: the characters they begin
  std::vector<int32_t> notPlain;                  // tokens with bytes that are not plainString
  std::vector<int32_t> withAngle;                 // tokens holding '<'
  std::array<std::vector<int32_t>, 256> byFirst;  // tokens by their first byte
};

// The generic format's fixed parts.
inline constexpr std::string_view kToolCallOpen = "<tool_call>\n";
inline constexpr std::string_view kToolCallClose = "\n</tool_call>";
inline constexpr std::string_view kToolCallTrigger = "<tool_call>";

struct ConstraintSpec {
  // Compiles what `output` asks for; null when it asks for nothing (free text). Throws ApiError-free
  // zipmoe::Error whose message starts with the request field (e.g. "response_format.json_schema.schema
  // /properties/x/pattern: …", "tools[1].function.parameters: …").
  static std::shared_ptr<const ConstraintSpec> compile(const OutputSpec& output);

  bool toolCalls = false;  // false: one JSON value
  bool freeText = false;   // tool_choice auto: text first, calls once "<tool_call>" is written
  int maxCalls = 1;
  Grammar grammar;         // the JSON value, or one call's {"name": …, "arguments": …}
};

class OutputConstraint {
 public:
  // REQUIRES: spec and index outlive nothing beyond their shared ownership; `eos` outlives this.
  OutputConstraint(std::shared_ptr<const ConstraintSpec> spec, std::shared_ptr<const TokenIndex> index,
                   std::span<const int32_t> eos);

  // Sets the logits of the tokens that may not come next to −inf. `remaining`: tokens the reply may
  // still generate, this one included. `exactEnd`: check, for every token, that the reply can still
  // be completed after it (the slow, exact mask; mask() does it by itself near the limit).
  void mask(std::span<float> logits, int remaining, bool exactEnd = false) const;
  // Whether `token` may come next and leave the reply completable within `remaining` − 1 tokens.
  bool allows(int32_t token, int remaining) const;
  // Takes the token. REQUIRES: allows(token, …).
  void accept(int32_t token);
  int completedCalls() const { return state_.calls; }

 private:
  enum class Phase : uint8_t { Free, Literal, Value, After };
  struct State {
    Phase phase = Phase::Value;
    std::string_view literal;  // Literal: the fixed text being matched, and how far
    size_t pos = 0;
    size_t trigger = 0;        // Free: bytes of "<tool_call>" matched so far
    int calls = 0;
    JsonMatcher value;
    explicit State(const Grammar& g) : value(g) {}
  };
  bool advance(State& s, uint8_t b) const;
  bool advance(State& s, const std::string& bytes) const;
  bool canEnd(const State& s) const;
  int minRemaining(const State& s) const;
  bool isEos(int32_t token) const;
  bool tokenFits(const std::string& bytes, int remaining, bool exactEnd, State& scratch) const;

  std::shared_ptr<const ConstraintSpec> spec_;
  std::shared_ptr<const TokenIndex> index_;
  std::span<const int32_t> eos_;
  State state_;
  mutable State scratch_;
  mutable std::vector<uint8_t> allowed_;  // mask()'s per-token marks, kept between steps
};

}  // namespace zipmoe::constrain
