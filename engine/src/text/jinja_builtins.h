// Internal: what a Jinja template can call — attribute and item access (with the bound methods of
// str and dict), slicing, filters, tests and the global functions transformers provides.
//
// Attribute access follows jinja2's sandboxed environment: `a.b` looks for a (safe) Python attribute
// first and then an item, `a['b']` the other way round; a miss yields undefined; names starting with
// an underscore are never attributes. Filters and tests take their arguments as Python would (position
// or keyword, with jinja2's defaults). The globals are range, namespace, dict, raise_exception and
// strftime_now, as transformers' chat-template environment defines them.
// Thread-safety: stateless functions. Cost: proportional to the values involved.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "text/jinja_value.h"

namespace zipmoe::jinja {

Value getAttribute(const Value& obj, const std::string& name);
Value getItem(const Value& obj, const Value& key);
Value sliceValue(const Value& obj, const Value& start, const Value& stop, const Value& step);

bool hasFilter(const std::string& name);
bool hasTest(const std::string& name);
Value applyFilter(const std::string& name, const Value& input, CallArgs& args);
bool applyTest(const std::string& name, const Value& input, CallArgs& args);

std::vector<std::pair<std::string, Value>> globalFunctions();

// Reads Python-style arguments: by position, else by keyword, else the default. finish() fails for
// arguments nobody asked for.
class ArgReader {
 public:
  ArgReader(CallArgs& args, std::string function) : args_(args), function_(std::move(function)) {}
  Value get(size_t position, const char* name, Value fallback = Value());
  void finish() const;

 private:
  CallArgs& args_;
  std::string function_;
  size_t positionalUsed_ = 0, keywordUsed_ = 0;
};

}  // namespace zipmoe::jinja
