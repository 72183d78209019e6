// ServeMetrics and ReplyObserver (see zipmoe/serve/serve_metrics.h).
#include "zipmoe/serve/serve_metrics.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "serve/histogram.h"
#include "serve/prometheus_text.h"

namespace zipmoe {

using serve::MetricLabels;
using serve::MetricType;
using serve::PrometheusText;

namespace {

// The runtime's pools as labels, in RuntimeStats::hits order (zipmoe/base/pools.h: F, C, S, E).
constexpr std::array<const char*, kNumPools> kPoolLabels = {"full", "compressed", "sign_mantissa", "exponent"};

double asValue(uint64_t v) { return static_cast<double>(v); }

void scalar(PrometheusText& out, const char* name, MetricType type, const char* help, double value) {
  out.family(name, type, help);
  out.sample(name, {}, value);
}

}  // namespace

const char* requestOutcomeName(RequestOutcome outcome) {
  switch (outcome) {
    case RequestOutcome::Completed: return "completed";
    case RequestOutcome::Cancelled: return "cancelled";
    case RequestOutcome::Failed: return "failed";
    case RequestOutcome::Refused: return "refused";
  }
  return "unknown";
}

struct ServeMetrics::Requests {
  mutable std::mutex mutex;
  std::set<std::string> endpoints;
  std::map<std::tuple<std::string, RequestOutcome, int>, uint64_t> counts;
};

const std::vector<double>& ServeMetrics::latencyBounds() {
  static const std::vector<double> b = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60};
  return b;
}

const std::vector<double>& ServeMetrics::batchSizeBounds() {
  static const std::vector<double> b = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  return b;
}

ServeMetrics::ServeMetrics()
    : requests_(std::make_unique<Requests>()),
      timeToFirstToken_(std::make_unique<serve::Histogram>(latencyBounds())),
      interTokenLatency_(std::make_unique<serve::Histogram>(latencyBounds())),
      batchSize_(std::make_unique<serve::Histogram>(batchSizeBounds())) {}

ServeMetrics::~ServeMetrics() = default;

void ServeMetrics::setSources(ServeMetricsSources sources) {
  std::lock_guard lock(sourcesMutex_);
  sources_ = std::move(sources);
}

std::function<void(const StepReport&)> ServeMetrics::chainStepObserver(std::function<void(const StepReport&)> next) {
  return [this, next = std::move(next)](const StepReport& step) {
    recordStep(step);
    if (next) next(step);
  };
}

void ServeMetrics::recordStep(const StepReport& step) {
  batchSize_->observe(static_cast<double>(step.members.size()));
  forwardTokens_.fetch_add(static_cast<uint64_t>(std::max(step.tokens, 0)), std::memory_order_relaxed);
  kvCapacityBytes_.store(step.kvCapacityBytes, std::memory_order_relaxed);
}

void ServeMetrics::trackEndpoint(const std::string& path) {
  std::lock_guard lock(requests_->mutex);
  requests_->endpoints.insert(path);
}

bool ServeMetrics::tracksEndpoint(const std::string& path) const {
  std::lock_guard lock(requests_->mutex);
  return requests_->endpoints.count(path) > 0;
}

void ServeMetrics::recordRequest(const std::string& endpoint, RequestOutcome outcome, int status) {
  std::lock_guard lock(requests_->mutex);
  ++requests_->counts[{endpoint, outcome, status}];
}

void ServeMetrics::recordUsage(const GenerationStats& finished) {
  const auto add = [](std::atomic<uint64_t>& counter, int n) {
    counter.fetch_add(static_cast<uint64_t>(std::max(n, 0)), std::memory_order_relaxed);
  };
  add(promptTokens_, finished.promptTokens);
  add(generatedTokens_, finished.generatedTokens);
  add(reusedPromptTokens_, finished.reusedTokens);
}

void ServeMetrics::recordTimeToFirstToken(double seconds) { timeToFirstToken_->observe(seconds); }

void ServeMetrics::recordInterTokenGap(double seconds, int pieces) {
  if (pieces > 0) interTokenLatency_->observe(seconds / pieces, static_cast<uint64_t>(pieces));
}

std::string ServeMetrics::render(const ServeCounters& c) const {
  ServeMetricsSources sources;
  {
    std::lock_guard lock(sourcesMutex_);
    sources = sources_;
  }
  RuntimeStats rt;
  if (sources.runtime) rt = sources.runtime->stats();
  const RemoteExpertCalls remote = sources.remoteCalls ? sources.remoteCalls() : RemoteExpertCalls{};
  const auto counter = [](uint64_t v) { return asValue(v); };

  PrometheusText out;
  out.family("zipmoe_requests_total", MetricType::Counter,
             "Generation requests by endpoint, outcome (completed, cancelled, failed, refused) and HTTP status "
             "(cancelled: 499, the client went away first).");
  {
    std::lock_guard lock(requests_->mutex);
    for (const auto& [key, n] : requests_->counts) {
      const auto& [endpoint, outcome, status] = key;
      out.sample("zipmoe_requests_total",
                 MetricLabels{{"endpoint", endpoint}, {"outcome", requestOutcomeName(outcome)}, {"code", std::to_string(status)}},
                 counter(n));
    }
  }
  scalar(out, "zipmoe_prompt_tokens_total", MetricType::Counter, "Prompt tokens of the replies that finished.",
         counter(promptTokens_.load(std::memory_order_relaxed)));
  scalar(out, "zipmoe_generated_tokens_total", MetricType::Counter, "Tokens generated by the replies that finished.",
         counter(generatedTokens_.load(std::memory_order_relaxed)));
  scalar(out, "zipmoe_reused_prompt_tokens_total", MetricType::Counter,
         "Prompt tokens of the replies that finished found in a cached sequence's KV cache (not prefilled).",
         counter(reusedPromptTokens_.load(std::memory_order_relaxed)));
  out.family("zipmoe_time_to_first_token_seconds", MetricType::Histogram,
             "Seconds from a request's arrival to its first output (text or a tool call).");
  out.histogram("zipmoe_time_to_first_token_seconds", {}, timeToFirstToken_->snapshot());
  out.family("zipmoe_inter_token_latency_seconds", MetricType::Histogram,
             "Seconds between a reply's successive pieces of output (usually one token each).");
  out.histogram("zipmoe_inter_token_latency_seconds", {}, interTokenLatency_->snapshot());
  out.family("zipmoe_batch_size", MetricType::Histogram, "Requests in each forward step.");
  out.histogram("zipmoe_batch_size", {}, batchSize_->snapshot());
  scalar(out, "zipmoe_forward_steps_total", MetricType::Counter, "Forward steps of the engine thread.", counter(c.steps));
  scalar(out, "zipmoe_forward_tokens_total", MetricType::Counter, "Tokens run through the model (prefill and decode).",
         counter(forwardTokens_.load(std::memory_order_relaxed)));
  scalar(out, "zipmoe_requests_running", MetricType::Gauge, "Requests decoding or prefilling.", c.running);
  scalar(out, "zipmoe_requests_waiting", MetricType::Gauge, "Requests queued, not admitted yet.", c.waiting);
  scalar(out, "zipmoe_cached_sequences", MetricType::Gauge, "Finished conversations kept for prefix reuse.",
         c.cachedSequences);
  scalar(out, "zipmoe_prompt_cache_hits_total", MetricType::Counter,
         "Requests started from a conversation's KV cache on disk (--prompt-cache).", counter(c.promptCacheHits));
  scalar(out, "zipmoe_prompt_cache_tokens_total", MetricType::Counter,
         "Prompt tokens those files held (not prefilled).", counter(c.promptCacheTokens));

  out.family("zipmoe_expert_cache_hits_total", MetricType::Counter,
             "Experts found in memory, by the runtime's pool (full tensors, compressed, sign-mantissa, exponent).");
  for (int p = 0; p < kNumPools; ++p)
    out.sample("zipmoe_expert_cache_hits_total", MetricLabels{{"pool", kPoolLabels[static_cast<size_t>(p)]}},
               counter(rt.hits[static_cast<size_t>(p)]));
  scalar(out, "zipmoe_expert_cache_misses_total", MetricType::Counter, "Experts read from the store.", counter(rt.misses));
  scalar(out, "zipmoe_expert_bytes_read_total", MetricType::Counter, "Bytes the expert runtime read from the store.",
         counter(rt.bytesRead));
  scalar(out, "zipmoe_replans_total", MetricType::Counter, "Pool plans the expert runtime computed.", counter(rt.replans));
  scalar(out, "zipmoe_memory_budget_bytes", MetricType::Gauge,
         "The whole memory budget of serving: experts, KV cache and activations (0: none).", counter(c.budgetBytes));
  scalar(out, "zipmoe_expert_budget_bytes", MetricType::Gauge, "The expert runtime's budget (0: every expert resident).",
         counter(rt.budgetBytes));
  scalar(out, "zipmoe_expert_held_bytes", MetricType::Gauge, "Bytes the expert runtime holds now.", counter(rt.heldBytes));
  scalar(out, "zipmoe_kv_capacity_bytes", MetricType::Gauge, "The KV cache's capacity after the latest forward step.",
         counter(kvCapacityBytes_.load(std::memory_order_relaxed)));
  scalar(out, "zipmoe_remote_expert_calls_total", MetricType::Counter, "Calls to expert nodes (0 without --nodes).",
         counter(remote.calls));
  scalar(out, "zipmoe_remote_expert_call_failures_total", MetricType::Counter, "Calls to expert nodes that failed.",
         counter(remote.failed));
  return out.text();
}

ReplyObserver::ReplyObserver(ServeMetrics& metrics, std::string endpoint, Clock::time_point received)
    : metrics_(&metrics), endpoint_(std::move(endpoint)), received_(received), lastOutput_(received) {}

void ReplyObserver::observe(const std::vector<RequestTicket::Event>& events) {
  using Kind = RequestTicket::Event::Kind;
  const Clock::time_point now = Clock::now();
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  int pieces = 0;
  for (const RequestTicket::Event& e : events) {
    if (e.kind == Kind::Text || e.kind == Kind::ToolCallBegin || e.kind == Kind::ToolCallDelta) {
      ++pieces;
    } else if (e.kind == Kind::Finished && !ended_) {
      if (!sawOutput_ && pieces == 0 && e.finish.generatedTokens > 0) pieces = 1;  // tokens that showed no text
      metrics_->recordUsage(e.finish);
      end(RequestOutcome::Completed, 200);
    } else if (e.kind == Kind::Failed && !ended_) {
      end(RequestOutcome::Failed, e.error ? e.error->status() : 500);
    }
  }
  if (pieces == 0) return;
  if (!sawOutput_) {
    sawOutput_ = true;
    metrics_->recordTimeToFirstToken(seconds(now - received_));
  } else {
    metrics_->recordInterTokenGap(seconds(now - lastOutput_), pieces);
  }
  lastOutput_ = now;
}

void ReplyObserver::end(RequestOutcome outcome, int status) {
  if (ended_) return;
  ended_ = true;
  metrics_->recordRequest(endpoint_, outcome, status);
}

}  // namespace zipmoe
