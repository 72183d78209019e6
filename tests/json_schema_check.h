// A JSON-schema check for tests — the subset constrained decoding supports (type, properties,
// required, additionalProperties, items, min/maxItems, min/maxLength, enum, anyOf), written
// independently of the grammar it checks. (No JSON-schema validator is packaged for C++ in Debian.)
#pragma once

#include <QString>

#include <nlohmann/json.hpp>

namespace zipmoe::testing {

using SchemaJson = nlohmann::ordered_json;

// Whether `v` follows `schema`.
inline bool follows(const SchemaJson& schema, const SchemaJson& v) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("enum")) {
    for (const auto& e : schema.at("enum"))
      if (e == v) return true;
    return false;
  }
  if (schema.contains("anyOf")) {
    for (const auto& s : schema.at("anyOf"))
      if (follows(s, v)) return true;
    return false;
  }
  if (!schema.contains("type")) return true;
  const SchemaJson& t = schema.at("type");
  if (t.is_array()) {
    for (const auto& one : t) {
      SchemaJson s = schema;
      s["type"] = one;
      if (follows(s, v)) return true;
    }
    return false;
  }
  const std::string type = t.get<std::string>();
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "string") {
    if (!v.is_string()) return false;
    const QString s = QString::fromStdString(v.get<std::string>());
    const auto chars = static_cast<int>(s.toUcs4().size());
    return chars >= schema.value("minLength", 0) && chars <= schema.value("maxLength", 1 << 30);
  }
  if (type == "array") {
    if (!v.is_array()) return false;
    if (static_cast<int>(v.size()) < schema.value("minItems", 0) || static_cast<int>(v.size()) > schema.value("maxItems", 1 << 30))
      return false;
    for (const auto& item : v)
      if (schema.contains("items") && !follows(schema.at("items"), item)) return false;
    return true;
  }
  if (type == "object") {
    if (!v.is_object()) return false;
    for (const auto& r : schema.value("required", SchemaJson::array()))
      if (!v.contains(r.get<std::string>())) return false;
    const SchemaJson props = schema.value("properties", SchemaJson::object());
    for (const auto& [k, value] : v.items()) {
      if (!props.contains(k)) {
        if (schema.value("additionalProperties", SchemaJson(true)) == SchemaJson(false)) return false;
        continue;
      }
      if (!follows(props.at(k), value)) return false;
    }
    return true;
  }
  return false;
}

}  // namespace zipmoe::testing
