// Jinja values as JSON: toJson reproduces Python's json.dumps byte for byte (separators, indent,
// ensure_ascii, NaN/Infinity), which transformers' `tojson` filter calls; fromJson turns a parsed
// nlohmann value (a chat's messages, tools) into template values.
#include "text/jinja_value.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace zipmoe::jinja {

namespace {

std::string jsonString(const std::string& s, bool ensureAscii) {
  std::string out = "\"";
  for (auto ch : codePoints(s)) {
    const uint32_t cp = decodeCodePoint(ch);
    char buf[16];
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensureAscii && cp > 0x7E)) {
          if (cp >= 0x10000) {
            const uint32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", cp);
          }
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string jsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return pyFloatRepr(d);
}

std::string jsonKey(const Value& k, bool ensureAscii) {
  if (k.isString()) return jsonString(k.asString(), ensureAscii);
  if (k.isBool()) return k.asBool() ? "\"true\"" : "\"false\"";
  if (k.isInt()) return "\"" + std::to_string(k.asInt()) + "\"";
  if (k.isFloat()) return "\"" + jsonFloat(k.asDouble()) + "\"";
  if (k.isNone()) return "\"null\"";
  fail("keys must be str, int, float, bool or None, not " + k.typeName());
}

void dumpJson(const Value& v, const JsonOptions& o, int depth, std::string& out) {
  const PrintLevel level;
  checkPrinted(out);
  if (v.isNone()) { out += "null"; return; }
  if (v.isBool()) { out += v.asBool() ? "true" : "false"; return; }
  if (v.isInt()) { out += std::to_string(v.asInt()); return; }
  if (v.isFloat()) { out += jsonFloat(v.asDouble()); return; }
  if (v.isString()) { out += jsonString(v.asString(), o.ensureAscii); return; }
  const std::string itemSep = o.separators ? o.separators->first : (o.indent ? "," : ", ");
  const std::string keySep = o.separators ? o.separators->second : ": ";
  const auto newline = [&](int d) {
    if (!o.indent) return;
    out += '\n';
    for (int i = 0; i < d; ++i) appendBounded(out, *o.indent);
  };
  if (v.isList()) {
    const auto& items = v.items();
    if (items.empty()) { out += "[]"; return; }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += itemSep;
      newline(depth + 1);
      dumpJson(items[i], o, depth + 1, out);
    }
    newline(depth);
    out += ']';
    return;
  }
  if (v.isDict()) {
    auto items = v.dictData().items;
    if (items.empty()) { out += "{}"; return; }
    if (o.sortKeys)
      std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return lessThan(a.first, b.first); });
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += itemSep;
      newline(depth + 1);
      out += jsonKey(items[i].first, o.ensureAscii) + keySep;
      dumpJson(items[i].second, o, depth + 1, out);
    }
    newline(depth);
    out += '}';
    return;
  }
  fail("Object of type " + v.typeName() + " is not JSON serializable");
}

}  // namespace

std::string toJson(const Value& v, const JsonOptions& options) {
  std::string out;
  dumpJson(v, options, 0, out);
  return out;
}

Value fromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return None{};
    case nlohmann::ordered_json::value_t::boolean: return j.get<bool>();
    case nlohmann::ordered_json::value_t::number_integer: return j.get<int64_t>();
    case nlohmann::ordered_json::value_t::number_unsigned: return static_cast<int64_t>(j.get<uint64_t>());
    case nlohmann::ordered_json::value_t::number_float: return j.get<double>();
    case nlohmann::ordered_json::value_t::string: return j.get<std::string>();
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(fromJson(e));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      DictData d;
      for (const auto& [k, e] : j.items()) d.items.emplace_back(Value(k), fromJson(e));
      return Value::dict(std::move(d));
    }
    default: return Undefined{};
  }
}

}  // namespace zipmoe::jinja
