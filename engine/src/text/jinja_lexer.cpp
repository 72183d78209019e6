// The Jinja lexer: literal text, tag delimiters with their whitespace control, and expression tokens.
//
// It follows jinja2's lexer state machine rather than its regular expressions: in the text state it
// looks for the nearest `{{`, `{%` or `{#` and trims the text before it (`-` sign: rstrip; otherwise
// lstrip_blocks for block and comment tags when only whitespace separates the tag from the start of its
// line, or from the previous tag's end if that end swallowed a newline); inside a tag it yields tokens
// until the closing delimiter, ignoring delimiters nested in brackets as jinja2 does (so `{{ {'a': 1}}}`
// closes at the last `}}`). String literals are decoded the way jinja2 decodes them (Python's
// unicode-escape: \n \t \\ \' \" \xhh \uhhhh \Uhhhhhhhh, octal, and unknown escapes kept verbatim).
#include "text/jinja_lexer.h"

#include <algorithm>
#include <cctype>

#include "text/jinja_value.h"

namespace zipmoe::jinja {
namespace {

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    // Newlines → "\n"; one trailing newline dropped (keep_trailing_newline=False).
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    lineStarts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') lineStarts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool lineStarting = true;
    while (pos < src_.size()) {
      const size_t tag = findTagStart(pos);
      if (tag == std::string::npos) {
        emit(TokenType::Data, src_.substr(pos), pos);
        break;
      }
      const char kind = src_[tag + 1];
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : '\0';
      std::string text = src_.substr(pos, tag - pos);
      text = trimBefore(std::move(text), sign, kind != '{', lineStarting);
      if (!text.empty()) emit(TokenType::Data, std::move(text), pos);
      size_t p = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        const size_t end = src_.find("#}", p);
        if (end == std::string::npos) throw error("missing end of comment tag", tag);
        const char endSign = end > p && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
        pos = trimAfter(end + 2, endSign, true, lineStarting);
        continue;
      }
      if (kind == '%' && rawBlock(tag, p, pos, lineStarting)) continue;
      emit(kind == '{' ? TokenType::VarBegin : TokenType::BlockBegin, kind == '{' ? "{{" : "{%", tag);
      pos = tagBody(kind, tag, p, lineStarting);
    }
    emit(TokenType::Eof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  std::string src_;
  std::vector<size_t> lineStarts_;
  std::vector<Token> tokens_;

  SyntaxError error(const std::string& message, size_t pos) const {
    const auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), pos) - 1;
    const auto line = static_cast<int>(it - lineStarts_.begin()) + 1;
    SyntaxError e;
    e.message = message;
    e.line = line;
    e.column = static_cast<int>(pos - *it) + 1;
    return e;
  }

  void emit(TokenType type, std::string value, size_t pos) {
    const SyntaxError place = error("", pos);
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.line = place.line;
    t.column = place.column;
    tokens_.push_back(std::move(t));
  }

  size_t findTagStart(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  // Length of the Python-whitespace character at i (0 when none).
  size_t spaceAt(size_t i) const {
    if (i >= src_.size()) return 0;
    const auto c = static_cast<unsigned char>(src_[i]);
    if (c < 0x80) return isPySpace(c) ? 1 : 0;
    const size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > src_.size()) return 0;
    return isPySpace(decodeCodePoint(std::string_view(src_).substr(i, n))) ? n : 0;
  }

  static std::string trimBefore(std::string text, char sign, bool lstripApplies, bool lineStarting) {
    if (sign == '-') return pyStrip(text, false, true, std::nullopt);
    if (sign == '+' || !lstripApplies) return text;
    const size_t lineStart = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (lineStart == 0 && !lineStarting) return text;
    const std::string tail = text.substr(lineStart);
    if (!tail.empty() && pyStrip(tail, true, true, std::nullopt).empty()) text.resize(lineStart);
    return text;
  }

  // After a closing delimiter ending at `pos`: `-` strips whitespace, trim_blocks drops one newline.
  size_t trimAfter(size_t pos, char sign, bool trimBlocks, bool& lineStarting) const {
    lineStarting = false;
    if (sign == '-') {
      size_t n = 0;
      while ((n = spaceAt(pos)) != 0) {
        lineStarting = src_[pos] == '\n';
        pos += n;
      }
    } else if (sign != '+' && trimBlocks && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
      lineStarting = true;
    }
    return pos;
  }

  size_t skipSpaces(size_t p) const {
    size_t n = 0;
    while ((n = spaceAt(p)) != 0) p += n;
    return p;
  }

  bool wordAt(size_t p, std::string_view word) const {
    return src_.compare(p, word.size(), word) == 0 &&
           (p + word.size() >= src_.size() || !(std::isalnum(static_cast<unsigned char>(src_[p + word.size()])) ||
                                                src_[p + word.size()] == '_'));
  }

  // {% raw %}...{% endraw %}: the text between is literal. Returns false when the tag is not `raw`.
  bool rawBlock(size_t tag, size_t p, size_t& pos, bool& lineStarting) {
    size_t q = skipSpaces(p);
    if (!wordAt(q, "raw")) return false;
    q = skipSpaces(q + 3);
    char sign = '\0';
    if (q < src_.size() && src_[q] == '-') sign = src_[q++];
    if (src_.compare(q, 2, "%}") != 0) return false;
    size_t bodyStart = q + 2;
    if (sign == '-') bodyStart = skipSpaces(bodyStart);
    for (size_t search = bodyStart;;) {
      const size_t end = src_.find("{%", search);
      if (end == std::string::npos) throw error("missing end of raw directive", tag);
      const char endSign = end + 2 < src_.size() && (src_[end + 2] == '-' || src_[end + 2] == '+') ? src_[end + 2] : '\0';
      size_t r = skipSpaces(end + 2 + (endSign ? 1 : 0));
      if (!wordAt(r, "endraw")) {
        search = end + 2;
        continue;
      }
      r = skipSpaces(r + 6);
      char closeSign = '\0';
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) closeSign = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) throw error("expected '%}' after endraw", r);
      std::string text = trimBefore(src_.substr(bodyStart, end - bodyStart), endSign, true, false);
      if (!text.empty()) emit(TokenType::Data, std::move(text), bodyStart);
      pos = trimAfter(r + 2, closeSign, true, lineStarting);
      return true;
    }
  }

  // Expression tokens up to the closing delimiter; returns the position after it.
  size_t tagBody(char kind, size_t tag, size_t p, bool& lineStarting) {
    std::string brackets;
    for (;;) {
      p = skipSpaces(p);
      if (p >= src_.size())
        throw error(kind == '{' ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'", tag);
      if (brackets.empty()) {
        const std::string_view close = kind == '{' ? "}}" : "%}";
        for (const char sign : {'-', '+', '\0'}) {
          if (sign == '+' && kind == '{') continue;
          const size_t at = p + (sign ? 1 : 0);
          if ((sign == '\0' || src_[p] == sign) && src_.compare(at, 2, close) == 0) {
            emit(kind == '{' ? TokenType::VarEnd : TokenType::BlockEnd, std::string(close), p);
            return trimAfter(at + 2, sign, kind == '%', lineStarting);
          }
        }
      }
      p = token(p, brackets);
    }
  }

  size_t token(size_t p, std::string& brackets) {
    const char c = src_[p];
    const auto isDigit = [&](size_t i) { return i < src_.size() && src_[i] >= '0' && src_[i] <= '9'; };
    if (c == '\'' || c == '"') return stringLiteral(p);
    if (isDigit(p)) {
      size_t q = p;
      while (isDigit(q) || (src_[q] == '_' && isDigit(q + 1))) ++q;
      bool isFloat = false;
      const bool afterDot = p > 0 && src_[p - 1] == '.';
      if (!afterDot && q < src_.size() && src_[q] == '.' && isDigit(q + 1)) {
        isFloat = true;
        ++q;
        while (isDigit(q) || (src_[q] == '_' && isDigit(q + 1))) ++q;
      }
      if (!afterDot && q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        size_t e = q + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        if (isDigit(e)) {
          isFloat = true;
          q = e;
          while (isDigit(q) || (src_[q] == '_' && isDigit(q + 1))) ++q;
        }
      }
      std::string text = src_.substr(p, q - p);
      text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
      emit(isFloat ? TokenType::Float : TokenType::Integer, std::move(text), p);
      return q;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t q = p;
      while (q < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
      emit(TokenType::Name, src_.substr(p, q - p), p);
      return q;
    }
    static const char* const kOperators[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[",
                                             "]",  "(",  ")",  "{",  "}",  "<",  ">", "=", ".", ":", "|", ",", ";"};
    for (const char* op : kOperators) {
      const std::string_view s(op);
      if (src_.compare(p, s.size(), s) != 0) continue;
      if (s == "(" || s == "[" || s == "{") brackets += s[0];
      if (s == ")" || s == "]" || s == "}") {
        const char open = s == ")" ? '(' : s == "]" ? '[' : '{';
        if (brackets.empty() || brackets.back() != open)
          throw error("unexpected '" + std::string(s) + "'", p);
        brackets.pop_back();
      }
      emit(TokenType::Operator, std::string(s), p);
      return p + s.size();
    }
    throw error(std::string("unexpected character '") + c + "'", p);
  }

  size_t stringLiteral(size_t p) {
    const char quote = src_[p];
    std::string out;
    size_t q = p + 1;
    for (;;) {
      if (q >= src_.size()) throw error("unterminated string literal", p);
      const char c = src_[q];
      if (c == quote) break;
      if (c != '\\' || q + 1 >= src_.size()) {
        out += c;
        ++q;
        continue;
      }
      q = escape(q, out);
    }
    emit(TokenType::String, std::move(out), p);
    return q + 1;
  }

  static int hexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Decodes the escape at q (a backslash) into out; returns the position after it.
  size_t escape(size_t q, std::string& out) {
    const char e = src_[q + 1];
    switch (e) {
      case '\n': return q + 2;
      case '\\': out += '\\'; return q + 2;
      case '\'': out += '\''; return q + 2;
      case '"': out += '"'; return q + 2;
      case 'a': out += '\a'; return q + 2;
      case 'b': out += '\b'; return q + 2;
      case 'f': out += '\f'; return q + 2;
      case 'n': out += '\n'; return q + 2;
      case 'r': out += '\r'; return q + 2;
      case 't': out += '\t'; return q + 2;
      case 'v': out += '\v'; return q + 2;
      default: break;
    }
    if (e >= '0' && e <= '7') {
      uint32_t v = 0;
      size_t r = q + 1;
      for (int i = 0; i < 3 && r < src_.size() && src_[r] >= '0' && src_[r] <= '7'; ++i, ++r)
        v = v * 8 + static_cast<uint32_t>(src_[r] - '0');
      out += encodeCodePoint(v);
      return r;
    }
    const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits == 0) {  // unknown escape: kept as written
      out += '\\';
      return q + 1;
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const size_t r = q + 2 + static_cast<size_t>(i);
      const int h = r < src_.size() ? hexValue(src_[r]) : -1;
      if (h < 0) throw error("truncated \\" + std::string(1, e) + " escape in string literal", q);
      v = v * 16 + static_cast<uint32_t>(h);
    }
    if (v > 0x10FFFF) throw error("illegal Unicode character in string literal", q);
    out += encodeCodePoint(v);
    return q + 2 + static_cast<size_t>(digits);
  }
};

}  // namespace

std::vector<Token> lexTemplate(std::string_view source) { return Lexer(source).run(); }

}  // namespace zipmoe::jinja
