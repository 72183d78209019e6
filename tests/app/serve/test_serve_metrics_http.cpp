// GET /metrics of a real `zipmoe serve` on the demo model, read with curl and Python's http.client
// (tests/app/serve/sse_client.py): the scrape parses as Prometheus text under a strict parser written
// here (every line a `# HELP` / `# TYPE` comment or a `name{labels} value` sample of the family
// declared last; counters end in _total; each histogram's buckets ascend, are cumulative and end at
// le="+Inf" equal to its _count); two requests (one whole, one streamed) move the request, token and
// latency counters by what their replies' usage says, and a refused one counts as refused with its
// status; /metrics needs the API key (401 without it, /health does not) unless the server runs with
// --metrics-public; on a store with a budget the expert runtime's counters and the budget gauges
// move, and under 16 concurrent long requests the process's peak RSS grows by no more than the
// budget it did not hold yet plus a stated fixed overhead. Skips when curl or python3 is missing.
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "app/serve/serve_process.h"
#include "test_support.h"
#include "zipmoe/format/converter.h"

using nlohmann::json;
using zipmoe::testing::curl;
using zipmoe::testing::HttpReply;

namespace {

const QString kKey = "metrics-key-42";
constexpr const char* kChat = "/v1/chat/completions";

// A scrape, parsed strictly: the samples by "name{label="value",…}" as written (labels in order),
// or the first error, naming the line.
struct Scrape {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;  // family → counter, gauge, histogram
  std::string error;

  double value(const std::string& key) const {
    const auto it = samples.find(key);
    return it == samples.end() ? 0.0 : it->second;
  }
};

double parseValue(const std::string& text, bool& ok) {
  ok = true;
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  if (text == "NaN") return NAN;
  static const QRegularExpression number(QRegularExpression::anchoredPattern(R"([-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?)"));
  ok = number.match(QString::fromStdString(text)).hasMatch();
  return ok ? std::stod(text) : 0.0;
}

// The histogram family a sample belongs to: its name without _bucket, _sum or _count.
std::string histogramFamily(const std::string& name, std::string& part) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      part = s;
      return name.substr(0, name.size() - s.size());
    }
  }
  return {};
}

Scrape parsePrometheus(const std::string& text) {
  Scrape out;
  // Qt's (PCRE2) expressions: GCC 12's <regex> trips -Wmaybe-uninitialized in the sanitizer build.
  static const QRegularExpression comment(QRegularExpression::anchoredPattern(R"(# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*))"));
  static const QRegularExpression sample(QRegularExpression::anchoredPattern(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+))"));
  static const QRegularExpression label(R"(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)\"(,|$))");
  std::string family;  // declared by the latest TYPE
  std::set<std::string> helped, typed;
  // Per histogram series (family + labels but le): its bucket bounds and values in order, _count.
  struct Series {
    std::vector<std::pair<double, double>> buckets;
    double count = -1;
    bool sum = false;
  };
  std::map<std::string, Series> histograms;
  const auto fail = [&](size_t n, const std::string& line, const std::string& why) {
    if (out.error.empty()) out.error = "line " + std::to_string(n) + " '" + line + "': " + why;
  };
  if (text.empty() || text.back() != '\n') fail(0, "", "the text does not end with a newline");
  size_t n = 0, start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    ++n;
    const QString qline = QString::fromStdString(line);
    if (line.rfind("#", 0) == 0) {
      const QRegularExpressionMatch m = comment.match(qline);
      if (!m.hasMatch()) {
        fail(n, line, "a comment that is not '# HELP name text' or '# TYPE name type'");
        continue;
      }
      const std::string name = m.captured(2).toStdString();
      if (m.captured(1) == "HELP") {
        if (!helped.insert(name).second) fail(n, line, "a second HELP for " + name);
      } else {
        const std::string type = m.captured(3).toStdString();
        if (type != "counter" && type != "gauge" && type != "histogram") fail(n, line, "an unknown type");
        if (!typed.insert(name).second) fail(n, line, "a second TYPE for " + name);
        const std::string total = "_total";
        if (type == "counter" && (name.size() <= total.size() || name.compare(name.size() - total.size(), total.size(), total) != 0))
          fail(n, line, "a counter not ending in _total");
        family = name;
        out.types[name] = type;
      }
      continue;
    }
    const QRegularExpressionMatch m = sample.match(qline);
    if (!m.hasMatch()) {
      fail(n, line, "neither a comment nor 'name{labels} value'");
      continue;
    }
    const std::string name = m.captured(1).toStdString();
    std::string labels = m.captured(3).toStdString();
    bool ok = false;
    const double value = parseValue(m.captured(4).toStdString(), ok);
    if (!ok) fail(n, line, "the value is not a number");
    std::string part;
    const std::string base = out.types.count(name) ? name : histogramFamily(name, part);
    if (base != family) fail(n, line, "a sample outside its family (declared last: " + family + ")");
    const auto type = out.types.find(base);
    const bool histogram = type != out.types.end() && type->second == "histogram";
    if (histogram != !part.empty()) fail(n, line, "a histogram's sample without _bucket/_sum/_count, or a part of another");
    // The labels, strictly: key="escaped", comma-separated; le taken apart for histograms.
    std::string seriesLabels, le;
    size_t at = 0;
    while (at < labels.size()) {
      const std::string rest = labels.substr(at);
      const QRegularExpressionMatch l = label.match(QString::fromStdString(rest), 0, QRegularExpression::NormalMatch,
                                                    QRegularExpression::AnchorAtOffsetMatchOption);
      if (!l.hasMatch()) {
        fail(n, line, "malformed labels at '" + rest + "'");
        break;
      }
      if (l.captured(1) == "le") le = l.captured(2).toStdString();
      else seriesLabels += l.captured(0).toStdString();
      at += static_cast<size_t>(l.captured(0).toUtf8().size());
    }
    out.samples[name + (labels.empty() ? "" : "{" + labels + "}")] = value;
    if (part.empty()) continue;
    Series& s = histograms[base + "{" + seriesLabels + "}"];
    if (part == "_bucket") {
      bool leOk = false;
      const double bound = parseValue(le, leOk);
      if (!leOk || le.empty()) fail(n, line, "a bucket without a numeric le");
      if (!s.buckets.empty() && !(bound > s.buckets.back().first)) fail(n, line, "bucket bounds not ascending");
      if (!s.buckets.empty() && value < s.buckets.back().second) fail(n, line, "buckets not cumulative");
      s.buckets.push_back({bound, value});
    } else if (part == "_sum") {
      s.sum = true;
    } else {
      s.count = value;
    }
  }
  for (const auto& [series, s] : histograms) {
    if (s.buckets.empty() || !std::isinf(s.buckets.back().first)) fail(0, series, "the buckets do not end at le=\"+Inf\"");
    else if (s.buckets.back().second != s.count) fail(0, series, "the +Inf bucket is not _count");
    if (!s.sum) fail(0, series, "no _sum");
  }
  return out;
}

std::string requests(const std::string& endpoint, const std::string& outcome, int code) {
  return "zipmoe_requests_total{endpoint=\"" + endpoint + "\",outcome=\"" + outcome + "\",code=\"" + std::to_string(code) + "\"}";
}

}  // namespace

class TestServeMetricsHttp : public QObject {
  Q_OBJECT

 private:
  QProcess server_;
  int port_ = 0;

  QString url(int port, const QString& path) const { return QString("http://127.0.0.1:%1%2").arg(port).arg(path); }
  HttpReply metrics(const QString& key = kKey, int port = 0) {
    QStringList args = {url(port ? port : port_, "/metrics")};
    if (!key.isEmpty()) args = QStringList{"-H", "Authorization: Bearer " + key} + args;
    return curl(args);
  }
  Scrape scrape() {
    const HttpReply r = metrics();
    if (r.code != 200) qWarning("GET /metrics: %d %s", r.code, r.body.c_str());
    return parsePrometheus(r.body);
  }
  static json chatBody(const std::string& user, int maxTokens, bool stream) {
    return zipmoe::testing::chatBody(user, maxTokens, stream);
  }

 private Q_SLOTS:
  void initTestCase() {
    if (QStandardPaths::findExecutable("curl").isEmpty()) QSKIP("curl is not installed (scripts/deps.sh)");
    if (QStandardPaths::findExecutable("python3").isEmpty()) QSKIP("python3 is not installed (scripts/deps.sh)");
    if (!std::filesystem::exists(zipmoe::testing::demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
    port_ = zipmoe::testing::startServer(server_, {"--api-key", kKey, "--dtype", "fp32", "--prefill-chunk", "16"});
    QVERIFY(port_ > 0);
  }

  void cleanupTestCase() {
    if (server_.state() == QProcess::Running) {
      server_.kill();
      server_.waitForFinished(-1);
    }
  }

  // The strict parser refuses what is not Prometheus text (so that its passing means something).
  void theParserIsStrict() {
    QVERIFY(parsePrometheus("# HELP a_total A.\n# TYPE a_total counter\na_total 1\n").error.empty());
    for (const char* bad : {"# TYPE a counter\na 1\n",                                   // counter without _total
                            "# TYPE a gauge\na{x=\"1\"} 1 2 3\n",                      // trailing junk
                            "# TYPE a gauge\nb 1\n",                                   // outside its family
                            "# TYPE a gauge\na{x=1} 1\n",                              // unquoted label
                            "# a comment\n",                                           // neither HELP nor TYPE
                            "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
                            "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",  // no +Inf
                            "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n"})
      QVERIFY2(!parsePrometheus(bad).error.empty(), bad);
  }

  void metricsNeedTheKey() {
    QCOMPARE(metrics("").code, 401);
    QCOMPARE(metrics("wrong").code, 401);
    QCOMPARE(json::parse(metrics("").body)["error"]["code"], "invalid_api_key");
    QCOMPARE(curl({url(port_, "/health")}).code, 200);  // still key-free
    const HttpReply r = metrics();
    QCOMPARE(r.code, 200);
    QCOMPARE(QString::fromStdString(r.contentType), QString("text/plain; version=0.0.4; charset=utf-8"));
  }

  void scrapeIsPrometheusText() {
    const Scrape s = scrape();
    QVERIFY2(s.error.empty(), s.error.c_str());
    for (const char* family :
         {"zipmoe_requests_total", "zipmoe_prompt_tokens_total", "zipmoe_generated_tokens_total",
          "zipmoe_reused_prompt_tokens_total", "zipmoe_time_to_first_token_seconds", "zipmoe_inter_token_latency_seconds",
          "zipmoe_batch_size", "zipmoe_forward_steps_total", "zipmoe_expert_cache_hits_total",
          "zipmoe_expert_cache_misses_total", "zipmoe_expert_bytes_read_total", "zipmoe_replans_total",
          "zipmoe_memory_budget_bytes", "zipmoe_expert_budget_bytes", "zipmoe_expert_held_bytes",
          "zipmoe_kv_capacity_bytes", "zipmoe_remote_expert_calls_total", "zipmoe_requests_running",
          "zipmoe_requests_waiting"})
      QVERIFY2(s.types.count(family), family);
    QCOMPARE(s.value("zipmoe_remote_expert_calls_total"), 0.0);  // no --nodes
    QVERIFY(s.samples.count("zipmoe_expert_cache_hits_total{pool=\"exponent\"}"));
  }

  // Two requests, one whole (curl) and one streamed (http.client): the counters grow by what their
  // usage says; a wrong model and a wrong key count as refused with their status.
  void countersMoveWithTraffic() {
    const Scrape before = scrape();
    QVERIFY2(before.error.empty(), before.error.c_str());

    const HttpReply whole = curl({"-H", "Authorization: Bearer " + kKey, "-H", "Content-Type: application/json",
                                  "--data-binary", QString::fromStdString(chatBody("ROMEO: what news?", 12, false).dump()),
                                  url(port_, kChat)});
    QVERIFY2(whole.code == 200, whole.body.c_str());
    const json u1 = json::parse(whole.body)["usage"];
    QProcess py;
    py.start("python3", {QString(ZIPMOE_SOURCE_DIR) + "/tests/app/serve/sse_client.py", "stream", QString::number(port_),
                         kKey, QString::fromStdString(chatBody("ROMEO: what news?", 12, true).dump())});
    QVERIFY(py.waitForFinished(-1));
    const json streamed = json::parse(py.readAllStandardOutput().toStdString(), nullptr, false);
    QVERIFY2(streamed.is_object() && streamed["status"] == 200 && streamed["done"].get<bool>(), streamed.dump().c_str());
    const json u2 = streamed["usage"];
    QVERIFY2(u2.is_object(), streamed.dump().c_str());

    const HttpReply unknownModel = curl({"-H", "Authorization: Bearer " + kKey, "-H", "Content-Type: application/json", "--data-binary",
                                         R"({"model":"gpt-4","messages":[{"role":"user","content":"hi"}]})", url(port_, kChat)});
    QCOMPARE(unknownModel.code, 404);
    const HttpReply noKey = curl({"-H", "Content-Type: application/json", "--data-binary", QString::fromStdString(chatBody("hi", 2, false).dump()), url(port_, kChat)});
    QCOMPARE(noKey.code, 401);

    // The engine thread reports a step (onStep) and publishes its counters after the step that
    // finished the reply: wait until it is idle and both have caught up.
    Scrape after;
    const auto grew = [&](const std::string& key) { return after.value(key) - before.value(key); };
    const auto settled = [&] {
      after = scrape();
      return !after.error.empty() || (after.value("zipmoe_requests_running") == 0 &&
                                      grew("zipmoe_batch_size_count") == grew("zipmoe_forward_steps_total"));
    };
    QTRY_VERIFY_WITH_TIMEOUT(settled(), 120000);
    QVERIFY2(after.error.empty(), after.error.c_str());
    const auto sum = [&](const char* field) { return u1[field].get<double>() + u2[field].get<double>(); };
    QCOMPARE(grew(requests(kChat, "completed", 200)), 2.0);
    QCOMPARE(grew(requests(kChat, "refused", 404)), 1.0);
    QCOMPARE(grew(requests(kChat, "refused", 401)), 1.0);
    QCOMPARE(grew("zipmoe_prompt_tokens_total"), sum("prompt_tokens"));
    QCOMPARE(grew("zipmoe_generated_tokens_total"), sum("completion_tokens"));
    QCOMPARE(grew("zipmoe_reused_prompt_tokens_total"),
             u1["prompt_tokens_details"]["cached_tokens"].get<double>() + u2["prompt_tokens_details"]["cached_tokens"].get<double>());
    QVERIFY(u2["prompt_tokens_details"]["cached_tokens"].get<int>() > 0);  // the same prompt again: reused
    QCOMPARE(grew("zipmoe_time_to_first_token_seconds_count"), 2.0);
    QVERIFY(grew("zipmoe_inter_token_latency_seconds_count") > 0);
    QVERIFY(grew("zipmoe_forward_steps_total") > 0);
    QVERIFY(after.value("zipmoe_kv_capacity_bytes") > 0);
  }

  // A store with a budget: the expert runtime's hits and misses, bytes read and budgets show.
  void runtimeMetricsWithABudget() {
    zipmoe::testing::TempDir dir;
    const auto store = dir / "store";
    zipmoe::convertCheckpoint(zipmoe::testing::demoModel(), store, zipmoe::ConvertOptions{});
    QProcess budgeted;
    const int port = zipmoe::testing::startServer(
        budgeted, {"--metrics-public", "--model-id", "demo-model", "--budget", "100%", "--no-history", "--dtype", "fp32"},
        store);
    QVERIFY(port > 0);
    const HttpReply reply = curl({"-H", "Content-Type: application/json", "--data-binary",
                                  QString::fromStdString(chatBody("ROMEO: what news?", 6, false).dump()), url(port, kChat)});
    const Scrape s = parsePrometheus(metrics("", port).body);
    budgeted.terminate();
    QVERIFY(budgeted.waitForFinished(-1));
    QVERIFY2(reply.code == 200, reply.body.c_str());
    QVERIFY2(s.error.empty(), s.error.c_str());
    double hits = 0;
    for (const char* pool : {"full", "compressed", "sign_mantissa", "exponent"})
      hits += s.value(std::string("zipmoe_expert_cache_hits_total{pool=\"") + pool + "\"}");
    QVERIFY(hits + s.value("zipmoe_expert_cache_misses_total") > 0);
    QVERIFY(s.value("zipmoe_expert_bytes_read_total") > 0);
    QVERIFY(s.value("zipmoe_expert_budget_bytes") > 0);
    QVERIFY(s.value("zipmoe_memory_budget_bytes") >= s.value("zipmoe_expert_budget_bytes"));
    QCOMPARE(budgeted.exitCode(), 0);
  }

  // Memory that is measured, not only booked: 16 concurrent long requests on a budgeted store. The
  // process's peak RSS (VmHWM, /proc) may grow from its idle RSS by no more than the part of the
  // serving budget (experts + KV + activations, /metrics) that the idle server did not already hold,
  // plus a stated fixed overhead for what no budget counts: 16 connections' buffers and threads,
  // allocator arenas, libtorch's per-call scratch (kFixedOverhead). And the bookkeeping holds too:
  // no step over the budget.
  void peakMemoryFollowsTheBudget() {
#if defined(__SANITIZE_ADDRESS__)
    QSKIP("under AddressSanitizer the server's RSS holds its shadow memory and freed-block quarantine");
#endif
    constexpr double kFixedOverhead = 48.0 * 1024 * 1024;
    zipmoe::testing::TempDir dir;
    const auto store = dir / "store";
    zipmoe::convertCheckpoint(zipmoe::testing::demoModel(), store, zipmoe::ConvertOptions{});
    QProcess server;
    const int port = zipmoe::testing::startServer(
        server, {"--metrics-public", "--model-id", "demo-model", "--budget", "100%", "--no-history", "--dtype", "fp32",
                 "--max-batch", "16"},
        store);
    QVERIFY(port > 0);
    const auto status = [&](const char* field) {  // kB → bytes
      std::ifstream in("/proc/" + std::to_string(server.processId()) + "/status");
      for (std::string line; std::getline(in, line);)
        if (line.rfind(field, 0) == 0) return 1024.0 * std::atof(line.substr(std::strlen(field)).c_str());
      return -1.0;
    };
    const double idleRss = status("VmRSS:");
    const Scrape idle = parsePrometheus(metrics("", port).body);
    const std::string corpus = zipmoe::testing::readText(std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/corpus/tinyshakespeare.txt");
    json bodies = json::array();
    for (int i = 0; i < 16; ++i) {
      json b = chatBody(corpus.substr(1000 + static_cast<size_t>(i) * 977, 450), 120, true);
      b["ignore_eos"] = true;
      bodies.push_back(b);
    }
    const json results = json::parse(
        zipmoe::testing::runClientScript("sse_client.py", {"concurrent", QString::number(port), "", QString::fromStdString(bodies.dump())}),
        nullptr, false);
    const double peakRss = status("VmHWM:");
    const Scrape after = parsePrometheus(metrics("", port).body);
    const json health = json::parse(curl({url(port, "/health")}).body, nullptr, false);
    server.terminate();
    QVERIFY(server.waitForFinished(-1));
    QVERIFY2(results.is_array() && results.size() == 16, results.dump().substr(0, 300).c_str());
    for (const json& r : results) QVERIFY2(r["status"] == 200 && r["done"] == true, r.dump().c_str());
    const double budget = after.value("zipmoe_memory_budget_bytes");
    const double heldIdle = idle.value("zipmoe_expert_held_bytes");
    QVERIFY(budget > 0 && idleRss > 0 && peakRss >= idleRss);
    const double allowed = budget - heldIdle + kFixedOverhead;
    qInfo("RSS idle %.1f MiB, peak %.1f MiB (+%.1f MiB); serving budget %.1f MiB, held idle %.1f MiB, allowed growth %.1f MiB",
          idleRss / 1048576, peakRss / 1048576, (peakRss - idleRss) / 1048576, budget / 1048576, heldIdle / 1048576,
          allowed / 1048576);
    QVERIFY2(peakRss - idleRss <= allowed, "the server's RSS grew past its budget and the stated overhead");
    QCOMPARE(health["memory"]["over_budget_steps"].get<int>(), 0);
    QVERIFY(health["memory"]["peak_used_bytes"].get<double>() <= budget);
  }

  // --metrics-public: /metrics without the key; /v1 still needs it.
  void metricsPublicNeedsNoKey() {
    QProcess open;
    const int port = zipmoe::testing::startServer(open, {"--api-key", kKey, "--metrics-public"});
    QVERIFY(port > 0);
    const HttpReply r = metrics("", port);
    const int models = curl({url(port, "/v1/models")}).code;
    open.terminate();
    QVERIFY(open.waitForFinished(-1));
    QCOMPARE(r.code, 200);
    QVERIFY2(parsePrometheus(r.body).error.empty(), parsePrometheus(r.body).error.c_str());
    QCOMPARE(models, 401);
    QCOMPARE(open.exitCode(), 0);
  }
};

QTEST_GUILESS_MAIN(TestServeMetricsHttp)
#include "test_serve_metrics_http.moc"
