// The Jinja parser: a recursive-descent parser over the lexer's tokens, following jinja2's grammar.
//
// Expression precedence (loosest first), as jinja2's Parser defines it: `a if c else b`, or, and, not,
// comparisons (== != < <= > >= in, not in; chained), + and -, ~, * / // %, ** (left-associative as in
// jinja2), unary - and +, then a primary with postfixes (.attr, .0, [key], [a:b:c], call(...)) and
// filter/test suffixes (`|f(args)`, `is [not] t arg`). Bare tuples are accepted where jinja2 accepts
// them ({{ a, b }}, for targets and iterables, set targets). Statement tags parse their own headers and
// collect bodies until their end tag; a stray or unknown tag is a syntax error naming the tag.
#include "text/jinja_parser.h"

namespace zipmoe::jinja {
namespace parsing {

// Parses nodes until a block tag named in `ends` (consumed, name returned in `end`) or the end.
Body Parser::parseBody(const std::vector<std::string>& ends, std::string& end) {
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

NodePtr Parser::parseStatement() {
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

std::vector<std::string> Parser::parseTargetNames() {
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
ExprPtr Parser::parseAssignTarget() {
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

}  // namespace parsing

Body parseTemplate(std::string_view source) { return parsing::Parser(lexTemplate(source)).parseAll(); }

}  // namespace zipmoe::jinja
