// GET /metrics' text: the Prometheus writer's exact output for a known set of samples (HELP and TYPE
// lines, escaped label values and help, whole and fractional values, a histogram's cumulative
// buckets ending at +Inf with its sum and count), names it refuses, the histogram's buckets
// (an observation on a bound counts in that bucket: le is ≤), and ServeMetrics' families after known
// events: requests by endpoint, outcome and status, usage, the step observer chained before the
// caller's own, the gap of pieces that arrive together shared evenly; 4 threads recording while
// another renders: every total arrives, and each snapshot's buckets add up to its count.
#include <QtTest>

#include <atomic>
#include <thread>

#include "serve/histogram.h"
#include "serve/prometheus_text.h"
#include "zipmoe/base/error.h"
#include "zipmoe/serve/serve_metrics.h"

using namespace zipmoe;
using namespace zipmoe::serve;

namespace {

bool hasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

class TestServeMetrics : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void writesTheExactText() {
    PrometheusText out;
    out.family("zipmoe_requests_total", MetricType::Counter, "Requests, by \"endpoint\".\nA back\\slash.");
    out.sample("zipmoe_requests_total", {{"endpoint", "/v1/chat"}, {"code", "200"}}, 3);
    out.sample("zipmoe_requests_total", {{"endpoint", "a\"b\\c\nd"}, {"code", "404"}}, 12345678901);
    out.family("zipmoe_held_bytes", MetricType::Gauge, "Held.");
    out.sample("zipmoe_held_bytes", {}, 0.25);
    out.family("zipmoe_latency_seconds", MetricType::Histogram, "Latency.");
    HistogramSnapshot h;
    h.bounds = {0.005, 0.5, 2};
    h.counts = {1, 0, 2, 1};
    h.sum = 3.75;
    out.histogram("zipmoe_latency_seconds", {{"pool", "full"}}, h);
    const std::string expected =
        "# HELP zipmoe_requests_total Requests, by \"endpoint\".\\nA back\\\\slash.\n"
        "# TYPE zipmoe_requests_total counter\n"
        "zipmoe_requests_total{endpoint=\"/v1/chat\",code=\"200\"} 3\n"
        "zipmoe_requests_total{endpoint=\"a\\\"b\\\\c\\nd\",code=\"404\"} 12345678901\n"
        "# HELP zipmoe_held_bytes Held.\n"
        "# TYPE zipmoe_held_bytes gauge\n"
        "zipmoe_held_bytes 0.25\n"
        "# HELP zipmoe_latency_seconds Latency.\n"
        "# TYPE zipmoe_latency_seconds histogram\n"
        "zipmoe_latency_seconds_bucket{pool=\"full\",le=\"0.005\"} 1\n"
        "zipmoe_latency_seconds_bucket{pool=\"full\",le=\"0.5\"} 1\n"
        "zipmoe_latency_seconds_bucket{pool=\"full\",le=\"2\"} 3\n"
        "zipmoe_latency_seconds_bucket{pool=\"full\",le=\"+Inf\"} 4\n"
        "zipmoe_latency_seconds_sum{pool=\"full\"} 3.75\n"
        "zipmoe_latency_seconds_count{pool=\"full\"} 4\n";
    QCOMPARE(QString::fromStdString(out.text()), QString::fromStdString(expected));
  }

  void formatsValues() {
    QCOMPARE(QString::fromStdString(formatMetricValue(0)), QString("0"));
    QCOMPARE(QString::fromStdString(formatMetricValue(-7)), QString("-7"));
    QCOMPARE(QString::fromStdString(formatMetricValue(0.1)), QString("0.1"));
    QCOMPARE(QString::fromStdString(formatMetricValue(1e300)), QString("1e+300"));
    QCOMPARE(QString::fromStdString(formatMetricValue(std::numeric_limits<double>::infinity())), QString("+Inf"));
    QCOMPARE(QString::fromStdString(formatMetricValue(-std::numeric_limits<double>::infinity())), QString("-Inf"));
    QCOMPARE(QString::fromStdString(formatMetricValue(std::numeric_limits<double>::quiet_NaN())), QString("NaN"));
  }

  void refusesBadNames() {
    PrometheusText out;
    QVERIFY(validMetricName("zipmoe:rate_5m"));
    QVERIFY(!validMetricName("zipmoe:rate", true));
    QVERIFY(!validMetricName("9lives"));
    QVERIFY(!validMetricName(""));
    try {
      out.family("zipmoe-requests", MetricType::Counter, "x");
      QFAIL("a name with '-' was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("'zipmoe-requests'") != std::string::npos, e.what());
    }
    out.family("zipmoe_ok", MetricType::Gauge, "x");
    QVERIFY_THROWS_EXCEPTION(Error, out.sample("zipmoe_ok", {{"bad label", "v"}}, 1));
  }

  void histogramBucketsAreLessOrEqual() {
    Histogram h({1, 2});
    h.observe(1);        // on a bound: that bucket
    h.observe(1.5, 3);
    h.observe(99);
    h.observe(std::numeric_limits<double>::quiet_NaN());  // ignored
    const HistogramSnapshot s = h.snapshot();
    QCOMPARE(s.counts, (std::vector<uint64_t>{1, 3, 1}));
    QCOMPARE(s.sum, 1 + 4.5 + 99.0);
    QVERIFY_THROWS_EXCEPTION(Error, Histogram({2, 1}));
  }

  void serveMetricsCountKnownEvents() {
    ServeMetrics m;
    m.trackEndpoint("/v1/chat/completions");
    QVERIFY(m.tracksEndpoint("/v1/chat/completions"));
    QVERIFY(!m.tracksEndpoint("/v1/models"));

    // A reply: its first piece, then three pieces together 0.3 s later, then the end.
    const auto t0 = ReplyObserver::Clock::now() - std::chrono::seconds(1);
    ReplyObserver reply(m, "/v1/chat/completions", t0);
    using Event = RequestTicket::Event;
    Event text;
    text.kind = Event::Kind::Text;
    text.text = "a";
    reply.observe({text});
    reply.observe({text, text, text});
    Event finished;
    finished.kind = Event::Kind::Finished;
    finished.finish.promptTokens = 10;
    finished.finish.reusedTokens = 4;
    finished.finish.generatedTokens = 5;
    reply.observe({finished});
    QVERIFY(reply.ended());
    reply.end(RequestOutcome::Cancelled, 499);  // the first outcome stands

    ReplyObserver refused(m, "/v1/chat/completions");
    refused.end(RequestOutcome::Refused, 400);
    ReplyObserver failed(m, "/v1/chat/completions");
    Event error;
    error.kind = Event::Kind::Failed;
    error.error = ApiError(503, "server_error", "shutting down");
    failed.observe({error});

    // The step observer records, then calls the caller's own.
    int callersSteps = 0;
    const auto onStep = m.chainStepObserver([&](const StepReport&) { ++callersSteps; });
    StepReport step;
    step.tokens = 3;
    step.members.resize(3);
    step.kvCapacityBytes = 4096;
    onStep(step);
    QCOMPARE(callersSteps, 1);

    ServeCounters c;
    c.steps = 7;
    c.running = 2;
    c.waiting = 1;
    const std::string text1 = m.render(c);
    for (const char* line :
         {"zipmoe_requests_total{endpoint=\"/v1/chat/completions\",outcome=\"completed\",code=\"200\"} 1",
          "zipmoe_requests_total{endpoint=\"/v1/chat/completions\",outcome=\"failed\",code=\"503\"} 1",
          "zipmoe_requests_total{endpoint=\"/v1/chat/completions\",outcome=\"refused\",code=\"400\"} 1",
          "zipmoe_prompt_tokens_total 10", "zipmoe_generated_tokens_total 5", "zipmoe_reused_prompt_tokens_total 4",
          "zipmoe_time_to_first_token_seconds_count 1", "zipmoe_time_to_first_token_seconds_bucket{le=\"0.5\"} 0",
          "zipmoe_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1", "zipmoe_inter_token_latency_seconds_count 3",
          "zipmoe_batch_size_bucket{le=\"2\"} 0", "zipmoe_batch_size_bucket{le=\"4\"} 1", "zipmoe_batch_size_count 1",
          "zipmoe_forward_steps_total 7", "zipmoe_forward_tokens_total 3", "zipmoe_requests_running 2",
          "zipmoe_requests_waiting 1", "zipmoe_kv_capacity_bytes 4096",
          "zipmoe_expert_cache_hits_total{pool=\"sign_mantissa\"} 0", "zipmoe_expert_cache_misses_total 0",
          "zipmoe_remote_expert_calls_total 0", "# TYPE zipmoe_batch_size histogram",
          "# TYPE zipmoe_expert_held_bytes gauge"})
      QVERIFY2(hasLine(text1, line), (std::string(line) + " is not in\n" + text1).c_str());
    QVERIFY2(text1.find("outcome=\"cancelled\"") == std::string::npos, text1.c_str());

    // The remote calls' source is read at each render.
    m.setSources({nullptr, [] { return RemoteExpertCalls{12, 1}; }});
    const std::string text2 = m.render(c);
    QVERIFY2(hasLine(text2, "zipmoe_remote_expert_calls_total 12"), text2.c_str());
    QVERIFY2(hasLine(text2, "zipmoe_remote_expert_call_failures_total 1"), text2.c_str());
  }

  void recordsFromManyThreads() {
    ServeMetrics m;
    Histogram h(ServeMetrics::latencyBounds());
    constexpr int kThreads = 4, kEach = 2000;
    std::atomic<bool> done{false};
    std::atomic<int> inconsistent{0};
    std::thread reader([&] {
      while (!done.load()) {
        const HistogramSnapshot s = h.snapshot();
        uint64_t inBuckets = 0;
        for (const uint64_t c : s.counts) inBuckets += c;
        if (s.sum != 0.5 * static_cast<double>(inBuckets)) inconsistent.fetch_add(1);  // halves sum exactly
        (void)m.render(ServeCounters{});
      }
    });
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t)
      writers.emplace_back([&] {
        GenerationStats usage;
        usage.promptTokens = 2;
        for (int i = 0; i < kEach; ++i) {
          h.observe(0.5);
          m.recordUsage(usage);
          m.recordRequest("/v1/completions", RequestOutcome::Completed, 200);
          m.recordStep(StepReport{});
        }
      });
    for (std::thread& w : writers) w.join();
    done = true;
    reader.join();
    QCOMPARE(inconsistent.load(), 0);
    const std::string text = m.render(ServeCounters{});
    const std::string n = std::to_string(kThreads * kEach);
    QVERIFY(hasLine(text, "zipmoe_requests_total{endpoint=\"/v1/completions\",outcome=\"completed\",code=\"200\"} " + n));
    QVERIFY(hasLine(text, "zipmoe_prompt_tokens_total " + std::to_string(2 * kThreads * kEach)));
    QVERIFY(hasLine(text, "zipmoe_batch_size_count " + n));
  }
};

QTEST_GUILESS_MAIN(TestServeMetrics)
#include "test_serve_metrics.moc"
