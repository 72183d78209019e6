// Internal: the Jinja parser (jinja_parser.cpp: statements; jinja_expressions.cpp: expressions), a
// recursive-descent parser over the lexer's tokens following jinja2's grammar. Its nesting is bounded
// (kMaxNesting): a chat template is untrusted. Thread-safety: one parse per Parser. Cost: linear.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "text/jinja_ast.h"

namespace zipmoe::jinja::parsing {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parseAll() {
    std::string end;
    Body body = parseBody({}, end);
    return body;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool isOp(const char* op) const { return cur().type == TokenType::Operator && cur().value == op; }
  bool isName(const char* name) const { return cur().type == TokenType::Name && cur().value == name; }
  const Token& advance() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::Eof: return "end of template";
      case TokenType::VarEnd: return "end of print statement '}}'";
      case TokenType::BlockEnd: return "end of statement block '%}'";
      case TokenType::Data: return "template data";
      case TokenType::String: return "string literal";
      default: return "'" + t.value + "'";
    }
  }
  [[noreturn]] void fail(const std::string& message, const Token& at) const {
    SyntaxError e;
    e.message = message;
    e.line = at.line;
    e.column = at.column;
    throw e;
  }
  [[noreturn]] void unexpected(const std::string& expected) const {
    fail("expected " + expected + ", got " + describe(cur()), cur());
  }
  void expectOp(const char* op) {
    if (!isOp(op)) unexpected(std::string("'") + op + "'");
    advance();
  }
  void expectBlockEnd() {
    if (cur().type != TokenType::BlockEnd) unexpected("end of statement block '%}'");
    advance();
  }
  std::string expectName() {
    if (cur().type != TokenType::Name) unexpected("a name");
    return advance().value;
  }

  // Expression trees and statement blocks nest at most kMaxNesting deep: a template is untrusted,
  // and the evaluator (and the tree's destructor) recurse over them.
  static constexpr int kMaxNesting = 200;
  int blockDepth_ = 0, recursion_ = 0;
  // One level of the parser's own recursion (blocks, or nested expressions such as parentheses).
  struct Level {
    Level(const Parser& p, int& depth, const char* what) : depth_(depth) {
      if (++depth_ > kMaxNesting) p.fail(std::string(what) + " nested deeper than " + std::to_string(kMaxNesting) + " levels", p.cur());
    }
    ~Level() { --depth_; }
    Level(const Level&) = delete;
    Level& operator=(const Level&) = delete;
    int& depth_;
  };
  void deepen(Expr& parent, const Expr* child) const {
    if (!child) return;
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxNesting)
      fail("expression nested deeper than " + std::to_string(kMaxNesting) + " levels", cur());
  }
  void adopt(Expr& parent, ExprPtr child) {
    deepen(parent, child.get());
    parent.args.push_back(std::move(child));
  }

  template <class T>
  static std::unique_ptr<T> at(const Token& t) {
    auto p = std::make_unique<T>();
    p->line = t.line;
    p->column = t.column;
    return p;
  }
  static ExprPtr make(Expr::Kind kind, const Token& t) {
    auto e = at<Expr>(t);
    e->kind = kind;
    return e;
  }

  // --- statements (jinja_parser.cpp) ---

  // Parses nodes until a block tag named in `ends` (consumed, name returned in `end`) or the end.
  Body parseBody(const std::vector<std::string>& ends, std::string& end);
  NodePtr parseStatement();
  std::vector<std::string> parseTargetNames();
  // A set target: name, name.attr (namespace) or a tuple of names.
  ExprPtr parseAssignTarget();
  // --- expressions ---
  bool atTupleEnd(const std::vector<std::string>& extraEnds) const;
  ExprPtr parseTuple(bool withCondExpr, const std::vector<std::string>& extraEnds, bool explicitParens = false);
  ExprPtr parseExpression(bool withCondExpr);
  ExprPtr binary(Expr::Kind kind, const Token& t, ExprPtr a, ExprPtr b, std::string op = {});
  ExprPtr parseOr();
  ExprPtr parseAnd();
  ExprPtr parseNot();
  ExprPtr parseCompare();
  ExprPtr parseMath1();
  ExprPtr parseConcat();
  ExprPtr parseMath2();
  ExprPtr parsePow();
  ExprPtr parseUnary(bool withFilter);
  ExprPtr parsePrimary();
  ExprPtr parsePostfix(ExprPtr e);
  ExprPtr parseSubscript(ExprPtr obj, const Token& t);
  // Parses "(args)" into e's args (after those already there) and kwargs.
  void parseCallArgs(Expr& e);
  ExprPtr parseCall(ExprPtr callee);
  ExprPtr parseFilter(ExprPtr input, bool pipe = true);
  ExprPtr parseTest(ExprPtr input);
  ExprPtr parseFilterExpr(ExprPtr e);
};

}  // namespace zipmoe::jinja::parsing
