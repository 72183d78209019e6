// Python semantics for Jinja values: the operations jinja2 delegates to Python objects.
//
// Numbers follow Python (bool is an int, int / int is a float, // and % floor towards −∞, floats print
// with repr's shortest round-trip digits and switch to exponent form outside 1e-4 ≤ |x| < 1e16);
// strings compare by code point (UTF-8 byte order is code-point order) and count characters in code
// points; containers compare element-wise; an undefined value renders as "" and iterates as empty but
// fails on arithmetic, as jinja2's default Undefined does. JSON lives in jinja_json.cpp.
#include "text/jinja_value.h"

#include "text/unicode_tables.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace zipmoe::jinja {

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

void DictData::set(const Value& key, Value value) {
  for (auto& [k, v] : items)
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  items.emplace_back(key, std::move(value));
}

Value Value::list(std::vector<Value> items, bool tuple) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->tuple = tuple;
  Value v;
  v.v_ = std::shared_ptr<const ListData>(std::move(data));
  return v;
}

Value Value::dict(DictData data) {
  Value v;
  v.v_ = std::shared_ptr<const DictData>(std::make_shared<DictData>(std::move(data)));
  return v;
}

Value Value::callable(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v;
  v.v_ = std::shared_ptr<const CallableData>(std::make_shared<CallableData>(CallableData{std::move(name), std::move(fn)}));
  return v;
}

namespace {
thread_local std::vector<std::weak_ptr<NamespaceData>>* liveNamespaces = nullptr;  // of the running render
}  // namespace

Value Value::namespaceObject(NamespaceData data) {
  auto ns = std::make_shared<NamespaceData>(std::move(data));
  if (liveNamespaces) liveNamespaces->push_back(ns);
  Value v;
  v.v_ = std::move(ns);
  return v;
}

NamespaceCollector::NamespaceCollector() : outer_(liveNamespaces) { liveNamespaces = &created_; }

NamespaceCollector::~NamespaceCollector() {
  liveNamespaces = outer_;
  for (const auto& weak : created_)
    if (const auto ns = weak.lock()) ns->attrs.clear();  // breaks any cycle through it
}

int64_t Value::asInt() const { return isBool() ? (asBool() ? 1 : 0) : get<int64_t>("int"); }

void Value::typeMismatch(const char* expected) const {
  fail(std::string("expected ") + expected + ", got '" + typeName() + "'");
}

double Value::asDouble() const { return isFloat() ? get<double>("float") : static_cast<double>(asInt()); }

std::string Value::typeName() const {
  if (isUndefined()) return "Undefined";
  if (isNone()) return "NoneType";
  if (isBool()) return "bool";
  if (isInt()) return "int";
  if (isFloat()) return "float";
  if (isString()) return "str";
  if (isTuple()) return "tuple";
  if (isList()) return "list";
  if (isDict()) return "dict";
  if (isNamespace()) return "Namespace";
  return "function";
}

bool Value::truthy() const {
  if (isUndefined() || isNone()) return false;
  if (isBool()) return asBool();
  if (isInt()) return asInt() != 0;
  if (isFloat()) return asDouble() != 0.0;
  if (isString()) return !asString().empty();
  if (isList()) return !items().empty();
  if (isDict()) return !dictData().items.empty();
  return true;
}

void fail(const std::string& message) {
  RenderError e;
  e.message = message;
  throw e;
}

void failUndefined(const Value& v) {
  fail(v.undefinedName().empty() ? std::string("undefined value") : "'" + v.undefinedName() + "' is undefined");
}

// --- UTF-8 -----------------------------------------------------------------------------------------

std::vector<std::string_view> codePoints(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

uint32_t decodeCodePoint(std::string_view ch) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(ch[i])); };
  switch (ch.size()) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    case 4: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    default: return 0xFFFD;
  }
}

std::string encodeCodePoint(uint32_t cp) {
  std::string out;
  unicode::appendUtf8(out, cp);
  return out;
}

// str.isspace(): the characters Python's str.strip() and the `\s` of jinja2's lexer remove.
bool isPySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

std::string pyStrip(std::string_view s, bool left, bool right, const std::optional<std::string>& chars) {
  const auto cps = codePoints(s);
  std::vector<std::string_view> strip;
  if (chars) strip = codePoints(*chars);
  const auto removable = [&](std::string_view ch) {
    if (!chars) return isPySpace(decodeCodePoint(ch));
    for (auto c : strip)
      if (c == ch) return true;
    return false;
  };
  size_t begin = 0, end = cps.size();
  if (left)
    while (begin < end && removable(cps[begin])) ++begin;
  if (right)
    while (end > begin && removable(cps[end - 1])) --end;
  if (begin == end) return {};
  const char* first = cps[begin].data();
  const char* last = cps[end - 1].data() + cps[end - 1].size();
  return std::string(first, static_cast<size_t>(last - first));
}

// --- str / repr ------------------------------------------------------------------------------------

std::string pyFloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // [-]d[.ddd]e±XX
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  std::string out;
  if (exponent >= -5 + 1 && exponent < 16) {  // Python's repr: fixed for 1e-4 <= |x| < 1e16
    if (exponent >= 0) {
      if (static_cast<int>(digits.size()) <= exponent + 1) {
        out = digits + std::string(static_cast<size_t>(exponent + 1) - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, static_cast<size_t>(exponent + 1)) + "." + digits.substr(static_cast<size_t>(exponent + 1));
      }
    } else {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', exponent < 0 ? -exponent : exponent);
    out += exp;
  }
  return negative ? "-" + out : out;
}

namespace {

std::string reprString(const std::string& s) {
  const bool useDouble = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = useDouble ? '"' : '\'';
  std::string out(1, quote);
  for (auto ch : codePoints(s)) {
    const uint32_t cp = decodeCodePoint(ch);
    char buf[16];
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || cp == 0xAD) {
      std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      out += buf;
    } else {
      out += ch;
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Value::repr() const {
  if (isString()) return reprString(asString());
  if (isUndefined()) return "Undefined";
  return str();
}

namespace {
constexpr int kMaxPrintDepth = 200;
thread_local int printDepth = 0;
}  // namespace

PrintLevel::PrintLevel() {
  if (++printDepth > kMaxPrintDepth)
    fail("a value nested deeper than " + std::to_string(kMaxPrintDepth) + " levels (a namespace that contains itself?)");
}
PrintLevel::~PrintLevel() { --printDepth; }

void checkPrinted(const std::string& out) {
  if (out.size() > kMaxValueBytes) fail("the template prints a value of more than " + std::to_string(kMaxValueBytes) + " bytes");
}

std::string Value::str() const {
  const PrintLevel level;
  if (isUndefined()) return {};
  if (isNone()) return "None";
  if (isBool()) return asBool() ? "True" : "False";
  if (isInt()) return std::to_string(asInt());
  if (isFloat()) return pyFloatRepr(asDouble());
  if (isString()) return asString();
  if (isList()) {
    std::string out = isTuple() ? "(" : "[";
    const auto& v = items();
    for (size_t i = 0; i < v.size(); ++i) {
      out += (i ? ", " : "") + v[i].repr();
      checkPrinted(out);
    }
    if (isTuple() && v.size() == 1) out += ",";
    return out + (isTuple() ? ")" : "]");
  }
  if (isDict()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : dictData().items) {
      out += (first ? "" : ", ") + k.repr() + ": " + v.repr();
      checkPrinted(out);
      first = false;
    }
    return out + "}";
  }
  if (isNamespace()) {
    std::string out = "<Namespace {";
    bool first = true;
    for (const auto& [k, v] : namespaceData().attrs) {
      out += (first ? "" : ", ") + reprString(k) + ": " + v.repr();
      first = false;
    }
    return out + "}>";
  }
  return "<function " + callableData().name + ">";
}

// --- comparisons -----------------------------------------------------------------------------------

bool equals(const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isFloat() || b.isFloat()) return a.asDouble() == b.asDouble();
    return a.asInt() == b.asInt();
  }
  if (a.isString() && b.isString()) return a.asString() == b.asString();
  if (a.isUndefined() || b.isUndefined()) return a.isUndefined() && b.isUndefined();
  if (a.isNone() || b.isNone()) return a.isNone() && b.isNone();
  if (a.isList() && b.isList()) {
    if (a.isTuple() != b.isTuple() || a.items().size() != b.items().size()) return false;
    for (size_t i = 0; i < a.items().size(); ++i)
      if (!equals(a.items()[i], b.items()[i])) return false;
    return true;
  }
  if (a.isDict() && b.isDict()) {
    const auto& x = a.dictData().items;
    if (x.size() != b.dictData().items.size()) return false;
    for (const auto& [k, v] : x) {
      const Value* other = b.dictData().find(k);
      if (!other || !equals(v, *other)) return false;
    }
    return true;
  }
  if (a.isNamespace() && b.isNamespace()) return &a.namespaceData() == &b.namespaceData();
  if (a.isCallable() && b.isCallable()) return &a.callableData() == &b.callableData();
  return false;
}

bool lessThan(const Value& a, const Value& b) {
  if (a.isUndefined()) failUndefined(a);
  if (b.isUndefined()) failUndefined(b);
  if (a.isNumber() && b.isNumber()) {
    if (a.isFloat() || b.isFloat()) return a.asDouble() < b.asDouble();
    return a.asInt() < b.asInt();
  }
  if (a.isString() && b.isString()) return a.asString() < b.asString();
  if (a.isList() && b.isList() && a.isTuple() == b.isTuple()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return lessThan(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + a.typeName() + "' and '" + b.typeName() + "'");
}

bool contains(const Value& container, const Value& item) {
  if (container.isString()) {
    if (!item.isString())
      fail("'in <string>' requires string as left operand, not " + item.typeName());
    return container.asString().find(item.asString()) != std::string::npos;
  }
  if (container.isDict()) return container.dictData().find(item) != nullptr;
  if (container.isList()) {
    for (const auto& v : container.items())
      if (equals(v, item)) return true;
    return false;
  }
  if (container.isUndefined()) return false;
  fail("argument of type '" + container.typeName() + "' is not iterable");
}

// --- arithmetic ------------------------------------------------------------------------------------

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (a.isUndefined()) failUndefined(a);
  if (b.isUndefined()) failUndefined(b);
  fail("unsupported operand type(s) for " + op + ": '" + a.typeName() + "' and '" + b.typeName() + "'");
}

// A template is untrusted code: no value it builds may exceed kMaxValueBytes (strings) or
// kMaxValueItems (lists), and integers stay within 64 bits (Python's are unbounded; a template that
// needs more is refused rather than computed wrongly).
void checkSize(size_t bytes, size_t items) {
  if (bytes > kMaxValueBytes)
    fail("the template builds a string of more than " + std::to_string(kMaxValueBytes) + " bytes");
  if (items > kMaxValueItems) fail("the template builds a list of more than " + std::to_string(kMaxValueItems) + " items");
}

[[noreturn]] void overflow() { fail("integer overflow: the template computes beyond 64 bits"); }
int64_t checkedAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
int64_t checkedSub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
int64_t checkedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

Value repeat(const Value& seq, int64_t n) {
  if (n <= 0) return seq.isString() ? Value(std::string()) : Value::list({}, seq.isTuple());
  if (seq.isString()) {
    checkSize(static_cast<size_t>(checkedMul(static_cast<int64_t>(seq.asString().size()), n)), 0);
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.asString();
    return out;
  }
  checkSize(0, static_cast<size_t>(checkedMul(static_cast<int64_t>(seq.items().size()), n)));
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.isTuple());
}

int64_t floorDiv(int64_t a, int64_t b) {
  if (a == INT64_MIN && b == -1) overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t power(int64_t base, int64_t exponent) {  // exponent ≥ 0, by squaring
  int64_t r = 1;
  while (exponent > 0) {
    if (exponent & 1) r = checkedMul(r, base);
    exponent >>= 1;
    if (exponent > 0) base = checkedMul(base, base);
  }
  return r;
}

}  // namespace

void appendBounded(std::string& out, std::string_view piece) {
  checkSize(out.size() + piece.size(), 0);
  out += piece;
}

std::string spaces(int64_t n) {
  if (n <= 0) return {};
  checkSize(static_cast<uint64_t>(n) > kMaxValueBytes ? kMaxValueBytes + 1 : static_cast<size_t>(n), 0);
  return std::string(static_cast<size_t>(n), ' ');
}

Value add(const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isFloat() || b.isFloat()) return a.asDouble() + b.asDouble();
    return checkedAdd(a.asInt(), b.asInt());
  }
  if (a.isString() && b.isString()) {
    checkSize(a.asString().size() + b.asString().size(), 0);
    return a.asString() + b.asString();
  }
  if (a.isList() && b.isList() && a.isTuple() == b.isTuple()) {
    checkSize(0, a.items().size() + b.items().size());
    std::vector<Value> out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(out), a.isTuple());
  }
  unsupported("+", a, b);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (op == "*") {
    if ((a.isString() || a.isList()) && (b.isInt() || b.isBool())) return repeat(a, b.asInt());
    if ((b.isString() || b.isList()) && (a.isInt() || a.isBool())) return repeat(b, a.asInt());
  }
  if (!a.isNumber() || !b.isNumber()) unsupported(op, a, b);
  const bool useFloat = a.isFloat() || b.isFloat();
  if (op == "-") return useFloat ? Value(a.asDouble() - b.asDouble()) : Value(checkedSub(a.asInt(), b.asInt()));
  if (op == "*") return useFloat ? Value(a.asDouble() * b.asDouble()) : Value(checkedMul(a.asInt(), b.asInt()));
  if (op == "/") {
    if (b.asDouble() == 0.0) fail("division by zero");
    return a.asDouble() / b.asDouble();
  }
  if (op == "//" || op == "%") {
    if (b.asDouble() == 0.0) fail(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
    if (useFloat) {
      const double x = a.asDouble(), y = b.asDouble();
      double m = std::fmod(x, y);
      if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
      return op == "%" ? Value(m) : Value(std::floor((x - m) / y + 0.5));
    }
    const int64_t q = floorDiv(a.asInt(), b.asInt());
    return op == "//" ? Value(q) : Value(checkedSub(a.asInt(), checkedMul(q, b.asInt())));
  }
  if (op == "**") {
    if (!useFloat && b.asInt() >= 0) return power(a.asInt(), b.asInt());
    return std::pow(a.asDouble(), b.asDouble());
  }
  fail("unknown operator " + op);
}

Value negate(const Value& a) {
  if (a.isFloat()) return -a.asDouble();
  if (a.isNumber()) return checkedSub(0, a.asInt());
  if (a.isUndefined()) failUndefined(a);
  fail("bad operand type for unary -: '" + a.typeName() + "'");
}

std::vector<Value> iterate(const Value& v) {
  if (v.isList()) return v.items();
  if (v.isDict()) {
    std::vector<Value> keys;
    for (const auto& kv : v.dictData().items) keys.push_back(kv.first);
    return keys;
  }
  if (v.isString()) {
    std::vector<Value> chars;
    for (auto ch : codePoints(v.asString())) chars.emplace_back(std::string(ch));
    return chars;
  }
  if (v.isUndefined()) return {};
  fail("'" + v.typeName() + "' object is not iterable");
}

int64_t length(const Value& v) {
  if (v.isString()) return static_cast<int64_t>(codePoints(v.asString()).size());
  if (v.isList()) return static_cast<int64_t>(v.items().size());
  if (v.isDict()) return static_cast<int64_t>(v.dictData().items.size());
  if (v.isUndefined()) return 0;
  fail("object of type '" + v.typeName() + "' has no len()");
}

}  // namespace zipmoe::jinja
