// Attribute and item access, slicing, the methods of str and dict, and the global functions.
//
// jinja2 resolves `obj.name` with Python's getattr first (so `message.items` is dict.items, and
// `text.strip` is a bound method) and falls back to `obj['name']`; `obj[key]` tries the item first.
// Only side-effect-free methods exist here, as in jinja2's ImmutableSandboxedEnvironment (list.append
// and dict.update are refused there too). String methods work on code points; case mapping is ASCII
// only (chat templates case-map role names and keywords, not arbitrary text). The globals mirror
// transformers: range (limited like the sandbox), namespace(), dict(), raise_exception(),
// strftime_now().
#include <algorithm>
#include <cctype>
#include <ctime>

#include "text/jinja_builtins.h"

namespace zipmoe::jinja {

Value ArgReader::get(size_t position, const char* name, Value fallback) {
  if (position < args_.positional.size()) {
    positionalUsed_ = std::max(positionalUsed_, position + 1);
    return args_.positional[position];
  }
  for (const auto& [key, v] : args_.keyword)
    if (key == name) {
      ++keywordUsed_;
      return v;
    }
  return fallback;
}

void ArgReader::finish() const {
  if (args_.positional.size() > positionalUsed_)
    fail(function_ + "() got too many positional arguments (" + std::to_string(args_.positional.size()) + ")");
  if (args_.keyword.size() > keywordUsed_) fail(function_ + "() got an unexpected keyword argument");
}

namespace {

std::string asciiLower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string asciiUpper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string requireString(const Value& v, const std::string& what) {
  if (!v.isString()) fail(what + " must be str, not " + v.typeName());
  return v.asString();
}

std::optional<std::string> optionalString(const Value& v, const std::string& what) {
  if (v.isNone() || v.isUndefined()) return std::nullopt;
  return requireString(v, what);
}

Value splitString(const std::string& s, const Value& sepValue, int64_t maxsplit) {
  std::vector<Value> parts;
  const auto sep = optionalString(sepValue, "split() separator");
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t pos = 0;
    for (;;) {
      const size_t at = (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) ? s.find(*sep, pos) : std::string::npos;
      if (at == std::string::npos) {
        parts.emplace_back(s.substr(pos));
        break;
      }
      parts.emplace_back(s.substr(pos, at - pos));
      pos = at + sep->size();
    }
    return Value::list(std::move(parts));
  }
  const auto cps = codePoints(s);
  size_t i = 0;
  for (;;) {
    while (i < cps.size() && isPySpace(decodeCodePoint(cps[i]))) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      std::string rest;
      for (size_t k = i; k < cps.size(); ++k) rest += cps[k];
      parts.emplace_back(pyStrip(rest, false, true, std::nullopt));
      break;
    }
    std::string word;
    while (i < cps.size() && !isPySpace(decodeCodePoint(cps[i]))) word += cps[i++];
    parts.emplace_back(std::move(word));
  }
  return Value::list(std::move(parts));
}

std::string replaceString(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {
    int64_t done = 0;
    for (auto ch : codePoints(s)) {
      if (count < 0 || done < count) appendBounded(out, to), ++done;
      appendBounded(out, ch);
    }
    if (count < 0 || done < count) appendBounded(out, to);
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(from, pos);
    if (at == std::string::npos) break;
    appendBounded(out, std::string_view(s).substr(pos, at - pos));
    appendBounded(out, to);
    pos = at + from.size();
    ++done;
  }
  appendBounded(out, std::string_view(s).substr(pos));
  return out;
}

std::string pyTitle(const std::string& s) {
  std::string out;
  bool previousCased = false;
  for (char c : s) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    out += static_cast<char>(alpha ? (previousCased ? std::tolower(static_cast<unsigned char>(c))
                                                    : std::toupper(static_cast<unsigned char>(c)))
                                   : c);
    previousCased = alpha;
  }
  return out;
}

bool affixMatch(const std::string& s, const Value& affix, bool prefix) {
  const auto one = [&](const Value& a) {
    const std::string x = requireString(a, prefix ? "startswith() argument" : "endswith() argument");
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.isTuple()) {
    for (const auto& a : affix.items())
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

Value stringMethod(const std::string& s, const std::string& name, CallArgs& args) {
  ArgReader r(args, "str." + name);
  Value result;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto chars = optionalString(r.get(0, "chars", None{}), name + "() argument");
    result = pyStrip(s, name != "rstrip", name != "lstrip", chars);
  } else if (name == "split") {
    result = splitString(s, r.get(0, "sep", None{}), r.get(1, "maxsplit", -1).asInt());
  } else if (name == "startswith" || name == "endswith") {
    result = affixMatch(s, r.get(0, "prefix"), name == "startswith");
  } else if (name == "upper") {
    result = asciiUpper(s);
  } else if (name == "lower") {
    result = asciiLower(s);
  } else if (name == "title") {
    result = pyTitle(s);
  } else if (name == "capitalize") {
    std::string low = asciiLower(s);
    if (!low.empty()) low[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(low[0])));
    result = low;
  } else if (name == "replace") {
    result = replaceString(s, requireString(r.get(0, "old"), "replace() argument 1"),
                           requireString(r.get(1, "new"), "replace() argument 2"), r.get(2, "count", -1).asInt());
  } else if (name == "find" || name == "count") {
    const std::string sub = requireString(r.get(0, "sub"), name + "() argument");
    if (name == "find") {
      const size_t at = s.find(sub);
      result = at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(codePoints(s.substr(0, at)).size());
    } else {
      int64_t n = 0;
      if (sub.empty()) {
        n = static_cast<int64_t>(codePoints(s).size()) + 1;
      } else {
        for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      }
      result = n;
    }
  } else if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& v : iterate(r.get(0, "iterable"))) {
      if (!first) appendBounded(out, s);
      appendBounded(out, requireString(v, "join() item"));
      first = false;
    }
    result = out;
  } else if (name == "splitlines") {
    std::vector<Value> lines;
    std::string cur;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        lines.emplace_back(cur);
        cur.clear();
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      } else {
        cur += s[i];
      }
    }
    if (!cur.empty()) lines.emplace_back(cur);
    result = Value::list(std::move(lines));
  } else if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
             name == "isupper") {
    bool ok = !s.empty(), cased = false;
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (name == "isdigit") ok = ok && std::isdigit(c);
      if (name == "isalpha") ok = ok && std::isalpha(c);
      if (name == "isalnum") ok = ok && std::isalnum(c);
      if (name == "isspace") ok = ok && std::isspace(c);
      if (name == "islower") ok = ok && !std::isupper(c), cased = cased || std::islower(c);
      if (name == "isupper") ok = ok && !std::islower(c), cased = cased || std::isupper(c);
    }
    result = (name == "islower" || name == "isupper") ? ok && cased : ok;
  } else {
    fail("'str' object has no attribute '" + name + "'");
  }
  r.finish();
  return result;
}

const char* const kStringMethods[] = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper",
                                      "lower", "title", "capitalize", "replace", "find", "count", "join",
                                      "splitlines", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper"};

Value dictMethod(const Value& d, const std::string& name, CallArgs& args) {
  ArgReader r(args, "dict." + name);
  Value result;
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.dictData().items) {
      if (name == "items") out.push_back(Value::list({k, v}, true));
      if (name == "keys") out.push_back(k);
      if (name == "values") out.push_back(v);
    }
    result = Value::list(std::move(out));
  } else {  // get
    const Value key = r.get(0, "key");
    const Value* found = d.dictData().find(key);
    result = found ? *found : r.get(1, "default", None{});
  }
  r.finish();
  return result;
}

Value boundMethod(const Value& obj, const std::string& name) {
  if (obj.isString()) {
    for (const char* m : kStringMethods)
      if (name == m) {
        const std::string s = obj.asString();
        return Value::callable("str." + name, [s, name](CallArgs& a) { return stringMethod(s, name, a); });
      }
  }
  if (obj.isDict() && (name == "items" || name == "keys" || name == "values" || name == "get"))
    return Value::callable("dict." + name, [obj, name](CallArgs& a) { return dictMethod(obj, name, a); });
  return Undefined{name};
}

// Python's index normalisation for obj[i]; nullopt when out of range.
std::optional<size_t> normaliseIndex(int64_t i, size_t size) {
  const auto n = static_cast<int64_t>(size);
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::nullopt;
  return static_cast<size_t>(i);
}

}  // namespace

Value getAttribute(const Value& obj, const std::string& name) {
  if (obj.isUndefined()) failUndefined(obj);
  if (!name.empty() && name[0] == '_') return Undefined{name};
  if (obj.isNamespace()) {
    for (const auto& [k, v] : obj.namespaceData().attrs)
      if (k == name) return v;
    return Undefined{name};
  }
  Value method = boundMethod(obj, name);
  if (!method.isUndefined()) return method;
  if (obj.isDict()) {
    if (const Value* v = obj.dictData().find(Value(name))) return *v;
  }
  return Undefined{name};
}

Value getItem(const Value& obj, const Value& key) {
  if (obj.isUndefined()) failUndefined(obj);
  if (obj.isDict()) {
    if (const Value* v = obj.dictData().find(key)) return *v;
  } else if ((obj.isList() || obj.isString()) && (key.isInt() || key.isBool())) {
    if (obj.isList()) {
      if (auto i = normaliseIndex(key.asInt(), obj.items().size())) return obj.items()[*i];
    } else {
      const auto cps = codePoints(obj.asString());
      if (auto i = normaliseIndex(key.asInt(), cps.size())) return std::string(cps[*i]);
    }
    return Undefined{key.str()};
  }
  if (key.isString()) return getAttribute(obj, key.asString());
  return Undefined{key.str()};
}

Value sliceValue(const Value& obj, const Value& startV, const Value& stopV, const Value& stepV) {
  if (obj.isUndefined()) failUndefined(obj);
  const auto bound = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.isNone() || v.isUndefined()) return std::nullopt;
    if (!v.isInt() && !v.isBool()) fail(std::string("slice ") + what + " must be an integer or None");
    return v.asInt();
  };
  const int64_t step = bound(stepV, "step").value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  std::vector<std::string_view> cps;
  size_t size = 0;
  if (obj.isString()) {
    cps = codePoints(obj.asString());
    size = cps.size();
  } else if (obj.isList()) {
    size = obj.items().size();
  } else {
    fail("'" + obj.typeName() + "' object is not subscriptable");
  }
  const auto n = static_cast<int64_t>(size);
  const auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t start = adjust(bound(startV, "start"), step > 0 ? 0 : n - 1);
  const int64_t stop = adjust(bound(stopV, "stop"), step > 0 ? n : -1);
  std::vector<size_t> picked;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picked.push_back(static_cast<size_t>(i));
  if (obj.isString()) {
    std::string out;
    for (size_t i : picked) out += cps[i];
    return out;
  }
  std::vector<Value> out;
  for (size_t i : picked) out.push_back(obj.items()[i]);
  return Value::list(std::move(out), obj.isTuple());
}

std::vector<std::pair<std::string, Value>> globalFunctions() {
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("range", Value::callable("range", [](CallArgs& a) {
    if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3) fail("range() expects 1 to 3 integers");
    for (const auto& v : a.positional)
      if (!v.isInt() && !v.isBool()) fail("'" + v.typeName() + "' object cannot be interpreted as an integer");
    int64_t start = 0, stop = 0, step = 1;
    if (a.positional.size() == 1) {
      stop = a.positional[0].asInt();
    } else {
      start = a.positional[0].asInt();
      stop = a.positional[1].asInt();
      if (a.positional.size() == 3) step = a.positional[2].asInt();
    }
    if (step == 0) fail("range() arg 3 must not be zero");
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= 100000) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      out.emplace_back(i);
    }
    return Value::list(std::move(out));
  }));
  const auto keywordsToDict = [](CallArgs& a, const char* what) {
    DictData d;
    if (a.positional.size() > 1) fail(std::string(what) + "() takes at most one positional argument");
    if (!a.positional.empty()) {
      if (!a.positional[0].isDict()) fail(std::string(what) + "() positional argument must be a dict");
      d = a.positional[0].dictData();
    }
    for (const auto& [k, v] : a.keyword) d.set(Value(k), v);
    return d;
  };
  g.emplace_back("dict", Value::callable("dict", [keywordsToDict](CallArgs& a) { return Value::dict(keywordsToDict(a, "dict")); }));
  g.emplace_back("namespace", Value::callable("namespace", [keywordsToDict](CallArgs& a) {
    NamespaceData ns;
    for (const auto& [k, v] : keywordsToDict(a, "namespace").items) {
      const std::string key = k.str();
      if (!key.empty() && key[0] == '_')
        fail("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" + key + "'");
      ns.attrs.emplace_back(key, v);
    }
    return Value::namespaceObject(std::move(ns));
  }));
  g.emplace_back("raise_exception", Value::callable("raise_exception", [](CallArgs& a) -> Value {
    ArgReader r(a, "raise_exception");
    RenderError e;
    e.message = r.get(0, "message").str();
    e.raised = true;
    throw e;
  }));
  g.emplace_back("strftime_now", Value::callable("strftime_now", [](CallArgs& a) {
    ArgReader r(a, "strftime_now");
    const std::string format = requireString(r.get(0, "format"), "strftime_now() format");
    r.finish();
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[256];
    // The format comes from the template by design (transformers passes it to datetime.strftime).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &local);
#pragma GCC diagnostic pop
    return std::string(buf, n);
  }));
  return g;
}

}  // namespace zipmoe::jinja
