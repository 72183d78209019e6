// The Jinja parser: a recursive-descent parser over the lexer's tokens, following jinja2's grammar.
//
// Expression precedence (loosest first), as jinja2's Parser defines it: `a if c else b`, or, and, not,
// comparisons (== != < <= > >= in, not in; chained), + and -, ~, * / // %, ** (left-associative as in
// jinja2), unary - and +, then a primary with postfixes (.attr, .0, [key], [a:b:c], call(...)) and
// filter/test suffixes (`|f(args)`, `is [not] t arg`). Bare tuples are accepted where jinja2 accepts
// them ({{ a, b }}, for targets and iterables, set targets). Statement tags parse their own headers and
// collect bodies until their end tag; a stray or unknown tag is a syntax error naming the tag.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "text/jinja_ast.h"

namespace zipmoe::jinja {
namespace {

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

  // --- statements ---

  // Parses nodes until a block tag named in `ends` (consumed, name returned in `end`) or the end.
  Body parseBody(const std::vector<std::string>& ends, std::string& end) {
    const Level level(*this, blockDepth_, "blocks");
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.type == TokenType::Eof) {
        if (!ends.empty()) {
          std::string list;
          for (const auto& e : ends) list += (list.empty() ? "'" : " or '") + e + "'";
          fail("unexpected end of template; expected " + list, t);
        }
        return body;
      }
      if (t.type == TokenType::Data) {
        auto n = at<Node>(t);
        n->kind = Node::Kind::Text;
        n->text = advance().value;
        body.push_back(std::move(n));
      } else if (t.type == TokenType::VarBegin) {
        advance();
        auto n = at<Node>(t);
        n->kind = Node::Kind::Output;
        n->expr = parseTuple(true, {});
        if (cur().type != TokenType::VarEnd) unexpected("end of print statement '}}'");
        advance();
        body.push_back(std::move(n));
      } else if (t.type == TokenType::BlockBegin) {
        advance();
        const Token& nameTok = cur();
        if (nameTok.type != TokenType::Name) unexpected("a statement name");
        for (const auto& e : ends)
          if (nameTok.value == e) {
            advance();
            end = e;
            return body;
          }
        body.push_back(parseStatement());
      } else {
        unexpected("template data or a tag");
      }
    }
  }

  NodePtr parseStatement() {
    const Token& t = cur();
    const std::string name = advance().value;
    auto n = at<Node>(t);
    std::string end;
    if (name == "if") {
      n->kind = Node::Kind::If;
      ExprPtr cond = parseTuple(false, {});
      for (;;) {
        expectBlockEnd();
        Body b = parseBody({"elif", "else", "endif"}, end);
        n->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "endif") break;
        if (end == "else") {
          expectBlockEnd();
          n->branches.emplace_back(nullptr, parseBody({"endif"}, end));
          break;
        }
        cond = parseTuple(false, {});
      }
      expectBlockEnd();
    } else if (name == "for") {
      n->kind = Node::Kind::For;
      n->targets = parseTargetNames();
      if (!isName("in")) unexpected("'in'");
      advance();
      n->expr = parseTuple(false, {"recursive"});
      if (isName("if")) {
        advance();
        n->cond = parseExpression(true);
      }
      if (isName("recursive")) fail("recursive loops are not supported", cur());
      expectBlockEnd();
      n->body = parseBody({"endfor", "else"}, end);
      if (end == "else") {
        expectBlockEnd();
        n->elseBody = parseBody({"endfor"}, end);
      }
      expectBlockEnd();
    } else if (name == "set") {
      n->target = parseAssignTarget();
      if (isOp("=")) {
        advance();
        n->kind = Node::Kind::Set;
        n->expr = parseTuple(true, {});
        expectBlockEnd();
      } else {
        if (n->target->kind != Expr::Kind::Name) unexpected("'='");
        n->kind = Node::Kind::SetBlock;
        while (isOp("|")) n->filters.push_back(parseFilter(nullptr));
        expectBlockEnd();
        n->body = parseBody({"endset"}, end);
        expectBlockEnd();
      }
    } else if (name == "macro") {
      n->kind = Node::Kind::Macro;
      n->name = expectName();
      expectOp("(");
      while (!isOp(")")) {
        if (!n->params.empty()) expectOp(",");
        if (isOp(")")) break;
        std::string param = expectName();
        ExprPtr def;
        if (isOp("=")) {
          advance();
          def = parseExpression(true);
        }
        n->params.emplace_back(std::move(param), std::move(def));
      }
      advance();
      expectBlockEnd();
      n->body = parseBody({"endmacro"}, end);
      expectBlockEnd();
    } else if (name == "filter") {
      n->kind = Node::Kind::FilterBlock;
      do n->filters.push_back(parseFilter(nullptr, false));
      while (isOp("|"));
      expectBlockEnd();
      n->body = parseBody({"endfilter"}, end);
      expectBlockEnd();
    } else if (name == "break" || name == "continue") {
      n->kind = name == "break" ? Node::Kind::Break : Node::Kind::Continue;
      expectBlockEnd();
    } else if (name == "generation") {
      n->kind = Node::Kind::Scope;
      expectBlockEnd();
      n->body = parseBody({"endgeneration"}, end);
      expectBlockEnd();
    } else {
      fail("encountered unknown or unexpected tag '" + name + "'", t);
    }
    return n;
  }

  std::vector<std::string> parseTargetNames() {
    std::vector<std::string> names;
    const bool paren = isOp("(");
    if (paren) advance();
    do {
      if (!names.empty()) advance();  // ','
      names.push_back(expectName());
    } while (isOp(","));
    if (paren) expectOp(")");
    return names;
  }

  // A set target: name, name.attr (namespace) or a tuple of names.
  ExprPtr parseAssignTarget() {
    const Token& t = cur();
    if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().value == ".") {
      auto e = make(Expr::Kind::Attr, t);
      auto base = make(Expr::Kind::Name, t);
      base->name = advance().value;
      advance();
      e->name = expectName();
      adopt(*e, std::move(base));
      return e;
    }
    std::vector<std::string> names = parseTargetNames();
    if (names.size() == 1) {
      auto e = make(Expr::Kind::Name, t);
      e->name = names[0];
      return e;
    }
    auto e = make(Expr::Kind::Tuple, t);
    for (auto& nm : names) {
      auto item = make(Expr::Kind::Name, t);
      item->name = std::move(nm);
      adopt(*e, std::move(item));
    }
    return e;
  }

  // --- expressions ---

  bool atTupleEnd(const std::vector<std::string>& extraEnds) const {
    if (cur().type == TokenType::VarEnd || cur().type == TokenType::BlockEnd || cur().type == TokenType::Eof ||
        isOp(")"))
      return true;
    for (const auto& e : extraEnds)
      if (cur().type == TokenType::Name && cur().value == e) return true;
    return false;
  }

  ExprPtr parseTuple(bool withCondExpr, const std::vector<std::string>& extraEnds, bool explicitParens = false) {
    const Token& t = cur();
    std::vector<ExprPtr> items;
    bool isTuple = false;
    for (;;) {
      if (!items.empty()) expectOp(",");
      if (atTupleEnd(extraEnds)) break;
      items.push_back(withCondExpr ? parseExpression(true) : parseOr());
      if (isOp(",")) {
        isTuple = true;
      } else {
        break;
      }
    }
    if (!isTuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicitParens) unexpected("an expression");
    }
    auto e = make(Expr::Kind::Tuple, t);
    for (auto& item : items) adopt(*e, std::move(item));
    return e;
  }

  ExprPtr parseExpression(bool withCondExpr) {
    ExprPtr e = parseOr();
    if (!withCondExpr) return e;
    while (isName("if")) {
      const Token& t = advance();
      auto c = make(Expr::Kind::CondExpr, t);
      adopt(*c, parseOr());
      adopt(*c, std::move(e));
      if (isName("else")) {
        advance();
        adopt(*c, parseExpression(true));
      } else {
        adopt(*c, nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(Expr::Kind kind, const Token& t, ExprPtr a, ExprPtr b, std::string op = {}) {
    auto e = make(kind, t);
    e->name = std::move(op);
    adopt(*e, std::move(a));
    adopt(*e, std::move(b));
    return e;
  }

  ExprPtr parseOr() {
    ExprPtr e = parseAnd();
    while (isName("or")) {
      const Token& t = advance();
      e = binary(Expr::Kind::Or, t, std::move(e), parseAnd());
    }
    return e;
  }

  ExprPtr parseAnd() {
    ExprPtr e = parseNot();
    while (isName("and")) {
      const Token& t = advance();
      e = binary(Expr::Kind::And, t, std::move(e), parseNot());
    }
    return e;
  }

  ExprPtr parseNot() {
    if (isName("not")) {
      const Level level(*this, recursion_, "expression");
      const Token& t = advance();
      auto e = make(Expr::Kind::Not, t);
      adopt(*e, parseNot());
      return e;
    }
    return parseCompare();
  }

  ExprPtr parseCompare() {
    const Token& t = cur();
    ExprPtr first = parseMath1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    for (;;) {
      if (cur().type == TokenType::Operator &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == "<=" ||
           cur().value == ">" || cur().value == ">=")) {
        ops.push_back(advance().value);
      } else if (isName("in")) {
        advance();
        ops.emplace_back("in");
      } else if (isName("not") && peek().type == TokenType::Name && peek().value == "in") {
        advance();
        advance();
        ops.emplace_back("notin");
      } else {
        break;
      }
      operands.push_back(parseMath1());
    }
    if (ops.empty()) return first;
    auto e = make(Expr::Kind::Compare, t);
    adopt(*e, std::move(first));
    for (auto& o : operands) adopt(*e, std::move(o));
    e->ops = std::move(ops);
    return e;
  }

  ExprPtr parseMath1() {
    ExprPtr e = parseConcat();
    while (isOp("+") || isOp("-")) {
      const Token& t = advance();
      e = binary(Expr::Kind::Binary, t, std::move(e), parseConcat(), t.value);
    }
    return e;
  }

  ExprPtr parseConcat() {
    ExprPtr e = parseMath2();
    while (isOp("~")) {
      const Token& t = advance();
      e = binary(Expr::Kind::Binary, t, std::move(e), parseMath2(), "~");
    }
    return e;
  }

  ExprPtr parseMath2() {
    ExprPtr e = parsePow();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      const Token& t = advance();
      e = binary(Expr::Kind::Binary, t, std::move(e), parsePow(), t.value);
    }
    return e;
  }

  ExprPtr parsePow() {
    ExprPtr e = parseUnary(true);
    while (isOp("**")) {
      const Token& t = advance();
      e = binary(Expr::Kind::Binary, t, std::move(e), parseUnary(true), "**");
    }
    return e;
  }

  ExprPtr parseUnary(bool withFilter) {
    const Level level(*this, recursion_, "expression");
    const Token& t = cur();
    ExprPtr e;
    if (isOp("-") || isOp("+")) {
      advance();
      e = make(t.value == "-" ? Expr::Kind::Neg : Expr::Kind::Pos, t);
      adopt(*e, parseUnary(false));
    } else {
      e = parsePrimary();
    }
    e = parsePostfix(std::move(e));
    if (withFilter) e = parseFilterExpr(std::move(e));
    return e;
  }

  ExprPtr parsePrimary() {
    const Token& t = cur();
    switch (t.type) {
      case TokenType::Name: {
        advance();
        auto e = make(Expr::Kind::Literal, t);
        if (t.value == "true" || t.value == "True") {
          e->value = true;
        } else if (t.value == "false" || t.value == "False") {
          e->value = false;
        } else if (t.value == "none" || t.value == "None") {
          e->value = None{};
        } else {
          e->kind = Expr::Kind::Name;
          e->name = t.value;
        }
        return e;
      }
      case TokenType::String: {
        auto e = make(Expr::Kind::Literal, t);
        std::string s;
        while (cur().type == TokenType::String) s += advance().value;
        e->value = std::move(s);
        return e;
      }
      case TokenType::Integer: {
        advance();
        auto e = make(Expr::Kind::Literal, t);
        e->value = static_cast<int64_t>(std::strtoll(t.value.c_str(), nullptr, 10));
        return e;
      }
      case TokenType::Float: {
        advance();
        auto e = make(Expr::Kind::Literal, t);
        e->value = std::strtod(t.value.c_str(), nullptr);
        return e;
      }
      default: break;
    }
    if (isOp("(")) {
      advance();
      ExprPtr e = parseTuple(true, {}, true);
      expectOp(")");
      return e;
    }
    if (isOp("[")) {
      advance();
      auto e = make(Expr::Kind::List, t);
      while (!isOp("]")) {
        if (!e->args.empty()) expectOp(",");
        if (isOp("]")) break;
        adopt(*e, parseExpression(true));
      }
      advance();
      return e;
    }
    if (isOp("{")) {
      advance();
      auto e = make(Expr::Kind::Dict, t);
      while (!isOp("}")) {
        if (!e->args.empty()) expectOp(",");
        if (isOp("}")) break;
        adopt(*e, parseExpression(true));
        expectOp(":");
        adopt(*e, parseExpression(true));
      }
      advance();
      return e;
    }
    unexpected("an expression");
  }

  ExprPtr parsePostfix(ExprPtr e) {
    for (;;) {
      const Token& t = cur();
      if (isOp(".")) {
        advance();
        if (cur().type == TokenType::Integer) {
          auto item = make(Expr::Kind::Item, t);
          auto key = make(Expr::Kind::Literal, cur());
          key->value = static_cast<int64_t>(std::strtoll(advance().value.c_str(), nullptr, 10));
          adopt(*item, std::move(e));
          adopt(*item, std::move(key));
          e = std::move(item);
        } else {
          auto attr = make(Expr::Kind::Attr, t);
          attr->name = expectName();
          adopt(*attr, std::move(e));
          e = std::move(attr);
        }
      } else if (isOp("[")) {
        advance();
        e = parseSubscript(std::move(e), t);
        expectOp("]");
      } else if (isOp("(")) {
        e = parseCall(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parseSubscript(ExprPtr obj, const Token& t) {
    ExprPtr start;
    if (!isOp(":")) {
      start = parseExpression(true);
      if (!isOp(":")) return binary(Expr::Kind::Item, t, std::move(obj), std::move(start));
    }
    advance();  // ':'
    auto e = make(Expr::Kind::Slice, t);
    adopt(*e, std::move(obj));
    adopt(*e, std::move(start));
    adopt(*e, isOp("]") || isOp(":") ? nullptr : parseExpression(true));
    ExprPtr step;
    if (isOp(":")) {
      advance();
      if (!isOp("]")) step = parseExpression(true);
    }
    adopt(*e, std::move(step));
    return e;
  }

  // Parses "(args)" into e's args (after those already there) and kwargs.
  void parseCallArgs(Expr& e) {
    expectOp("(");
    bool first = true;
    while (!isOp(")")) {
      if (!first) expectOp(",");
      first = false;
      if (isOp(")")) break;
      if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().value == "=") {
        std::string key = advance().value;
        advance();
        {
          ExprPtr value = parseExpression(true);
          deepen(e, value.get());
          e.kwargs.emplace_back(std::move(key), std::move(value));
        }
      } else {
        if (!e.kwargs.empty()) fail("positional argument after keyword argument", cur());
        adopt(e, parseExpression(true));
      }
    }
    advance();
  }

  ExprPtr parseCall(ExprPtr callee) {
    auto e = make(Expr::Kind::Call, cur());
    adopt(*e, std::move(callee));
    parseCallArgs(*e);
    return e;
  }

  ExprPtr parseFilter(ExprPtr input, bool pipe = true) {
    if (pipe) expectOp("|");
    auto e = make(Expr::Kind::Filter, cur());
    e->name = expectName();
    while (isOp(".")) {
      advance();
      e->name += "." + expectName();
    }
    adopt(*e, std::move(input));
    if (isOp("(")) parseCallArgs(*e);
    return e;
  }

  ExprPtr parseTest(ExprPtr input) {
    auto e = make(Expr::Kind::Test, cur());
    advance();  // 'is'
    if (isName("not")) {
      advance();
      e->negated = true;
    }
    e->name = expectName();
    adopt(*e, std::move(input));
    if (isOp("(")) {
      parseCallArgs(*e);
    } else if ((cur().type == TokenType::Name || cur().type == TokenType::String || cur().type == TokenType::Integer ||
                cur().type == TokenType::Float || isOp("(") || isOp("[") || isOp("{")) &&
               !isName("else") && !isName("or") && !isName("and")) {
      if (isName("is")) fail("You cannot chain multiple tests with is", cur());
      adopt(*e, parsePostfix(parsePrimary()));
    }
    return e;
  }

  ExprPtr parseFilterExpr(ExprPtr e) {
    for (;;) {
      if (isOp("|")) {
        e = parseFilter(std::move(e));
      } else if (isName("is")) {
        e = parseTest(std::move(e));
      } else if (isOp("(")) {
        e = parseCall(std::move(e));
      } else {
        return e;
      }
    }
  }
};

}  // namespace

Body parseTemplate(std::string_view source) { return Parser(lexTemplate(source)).parseAll(); }

}  // namespace zipmoe::jinja
