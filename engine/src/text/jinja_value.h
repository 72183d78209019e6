// Internal: the values a Jinja template computes with, with Python's semantics.
//
// Chat templates are Python jinja2 programs, so a value behaves like the Python object jinja2 would
// hold: undefined (renders empty, fails on arithmetic), None, bool, int, float, str (UTF-8; length,
// indexing and slicing count code points), list, tuple, dict (insertion-ordered), namespace (the one
// mutable object, shared by reference) and callables (filters-as-methods, macros, globals). This file
// declares the value and the Python operations on it: truthiness, str() and repr(), ==, <, `in`,
// arithmetic, iteration, and json.dumps as transformers' `tojson` calls it.
// Thread-safety: values are immutable except namespaces; a render owns its values. Cost: small strings
// are copied, containers shared.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zipmoe::jinja {

class Value;

// Bounds on what one render may build (a template is untrusted code from a model's files): a string
// or the rendered output at most kMaxValueBytes, a list at most kMaxValueItems.
constexpr size_t kMaxValueBytes = size_t{16} << 20;
constexpr size_t kMaxValueItems = size_t{1} << 20;

struct Undefined {
  std::string name;  // what was looked up, for error messages ("'x' is undefined")
};
struct None {};
struct ListData {
  std::vector<Value> items;
  bool tuple = false;
};
struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order, unique keys
  const Value* find(const Value& key) const;
  void set(const Value& key, Value value);
};
struct NamespaceData {
  std::vector<std::pair<std::string, Value>> attrs;
};
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
struct CallableData {
  std::string name;
  std::function<Value(CallArgs&)> fn;
};

class Value {
 public:
  using Storage = std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<const ListData>,
                               std::shared_ptr<const DictData>, std::shared_ptr<NamespaceData>,
                               std::shared_ptr<const CallableData>>;
  Value() : v_(Undefined{}) {}
  Value(Undefined u) : v_(std::move(u)) {}
  Value(None) : v_(None{}) {}
  Value(bool b) : v_(b) {}
  Value(int64_t i) : v_(i) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(DictData data);
  static Value callable(std::string name, std::function<Value(CallArgs&)> fn);
  static Value namespaceObject(NamespaceData data);

  bool isUndefined() const { return std::holds_alternative<Undefined>(v_); }
  bool isNone() const { return std::holds_alternative<None>(v_); }
  bool isBool() const { return std::holds_alternative<bool>(v_); }
  bool isInt() const { return std::holds_alternative<int64_t>(v_); }  // not bool
  bool isFloat() const { return std::holds_alternative<double>(v_); }
  bool isNumber() const { return isBool() || isInt() || isFloat(); }
  bool isString() const { return std::holds_alternative<std::string>(v_); }
  bool isList() const { return std::holds_alternative<std::shared_ptr<const ListData>>(v_); }  // list or tuple
  bool isTuple() const { return isList() && listData().tuple; }
  bool isDict() const { return std::holds_alternative<std::shared_ptr<const DictData>>(v_); }
  bool isNamespace() const { return std::holds_alternative<std::shared_ptr<NamespaceData>>(v_); }
  bool isCallable() const { return std::holds_alternative<std::shared_ptr<const CallableData>>(v_); }

  // The typed accessors fail with a TypeError-like message (never std::bad_variant_access) when the
  // value is of another type: a template may pass anything anywhere.
  bool asBool() const { return get<bool>("bool"); }
  int64_t asInt() const;  // int or bool
  double asDouble() const;  // any number
  const std::string& asString() const { return get<std::string>("str"); }
  const std::vector<Value>& items() const { return listData().items; }
  const ListData& listData() const { return *get<std::shared_ptr<const ListData>>("list"); }
  const DictData& dictData() const { return *get<std::shared_ptr<const DictData>>("dict"); }
  NamespaceData& namespaceData() const { return *get<std::shared_ptr<NamespaceData>>("namespace"); }
  const CallableData& callableData() const { return *get<std::shared_ptr<const CallableData>>("callable"); }
  const std::string& undefinedName() const { return get<Undefined>("undefined").name; }

  // Python's type name ("str", "int", "list", "dict", "NoneType", "Undefined", ...).
  std::string typeName() const;
  bool truthy() const;
  std::string str() const;   // str(value); undefined → ""
  std::string repr() const;  // repr(value)
  const Storage& storage() const { return v_; }

 private:
  template <class T>
  const T& get(const char* expected) const {
    if (const T* p = std::get_if<T>(&v_)) return *p;
    typeMismatch(expected);
  }
  [[noreturn]] void typeMismatch(const char* expected) const;
  Storage v_;
};

// A namespace is the one mutable value, so it can come to contain itself ({% set ns.x = [ns] %}), a
// cycle of shared pointers that would never be freed. A render holds a NamespaceCollector while it
// runs: every namespace created meanwhile is emptied when it ends, which breaks such cycles (the
// render returns only text, so no namespace is used after it). Thread-safety: per thread.
class NamespaceCollector {
 public:
  NamespaceCollector();
  ~NamespaceCollector();
  NamespaceCollector(const NamespaceCollector&) = delete;
  NamespaceCollector& operator=(const NamespaceCollector&) = delete;

 private:
  std::vector<std::weak_ptr<NamespaceData>>* outer_;
  std::vector<std::weak_ptr<NamespaceData>> created_;
};

// The error a template raises while rendering; ChatTemplate turns it into zipmoe::Error with the place.
struct RenderError {
  std::string message;
  int line = 0, column = 0;  // 0 until the evaluator attaches the expression's place
  bool raised = false;       // from the template's own raise_exception()
};
[[noreturn]] void fail(const std::string& message);
[[noreturn]] void failUndefined(const Value& v);

bool equals(const Value& a, const Value& b);
bool lessThan(const Value& a, const Value& b);  // Python <; fails for unorderable types
bool contains(const Value& container, const Value& item);  // `item in container`
Value add(const Value& a, const Value& b);
Value arithmetic(const std::string& op, const Value& a, const Value& b);  // - * / // % **
Value negate(const Value& a);
// The items a for loop (or list()) sees: list elements, dict keys, string characters; undefined → none.
std::vector<Value> iterate(const Value& v);
// len(); fails for values without a length.
int64_t length(const Value& v);

// json.dumps(value, ensure_ascii, indent, separators, sort_keys); fails for non-JSON values.
struct JsonOptions {
  bool ensureAscii = false;
  std::optional<std::string> indent;  // None, or the indent string (an int n means n spaces)
  std::optional<std::pair<std::string, std::string>> separators;
  bool sortKeys = false;
};
std::string toJson(const Value& v, const JsonOptions& options);
Value fromJson(const nlohmann::ordered_json& j);

// UTF-8 helpers with Python's notion of characters and whitespace.
std::vector<std::string_view> codePoints(std::string_view s);
bool isPySpace(uint32_t codePoint);
uint32_t decodeCodePoint(std::string_view ch);
std::string encodeCodePoint(uint32_t cp);
std::string pyStrip(std::string_view s, bool left, bool right, const std::optional<std::string>& chars);
std::string pyFloatRepr(double d);

// Bounds str()/repr()/tojson of containers: nesting (a namespace may contain itself) and size (a list
// may hold the same list twice, doubling per level). One PrintLevel per container being printed.
class PrintLevel {
 public:
  PrintLevel();
  ~PrintLevel();
  PrintLevel(const PrintLevel&) = delete;
  PrintLevel& operator=(const PrintLevel&) = delete;
};
void checkPrinted(const std::string& out);  // throws when a printed value grows past kMaxValueBytes
// Appends `piece` to a string the template is building, throwing before it would pass kMaxValueBytes
// (a separator, replacement or indent may be large and repeated many times).
void appendBounded(std::string& out, std::string_view piece);
// `n` spaces (none when n <= 0) for an indent width, refused past kMaxValueBytes.
std::string spaces(int64_t n);

}  // namespace zipmoe::jinja
