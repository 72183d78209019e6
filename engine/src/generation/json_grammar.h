// JSON grammar — what a constrained reply may say, compiled from a JSON schema (structured output,
// tool arguments) into a small graph of nodes that JsonMatcher (generation/json_matcher.h) walks
// byte by byte.
//
// Supported schema keywords: type (one or a list), properties / required / additionalProperties,
// items / minItems / maxItems, minLength / maxLength, enum, const, anyOf / oneOf (alternatives that
// start with different bytes), $ref to "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion
// allowed), and the annotations title, description, default, examples, $schema, $id, $comment,
// format (not enforced), strict. Anything else that would restrict the value (pattern, minimum,
// multipleOf, allOf, not, if, patternProperties, …) is refused with an error naming the schema path,
// so a reply never claims to follow a schema it was not held to.
//
// The language generated is compact JSON: no whitespace except one optional space after ':' and ','
// (the style of Python's json.dumps, which tool-call templates print). An object's declared
// properties come in the schema's order; optional ones may be left out; properties beyond the
// declared ones are not generated (an object schema without properties allows any keys). Strings
// are valid UTF-8 with JSON's escapes; numbers follow JSON's grammar, at most 24 bytes.
// Thread-safety: a Grammar is immutable once compiled. Cost: linear in the schema's size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "zipmoe/generation/output_spec.h"

namespace zipmoe::constrain {

enum class NodeKind : uint8_t {
  Object,    // declared keys (in order) or, with none, any keys whose values are `additional`
  Array,
  String,
  Number,
  Integer,
  Literal,   // one of `literals` (enum, const, true, false, null)
  Union,     // one of `options`, told apart by their first byte
  ToolCall,  // `literals[i]` = `{"name": "NAME_i", "arguments": ` then `values[i]`, then `}`
};

struct Node {
  NodeKind kind = NodeKind::Literal;
  // Object: keys (each as its quoted JSON text), their value nodes and whether each is required;
  // `additional`: the value node of free keys (an object without declared keys), else −1.
  std::vector<std::string> keys;
  std::vector<int> values;
  std::vector<bool> required;
  int additional = -1;
  int keyString = -1;  // with `additional`: the String node free keys follow
  // Array
  int items = -1, minItems = 0, maxItems = -1;  // −1 = unbounded
  // String (in characters)
  int minLength = 0, maxLength = -1;
  // Literal / ToolCall alternatives (byte strings)
  std::vector<std::string> literals;
  // Union
  std::vector<int> options;
  // Filled by compilation: the fewest bytes of any value of this node, and its possible first bytes.
  int minBytes = 0;
  uint8_t first[32] = {};  // a 256-bit set
  bool mayStartWith(uint8_t b) const { return (first[b >> 3] >> (b & 7)) & 1; }
};

struct Grammar {
  std::vector<Node> nodes;
  int root = -1;
};

// Compiles a schema (a JSON object, or `true` for anything). Throws zipmoe::Error whose message
// starts with the schema path of the offending keyword, e.g. "/properties/city/pattern: …".
Grammar compileSchema(const nlohmann::ordered_json& schema);
// Any JSON object (response_format json_object).
Grammar anyObjectGrammar();
// One tool call of the generic format's JSON: {"name": "NAME", "arguments": ARGS} for each tool, ARGS
// following its parameters. Throws zipmoe::Error naming "tools[i].function.parameters…" for a schema
// it cannot compile.
Grammar toolCallGrammar(const std::vector<ToolSpec>& tools);

}  // namespace zipmoe::constrain
