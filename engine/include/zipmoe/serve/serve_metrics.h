// ServeMetrics — what `zipmoe serve` counts for GET /metrics, rendered in the Prometheus text
// format (docs/SERVER.md, "Metrics"): generation requests by endpoint, outcome and HTTP status;
// prompt, generated and reused prompt tokens; time to first token and the gaps between streamed
// pieces; requests per forward step; and, read when scraped, the scheduler's counters (steps, the
// queue), the expert runtime's (cache hits per pool, misses, bytes read, replans, budget and held
// bytes) and the expert nodes' calls.
//
// Who feeds it: the engine thread through ServeOptions::onStep (chainStepObserver, which calls the
// caller's own onStep after it), and the HTTP handlers through one ReplyObserver per request, which
// sees the request's ticket events as the handler takes them.
// Thread-safety: every function from any thread; counters are atomics, each histogram and the
// request table take one mutex per event. Cost: O(1) per event; render reads RuntimeStats (a copy)
// and writes a few kilobytes.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/serve/serve_scheduler.h"

namespace zipmoe {

namespace serve {
class Histogram;
}

// Calls to the expert nodes that compute some experts elsewhere (zipmoe/dist/distributed_experts.h).
struct RemoteExpertCalls {
  uint64_t calls = 0, failed = 0;
};

// What render() reads at each scrape, beside the scheduler's counters.
struct ServeMetricsSources {
  std::shared_ptr<ExpertRuntime> runtime;         // null: every expert resident (its metrics read 0)
  std::function<RemoteExpertCalls()> remoteCalls;  // null: no expert nodes (0)
};

enum class RequestOutcome { Completed, Cancelled, Failed, Refused };
const char* requestOutcomeName(RequestOutcome outcome);  // "completed", …

class ServeMetrics {
 public:
  // Histogram bounds: seconds for a CPU LLM's latencies (5 ms … 60 s), and requests per forward.
  static const std::vector<double>& latencyBounds();
  static const std::vector<double>& batchSizeBounds();

  ServeMetrics();
  ~ServeMetrics();
  ServeMetrics(const ServeMetrics&) = delete;
  ServeMetrics& operator=(const ServeMetrics&) = delete;

  void setSources(ServeMetricsSources sources);
  // An onStep for ServeOptions: records the step, then calls `next` (the caller's, may be empty).
  // REQUIRES: this object outlives the scheduler that calls it.
  std::function<void(const StepReport&)> chainStepObserver(std::function<void(const StepReport&)> next);
  void recordStep(const StepReport& step);

  // A generation endpoint (its path): refusals that happen before a request reaches its handler
  // (a missing key, a body too large) are counted only at tracked paths.
  void trackEndpoint(const std::string& path);
  bool tracksEndpoint(const std::string& path) const;
  // A request answered at `endpoint` with HTTP `status` (cancelled: 499, the client closed first).
  void recordRequest(const std::string& endpoint, RequestOutcome outcome, int status);
  void recordUsage(const GenerationStats& finished);
  void recordTimeToFirstToken(double seconds);
  // `pieces` streamed pieces that arrived together `seconds` after the one before: each counts the
  // gap shared evenly.
  void recordInterTokenGap(double seconds, int pieces);

  // The whole exposition: the families in a fixed order (docs/SERVER.md).
  std::string render(const ServeCounters& counters) const;

 private:
  struct Requests;  // endpoint × outcome × status → count, under a mutex
  std::unique_ptr<Requests> requests_;
  std::unique_ptr<serve::Histogram> timeToFirstToken_, interTokenLatency_, batchSize_;
  std::atomic<uint64_t> promptTokens_{0}, generatedTokens_{0}, reusedPromptTokens_{0}, forwardTokens_{0};
  std::atomic<uint64_t> kvCapacityBytes_{0};  // after the latest step
  mutable std::mutex sourcesMutex_;
  ServeMetricsSources sources_;
};

// One request's part, as its HTTP handler sees it: the time from the request to its first output
// (text or a tool call), the gaps between later pieces, its usage when it finishes, its outcome.
// Thread-safety: one handler's (a stream's provider and releaser run on the same connection thread).
class ReplyObserver {
 public:
  using Clock = std::chrono::steady_clock;
  ReplyObserver(ServeMetrics& metrics, std::string endpoint, Clock::time_point received = Clock::now());
  // After each RequestTicket::wait: records the first output, the gaps, and a Finished (completed,
  // its usage) or Failed event (failed with the error's status).
  void observe(const std::vector<RequestTicket::Event>& events);
  // The request ended otherwise (the client went away, the server stopped). The first outcome
  // recorded stands; later calls do nothing.
  void end(RequestOutcome outcome, int status);
  bool ended() const { return ended_; }

 private:
  ServeMetrics* metrics_;
  std::string endpoint_;
  Clock::time_point received_, lastOutput_;
  bool sawOutput_ = false, ended_ = false;
};

}  // namespace zipmoe
