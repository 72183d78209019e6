// Internal: the Jinja evaluator — renders a parsed template against a set of variables.
//
// Scoping follows jinja2: the template has one top-level scope; each for-loop iteration and each macro
// call gets a fresh child scope (so `{% set %}` inside a loop does not leak out — templates use
// namespace() for that); if-blocks share their enclosing scope. Runtime errors are RenderError with the
// line and column of the innermost expression or statement that failed.
// Thread-safety: render() only reads the tree; concurrent renders are independent. Cost: linear in
// the work the template does.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "text/jinja_ast.h"

namespace zipmoe::jinja {

std::string render(const Body& body, const std::vector<std::pair<std::string, Value>>& variables);

}  // namespace zipmoe::jinja
