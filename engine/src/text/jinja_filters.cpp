// Jinja filters and tests with jinja2's semantics, plus transformers' `tojson`.
//
// Each filter reads its arguments the way jinja2's Python signature does (positional or keyword, same
// defaults): default(value, default_value='', boolean=False), join(d='', attribute=None),
// replace(old, new, count=None), indent(width=4, first=False, blank=False), int(default=0, base=10),
// sort/unique/min/max(case_sensitive=False, attribute=None), map(attribute=... | filter name, args),
// select/reject(test, args), selectattr/rejectattr(attribute, test, args), and tojson(ensure_ascii=False,
// indent=None, separators=None, sort_keys=False) as transformers overrides it (json.dumps, no HTML
// escaping). Filters that jinja2 implements as generators (map, select, ...) return lists, which is
// what every template does with them (|list, |join, iterate, |length after |list).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "text/jinja_builtins.h"

namespace zipmoe::jinja {
namespace {

// jinja2's make_attrgetter: "a.b.0" looks up item-then-attribute per dotted part.
Value attributePath(const Value& obj, const Value& attribute, const Value& fallback = Value()) {
  if (attribute.isInt()) return getItem(obj, attribute);
  Value cur = obj;
  const std::string path = attribute.str();
  size_t pos = 0;
  for (;;) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = numeric ? getItem(cur, Value(static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10)))) : getItem(cur, Value(part));
    if (cur.isUndefined() && !fallback.isUndefined()) return fallback;
    if (dot == std::string::npos) return cur;
    if (cur.isUndefined()) failUndefined(cur);
    pos = dot + 1;
  }
}

std::string lowerAscii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upperAscii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The sort key jinja2 uses: strings lower-cased unless case_sensitive.
Value sortKey(const Value& v, bool caseSensitive) {
  if (!caseSensitive && v.isString()) return lowerAscii(v.asString());
  return v;
}

std::string htmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(cur);
      cur.clear();
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      cur += s[i];
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  return lines;
}

Value indentFilter(const std::string& text, const Value& width, bool first, bool blank) {
  const std::string indention = width.isString() ? width.asString() : spaces(width.asInt());
  std::vector<std::string> lines = splitLines(text + "\n");
  std::string rv;
  if (first) rv = indention;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      appendBounded(rv, "\n");
      if (blank || !lines[i].empty()) appendBounded(rv, indention);
    }
    appendBounded(rv, lines[i]);
  }
  return rv;
}

// A float truncated to int, when it fits in 64 bits (Python's ints are unbounded; ours are not).
std::optional<int64_t> truncated(double d) {
  if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(std::trunc(d));
}

Value toInt(const Value& v, const Value& fallback, int base) {
  if (v.isInt() || v.isBool()) return v.asInt();
  if (v.isFloat()) {
    const auto i = truncated(v.asDouble());
    return i ? Value(*i) : fallback;
  }
  if (!v.isString()) return fallback;
  std::string s = pyStrip(v.asString(), true, true, std::nullopt);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return fallback;
  char* end = nullptr;
  const long long i = std::strtoll(s.c_str(), &end, base);
  if (end == s.c_str() + s.size()) return static_cast<int64_t>(i);
  const double d = std::strtod(s.c_str(), &end);
  if (end == s.c_str() + s.size())
    if (const auto t = truncated(d)) return *t;
  return fallback;
}

// A test or filter applied to each item, for select/reject/map.
bool runTest(const std::string& name, const Value& item, const std::vector<Value>& extra) {
  CallArgs a;
  a.positional = extra;
  return applyTest(name, item, a);
}

std::vector<Value> selectItems(const Value& input, CallArgs& args, bool byAttribute, bool keep) {
  std::vector<Value> rest = args.positional;
  if (!args.keyword.empty()) fail("select filters take positional arguments only");
  Value attribute;
  if (byAttribute) {
    if (rest.empty()) fail("selectattr/rejectattr need an attribute name");
    attribute = rest.front();
    rest.erase(rest.begin());
  }
  std::string test;
  if (!rest.empty()) {
    test = rest.front().str();
    rest.erase(rest.begin());
  }
  std::vector<Value> out;
  for (const auto& item : iterate(input)) {
    const Value subject = byAttribute ? attributePath(item, attribute) : item;
    const bool pass = test.empty() ? subject.truthy() : runTest(test, subject, rest);
    if (pass == keep) out.push_back(item);
  }
  return out;
}

Value mapFilter(const Value& input, CallArgs& args) {
  std::vector<Value> out;
  for (const auto& [k, v] : args.keyword) {
    if (k != "attribute" && k != "default") fail("map() got an unexpected keyword argument '" + k + "'");
  }
  const Value* attribute = nullptr;
  Value fallback;
  for (const auto& [k, v] : args.keyword) {
    if (k == "attribute") attribute = &v;
    if (k == "default") fallback = v;
  }
  if (attribute) {
    for (const auto& item : iterate(input)) out.push_back(attributePath(item, *attribute, fallback));
    return Value::list(std::move(out));
  }
  if (args.positional.empty()) fail("map() needs a filter name or attribute=");
  const std::string filter = args.positional[0].str();
  for (const auto& item : iterate(input)) {
    CallArgs a;
    a.positional.assign(args.positional.begin() + 1, args.positional.end());
    out.push_back(applyFilter(filter, item, a));
  }
  return Value::list(std::move(out));
}

const char* const kFilters[] = {"abs", "attr", "capitalize", "count", "d", "default", "dictsort", "e", "escape",
                                "first", "float", "indent", "int", "items", "join", "last", "length", "list",
                                "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "safe",
                                "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim",
                                "unique", "upper", "wordcount"};
const char* const kTests[] = {"defined", "undefined", "none", "boolean", "true", "false", "integer", "float",
                              "number", "string", "mapping", "iterable", "sequence", "callable", "sameas",
                              "lower", "upper", "odd", "even", "divisibleby", "eq", "equalto", "ne", "lt",
                              "lessthan", "le", "gt", "greaterthan", "ge", "in", "filter", "test"};

}  // namespace

bool hasFilter(const std::string& name) {
  return std::any_of(std::begin(kFilters), std::end(kFilters), [&](const char* f) { return name == f; });
}
bool hasTest(const std::string& name) {
  return std::any_of(std::begin(kTests), std::end(kTests), [&](const char* t) { return name == t; });
}

Value applyFilter(const std::string& name, const Value& input, CallArgs& args) {
  if (name == "map") return mapFilter(input, args);
  if (name == "select" || name == "reject")
    return Value::list(selectItems(input, args, false, name == "select"));
  if (name == "selectattr" || name == "rejectattr")
    return Value::list(selectItems(input, args, true, name == "selectattr"));
  ArgReader r(args, name);
  Value result;
  if (name == "default" || name == "d") {
    const Value fallback = r.get(0, "default_value", std::string());
    const bool boolean = r.get(1, "boolean", false).truthy();
    result = (input.isUndefined() || (boolean && !input.truthy())) ? fallback : input;
  } else if (name == "length" || name == "count") {
    result = length(input);
  } else if (name == "trim") {
    const Value chars = r.get(0, "chars", None{});
    result = pyStrip(input.str(), true, true, chars.isNone() ? std::nullopt : std::optional<std::string>(chars.str()));
  } else if (name == "upper") {
    result = upperAscii(input.str());
  } else if (name == "lower") {
    result = lowerAscii(input.str());
  } else if (name == "capitalize") {
    std::string s = lowerAscii(input.str());
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    result = s;
  } else if (name == "title") {
    // jinja2: split on runs of [-\s({\[<], upper-case each piece's first character, lower the rest.
    const std::string s = input.str();
    std::string out;
    bool atStart = true;
    for (char c : s) {
      const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || isPySpace(static_cast<unsigned char>(c));
      if (sep) {
        out += c;
        atStart = true;
      } else {
        out += static_cast<char>(atStart ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
        atStart = false;
      }
    }
    result = out;
  } else if (name == "first" || name == "last") {
    const auto items = iterate(input);
    result = items.empty() ? Value(Undefined{name}) : (name == "first" ? items.front() : items.back());
  } else if (name == "join") {
    const std::string sep = r.get(0, "d", std::string()).str();
    const Value attribute = r.get(1, "attribute", None{});
    std::string out;
    bool first = true;
    for (const auto& item : iterate(input)) {
      if (!first) appendBounded(out, sep);
      appendBounded(out, (attribute.isNone() ? item : attributePath(item, attribute)).str());
      first = false;
    }
    result = out;
  } else if (name == "replace") {
    CallArgs method;
    method.positional = {r.get(0, "old"), r.get(1, "new")};
    const Value count = r.get(2, "count", None{});
    if (!count.isNone()) method.positional.push_back(count);
    result = getAttribute(Value(input.str()), "replace").callableData().fn(method);
  } else if (name == "safe" || name == "string") {
    result = input.isString() ? input : Value(input.str());
  } else if (name == "e" || name == "escape") {
    result = htmlEscape(input.str());
  } else if (name == "int") {
    result = toInt(input, r.get(0, "default", int64_t{0}), static_cast<int>(r.get(1, "base", int64_t{10}).asInt()));
  } else if (name == "float") {
    const Value fallback = r.get(0, "default", 0.0);
    if (input.isNumber()) {
      result = input.asDouble();
    } else if (input.isString()) {
      const std::string s = pyStrip(input.asString(), true, true, std::nullopt);
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      result = (!s.empty() && end == s.c_str() + s.size()) ? Value(d) : fallback;
    } else {
      result = fallback;
    }
  } else if (name == "abs") {
    if (!input.isNumber()) fail("bad operand type for abs(): '" + input.typeName() + "'");
    if (input.isFloat()) {
      result = Value(std::fabs(input.asDouble()));
    } else {
      if (input.asInt() == INT64_MIN) fail("integer overflow: the template computes beyond 64 bits");
      result = Value(static_cast<int64_t>(std::llabs(input.asInt())));
    }
  } else if (name == "list") {
    result = Value::list(iterate(input));
  } else if (name == "items") {
    if (input.isUndefined()) {
      result = Value::list({});
    } else {
      if (!input.isDict()) fail("items filter expects a mapping, got " + input.typeName());
      CallArgs none;
      result = getAttribute(input, "items").callableData().fn(none);
    }
  } else if (name == "reverse") {
    if (input.isString()) {
      auto cps = codePoints(input.asString());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      result = out;
    } else {
      auto items = iterate(input);
      std::reverse(items.begin(), items.end());
      result = Value::list(std::move(items));
    }
  } else if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    const bool reverse = name == "sort" ? r.get(0, "reverse", false).truthy() : false;
    const bool caseSensitive = r.get(name == "sort" ? 1 : 0, "case_sensitive", false).truthy();
    const Value attribute = r.get(name == "sort" ? 2 : 1, "attribute", None{});
    auto items = iterate(input);
    const auto key = [&](const Value& v) { return sortKey(attribute.isNone() ? v : attributePath(v, attribute), caseSensitive); };
    if (name == "unique") {
      std::vector<Value> out, seen;
      for (const auto& v : items) {
        const Value k = key(v);
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
          seen.push_back(k);
          out.push_back(v);
        }
      }
      result = Value::list(std::move(out));
    } else {
      std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        return reverse ? lessThan(key(b), key(a)) : lessThan(key(a), key(b));
      });
      if (name == "sort") {
        result = Value::list(std::move(items));
      } else if (items.empty()) {
        result = Undefined{name};
      } else {
        result = name == "min" ? items.front() : items.back();
      }
    }
  } else if (name == "dictsort") {
    if (!input.isDict()) fail("dictsort expects a mapping, got " + input.typeName());
    const bool caseSensitive = r.get(0, "case_sensitive", false).truthy();
    const std::string by = r.get(1, "by", std::string("key")).str();
    const bool reverse = r.get(2, "reverse", false).truthy();
    auto items = input.dictData().items;
    std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) {
      const Value ka = sortKey(by == "value" ? a.second : a.first, caseSensitive);
      const Value kb = sortKey(by == "value" ? b.second : b.first, caseSensitive);
      return reverse ? lessThan(kb, ka) : lessThan(ka, kb);
    });
    std::vector<Value> out;
    for (auto& [k, v] : items) out.push_back(Value::list({k, v}, true));
    result = Value::list(std::move(out));
  } else if (name == "sum") {
    const Value attribute = r.get(0, "attribute", None{});
    Value total = r.get(1, "start", int64_t{0});
    for (const auto& v : iterate(input)) total = add(total, attribute.isNone() ? v : attributePath(v, attribute));
    result = total;
  } else if (name == "attr") {
    result = getAttribute(input, r.get(0, "name").str());
  } else if (name == "wordcount") {
    CallArgs none;
    result = static_cast<int64_t>(getAttribute(Value(input.str()), "split").callableData().fn(none).items().size());
  } else if (name == "indent") {
    result = indentFilter(input.str(), r.get(0, "width", int64_t{4}), r.get(1, "first", false).truthy(),
                          r.get(2, "blank", false).truthy());
  } else if (name == "tojson") {
    JsonOptions o;
    o.ensureAscii = r.get(0, "ensure_ascii", false).truthy();
    const Value indent = r.get(1, "indent", None{});
    if (indent.isString()) o.indent = indent.asString();
    else if (indent.isInt()) o.indent = spaces(indent.asInt());
    else if (!indent.isNone()) fail("tojson indent must be an int or str");
    const Value separators = r.get(2, "separators", None{});
    if (separators.isList() && separators.items().size() == 2)
      o.separators = std::make_pair(separators.items()[0].str(), separators.items()[1].str());
    else if (!separators.isNone()) fail("tojson separators must be a (item, key) pair");
    o.sortKeys = r.get(3, "sort_keys", false).truthy();
    result = toJson(input, o);
  } else {
    fail("no filter named '" + name + "'");
  }
  r.finish();
  return result;
}

bool applyTest(const std::string& name, const Value& v, CallArgs& args) {
  ArgReader r(args, name);
  bool result = false;
  if (name == "defined") result = !v.isUndefined();
  else if (name == "undefined") result = v.isUndefined();
  else if (name == "none") result = v.isNone();
  else if (name == "boolean") result = v.isBool();
  else if (name == "true") result = v.isBool() && v.asBool();
  else if (name == "false") result = v.isBool() && !v.asBool();
  else if (name == "integer") result = v.isInt();
  else if (name == "float") result = v.isFloat();
  else if (name == "number") result = v.isNumber();
  else if (name == "string") result = v.isString();
  else if (name == "mapping") result = v.isDict();
  else if (name == "iterable") result = v.isString() || v.isList() || v.isDict() || v.isUndefined();
  else if (name == "sequence") result = v.isString() || v.isList() || v.isDict() || v.isUndefined();
  else if (name == "callable") result = v.isCallable();
  else if (name == "lower") result = v.isString() && lowerAscii(v.asString()) == v.asString();
  else if (name == "upper") result = v.isString() && upperAscii(v.asString()) == v.asString();
  else if (name == "odd" || name == "even") {
    if (!v.isInt() && !v.isBool()) fail("the " + name + " test needs an integer, got " + v.typeName());
    result = ((v.asInt() % 2) != 0) == (name == "odd");
  } else if (name == "divisibleby") {
    const Value n = r.get(0, "num");
    if (!v.isNumber() || !n.isNumber() || n.asDouble() == 0.0) fail("divisibleby needs numbers and a non-zero divisor");
    result = equals(arithmetic("%", v, n), Value(int64_t{0}));
  } else if (name == "sameas") {
    const Value other = r.get(0, "other");
    result = (v.isNone() && other.isNone()) || (v.isBool() && other.isBool() && v.asBool() == other.asBool()) ||
             ((v.isNamespace() || v.isCallable() || v.isDict() || v.isList()) && equals(v, other) &&
              v.storage().index() == other.storage().index());
  } else if (name == "eq" || name == "equalto") result = equals(v, r.get(0, "other"));
  else if (name == "ne") result = !equals(v, r.get(0, "other"));
  else if (name == "lt" || name == "lessthan") result = lessThan(v, r.get(0, "other"));
  else if (name == "le") result = !lessThan(r.get(0, "other"), v);
  else if (name == "gt" || name == "greaterthan") result = lessThan(r.get(0, "other"), v);
  else if (name == "ge") result = !lessThan(v, r.get(0, "other"));
  else if (name == "in") result = contains(r.get(0, "seq"), v);
  else if (name == "filter") result = hasFilter(v.str());
  else if (name == "test") result = hasTest(v.str());
  else fail("no test named '" + name + "'");
  r.finish();
  return result;
}

}  // namespace zipmoe::jinja
