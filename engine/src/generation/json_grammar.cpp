// JSON schema → Grammar (see json_grammar.h).
#include "generation/json_grammar.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "zipmoe/base/error.h"

namespace zipmoe::constrain {
namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxKeys = 64;      // properties of one object (the matcher keeps a 64-bit set)
constexpr int kMaxLiterals = 64;  // enum values

void addFirst(Node& n, uint8_t b) { n.first[b >> 3] = static_cast<uint8_t>(n.first[b >> 3] | (1u << (b & 7))); }

std::string describeByte(int b) {
  if (b >= 0x21 && b < 0x7f) return std::string("'") + static_cast<char>(b) + "'";
  return "byte " + std::to_string(b);
}

class Compiler {
 public:
  explicit Compiler(const json& root) : root_(root) {}

  Grammar finish(int rootNode) {
    g_.root = rootNode;
    computeFirstBytes();
    computeMinBytes();
    checkUnions();
    return std::move(g_);
  }

  int compile(const json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) throw Error(path + ": the schema `false` allows no value");
      return any();
    }
    if (!s.is_object()) throw Error(path + ": a schema must be an object or true");
    static const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema",
                                                       "$id", "$comment", "format", "strict", "$defs",
                                                       "definitions", "name", "readOnly", "writeOnly", "deprecated"};
    static const std::set<std::string> kKnown = {"type", "properties", "required", "additionalProperties", "items",
                                                 "minItems", "maxItems", "minLength", "maxLength", "enum", "const",
                                                 "anyOf", "oneOf", "$ref"};
    for (const auto& [key, value] : s.items()) {
      if (kAnnotations.count(key) || kKnown.count(key)) continue;
      throw Error(path + "/" + key + ": the schema keyword '" + key +
                  "' is not supported by constrained decoding (supported: type, properties, required, "
                  "additionalProperties, items, minItems, maxItems, minLength, maxLength, enum, const, anyOf, "
                  "oneOf, $ref)");
    }
    if (s.contains("$ref")) return ref(s.at("$ref"), path + "/$ref");
    if (s.contains("enum")) return enumNode(s.at("enum"), path + "/enum");
    if (s.contains("const")) return literal({s.at("const").dump()});
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& alts = s.at(key);
      if (!alts.is_array() || alts.empty()) throw Error(path + "/" + key + ": must be a non-empty array of schemas");
      std::vector<int> options;
      for (size_t i = 0; i < alts.size(); ++i) options.push_back(compile(alts[i], path + "/" + key + "/" + std::to_string(i)));
      return options.size() == 1 ? options[0] : unionOf(std::move(options), path + "/" + key);
    }
    if (s.contains("type")) {
      const json& t = s.at("type");
      if (t.is_string()) return typed(t.get<std::string>(), s, path);
      if (!t.is_array() || t.empty()) throw Error(path + "/type: must be a type name or a non-empty list of them");
      std::vector<int> options;
      for (size_t i = 0; i < t.size(); ++i) {
        if (!t[i].is_string()) throw Error(path + "/type/" + std::to_string(i) + ": must be a type name");
        options.push_back(typed(t[i].get<std::string>(), s, path));
      }
      return options.size() == 1 ? options[0] : unionOf(std::move(options), path + "/type");
    }
    if (s.contains("properties") || s.contains("additionalProperties")) return typed("object", s, path);
    if (s.contains("items")) return typed("array", s, path);
    if (s.contains("minLength") || s.contains("maxLength")) return typed("string", s, path);
    return any();
  }

  int toolCall(const std::vector<ToolSpec>& tools) {
    const int id = add(Node{});
    Node n;
    n.kind = NodeKind::ToolCall;
    for (size_t i = 0; i < tools.size(); ++i) {
      const std::string where = "tools[" + std::to_string(i) + "].function.parameters";
      json params;
      try {
        params = json::parse(tools[i].parametersJson);
      } catch (const json::exception& e) {
        throw Error(where + ": not JSON: " + e.what());
      }
      root_ = params;
      refs_.clear();
      int args = compile(params, where);
      if (g_.nodes[static_cast<size_t>(args)].kind != NodeKind::Object) {
        const bool untyped = params.is_boolean() || (params.is_object() && !params.contains("type") &&
                                                     !params.contains("anyOf") && !params.contains("oneOf") &&
                                                     !params.contains("enum") && !params.contains("const"));
        if (!untyped) throw Error(where + ": a tool's parameters must be an object schema");
        args = anyObject();
      }
      n.literals.push_back("{\"name\": " + json(tools[i].name).dump() + ", \"arguments\": ");
      n.values.push_back(args);
    }
    g_.nodes[static_cast<size_t>(id)] = std::move(n);
    return id;
  }

  int anyObject() {
    const int a = any();
    Node n;
    n.kind = NodeKind::Object;
    n.additional = a;
    n.keyString = keyString();
    return add(std::move(n));
  }

 private:
  int add(Node n) {
    g_.nodes.push_back(std::move(n));
    return static_cast<int>(g_.nodes.size()) - 1;
  }

  int literal(std::vector<std::string> texts) {
    Node n;
    n.kind = NodeKind::Literal;
    n.literals = std::move(texts);
    return add(std::move(n));
  }

  int enumNode(const json& values, const std::string& path) {
    if (!values.is_array() || values.empty()) throw Error(path + ": must be a non-empty array");
    if (values.size() > static_cast<size_t>(kMaxLiterals))
      throw Error(path + ": " + std::to_string(values.size()) + " values; constrained decoding supports at most " +
                  std::to_string(kMaxLiterals));
    std::vector<std::string> texts;
    for (const json& v : values) texts.push_back(v.dump());
    return literal(std::move(texts));
  }

  // A plain string (free object keys): one node per grammar.
  int keyString() {
    if (keyString_ >= 0) return keyString_;
    Node n;
    n.kind = NodeKind::String;
    keyString_ = add(std::move(n));
    return keyString_;
  }

  // Any JSON value: one node per grammar, built on first use.
  int any() {
    if (any_ >= 0) return any_;
    any_ = add(Node{});
    Node obj;
    obj.kind = NodeKind::Object;
    obj.additional = any_;
    obj.keyString = keyString();
    Node arr;
    arr.kind = NodeKind::Array;
    arr.items = any_;
    Node str;
    str.kind = NodeKind::String;
    Node num;
    num.kind = NodeKind::Number;
    Node u;
    u.kind = NodeKind::Union;
    u.options = {add(std::move(obj)), add(std::move(arr)), add(std::move(str)), add(std::move(num)),
                 literal({"true", "false", "null"})};
    g_.nodes[static_cast<size_t>(any_)] = std::move(u);
    return any_;
  }

  int unionOf(std::vector<int> options, const std::string& path) {
    Node u;
    u.kind = NodeKind::Union;
    for (int o : options) {
      const Node& n = g_.nodes[static_cast<size_t>(o)];
      if (n.kind == NodeKind::Union && !n.options.empty()) {
        u.options.insert(u.options.end(), n.options.begin(), n.options.end());
      } else {
        u.options.push_back(o);
      }
    }
    const int id = add(std::move(u));
    unionPaths_[id] = path;
    return id;
  }

  static int intField(const json& s, const char* key, const std::string& path, int fallback) {
    if (!s.contains(key)) return fallback;
    const json& v = s.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT_MAX)
      throw Error(path + "/" + key + ": must be a non-negative integer, not " + v.dump());
    return v.get<int>();
  }

  int typed(const std::string& type, const json& s, const std::string& path) {
    Node n;
    if (type == "string") {
      n.kind = NodeKind::String;
      n.minLength = intField(s, "minLength", path, 0);
      n.maxLength = intField(s, "maxLength", path, -1);
      if (n.maxLength >= 0 && n.maxLength < n.minLength) throw Error(path + "/maxLength: smaller than minLength");
      return add(std::move(n));
    }
    if (type == "number" || type == "integer") {
      n.kind = type == "number" ? NodeKind::Number : NodeKind::Integer;
      return add(std::move(n));
    }
    if (type == "boolean") return literal({"true", "false"});
    if (type == "null") return literal({"null"});
    if (type == "array") {
      n.kind = NodeKind::Array;
      n.minItems = intField(s, "minItems", path, 0);
      n.maxItems = intField(s, "maxItems", path, -1);
      if (n.maxItems >= 0 && n.maxItems < n.minItems) throw Error(path + "/maxItems: smaller than minItems");
      const int id = add(std::move(n));
      const int items = s.contains("items") ? compile(s.at("items"), path + "/items") : any();
      g_.nodes[static_cast<size_t>(id)].items = items;
      return id;
    }
    if (type == "object") return object(s, path);
    throw Error(path + "/type: unknown type '" + type + "' (expected object, array, string, number, integer, boolean or null)");
  }

  int object(const json& s, const std::string& path) {
    const int id = add(Node{});
    Node n;
    n.kind = NodeKind::Object;
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& r = s.at("required");
      if (!r.is_array()) throw Error(path + "/required: must be an array of property names");
      for (const json& k : r) {
        if (!k.is_string()) throw Error(path + "/required: must be an array of property names, not " + k.dump());
        required.insert(k.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      const json& props = s.at("properties");
      if (!props.is_object()) throw Error(path + "/properties: must be an object");
      if (props.size() > static_cast<size_t>(kMaxKeys))
        throw Error(path + "/properties: " + std::to_string(props.size()) + " properties; at most " +
                    std::to_string(kMaxKeys) + " are supported");
      for (const auto& [key, value] : props.items()) {
        n.keys.push_back(json(key).dump());
        n.values.push_back(compile(value, path + "/properties/" + key));
        n.required.push_back(required.erase(key) > 0);
      }
    }
    if (!required.empty()) throw Error(path + "/required: '" + *required.begin() + "' is not among the properties");
    if (n.keys.empty()) {
      const json extra = s.value("additionalProperties", json(true));
      if (extra.is_boolean() && !extra.get<bool>()) {
        n.additional = -1;  // {} only
      } else {
        n.additional = compile(extra, path + "/additionalProperties");
        n.keyString = keyString();
      }
    } else if (s.contains("additionalProperties") && !s.at("additionalProperties").is_boolean()) {
      compile(s.at("additionalProperties"), path + "/additionalProperties");  // checked, not generated
    }
    g_.nodes[static_cast<size_t>(id)] = std::move(n);
    return id;
  }

  int ref(const json& target, const std::string& path) {
    if (!target.is_string()) throw Error(path + ": must be a string");
    const std::string r = target.get<std::string>();
    if (auto it = refs_.find(r); it != refs_.end()) return it->second;
    const json* def = nullptr;
    if (r == "#") {
      def = &root_;
    } else {
      for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        const std::string p(prefix);
        if (r.rfind(p, 0) != 0) continue;
        const std::string container = p.substr(2, p.size() - 3);
        const std::string name = r.substr(p.size());
        if (root_.is_object() && root_.contains(container) && root_.at(container).is_object() &&
            root_.at(container).contains(name))
          def = &root_.at(container).at(name);
      }
    }
    if (def == nullptr) throw Error(path + ": cannot resolve '" + r + "' (only #, #/$defs/NAME and #/definitions/NAME)");
    // A placeholder first, so that a recursive definition refers to itself.
    const int id = add(Node{});
    refs_[r] = id;
    const int body = compile(*def, path + "(" + r + ")");
    g_.nodes[static_cast<size_t>(id)] = g_.nodes[static_cast<size_t>(body)];
    if (auto it = unionPaths_.find(body); it != unionPaths_.end()) unionPaths_[id] = it->second;
    return id;
  }

  void computeFirstBytes() {
    for (bool changed = true; changed;) {
      changed = false;
      for (Node& n : g_.nodes) {
        uint8_t before[32];
        std::copy(std::begin(n.first), std::end(n.first), before);
        switch (n.kind) {
          case NodeKind::Object: case NodeKind::ToolCall: addFirst(n, '{'); break;
          case NodeKind::Array: addFirst(n, '['); break;
          case NodeKind::String: addFirst(n, '"'); break;
          case NodeKind::Number: case NodeKind::Integer:
            addFirst(n, '-');
            for (uint8_t d = '0'; d <= '9'; ++d) addFirst(n, d);
            break;
          case NodeKind::Literal:
            for (const auto& l : n.literals)
              if (!l.empty()) addFirst(n, static_cast<uint8_t>(l[0]));
            break;
          case NodeKind::Union:
            for (int o : n.options)
              for (int i = 0; i < 32; ++i) n.first[i] = static_cast<uint8_t>(n.first[i] | g_.nodes[static_cast<size_t>(o)].first[i]);
            break;
        }
        if (!std::equal(std::begin(n.first), std::end(n.first), before)) changed = true;
      }
    }
  }

  void computeMinBytes() {
    constexpr int kInf = INT_MAX / 4;
    for (Node& n : g_.nodes) n.minBytes = kInf;
    auto at = [&](int i) { return g_.nodes[static_cast<size_t>(i)].minBytes; };
    for (bool changed = true; changed;) {
      changed = false;
      for (Node& n : g_.nodes) {
        int m = kInf;
        switch (n.kind) {
          case NodeKind::Object: {
            m = 2;
            bool firstKey = true;
            for (size_t i = 0; i < n.keys.size(); ++i) {
              if (!n.required[i]) continue;
              m += static_cast<int>(n.keys[i].size()) + 1 + at(n.values[i]) + (firstKey ? 0 : 1);
              firstKey = false;
            }
            break;
          }
          case NodeKind::Array: m = 2 + (n.minItems > 0 ? n.minItems * at(n.items) + n.minItems - 1 : 0); break;
          case NodeKind::String: m = 2 + n.minLength; break;
          case NodeKind::Number: case NodeKind::Integer: m = 1; break;
          case NodeKind::Literal:
            for (const auto& l : n.literals) m = std::min(m, static_cast<int>(l.size()));
            break;
          case NodeKind::Union:
            for (int o : n.options) m = std::min(m, at(o));
            break;
          case NodeKind::ToolCall:
            for (size_t i = 0; i < n.literals.size(); ++i)
              m = std::min(m, static_cast<int>(n.literals[i].size()) + at(n.values[i]) + 1);
            break;
        }
        m = std::min(m, kInf);
        if (m < n.minBytes) {
          n.minBytes = m;
          changed = true;
        }
      }
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (g_.nodes[i].minBytes >= kInf) throw Error("the schema allows no finite value (a required property refers to itself)");
  }

  void checkUnions() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& u = g_.nodes[i];
      if (u.kind != NodeKind::Union) continue;
      for (int b = 0; b < 256; ++b) {
        int count = 0;
        for (int o : u.options) count += g_.nodes[static_cast<size_t>(o)].mayStartWith(static_cast<uint8_t>(b)) ? 1 : 0;
        if (count > 1) {
          auto it = unionPaths_.find(static_cast<int>(i));
          throw Error((it != unionPaths_.end() ? it->second : std::string("anyOf")) + ": two alternatives can both start with " +
                      describeByte(b) + "; constrained decoding needs alternatives of different JSON types");
        }
      }
    }
  }

  Grammar g_;
  json root_;
  int any_ = -1, keyString_ = -1;
  std::map<std::string, int> refs_;
  std::map<int, std::string> unionPaths_;
};

}  // namespace

Grammar compileSchema(const nlohmann::ordered_json& schema) {
  Compiler c(schema);
  const int root = c.compile(schema, "");
  return c.finish(root);
}

Grammar anyObjectGrammar() {
  Compiler c(nlohmann::ordered_json::object());
  const int root = c.anyObject();
  return c.finish(root);
}

Grammar toolCallGrammar(const std::vector<ToolSpec>& tools) {
  if (tools.empty()) throw Error("tools: the list is empty");
  Compiler c(nlohmann::ordered_json::object());
  const int root = c.toolCall(tools);
  return c.finish(root);
}

}  // namespace zipmoe::constrain
