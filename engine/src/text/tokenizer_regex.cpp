// The regex engine of tokenizer_regex.h: a recursive-descent parser into a small node tree and a
// continuation-passing backtracking matcher (first alternative that leads to an overall match wins,
// as in Perl/Oniguruma). Greedy repeats of a single-character node count their maximal run and then
// back off, which keeps patterns like `\p{L}+` or `\s+(?!\S)` linear.
#include "text/tokenizer_regex.h"

#include <stdexcept>

#include "zipmoe/base/error.h"

#include "text/unicode_tables.h"

namespace zipmoe::tok {

namespace {
using unicode::Category;

// A set of code points: explicit ranges plus general-category and property flags.
struct CharSet {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  uint32_t categoryMask = 0;  // bit per unicode::Category
  bool whitespace = false, notWhitespace = false;
  std::vector<CharSet> negatedParts;  // \P{..}, \S etc. inside a class: member when NOT in the part
  bool negate = false;

  bool contains(uint32_t cp) const {
    bool in = false;
    for (const auto& [a, b] : ranges)
      if (cp >= a && cp <= b) { in = true; break; }
    if (!in && categoryMask && (categoryMask >> static_cast<unsigned>(unicode::category(cp)) & 1u)) in = true;
    if (!in && whitespace && unicode::isWhitespace(cp)) in = true;
    if (!in)
      for (const auto& p : negatedParts)
        if (!p.contains(cp)) { in = true; break; }
    return in != negate;
  }
};

uint32_t categoryBits(const std::string& name) {
  static const char* kNames[] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
                                 "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
                                 "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
  uint32_t bits = 0;
  for (uint32_t i = 0; i < 30; ++i) {
    const std::string n = kNames[i];
    if (n == name || (name.size() == 1 && n[0] == name[0])) bits |= 1u << i;
  }
  if (name == "L&" || name == "LC") bits = (1u << 1) | (1u << 2) | (1u << 3);
  if (name == "Letter") return categoryBits("L");
  if (name == "Number") return categoryBits("N");
  if (name == "Mark") return categoryBits("M");
  if (name == "Punctuation") return categoryBits("P");
  if (name == "Symbol") return categoryBits("S");
  if (name == "Separator") return categoryBits("Z");
  if (bits == 0) throw std::invalid_argument("unsupported property \\p{" + name + "}");
  return bits;
}

}  // namespace

struct Regex::Node {
  enum Kind { Char, Seq, Alt, Repeat, Look, LineStart, LineEnd, TextStart, TextEnd } kind = Seq;
  CharSet set;
  std::vector<std::unique_ptr<Node>> kids;
  int min = 0, max = -1;  // Repeat; max -1 = unbounded
  bool greedy = true;
  bool negative = false;  // Look
};

namespace {
using Node = Regex::Node;

class RegexParser {
 public:
  explicit RegexParser(const std::string& pattern) : cps_(unicode::decodeUtf8(pattern)) {}
  std::unique_ptr<Node> parse() {
    auto n = alternation(false);
    if (pos_ != cps_.size()) fail("unbalanced ')'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(what + " at code point " + std::to_string(pos_));
  }
  bool more() const { return pos_ < cps_.size(); }
  uint32_t peek() const { return cps_[pos_]; }

  std::unique_ptr<Node> alternation(bool icase) {
    auto alt = std::make_unique<Node>();
    alt->kind = Node::Alt;
    alt->kids.push_back(sequence(icase));
    while (more() && peek() == '|') {
      ++pos_;
      alt->kids.push_back(sequence(icase));
    }
    if (alt->kids.size() == 1) return std::move(alt->kids[0]);
    return alt;
  }

  std::unique_ptr<Node> sequence(bool icase) {
    auto seq = std::make_unique<Node>();
    seq->kind = Node::Seq;
    while (more() && peek() != '|' && peek() != ')') {
      auto atom = this->atom(icase);
      atom = quantified(std::move(atom));
      seq->kids.push_back(std::move(atom));
    }
    return seq;
  }

  int number() {
    if (!more() || peek() < '0' || peek() > '9') fail("expected a number in {m,n}");
    int v = 0;
    while (more() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<int>(peek() - '0');
      if (v > Regex::kMaxRepeatCount) fail("repeat count above " + std::to_string(Regex::kMaxRepeatCount) + " in {m,n}");
      ++pos_;
    }
    return v;
  }

  std::unique_ptr<Node> quantified(std::unique_ptr<Node> atom) {
    for (int stacked = 0; more(); ++stacked) {
      if (stacked == Regex::kMaxGroupDepth) fail("more than " + std::to_string(Regex::kMaxGroupDepth) + " quantifiers in a row");
      int mn = 0, mx = -1;
      const uint32_t c = peek();
      if (c == '?') mn = 0, mx = 1;
      else if (c == '*') mn = 0, mx = -1;
      else if (c == '+') mn = 1, mx = -1;
      else if (c == '{') {
        ++pos_;
        mn = number();
        mx = mn;
        if (more() && peek() == ',') {
          ++pos_;
          mx = (more() && peek() == '}') ? -1 : number();
        }
        if (!more() || peek() != '}') fail("malformed {m,n}");
        if (mx >= 0 && mx < mn) fail("{m,n} with n < m");
      } else {
        break;
      }
      ++pos_;
      if (atom->kind == Node::Look || atom->kind >= Node::LineStart) fail("quantified assertion");
      auto rep = std::make_unique<Node>();
      rep->kind = Node::Repeat;
      rep->min = mn;
      rep->max = mx;
      if (more() && peek() == '?') rep->greedy = false, ++pos_;
      else if (more() && peek() == '+') fail("possessive quantifier");
      rep->kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  static std::unique_ptr<Node> charNode(CharSet set) {
    auto n = std::make_unique<Node>();
    n->kind = Node::Char;
    n->set = std::move(set);
    return n;
  }

  static CharSet literal(uint32_t cp, bool icase) {
    CharSet s;
    s.ranges.emplace_back(cp, cp);
    if (icase && cp < 128) {
      if (cp >= 'a' && cp <= 'z') s.ranges.emplace_back(cp - 32, cp - 32);
      if (cp >= 'A' && cp <= 'Z') s.ranges.emplace_back(cp + 32, cp + 32);
      if (cp == 's' || cp == 'S') s.ranges.emplace_back(0x17F, 0x17F);  // ſ folds to s
      if (cp == 'k' || cp == 'K') s.ranges.emplace_back(0x212A, 0x212A);  // Kelvin sign folds to k
    } else if (icase) {
      throw std::invalid_argument("case-insensitive non-ASCII literal");
    }
    return s;
  }

  // An escape after '\'; fills `set` and returns true for a class escape, or returns the literal.
  uint32_t escape(CharSet& set, bool& isClass) {
    if (!more()) fail("trailing backslash");
    const uint32_t c = cps_[pos_++];
    isClass = true;
    switch (c) {
      case 's': set.whitespace = true; return 0;
      case 'S': { CharSet p; p.whitespace = true; set.negatedParts.push_back(p); return 0; }
      case 'd': set.categoryMask |= 1u << static_cast<unsigned>(Category::Nd); return 0;
      case 'D': { CharSet p; p.categoryMask = 1u << static_cast<unsigned>(Category::Nd); set.negatedParts.push_back(p); return 0; }
      case 'w': set.categoryMask |= categoryBits("L") | categoryBits("M") | categoryBits("N") | categoryBits("Pc"); return 0;
      case 'W': { CharSet p; p.categoryMask = categoryBits("L") | categoryBits("M") | categoryBits("N") | categoryBits("Pc"); set.negatedParts.push_back(p); return 0; }
      case 'p': case 'P': {
        if (!more() || peek() != '{') fail("expected { after \\p");
        ++pos_;
        std::string name;
        bool neg = c == 'P';
        if (more() && peek() == '^') neg = !neg, ++pos_;
        while (more() && peek() != '}') name += static_cast<char>(cps_[pos_++]);
        if (!more()) fail("unterminated \\p{");
        ++pos_;
        uint32_t bits = 0;
        try { bits = categoryBits(name); } catch (const std::invalid_argument& e) { fail(e.what()); }
        if (neg) { CharSet p; p.categoryMask = bits; set.negatedParts.push_back(p); }
        else set.categoryMask |= bits;
        return 0;
      }
      default: break;
    }
    isClass = false;
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'f': return '\f';
      case 'v': return '\v';
      case 'x': {
        uint32_t v = 0;
        auto hex = [&](uint32_t h) -> int {
          if (h >= '0' && h <= '9') return static_cast<int>(h - '0');
          if (h >= 'a' && h <= 'f') return static_cast<int>(h - 'a' + 10);
          if (h >= 'A' && h <= 'F') return static_cast<int>(h - 'A' + 10);
          return -1;
        };
        if (more() && peek() == '{') {
          ++pos_;
          while (more() && peek() != '}') {
            const int h = hex(cps_[pos_++]);
            if (h < 0) fail("bad \\x{...}");
            v = v * 16 + static_cast<uint32_t>(h);
          }
          if (!more()) fail("unterminated \\x{");
          ++pos_;
          return v;
        }
        for (int k = 0; k < 2; ++k) {
          if (!more() || hex(peek()) < 0) fail("bad \\x escape");
          v = v * 16 + static_cast<uint32_t>(hex(cps_[pos_++]));
        }
        return v;
      }
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
          fail(std::string("unsupported escape \\") + static_cast<char>(c));
        return c;  // escaped punctuation
    }
  }

  CharSet bracket(bool icase) {
    CharSet set;
    if (more() && peek() == '^') set.negate = true, ++pos_;
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      uint32_t lo = cps_[pos_++];
      if (lo == '[') fail("nested class or POSIX bracket");
      if (lo == '&' && more() && peek() == '&') fail("class intersection");
      if (lo == '\\') {
        bool isClass = false;
        lo = escape(set, isClass);
        if (isClass) continue;
      }
      uint32_t hi = lo;
      if (more() && peek() == '-' && pos_ + 1 < cps_.size() && cps_[pos_ + 1] != ']') {
        ++pos_;
        hi = cps_[pos_++];
        if (hi == '\\') {
          bool isClass = false;
          hi = escape(set, isClass);
          if (isClass) fail("class escape as a range end");
        }
        if (hi < lo) fail("reversed range in class");
      }
      if (icase) {
        for (uint32_t c = lo; c <= hi && c < 128; ++c) {
          const CharSet l = literal(c, true);
          set.ranges.insert(set.ranges.end(), l.ranges.begin(), l.ranges.end());
        }
        if (hi >= 128) fail("case-insensitive non-ASCII class");
      } else {
        set.ranges.emplace_back(lo, hi);
      }
    }
    if (!more()) fail("unterminated class");
    ++pos_;
    return set;
  }

  std::unique_ptr<Node> atom(bool icase) {
    const uint32_t c = cps_[pos_++];
    switch (c) {
      case '(': {
        if (++depth_ > Regex::kMaxGroupDepth) fail("groups nested deeper than " + std::to_string(Regex::kMaxGroupDepth));
        bool inner = icase;
        auto look = std::make_unique<Node>();
        bool isLook = false;
        if (more() && peek() == '?') {
          ++pos_;
          if (!more()) fail("unterminated group");
          const uint32_t k = cps_[pos_++];
          if (k == ':') {
          } else if (k == '=' || k == '!') {
            isLook = true;
            look->kind = Node::Look;
            look->negative = k == '!';
          } else if (k == 'i' && more() && peek() == ':') {
            ++pos_;
            inner = true;
          } else {
            fail("unsupported group (?" + std::string(1, static_cast<char>(k)));
          }
        } else {
          // Capturing group: treated as non-capturing (captures are unused by the tokenizer).
        }
        auto body = alternation(inner);
        if (!more() || peek() != ')') fail("missing ')'");
        ++pos_;
        --depth_;
        if (isLook) {
          look->kids.push_back(std::move(body));
          return look;
        }
        return body;
      }
      case '[': return charNode(bracket(icase));
      case '.': {
        CharSet s;
        s.ranges.emplace_back('\n', '\n');
        s.negate = true;
        return charNode(s);
      }
      case '^': { auto n = std::make_unique<Node>(); n->kind = Node::LineStart; return n; }
      case '$': { auto n = std::make_unique<Node>(); n->kind = Node::LineEnd; return n; }
      case '\\': {
        if (more() && (peek() == 'A' || peek() == 'z')) {
          auto n = std::make_unique<Node>();
          n->kind = cps_[pos_++] == 'A' ? Node::TextStart : Node::TextEnd;
          return n;
        }
        CharSet s;
        bool isClass = false;
        const uint32_t lit = escape(s, isClass);
        return charNode(isClass ? s : literal(lit, icase));
      }
      case '*': case '+': case '?': case '{': fail("quantifier without operand");
      case ')': fail("unbalanced ')'");
      default: return charNode(literal(c, icase));
    }
  }

  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// Continuation: the rest of the current sequence and what follows it.
// `rep` set: the end of one iteration of a general repeat (count iterations done, started at start).
struct Cont {
  const Node* seq;
  size_t index;
  const Cont* next;
  const Node* rep = nullptr;
  int count = 0;
  size_t start = 0;
};

// Thrown out of the recursion when a match attempt exceeds a limit; findAll turns it into an Error.
struct LimitExceeded {
  const char* what;
  size_t at;
};

class Matcher {
 public:
  explicit Matcher(const std::vector<uint32_t>& text)
      : t_(text), maxSteps_(Regex::kBaseSteps + Regex::kStepsPerCodePoint * static_cast<uint64_t>(text.size())) {}
  uint64_t maxSteps() const { return maxSteps_; }
  // Returns the end of a match starting at pos, or -1.
  long matchAt(const Node& root, size_t pos) {
    end_ = -1;
    depth_ = 0;
    start_ = pos;
    if (node(root, pos, nullptr)) return end_;
    return -1;
  }

 private:
  // Counts one step of the current attempt and one level of recursion, released by ~Level.
  struct Level {
    explicit Level(Matcher& m) : m_(m) {
      if (++m_.steps_ > m_.maxSteps_) throw LimitExceeded{"steps", m_.start_};
      if (++m_.depth_ > Regex::kMaxDepth) throw LimitExceeded{"levels of backtracking", m_.start_};
    }
    ~Level() { --m_.depth_; }
    Level(const Level&) = delete;
    Level& operator=(const Level&) = delete;
    Matcher& m_;
  };

  bool cont(const Cont* k, size_t pos) {
    const Level level(*this);
    if (!k) {
      end_ = static_cast<long>(pos);
      return true;
    }
    if (k->rep) return pos != k->start && repeat(*k->rep, pos, k->next, k->count);
    if (k->index >= k->seq->kids.size()) return cont(k->next, pos);
    const Cont rest{k->seq, k->index + 1, k->next, nullptr, 0, 0};
    return node(*k->seq->kids[k->index], pos, &rest);
  }

  bool node(const Node& n, size_t pos, const Cont* k) {
    const Level level(*this);
    switch (n.kind) {
      case Node::Char:
        return pos < t_.size() && n.set.contains(t_[pos]) && cont(k, pos + 1);
      case Node::Seq: {
        const Cont c{&n, 0, k, nullptr, 0, 0};
        return cont(&c, pos);
      }
      case Node::Alt:
        for (const auto& kid : n.kids)
          if (node(*kid, pos, k)) return true;
        return false;
      case Node::Look: {
        const long saved = end_;
        const bool found = node(*n.kids[0], pos, nullptr);
        end_ = saved;
        return found != n.negative && cont(k, pos);
      }
      case Node::LineStart:
        return (pos == 0 || t_[pos - 1] == '\n') && cont(k, pos);
      case Node::LineEnd:
        return (pos == t_.size() || t_[pos] == '\n') && cont(k, pos);
      case Node::TextStart:
        return pos == 0 && cont(k, pos);
      case Node::TextEnd:
        return pos == t_.size() && cont(k, pos);
      case Node::Repeat:
        return repeat(n, pos, k, 0);
    }
    return false;
  }

  bool repeat(const Node& n, size_t pos, const Cont* k, int count) {
    const Node& body = *n.kids[0];
    if (body.kind == Node::Char) {
      // Count the run once, then try continuations.
      size_t run = 0;
      const size_t limit = n.max < 0 ? t_.size() - pos : std::min<size_t>(static_cast<size_t>(n.max), t_.size() - pos);
      while (run < limit && body.set.contains(t_[pos + run])) ++run;
      steps_ += run;  // the scan is work too: a repeat re-entered many times must not go unbounded
      if (steps_ > maxSteps_) throw LimitExceeded{"steps", start_};
      if (run < static_cast<size_t>(n.min)) return false;
      if (n.greedy) {
        for (size_t r = run + 1; r-- > static_cast<size_t>(n.min);)
          if (cont(k, pos + r)) return true;
      } else {
        for (size_t r = static_cast<size_t>(n.min); r <= run; ++r)
          if (cont(k, pos + r)) return true;
      }
      return false;
    }
    // General body: one iteration at a time through a continuation that re-enters the repeat; an
    // iteration must consume input.
    const bool canStop = count >= n.min;
    const bool canGo = n.max < 0 || count < n.max;
    if (!n.greedy && canStop && cont(k, pos)) return true;
    if (canGo) {
      const Cont again{nullptr, 0, k, &n, count + 1, pos};
      if (node(body, pos, &again)) return true;
    }
    return n.greedy && canStop && cont(k, pos);
  }

  const std::vector<uint32_t>& t_;
  long end_ = -1;
  uint64_t steps_ = 0;  // over every attempt of one findAll
  const uint64_t maxSteps_;
  int depth_ = 0;
  size_t start_ = 0;
};

}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern), root_(RegexParser(pattern).parse()) {}
Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

std::vector<std::pair<size_t, size_t>> Regex::findAll(const std::vector<uint32_t>& text) const {
  std::vector<std::pair<size_t, size_t>> out;
  Matcher m(text);
  size_t pos = 0;
  while (pos < text.size()) {
    long end = -1;
    try {
      end = m.matchAt(*root_, pos);
    } catch (const LimitExceeded& e) {
      const bool steps = e.what[0] == 's';
      throw Error("tokenizer regex \"" + pattern_ + "\": matching a text of " + std::to_string(text.size()) +
                  " code points needs more than " +
                  std::to_string(steps ? m.maxSteps() : static_cast<uint64_t>(Regex::kMaxDepth)) + " " + e.what +
                  " (stopped at code point " + std::to_string(e.at) + "; the pattern backtracks too much for this text)");
    }
    if (end > static_cast<long>(pos)) {
      out.emplace_back(pos, static_cast<size_t>(end));
      pos = static_cast<size_t>(end);
    } else {
      ++pos;
    }
  }
  return out;
}

}  // namespace zipmoe::tok
