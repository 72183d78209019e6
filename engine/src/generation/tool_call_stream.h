// ToolCallStream — splits a reply's streamed text into what it says and the tool calls it makes, in
// the generic format (generation/token_constraint.h):
//
//   text … <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>\n<tool_call>…
//
// The text before the first call streams as text (holding back a tail that may begin
// "<tool_call>"); each call streams as its start (a fresh id and the name, once the name is
// complete) and then the pieces of its ARGS as they come. Whatever follows the calls is dropped.
// Calls are whole once their ARGS close; calls() lists them.
// Thread-safety: one thread. Cost: O(text).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "zipmoe/generation/output_spec.h"

namespace zipmoe {

struct ToolCallEvent {
  int index = 0;       // the call's position in the reply
  bool begin = false;  // true: id and name; false: `arguments`, the next piece of ARGS
  std::string id, name, arguments;
};

// "call_" and 24 random letters and digits.
std::string newToolCallId();

class ToolCallStream {
 public:
  // Takes the next piece of the reply's text; returns the text to show now and appends call events.
  std::string push(std::string_view text, std::vector<ToolCallEvent>& events);
  // The reply ended: the text held back (a "<tool_call>" that never completed is text after all,
  // unless a call had begun).
  std::string finish();
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class State { Text, Header, Arguments, Between };
  std::string consumeText(std::vector<ToolCallEvent>& events);
  void consumeCalls(std::vector<ToolCallEvent>& events);

  State state_ = State::Text;
  std::string pending_;  // bytes not yet classified
  std::vector<ToolCall> calls_;
  int depth_ = 0;
  bool inString_ = false, escaped_ = false, argsStarted_ = false;
};

}  // namespace zipmoe
