// RequestRouting — a RoutingOverride that routes each served request on its own, and
// RequestTraceRouting, which replays one activation-trace prompt per request (serving benchmarks).
//
// A forward of the serving scheduler (zipmoe/serve/serve_scheduler.h) holds the tokens of several requests
// in step order. Before each forward the scheduler calls setSegments() with the request of each step
// and its token count; choose() then hands every request its own share of the forward's tokens. When
// a request ends the scheduler calls release(). A model loaded with such an override and served
// without a scheduler that tells it the segments throws from choose() (the tokens do not add up).
//
// RequestTraceRouting gives the n-th request it sees (in the order of first appearance in
// setSegments: the scheduler's admission order) trace prompt n mod the trace's prompts, replayed by
// its own TraceRouting (zipmoe/trace/activation_trace.h) seeded with seed + n: each request draws the
// experts of its own prompt, with the skew and per-prompt variation of a real model, so that
// schedules which group requests by expert usage (CoServe) see real differences between requests.
// A replay plan (setPlan) names the prompts instead — the n-th request seen since the plan replays
// prompts[n mod their count], seeded seed + n — and the Pólya-urn continuation τ of every request's
// TraceRouting (setContinuation): the bench harness replays its prompt list this way.
// It is a benchmark instrument: `zipmoe serve --replay-trace TSV --per-request` installs it; the
// OpenAI request path never names a prompt.
// Thread-safety: used only by the thread that drives the model (the scheduler's engine thread).
// Cost: choose() is TraceRouting's per token; setSegments O(steps); one TraceRouting per live request.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "zipmoe/trace/activation_trace.h"
#include "zipmoe/model/routing_override.h"

namespace zipmoe {

class RequestRouting : public RoutingOverride {
 public:
  struct Segment {
    uint64_t request = 0;  // the scheduler's request id (RequestTicket::id)
    int64_t tokens = 0;    // that request's tokens in the forward
  };
  // The requests of the next forward, in step order.
  virtual void setSegments(std::vector<Segment> segments) = 0;
  // The request is over; its routing state may go.
  virtual void release(uint64_t request) = 0;
};

class RequestTraceRouting : public RequestRouting {
 public:
  // `moeLayers`, `experts` and `k` are the model's. Throws zipmoe::Error as TraceRouting's
  // constructor does, or when the trace has no prompt.
  RequestTraceRouting(std::shared_ptr<const ActivationTrace> trace, int moeLayers, int experts, int k, uint64_t seed);

  // What the requests seen from now on replay.
  struct Plan {
    std::vector<int> prompts;  // the n-th request: prompts[n mod size]; empty: trace prompt n mod the trace's prompts
    double continuation = 0;   // TraceRouting::setContinuation of each request's router (0: the counts again)
  };
  // Restarts the count: the next request seen is the 0th (seed + 0) and replays the plan's first
  // prompt. Requests seen before keep their routers. REQUIRES: no forward in flight (call it while
  // no scheduler drives the model). Throws zipmoe::Error naming a prompt outside the trace or a
  // continuation out of range (0 to 1e6), leaving the previous plan.
  void setPlan(Plan plan);

  void setSegments(std::vector<Segment> segments) override;
  void release(uint64_t request) override;
  // Throws zipmoe::Error when the segments' tokens differ from `tokens`.
  void choose(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) override;
  bool peek(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) override;

  // The trace prompt the request replays; -1 for a request not seen (or released).
  int promptOf(uint64_t request) const;
  // The segments of the current (last) forward.
  const std::vector<Segment>& segments() const { return segments_; }
  const ActivationTrace& trace() const { return *trace_; }
  uint64_t requestsSeen() const { return seen_; }

 private:
  TraceRouting& routerOf(uint64_t request);
  std::shared_ptr<const ActivationTrace> trace_;
  int moeLayers_, experts_, k_;
  uint64_t seed_;
  uint64_t seen_ = 0;     // requests seen in all
  uint64_t planned_ = 0;  // requests seen since the plan was set
  Plan plan_;
  std::map<uint64_t, std::unique_ptr<TraceRouting>> routers_;
  std::vector<Segment> segments_;
};

}  // namespace zipmoe
