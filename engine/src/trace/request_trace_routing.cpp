// RequestTraceRouting: one TraceRouting per served request (zipmoe/trace/request_routing.h).
#include <string>

#include "zipmoe/base/error.h"
#include "zipmoe/trace/request_routing.h"

namespace zipmoe {

RequestTraceRouting::RequestTraceRouting(std::shared_ptr<const ActivationTrace> trace, int moeLayers, int experts,
                                         int k, uint64_t seed)
    : trace_(std::move(trace)), moeLayers_(moeLayers), experts_(experts), k_(k), seed_(seed) {
  if (!trace_ || trace_->numPrompts() < 1) throw Error("per-request trace routing: the trace has no prompt");
  TraceRouting check(trace_, moeLayers_, experts_, k_, seed_);  // validates the shapes now, not at the first request
}

void RequestTraceRouting::setPlan(Plan plan) {
  for (size_t i = 0; i < plan.prompts.size(); ++i)
    if (plan.prompts[i] < 0 || plan.prompts[i] >= trace_->numPrompts())
      throw Error("per-request trace routing: prompt " + std::to_string(plan.prompts[i]) + " (entry " + std::to_string(i) +
                  " of the plan) is outside the trace's " + std::to_string(trace_->numPrompts()) + " prompts");
  TraceRouting check(trace_, moeLayers_, experts_, k_, seed_);
  check.setContinuation(plan.continuation);  // throws naming a continuation out of range
  plan_ = std::move(plan);
  planned_ = 0;
}

void RequestTraceRouting::setSegments(std::vector<Segment> segments) {
  segments_ = std::move(segments);
  for (const Segment& s : segments_) routerOf(s.request);
}

void RequestTraceRouting::release(uint64_t request) { routers_.erase(request); }

TraceRouting& RequestTraceRouting::routerOf(uint64_t request) {
  auto it = routers_.find(request);
  if (it == routers_.end()) {
    ++seen_;
    const uint64_t n = planned_++;
    auto router = std::make_unique<TraceRouting>(trace_, moeLayers_, experts_, k_, seed_ + n);
    router->setContinuation(plan_.continuation);
    router->setPrompt(plan_.prompts.empty() ? static_cast<int>(n % static_cast<uint64_t>(trace_->numPrompts()))
                                            : plan_.prompts[n % plan_.prompts.size()]);
    it = routers_.emplace(request, std::move(router)).first;
  }
  return *it->second;
}

int RequestTraceRouting::promptOf(uint64_t request) const {
  const auto it = routers_.find(request);
  return it == routers_.end() ? -1 : it->second->prompt();
}

void RequestTraceRouting::choose(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) {
  int64_t offset = 0;
  for (const Segment& s : segments_) {
    if (s.tokens <= 0) continue;
    if (offset + s.tokens > tokens) break;
    routerOf(s.request).choose(moeLayer, s.tokens, k,
                               out.subspan(static_cast<size_t>(offset * k), static_cast<size_t>(s.tokens * k)));
    offset += s.tokens;
  }
  if (offset != tokens)
    throw Error("per-request trace routing: the scheduler announced " + std::to_string(offset) +
                " tokens for this forward, the model routes " + std::to_string(tokens) +
                " (a model with --per-request routing must be driven by the serving scheduler)");
}

bool RequestTraceRouting::peek(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) {
  int64_t offset = 0;
  for (const Segment& s : segments_) {
    if (s.tokens <= 0) continue;
    if (offset + s.tokens > tokens) return false;
    routerOf(s.request).peek(moeLayer, s.tokens, k,
                             out.subspan(static_cast<size_t>(offset * k), static_cast<size_t>(s.tokens * k)));
    offset += s.tokens;
  }
  return offset == tokens;
}

}  // namespace zipmoe
