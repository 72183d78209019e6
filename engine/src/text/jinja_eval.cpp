// The Jinja evaluator: statements write to an output string, expressions compute Values.
//
// Statement semantics are jinja2's: a for loop iterates a snapshot of its iterable (dicts yield keys,
// strings characters, undefined nothing), applies its `if` filter first so that `loop.index`, `length`
// and `last` count only the items kept, binds `loop` (index, index0, revindex, revindex0, first, last,
// length, previtem, nextitem, depth, cycle) and runs `else` when nothing was iterated; break/continue
// come from the loopcontrols extension transformers enables. `set` assigns in the current scope, or an
// attribute of a namespace; macros capture the scope they were defined in and render to a string.
// Expressions short-circuit `and`/`or` and return operands as Python does; comparison chains
// evaluate like Python's.
#include "text/jinja_eval.h"

#include "text/jinja_builtins.h"

namespace zipmoe::jinja {
namespace {

struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get())
      for (const auto& [k, v] : s->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void set(const std::string& name, Value value) {
    for (auto& [k, v] : vars)
      if (k == name) {
        v = std::move(value);
        return;
      }
    vars.emplace_back(name, std::move(value));
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { Normal, Break, Continue };

template <class F>
auto located(int line, int column, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (RenderError& e) {
    if (e.line == 0) {
      e.line = line;
      e.column = column;
    }
    throw;
  }
}

// A template is untrusted code: one render may take at most kMaxSteps steps (statements and
// expressions evaluated), recurse kMaxDepth deep and write kMaxValueBytes of output; past any of
// these it fails with an error instead of hanging, overflowing the stack or exhausting memory. Real
// chat templates take a few hundred steps per message.
constexpr uint64_t kMaxSteps = 2'000'000;
constexpr int kMaxDepth = 1000;
constexpr int kMaxMacroDepth = 100;

class Evaluator {
 public:
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    const Step step(*this);
    for (const auto& node : body) {
      const Flow flow = located(node->line, node->column, [&] { return execNode(*node, scope, out); });
      if (out.size() > kMaxValueBytes)
        fail("the template's output grows past " + std::to_string(kMaxValueBytes) + " bytes");
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    const Step step(*this);
    return located(e.line, e.column, [&] { return evalExpr(e, scope); });
  }

 private:
  // One step of the render, and one level of its recursion while it lasts.
  struct Step {
    explicit Step(Evaluator& ev) : ev_(ev) {
      if (++ev_.steps_ > kMaxSteps) fail("the template takes more than " + std::to_string(kMaxSteps) + " steps");
      if (++ev_.recursion_ > kMaxDepth) fail("the template recurses deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~Step() { --ev_.recursion_; }
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;
    Evaluator& ev_;
  };

  int depth_ = 0;  // macro calls
  int recursion_ = 0;
  uint64_t steps_ = 0;

  Flow execNode(const Node& n, const ScopePtr& scope, std::string& out) {
    switch (n.kind) {
      case Node::Kind::Text: out += n.text; return Flow::Normal;
      case Node::Kind::Output: out += eval(*n.expr, scope).str(); return Flow::Normal;
      case Node::Kind::If:
        for (const auto& [cond, body] : n.branches)
          if (!cond || eval(*cond, scope).truthy()) return exec(body, scope, out);
        return Flow::Normal;
      case Node::Kind::For: execFor(n, scope, out); return Flow::Normal;
      case Node::Kind::Set: assign(*n.target, eval(*n.expr, scope), scope); return Flow::Normal;
      case Node::Kind::SetBlock: {
        std::string captured;
        exec(n.body, child(scope), captured);
        assign(*n.target, applyFilters(n.filters, Value(captured), scope), scope);
        return Flow::Normal;
      }
      case Node::Kind::FilterBlock: {
        std::string captured;
        exec(n.body, child(scope), captured);
        out += applyFilters(n.filters, Value(captured), scope).str();
        return Flow::Normal;
      }
      case Node::Kind::Macro: scope->set(n.name, makeMacro(n, scope)); return Flow::Normal;
      case Node::Kind::Break: return Flow::Break;
      case Node::Kind::Continue: return Flow::Continue;
      case Node::Kind::Scope: return exec(n.body, scope, out);
    }
    return Flow::Normal;
  }

  Value applyFilters(const std::vector<ExprPtr>& filters, Value v, const ScopePtr& scope) {
    for (const auto& f : filters) {
      CallArgs args = evalArgs(*f, scope, 1);
      v = located(f->line, f->column, [&] { return applyFilter(f->name, v, args); });
    }
    return v;
  }

  void bindTargets(const std::vector<std::string>& targets, const Value& item, Scope& scope) {
    if (targets.size() == 1) {
      scope.set(targets[0], item);
      return;
    }
    const auto parts = iterate(item);
    if (parts.size() != targets.size())
      fail(parts.size() < targets.size() ? "not enough values to unpack (expected " + std::to_string(targets.size()) +
                                               ", got " + std::to_string(parts.size()) + ")"
                                         : "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], parts[i]);
  }

  void execFor(const Node& n, const ScopePtr& scope, std::string& out) {
    std::vector<Value> items = iterate(eval(*n.expr, scope));
    if (n.cond) {
      std::vector<Value> kept;
      for (auto& item : items) {
        auto s = child(scope);
        bindTargets(n.targets, item, *s);
        if (eval(*n.cond, s).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(n.elseBody, scope, out);
      return;
    }
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      auto s = child(scope);
      const auto idx = static_cast<size_t>(i);
      bindTargets(n.targets, items[idx], *s);
      DictData loop;
      loop.items = {
          {Value("index"), Value(i + 1)},
          {Value("index0"), Value(i)},
          {Value("revindex"), Value(length - i)},
          {Value("revindex0"), Value(length - i - 1)},
          {Value("first"), Value(i == 0)},
          {Value("last"), Value(i == length - 1)},
          {Value("length"), Value(length)},
          {Value("depth"), Value(int64_t{1})},
          {Value("depth0"), Value(int64_t{0})},
          {Value("previtem"), i > 0 ? items[idx - 1] : Value(Undefined{"previtem"})},
          {Value("nextitem"), i + 1 < length ? items[idx + 1] : Value(Undefined{"nextitem"})},
          {Value("cycle"), Value::callable("loop.cycle", [i](CallArgs& a) {
             if (a.positional.empty()) fail("no items for cycling given");
             return a.positional[static_cast<size_t>(i) % a.positional.size()];
           })},
      };
      s->set("loop", Value::dict(std::move(loop)));
      if (exec(n.body, s, out) == Flow::Break) break;
    }
  }

  void assign(const Expr& target, const Value& v, const ScopePtr& scope) {
    if (target.kind == Expr::Kind::Name) {
      scope->set(target.name, v);
    } else if (target.kind == Expr::Kind::Tuple) {
      std::vector<std::string> names;
      for (const auto& t : target.args) names.push_back(t->name);
      bindTargets(names, v, *scope);
    } else {  // ns.attr
      const Value ns = eval(*target.args[0], scope);
      if (!ns.isNamespace()) fail("cannot assign attribute on non-namespace object");
      if (!target.name.empty() && target.name[0] == '_')
        fail("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" + target.name + "'");
      auto& attrs = ns.namespaceData().attrs;
      for (auto& [k, old] : attrs)
        if (k == target.name) {
          old = v;
          return;
        }
      attrs.emplace_back(target.name, v);
    }
  }

  // The macro is stored in the scope it captures, so it holds that scope weakly: a strong reference
  // would be a cycle that is never freed.
  Value makeMacro(const Node& n, const ScopePtr& defining) {
    const Node* node = &n;
    const std::weak_ptr<Scope> definingWeak = defining;
    return Value::callable(n.name, [this, node, definingWeak](CallArgs& a) -> Value {
      if (a.positional.size() > node->params.size())
        fail("macro '" + node->name + "' takes not more than " + std::to_string(node->params.size()) + " argument(s)");
      const ScopePtr outer = definingWeak.lock();
      if (!outer) fail("macro '" + node->name + "' called outside the scope that defined it");
      if (++depth_ > kMaxMacroDepth) fail("maximum macro recursion depth exceeded");
      auto s = child(outer);
      for (size_t i = 0; i < node->params.size(); ++i) {
        const auto& [param, def] = node->params[i];
        const Value* given = i < a.positional.size() ? &a.positional[i] : nullptr;
        for (const auto& [k, v] : a.keyword)
          if (k == param) given = &v;
        s->set(param, given ? *given : def ? eval(*def, s) : Value(Undefined{param}));
      }
      for (const auto& [k, v] : a.keyword) {
        bool known = false;
        for (const auto& p : node->params) known = known || p.first == k;
        if (!known) fail("macro '" + node->name + "' has no argument '" + k + "'");
      }
      std::string out;
      exec(node->body, s, out);
      --depth_;
      return out;
    });
  }

  CallArgs evalArgs(const Expr& e, const ScopePtr& scope, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i], scope));
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, eval(*v, scope));
    return a;
  }

  bool compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "<") return lessThan(a, b);
    if (op == ">") return lessThan(b, a);
    if (op == "<=") return !lessThan(b, a);
    if (op == ">=") return !lessThan(a, b);
    if (op == "in") return contains(b, a);
    return !contains(b, a);  // notin
  }

  Value evalExpr(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: {
        const Value* v = scope->find(e.name);
        return v ? *v : Value(Undefined{e.name});
      }
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        std::vector<Value> items;
        for (const auto& a : e.args) items.push_back(eval(*a, scope));
        return Value::list(std::move(items), e.kind == Expr::Kind::Tuple);
      }
      case Expr::Kind::Dict: {
        DictData d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) d.set(eval(*e.args[i], scope), eval(*e.args[i + 1], scope));
        return Value::dict(std::move(d));
      }
      case Expr::Kind::Attr: return getAttribute(eval(*e.args[0], scope), e.name);
      case Expr::Kind::Item: {
        const Value obj = eval(*e.args[0], scope);
        return getItem(obj, eval(*e.args[1], scope));
      }
      case Expr::Kind::Slice: {
        const Value obj = eval(*e.args[0], scope);
        const auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i], scope) : Value(None{}); };
        return sliceValue(obj, part(1), part(2), part(3));
      }
      case Expr::Kind::Call: {
        const Value callee = eval(*e.args[0], scope);
        CallArgs a = evalArgs(e, scope, 1);
        if (callee.isUndefined()) failUndefined(callee);
        if (!callee.isCallable()) fail("'" + callee.typeName() + "' object is not callable");
        return callee.callableData().fn(a);
      }
      case Expr::Kind::Filter: {
        const Value input = eval(*e.args[0], scope);
        CallArgs a = evalArgs(e, scope, 1);
        return applyFilter(e.name, input, a);
      }
      case Expr::Kind::Test: {
        const Value input = eval(*e.args[0], scope);
        CallArgs a = evalArgs(e, scope, 1);
        return applyTest(e.name, input, a) != e.negated;
      }
      case Expr::Kind::Not: return !eval(*e.args[0], scope).truthy();
      case Expr::Kind::Neg: return negate(eval(*e.args[0], scope));
      case Expr::Kind::Pos: {
        Value v = eval(*e.args[0], scope);
        if (v.isUndefined()) failUndefined(v);
        if (!v.isNumber()) fail("bad operand type for unary +: '" + v.typeName() + "'");
        return v.isBool() ? Value(v.asInt()) : v;
      }
      case Expr::Kind::Binary: {
        const Value a = eval(*e.args[0], scope);
        const Value b = eval(*e.args[1], scope);
        if (e.name == "~") {
          std::string joined = a.str();
          const std::string right = b.str();
          if (joined.size() + right.size() > kMaxValueBytes)
            fail("the template builds a string of more than " + std::to_string(kMaxValueBytes) + " bytes");
          return joined + right;
        }
        if (e.name == "+") return add(a, b);
        return arithmetic(e.name, a, b);
      }
      case Expr::Kind::And: {
        Value a = eval(*e.args[0], scope);
        return a.truthy() ? eval(*e.args[1], scope) : a;
      }
      case Expr::Kind::Or: {
        Value a = eval(*e.args[0], scope);
        return a.truthy() ? a : eval(*e.args[1], scope);
      }
      case Expr::Kind::Compare: {
        Value left = eval(*e.args[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1], scope);
          if (!compare(e.ops[i], left, right)) return false;
          left = std::move(right);
        }
        return true;
      }
      case Expr::Kind::CondExpr:
        if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value(Undefined{});
    }
    return Value();
  }
};

}  // namespace

std::string render(const Body& body, const std::vector<std::pair<std::string, Value>>& variables) {
  const NamespaceCollector namespaces;  // declared first: it empties the namespaces after the scopes go
  auto globals = std::make_shared<Scope>();
  for (auto& [name, v] : globalFunctions()) globals->set(name, std::move(v));
  auto top = child(globals);
  for (const auto& [name, v] : variables) top->set(name, v);
  Evaluator evaluator;
  std::string out;
  evaluator.exec(body, top, out);
  return out;
}

}  // namespace zipmoe::jinja
