// Internal: the Jinja lexer — template source to a flat token stream, with jinja2's whitespace rules.
//
// The source is split into literal text and tags ({{ }}, {% %}, {# #} comments, {% raw %} blocks);
// inside tags it yields names, string/number literals and operators. Whitespace control is applied
// here, exactly where jinja2's lexer applies it: newlines are normalised to "\n" and one trailing
// newline of the template is dropped (keep_trailing_newline=False); `{%-`/`{{-`/`{#-` strip all
// whitespace before the tag, `-%}`/`-}}`/`-#}` all whitespace after; lstrip_blocks removes spaces and
// tabs between the line start and a block or comment tag (not `{{`, not `{%+`); trim_blocks removes
// the first newline after a block or comment tag (not after `+%}`). "Whitespace" is Python's.
// Thread-safety: pure function. Cost: linear in the source.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zipmoe::jinja {

enum class TokenType { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, Eof };

struct Token {
  TokenType type = TokenType::Eof;
  std::string value;  // text for Data, decoded text for String, spelling otherwise
  int line = 1, column = 1;
};

// A template syntax error at a place in the source (1-based line and column).
struct SyntaxError {
  std::string message;
  int line = 1, column = 1;
};

// Throws SyntaxError for an unterminated tag, comment or string, or a character no token starts with.
std::vector<Token> lexTemplate(std::string_view source);

}  // namespace zipmoe::jinja
