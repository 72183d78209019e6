// JsonMatcher (see json_matcher.h).
#include "generation/json_matcher.h"

#include <algorithm>
#include <climits>

namespace zipmoe::constrain {
namespace {

// Phases. Object: Open '{' → First ('"' or '}') → Key → Colon → Value (one space, then the value)
// → After (',' or '}') → Next (one space, then '"') → Key …
enum : uint8_t { kOpen = 0, kFirst, kKey, kColon, kValue, kAfter, kNext };
// Array: Open '[' → First (']' or a value) → After (',' or ']') → Item (one space, then a value).
enum : uint8_t { kArrItem = 10 };
// String: Open '"' → Body.
enum : uint8_t { kBody = 20 };
// Number: Start → Minus → Zero | Int → Frac0 → Frac → Exp0 → ExpSign → Exp.
enum : uint8_t { kNumStart = 30, kNumMinus, kNumZero, kNumInt, kNumFrac0, kNumFrac, kNumExp0, kNumExpSign, kNumExp };
// Literal / ToolCall prefix: Match; ToolCall: Close '}' after the arguments.
enum : uint8_t { kMatch = 40, kToolClose };

constexpr int kNumberBytes = 24;
// String: where a \u escape's surrogate pair stands.
enum : uint8_t { kNoSurrogate = 0, kHighSeen, kNeedBackslash, kNeedU, kLowDigits };

bool isDigit(uint8_t b) { return b >= '0' && b <= '9'; }
uint64_t allBits(size_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

// Keeps the candidates whose text has `b` at `pos`.
uint64_t filter(const std::vector<std::string>& texts, uint64_t alive, size_t pos, uint8_t b) {
  uint64_t out = 0;
  for (uint64_t a = alive; a != 0; a &= a - 1) {
    const int i = __builtin_ctzll(a);
    const std::string& t = texts[static_cast<size_t>(i)];
    if (pos < t.size() && static_cast<uint8_t>(t[pos]) == b) out |= uint64_t{1} << i;
  }
  return out;
}

// The candidate whose text is exactly `pos` long, or −1.
int finished(const std::vector<std::string>& texts, uint64_t alive, size_t pos) {
  for (uint64_t a = alive; a != 0; a &= a - 1) {
    const int i = __builtin_ctzll(a);
    if (texts[static_cast<size_t>(i)].size() == pos) return i;
  }
  return -1;
}

}  // namespace

JsonMatcher::JsonMatcher(const Grammar& grammar) : grammar_(&grammar) { stack_.reserve(8); }

bool JsonMatcher::advance(uint8_t b) {
  if (!started_) {
    started_ = true;
    return push(grammar_->root, b);
  }
  return !stack_.empty() && step(b);
}

bool JsonMatcher::advance(std::string_view bytes) {
  for (char c : bytes)
    if (!advance(static_cast<uint8_t>(c))) return false;
  return true;
}

bool JsonMatcher::feed(std::string_view bytes) {
  JsonMatcher next = *this;
  if (!next.advance(bytes)) return false;
  *this = std::move(next);
  return true;
}

bool JsonMatcher::complete() const {
  if (!started_) return false;
  if (stack_.empty()) return true;
  return stack_.size() == 1 && completeable(stack_.back());
}

int JsonMatcher::stringRoom() const {
  if (stack_.empty()) return -1;
  const Frame& f = stack_.back();
  const Node& n = node(f);
  if (n.kind != NodeKind::String || f.phase != kBody || f.inEscape || f.hexLeft != 0 || f.utf8Left != 0 ||
      f.surrogate != kNoSurrogate)
    return -1;
  return n.maxLength < 0 ? INT_MAX : n.maxLength - f.count;
}

// Σ over the declared keys from `from` on that are required: the key, ':' and its smallest value;
// `count` gets how many there are.
int JsonMatcher::requiredCost(const Node& n, int from, int* count) const {
  int cost = 0;
  *count = 0;
  for (size_t i = static_cast<size_t>(from); i < n.keys.size(); ++i) {
    if (!n.required[i]) continue;
    cost += static_cast<int>(n.keys[i].size()) + 1 + grammar_->nodes[static_cast<size_t>(n.values[i])].minBytes;
    ++*count;
  }
  return cost;
}

int JsonMatcher::frameRemaining(const Frame& f) const {
  const Node& n = node(f);
  auto minOf = [&](int index) { return grammar_->nodes[static_cast<size_t>(index)].minBytes; };
  switch (n.kind) {
    case NodeKind::Object: {
      int count = 0;
      if (n.keys.empty()) {
        if (f.phase == kOpen) return n.minBytes;
        if (f.phase == kColon) return 1 + minOf(n.additional) + 1;
        if (f.phase == kValue) return minOf(n.additional) + 1;
        if (f.phase == kNext) return 2 + 1 + minOf(n.additional) + 1;  // "":X}
        return 1;
      }
      switch (f.phase) {
        case kOpen: return n.minBytes;
        case kFirst: { const int c = requiredCost(n, f.keyIndex, &count); return c + std::max(0, count - 1) + 1; }
        case kAfter: { const int c = requiredCost(n, f.keyIndex, &count); return c + count + 1; }
        case kColon: case kValue: {
          const int c = requiredCost(n, f.keyIndex, &count);
          return (f.phase == kColon ? 1 : 0) + minOf(n.values[static_cast<size_t>(f.keyIndex - 1)]) + c + count + 1;
        }
        case kNext: case kKey: {
          int best = INT_MAX;
          const uint64_t cands = f.phase == kNext ? keyCandidates(n, f.keyIndex) : f.alive;
          const size_t pos = f.phase == kNext ? 0 : f.pos;
          for (uint64_t a = cands; a != 0; a &= a - 1) {
            const int i = __builtin_ctzll(a);
            const int c = requiredCost(n, i + 1, &count);
            best = std::min(best, static_cast<int>(n.keys[static_cast<size_t>(i)].size() - pos) + 1 +
                                      minOf(n.values[static_cast<size_t>(i)]) + c + count + 1);
          }
          return best == INT_MAX ? 1 : best;
        }
        default: return 1;
      }
    }
    case NodeKind::Array: {
      const int item = n.items >= 0 ? minOf(n.items) : 0;
      switch (f.phase) {
        case kOpen: return n.minBytes;
        case kFirst: return n.minItems > 0 ? n.minItems * (item + 1) : 1;
        case kAfter: return std::max(0, n.minItems - f.count) * (item + 1) + 1;
        case kArrItem: return item + std::max(0, n.minItems - f.count - 1) * (item + 1) + 1;
        default: return 1;
      }
    }
    case NodeKind::String: {
      if (f.phase == kOpen) return n.minBytes;
      // A high surrogate's low half: \uDC00 (6 bytes), or what of it is left.
      const int pair = f.surrogate == kHighSeen || f.surrogate == kNeedBackslash ? 6 : f.surrogate == kNeedU ? 5 : 0;
      return f.utf8Left + f.hexLeft + pair + (f.inEscape ? 1 : 0) + std::max(0, n.minLength - f.count) + 1;
    }
    case NodeKind::Number: case NodeKind::Integer: return completeable(f) ? 0 : 1;
    case NodeKind::Literal: {
      int best = INT_MAX;
      for (uint64_t a = f.alive; a != 0; a &= a - 1)
        best = std::min(best, static_cast<int>(n.literals[static_cast<size_t>(__builtin_ctzll(a))].size() - f.pos));
      return best == INT_MAX ? 0 : best;
    }
    case NodeKind::ToolCall: {
      if (f.phase == kToolClose) return 1;
      if (f.phase == kValue) return minOf(n.values[static_cast<size_t>(f.keyIndex)]) + 1;
      int best = INT_MAX;
      for (uint64_t a = f.alive; a != 0; a &= a - 1) {
        const size_t i = static_cast<size_t>(__builtin_ctzll(a));
        best = std::min(best, static_cast<int>(n.literals[i].size() - f.pos) + minOf(n.values[i]) + 1);
      }
      return best == INT_MAX ? 1 : best;
    }
    case NodeKind::Union: return n.minBytes;
  }
  return 0;
}

int JsonMatcher::minRemaining() const {
  if (!started_) return grammar_->nodes[static_cast<size_t>(grammar_->root)].minBytes;
  int total = 0;
  for (const Frame& f : stack_) total += frameRemaining(f);
  return total;
}

bool JsonMatcher::push(int nodeIndex, uint8_t b) {
  if (stack_.size() >= kMaxDepth) return false;
  const Node& n = grammar_->nodes[static_cast<size_t>(nodeIndex)];
  if (!n.mayStartWith(b)) return false;
  if (n.kind == NodeKind::Union) {
    for (int o : n.options)
      if (grammar_->nodes[static_cast<size_t>(o)].mayStartWith(b)) return push(o, b);
    return false;
  }
  Frame f;
  f.node = nodeIndex;
  switch (n.kind) {
    case NodeKind::Object: f.phase = kOpen; break;
    case NodeKind::Array: f.phase = kOpen; break;
    case NodeKind::String: f.phase = kOpen; break;
    case NodeKind::Number: case NodeKind::Integer: f.phase = kNumStart; break;
    case NodeKind::Literal: case NodeKind::ToolCall:
      f.phase = kMatch;
      f.alive = allBits(n.literals.size());
      break;
    case NodeKind::Union: break;
  }
  stack_.push_back(f);
  return step(b);
}

bool JsonMatcher::completeable(const Frame& f) const {
  const Node& n = node(f);
  if (n.kind == NodeKind::Number || n.kind == NodeKind::Integer)
    return f.phase == kNumZero || f.phase == kNumInt || f.phase == kNumFrac || f.phase == kNumExp;
  if (n.kind == NodeKind::Literal) return finished(n.literals, f.alive, f.pos) >= 0;
  return false;
}

uint64_t JsonMatcher::keyCandidates(const Node& n, int from) const {
  uint64_t out = 0;
  for (size_t i = static_cast<size_t>(from); i < n.keys.size(); ++i) {
    out |= uint64_t{1} << i;
    if (n.required[i]) break;
  }
  return out;
}

bool JsonMatcher::step(uint8_t b) {
  Frame& f = stack_.back();
  const Node& n = node(f);
  auto space = [&]() {
    if (b != ' ' || !f.spaceOk) return false;
    f.spaceOk = false;
    return true;
  };
  auto pop = [&]() { stack_.pop_back(); };
  switch (n.kind) {
    case NodeKind::Object: {
      const bool noneRequired = !std::any_of(n.required.begin() + f.keyIndex, n.required.end(), [](bool r) { return r; });
      auto startKey = [&]() {
        if (n.keys.empty()) {  // a free key: a plain string, then ':' and the value
          f.phase = kColon;
          return push(n.keyString, b);
        }
        const uint64_t cands = keyCandidates(n, f.keyIndex);
        if (cands == 0) return false;
        f.phase = kKey;
        f.alive = cands;
        f.pos = 1;
        return true;
      };
      switch (f.phase) {
        case kOpen: if (b != '{') return false; f.phase = kFirst; return true;
        case kFirst:
          if (b == '}') { if (!noneRequired) return false; pop(); return true; }
          if (b != '"' || (n.keys.empty() && n.additional < 0)) return false;
          return startKey();
        case kNext:
          if (space()) return true;
          if (b != '"' || (n.keys.empty() && n.additional < 0)) return false;
          return startKey();
        case kKey: {
          f.alive = filter(n.keys, f.alive, f.pos, b);
          if (f.alive == 0) return false;
          ++f.pos;
          const int k = finished(n.keys, f.alive, f.pos);
          if (k >= 0) {
            f.keyIndex = k + 1;
            f.phase = kColon;
          }
          return true;
        }
        case kColon: if (b != ':') return false; f.phase = kValue; f.spaceOk = true; return true;
        case kValue: {
          if (space()) return true;
          const int value = n.keys.empty() ? n.additional : n.values[static_cast<size_t>(f.keyIndex - 1)];
          f.phase = kAfter;
          f.spaceOk = false;
          return push(value, b);
        }
        case kAfter:
          if (b == '}') { if (!noneRequired) return false; pop(); return true; }
          if (b != ',') return false;
          if (!n.keys.empty() && keyCandidates(n, f.keyIndex) == 0) return false;
          f.phase = kNext;
          f.spaceOk = true;
          return true;
        default: return false;
      }
    }
    case NodeKind::Array:
      switch (f.phase) {
        case kOpen: if (b != '[') return false; f.phase = kFirst; return true;
        case kFirst:
          if (b == ']') { if (n.minItems > 0) return false; pop(); return true; }
          if (n.maxItems == 0) return false;
          f.phase = kAfter;
          ++f.count;
          return push(n.items, b);
        case kAfter:
          if (b == ']') { if (f.count < n.minItems) return false; pop(); return true; }
          if (b != ',' || (n.maxItems >= 0 && f.count >= n.maxItems)) return false;
          f.phase = kArrItem;
          f.spaceOk = true;
          return true;
        case kArrItem:
          if (space()) return true;
          f.phase = kAfter;
          f.spaceOk = false;
          ++f.count;
          return push(n.items, b);
        default: return false;
      }
    case NodeKind::String: {
      if (f.phase == kOpen) {
        if (b != '"') return false;
        f.phase = kBody;
        return true;
      }
      if (f.utf8Left > 0) {
        if (b < f.utf8Lo || b > f.utf8Hi) return false;
        --f.utf8Left;
        f.utf8Lo = 0x80;
        f.utf8Hi = 0xBF;
        return true;
      }
      if (f.hexLeft > 0) {
        // Surrogates come in pairs (strict readers refuse a lone one): \uD800-\uDBFF must be
        // followed by \uDC00-\uDFFF, which may not stand alone.
        const bool hex = isDigit(b) || ((b | 0x20) >= 'a' && (b | 0x20) <= 'f');
        if (!hex) return false;
        const int digit = isDigit(b) ? b - '0' : (b | 0x20) - 'a' + 10;
        const bool low = f.surrogate == kLowDigits;
        if (f.hexLeft == 4 && low && digit != 0xD) return false;
        if (f.hexLeft == 3 && f.hexHigh == 0xD && (low ? digit < 0xC : digit >= 0xC)) return false;
        if (f.hexLeft == 4) f.hexHigh = static_cast<uint8_t>(digit);
        if (f.hexLeft == 3 && f.hexHigh == 0xD && !low && digit >= 0x8) f.surrogate = kHighSeen;
        if (--f.hexLeft == 0) f.surrogate = f.surrogate == kHighSeen ? kNeedBackslash : kNoSurrogate;
        return true;
      }
      if (f.surrogate == kNeedBackslash) {
        if (b != '\\') return false;
        f.surrogate = kNeedU;
        return true;
      }
      if (f.surrogate == kNeedU) {
        if (b != 'u') return false;
        f.surrogate = kLowDigits;
        f.hexLeft = 4;
        return true;
      }
      if (f.inEscape) {
        f.inEscape = false;
        if (b == 'u') { f.hexLeft = 4; return true; }
        return b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't';
      }
      if (b == '"') {
        if (f.count < n.minLength) return false;
        pop();
        return true;
      }
      if (b < 0x20 || b == 0x7F) return false;
      if (n.maxLength >= 0 && f.count >= n.maxLength) return false;
      if (b == '\\') {
        f.inEscape = true;
      } else if (b >= 0x80) {
        if (b >= 0xC2 && b <= 0xDF) { f.utf8Left = 1; }
        else if (b >= 0xE0 && b <= 0xEF) { f.utf8Left = 2; f.utf8Lo = b == 0xE0 ? 0xA0 : 0x80; f.utf8Hi = b == 0xED ? 0x9F : 0xBF; }
        else if (b >= 0xF0 && b <= 0xF4) { f.utf8Left = 3; f.utf8Lo = b == 0xF0 ? 0x90 : 0x80; f.utf8Hi = b == 0xF4 ? 0x8F : 0xBF; }
        else return false;
      }
      ++f.count;
      return true;
    }
    case NodeKind::Number: case NodeKind::Integer: {
      const bool integer = n.kind == NodeKind::Integer;
      // Digits per part stay within what every JSON reader takes as it was meant: an integer within
      // int64, a mantissa within a double's precision, an exponent of at most two digits.
      auto next = [&](uint8_t phase) {
        const bool digit = isDigit(b);
        if (phase != f.phase) f.count = 0;
        const int cap = phase == kNumInt ? (integer ? 18 : 15) : phase == kNumFrac ? 15 : phase == kNumExp ? 2 : 1;
        if (f.pos >= kNumberBytes || (digit && f.count >= cap)) return false;
        ++f.pos;
        f.count += digit ? 1 : 0;
        f.phase = phase;
        return true;
      };
      switch (f.phase) {
        case kNumStart:
          if (b == '-') return next(kNumMinus);
          [[fallthrough]];
        case kNumMinus:
          if (b == '0') return next(kNumZero);
          if (b >= '1' && b <= '9') return next(kNumInt);
          return false;
        case kNumInt:
          if (isDigit(b)) return next(kNumInt);
          [[fallthrough]];
        case kNumZero:
          if (!integer && b == '.') return next(kNumFrac0);
          if (!integer && (b == 'e' || b == 'E')) return next(kNumExp0);
          break;
        case kNumFrac0: return isDigit(b) && next(kNumFrac);
        case kNumFrac:
          if (isDigit(b)) return next(kNumFrac);
          if (b == 'e' || b == 'E') return next(kNumExp0);
          break;
        case kNumExp0:
          if (b == '+' || b == '-') return next(kNumExpSign);
          return isDigit(b) && next(kNumExp);
        case kNumExpSign: return isDigit(b) && next(kNumExp);
        case kNumExp:
          if (isDigit(b)) return next(kNumExp);
          break;
        default: return false;
      }
      // The number is complete and `b` belongs to what follows it.
      if (!completeable(f)) return false;
      pop();
      return !stack_.empty() && step(b);
    }
    case NodeKind::Literal: {
      const uint64_t alive = filter(n.literals, f.alive, f.pos, b);
      if (alive != 0) {
        f.alive = alive;
        ++f.pos;
        // A literal no other candidate extends is closed at once.
        const int done = finished(n.literals, alive, f.pos);
        if (done >= 0 && (alive & (alive - 1)) == 0) pop();
        return true;
      }
      if (finished(n.literals, f.alive, f.pos) < 0) return false;
      pop();
      return !stack_.empty() && step(b);
    }
    case NodeKind::ToolCall: {
      if (f.phase == kToolClose) {
        if (b != '}') return false;
        pop();
        return true;
      }
      if (f.phase == kValue) {  // the arguments, opened by this byte
        f.phase = kToolClose;
        return push(n.values[static_cast<size_t>(f.keyIndex)], b);
      }
      f.alive = filter(n.literals, f.alive, f.pos, b);
      if (f.alive == 0) return false;
      ++f.pos;
      const int chosen = finished(n.literals, f.alive, f.pos);
      if (chosen >= 0) {
        f.keyIndex = chosen;
        f.phase = kValue;
      }
      return true;
    }
    case NodeKind::Union: return false;
  }
  return false;
}

}  // namespace zipmoe::constrain
