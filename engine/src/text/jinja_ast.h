// Internal: the syntax tree of a parsed Jinja template, and the parser that builds it.
//
// Expressions (Expr) and statements (Node) are plain tagged structs: the parser fills the fields a
// kind uses and the evaluator switches on the kind. Every node keeps the line and column of its first
// token so that runtime errors can point into the template. The grammar is jinja2's: conditional
// expressions, or/and/not, comparisons (chained, with `in` / `not in`), + -, ~, * / // %, **, unary
// minus, then primaries with attribute/subscript/slice/call postfixes and `|filter` / `is test`.
// Statements: if/elif/else, for (tuple targets, `if` filter, else), set (names, tuples, namespace
// attributes, block form), macro, call-free filter blocks, break/continue, generation, raw text.
// Thread-safety: immutable after parsing. Cost: linear in the template.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja_lexer.h"
#include "text/jinja_value.h"

namespace zipmoe::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    List,      // args
    Tuple,     // args
    Dict,      // args: key, value, key, value, ...
    Attr,      // args[0].name
    Item,      // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]] (null parts omitted)
    Call,      // args[0](args[1..], kwargs)
    Filter,    // args[0] | name(args[1..], kwargs)
    Test,      // args[0] is name(args[1..]); negated
    Not,       // not args[0]
    Neg,       // -args[0]
    Pos,       // +args[0]
    Binary,    // args[0] op args[1] for + - * / // % ** ~
    And,       // args[0] and args[1]
    Or,        // args[0] or args[1]
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...
    CondExpr,  // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind = Kind::Literal;
  int line = 1, column = 1;
  int depth = 1;  // of the tree below, this node included (bounded by the parser: kMaxNesting)
  Value value;
  std::string name;  // Name / Attr / Filter / Test / Binary operator
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches (cond null = else)
    For,          // targets in expr [if cond] body [else elseBody]
    Set,          // target (Name/Tuple/Attr expr) = expr
    SetBlock,     // {% set targets[0] %}body{% endset %}, filtered through filters
    Macro,        // name(params) body
    FilterBlock,  // {% filter f %}body{% endfilter %}
    Break,
    Continue,
    Scope,        // a plain body (generation blocks)
  };
  Kind kind = Kind::Text;
  int line = 1, column = 1;
  std::string text;
  std::string name;
  ExprPtr expr;    // Output value, For iterable, Set value
  ExprPtr target;  // Set target
  ExprPtr cond;    // For filter
  std::vector<std::string> targets;               // For loop variables
  std::vector<std::pair<ExprPtr, Body>> branches;  // If
  Body body, elseBody;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro (default may be null)
  std::vector<ExprPtr> filters;  // SetBlock / FilterBlock: Filter exprs applied with args[0] = null
};

// Parses a whole template. Throws SyntaxError with the place of the offending token.
Body parseTemplate(std::string_view source);

}  // namespace zipmoe::jinja
