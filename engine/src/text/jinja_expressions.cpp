// The Jinja parser's expressions (see jinja_parser.h and the grammar in jinja_parser.cpp).
#include <cstdlib>

#include "text/jinja_parser.h"

namespace zipmoe::jinja::parsing {

// --- expressions ---
bool Parser::atTupleEnd(const std::vector<std::string>& extraEnds) const {
  if (cur().type == TokenType::VarEnd || cur().type == TokenType::BlockEnd || cur().type == TokenType::Eof ||
      isOp(")"))
    return true;
  for (const auto& e : extraEnds)
    if (cur().type == TokenType::Name && cur().value == e) return true;
  return false;
}

ExprPtr Parser::parseTuple(bool withCondExpr, const std::vector<std::string>& extraEnds, bool explicitParens) {
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

ExprPtr Parser::parseExpression(bool withCondExpr) {
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

ExprPtr Parser::binary(Expr::Kind kind, const Token& t, ExprPtr a, ExprPtr b, std::string op) {
  auto e = make(kind, t);
  e->name = std::move(op);
  adopt(*e, std::move(a));
  adopt(*e, std::move(b));
  return e;
}

ExprPtr Parser::parseOr() {
  ExprPtr e = parseAnd();
  while (isName("or")) {
    const Token& t = advance();
    e = binary(Expr::Kind::Or, t, std::move(e), parseAnd());
  }
  return e;
}

ExprPtr Parser::parseAnd() {
  ExprPtr e = parseNot();
  while (isName("and")) {
    const Token& t = advance();
    e = binary(Expr::Kind::And, t, std::move(e), parseNot());
  }
  return e;
}

ExprPtr Parser::parseNot() {
  if (isName("not")) {
    const Level level(*this, recursion_, "expression");
    const Token& t = advance();
    auto e = make(Expr::Kind::Not, t);
    adopt(*e, parseNot());
    return e;
  }
  return parseCompare();
}

ExprPtr Parser::parseCompare() {
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

ExprPtr Parser::parseMath1() {
  ExprPtr e = parseConcat();
  while (isOp("+") || isOp("-")) {
    const Token& t = advance();
    e = binary(Expr::Kind::Binary, t, std::move(e), parseConcat(), t.value);
  }
  return e;
}

ExprPtr Parser::parseConcat() {
  ExprPtr e = parseMath2();
  while (isOp("~")) {
    const Token& t = advance();
    e = binary(Expr::Kind::Binary, t, std::move(e), parseMath2(), "~");
  }
  return e;
}

ExprPtr Parser::parseMath2() {
  ExprPtr e = parsePow();
  while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
    const Token& t = advance();
    e = binary(Expr::Kind::Binary, t, std::move(e), parsePow(), t.value);
  }
  return e;
}

ExprPtr Parser::parsePow() {
  ExprPtr e = parseUnary(true);
  while (isOp("**")) {
    const Token& t = advance();
    e = binary(Expr::Kind::Binary, t, std::move(e), parseUnary(true), "**");
  }
  return e;
}

ExprPtr Parser::parseUnary(bool withFilter) {
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

ExprPtr Parser::parsePrimary() {
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

ExprPtr Parser::parsePostfix(ExprPtr e) {
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

ExprPtr Parser::parseSubscript(ExprPtr obj, const Token& t) {
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
void Parser::parseCallArgs(Expr& e) {
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

ExprPtr Parser::parseCall(ExprPtr callee) {
  auto e = make(Expr::Kind::Call, cur());
  adopt(*e, std::move(callee));
  parseCallArgs(*e);
  return e;
}

ExprPtr Parser::parseFilter(ExprPtr input, bool pipe) {
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

ExprPtr Parser::parseTest(ExprPtr input) {
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

ExprPtr Parser::parseFilterExpr(ExprPtr e) {
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

}  // namespace zipmoe::jinja::parsing
