// `zipmoe bench serve STORE --budget SIZE|PCT% [OPTIONS]`: a load generator against the
// OpenAI-compatible server on loopback, one run per configuration (SCHEDULE+EVICTION, e.g.
// fcfs+lru, fcfs+zipmoe, coserve+zipmoe; and, with --expert-floors, per experts' floor share — the
// memory split measured). Each run opens the engine afresh on the store under the budget (the whole
// memory of serving: experts + KV + activations), starts the scheduler and the HTTP server on a free
// port, and drives it with N client threads over real HTTP (cpp-httplib's client, streaming): each
// client waits an exponential time (mean N / rate, so that the arrivals together are about Poisson
// at `rate` per second while the clients are free), then streams one chat request from the prompt
// list (its own prompt, cycling), max_tokens fixed, greedy. Measured per run: throughput (completion
// tokens / wall seconds), requests, TTFT p50/p99 (request sent → first text), inter-token latency
// p50/p99 (between text chunks: one per token unless the decoder held bytes back), expert loads per
// forward step (runtime misses / steps), bytes read per generated token, the peak of experts + KV +
// activations and the steps over budget. Prints a table; --out writes JSON (docs/SERVER.md).
// With --trace-file TSV (or --workload qwen|deepseek, the traces `zipmoe bench suite` replays) the
// model's router is replaced per request: the n-th request the scheduler admits replays trace prompt
// n mod the trace's prompts (RequestTraceRouting), so that requests differ in expert usage the way a
// real model's prompts do — what CoServe's grouping and the eviction policies act on.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench_harness.h"
#include "command_line.h"
#include "commands.h"
#include "runtime_options.h"
#include "zipmoe/build_info.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/error.h"
#include "zipmoe/serve/openai_server.h"
#include "zipmoe/serve/serve_scheduler.h"

namespace zipmoe::cli {
namespace {

// What no budget counts, stated: connection buffers and threads, allocator arenas, libtorch's
// per-call scratch (test_serve_metrics_http checks the same bound on the demo model).
constexpr uint64_t kServeFixedOverhead = 48ull << 20;

using Clock = std::chrono::steady_clock;
using nlohmann::json;

const std::vector<std::string> kPrompts = {
    "ROMEO: What news from Mantua?", "JULIET: O Romeo, Romeo, wherefore art thou Romeo?",
    "First Citizen: Before we proceed any further, hear me speak.", "MERCUTIO: Nay, gentle Romeo, we must have you dance.",
    "KING RICHARD II: Now is the winter of our discontent.", "NURSE: Faith, I can tell her age unto an hour.",
    "FRIAR LAURENCE: These violent delights have violent ends.", "BENVOLIO: Here comes the furious Tybalt back again."};

struct Config {
  SchedulePolicy schedule = SchedulePolicy::Fcfs;
  EvictionPolicy eviction = EvictionPolicy::LeastFrequent;
  double expertFloor = 0.5;
  std::string label;
};

std::vector<Config> parseConfigs(const std::string& text, const std::vector<double>& floors) {
  std::vector<Config> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto plus = item.find('+');
    if (plus == std::string::npos) throw Error("option --configs: '" + item + "' is not SCHEDULE+EVICTION (e.g. coserve+zipmoe)");
    for (double floor : floors) {
      Config c;
      c.schedule = parseSchedulePolicy(item.substr(0, plus));
      c.eviction = parseEvictionPolicy(item.substr(plus + 1));
      c.expertFloor = floor;
      c.label = item + (floors.size() > 1 ? " floor " + std::to_string(static_cast<int>(floor * 100 + 0.5)) + "%" : "");
      out.push_back(c);
    }
  }
  if (out.empty()) throw Error("option --configs is empty");
  return out;
}

struct RequestResult {
  bool ok = false;
  bool gotText = false;  // TTFT and ITL are timed on text chunks
  double ttftMs = 0;
  std::vector<double> gapsMs;
  int completionTokens = 0;
  std::string error;
};

// One streaming chat request over HTTP; times its text chunks.
RequestResult streamOne(int port, const std::string& key, const std::string& model, const std::string& prompt, int maxTokens) {
  RequestResult r;
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(600, 0);
  const json body = {{"model", model},
                     {"messages", json::array({json{{"role", "user"}, {"content", prompt}}})},
                     {"max_tokens", maxTokens},
                     {"temperature", 0},
                     {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Authorization", "Bearer " + key);
  std::string pending;
  bool done = false;
  const auto start = Clock::now();
  Clock::time_point last{};
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    pending.append(data, n);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      const json j = json::parse(payload, nullptr, false);
      if (j.is_discarded() || j.contains("error")) {
        r.error = payload.substr(0, 200);
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object()) r.completionTokens = j["usage"].value("completion_tokens", 0);
      for (const auto& c : j.value("choices", json::array())) {
        const std::string text = c.contains("delta") ? c["delta"].value("content", "") : "";
        if (text.empty()) continue;
        const auto now = Clock::now();
        if (last == Clock::time_point{}) {
          r.gotText = true;
          r.ttftMs = std::chrono::duration<double, std::milli>(now - start).count();
        } else {
          r.gapsMs.push_back(std::chrono::duration<double, std::milli>(now - last).count());
        }
        last = now;
      }
    }
    return true;
  };
  const auto res = client.send(req);
  if (!res) {
    r.error = "HTTP error " + httplib::to_string(res.error());
  } else if (res->status != 200) {
    r.error = "status " + std::to_string(res->status);
  }
  r.ok = r.error.empty() && done;
  if (!r.ok && r.error.empty()) r.error = "no [DONE]";
  return r;
}

json runOne(const std::filesystem::path& store, const EngineOptions& base, const std::optional<std::string>& budget,
            const Config& config, int clients, double seconds, double rate, int maxTokens, const ServeOptions& shape, uint64_t seed) {
  EngineOptions options = base;
  options.runtime->eviction = config.eviction;
  options.onStatus = [](const std::string&) {};
  // Every configuration starts from the same state: no statistics of earlier runs, none saved.
  options.persistHistory = false;
  options.replayPerRequest = !options.replayTrace.empty();
  ServeOptions& so = options.serve;
  so = ServeOptions{};
  so.policy = config.schedule;
  so.maxBatch = shape.maxBatch;  // zipmoe serve's defaults unless given
  so.maxStepTokens = shape.maxStepTokens;
  so.prefillChunk = shape.prefillChunk;
  so.expertFloorShare = config.expertFloor;
  so.memoryBudget = options.runtime->budget;  // the whole of serving's memory, as `zipmoe serve --budget`
  auto engine = openEngine(store, options, budget);
  ExpertRuntime& rt = *engine->runtime();
  ServeScheduler& scheduler = engine->scheduler();
  ServerOptions ho;
  ho.port = 0;
  ho.apiKey = generateApiKey();
  ho.modelId = "bench";
  OpenAiServer server(scheduler, ho);
  const int port = server.start();

  // Memory that is measured (docs/SERVER.md): the RSS now, and its peak over the run, against the
  // budget the runtime does not hold yet plus a stated fixed overhead.
  const bool peakReset = resetPeakRss();
  const uint64_t rssIdle = processMemory("VmRSS:");
  const RuntimeStats before = rt.stats();
  const ServeCounters countersBefore = scheduler.counters();
  std::mutex mutex;
  std::vector<RequestResult> results;
  std::atomic<int> nextPrompt{0};
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(c));
      std::exponential_distribution<double> gap(rate / clients);
      for (;;) {
        const auto at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng)));
        if (at >= deadline) break;
        std::this_thread::sleep_until(at);
        const std::string& prompt = kPrompts[static_cast<size_t>(nextPrompt++) % kPrompts.size()];
        RequestResult r = streamOne(port, ho.apiKey, ho.modelId, prompt, maxTokens);
        std::lock_guard lock(mutex);
        results.push_back(std::move(r));
      }
    });
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const uint64_t rssPeak = processMemory("VmHWM:");
  const RuntimeStats after = rt.stats();
  server.stop();
  scheduler.stop();
  const ServeCounters counters = scheduler.counters();
  const uint64_t tracePromptsReplayed = engine->requestRouting() ? engine->requestRouting()->requestsSeen() : 0;

  std::vector<double> ttft, itl;
  uint64_t tokens = 0;
  int failures = 0;
  std::string firstError;
  for (const auto& r : results) {
    if (!r.ok) {
      if (failures++ == 0) firstError = r.error;
      continue;
    }
    if (r.gotText) ttft.push_back(r.ttftMs);
    itl.insert(itl.end(), r.gapsMs.begin(), r.gapsMs.end());
    tokens += static_cast<uint64_t>(r.completionTokens);
  }
  const uint64_t steps = counters.steps - countersBefore.steps;
  const uint64_t generated = counters.generatedTokens - countersBefore.generatedTokens;
  json j = {{"config", config.label},
            {"schedule", schedulePolicyName(config.schedule)},
            {"eviction", evictionPolicyName(config.eviction)},
            {"expert_floor_share", config.expertFloor},
            {"max_batch", so.maxBatch},
            {"step_tokens", so.maxStepTokens},
            {"prefill_chunk", so.prefillChunk},
            {"requests", results.size()},
            {"failures", failures},
            {"wall_seconds", wall},
            {"completion_tokens", tokens},
            {"throughput_tokens_per_s", wall > 0 ? static_cast<double>(tokens) / wall : 0.0},
            {"ttft_ms_p50", ttft.empty() ? 0.0 : percentile(ttft, 0.5)},
            {"ttft_ms_p99", ttft.empty() ? 0.0 : percentile(ttft, 0.99)},
            {"itl_ms_p50", itl.empty() ? 0.0 : percentile(itl, 0.5)},
            {"itl_ms_p99", itl.empty() ? 0.0 : percentile(itl, 0.99)},
            {"forward_steps", steps},
            {"expert_loads_per_step", steps ? static_cast<double>(after.misses - before.misses) / static_cast<double>(steps) : 0.0},
            {"bytes_read_per_token",
             generated ? static_cast<double>(after.bytesRead - before.bytesRead) / static_cast<double>(generated) : 0.0},
            {"reused_prompt_tokens", counters.reusedPromptTokens - countersBefore.reusedPromptTokens},
            {"aged_admissions", counters.agedAdmissions},
            {"budget_bytes", counters.budgetBytes},
            {"peak_used_bytes", counters.peakUsedBytes},
            {"over_budget_steps", counters.overBudgetSteps},
            // The process's RSS (/proc/self/status: the server and its load clients together) before
            // the load and at its peak during it; its growth against what the budget leaves: the
            // serving budget minus what the runtime already held, plus kServeFixedOverhead.
            {"rss_idle_bytes", rssIdle},
            {"rss_peak_bytes", peakReset ? rssPeak : 0},
            {"expert_held_idle_bytes", before.heldBytes},
            {"rss_growth_allowed_bytes", counters.budgetBytes > before.heldBytes
                                             ? counters.budgetBytes - before.heldBytes + kServeFixedOverhead
                                             : 0},
            {"routing", engine->requestRouting() ? "trace prompt per request: " + options.replayTrace.filename().string()
                                                  : "the model's router"},
            {"trace_requests_routed", tracePromptsReplayed},
            // TTFT and ITL are timed on text chunks: a request whose tokens decode to no text (a generated
            // model's random ids outside its small tokenizer) adds none; 0 above then means not measured.
            {"requests_with_text", ttft.size()}};
  if (!firstError.empty()) j["first_error"] = firstError;
  return j;
}

}  // namespace

int runBenchServe(const Args& arguments) {
  std::vector<OptionSpec> specs = {
      {"--configs", "LIST", "SCHEDULE+EVICTION,... (default fcfs+lru,fcfs+zipmoe,coserve+zipmoe)"},
      {"--expert-floors", "PCTS", "the experts' floor shares of the budget to measure, e.g. 25,50,75 (default 50)"},
      {"--clients", "N", "concurrent clients (1-256, default 8)"},
      {"--rate", "R", "requests per second, all clients together (default 4)"},
      {"--duration", "S", "seconds of load per configuration (1-3600, default 30)"},
      {"--max-tokens", "N", "max_tokens of every request (1-4096, default 32)"},
      {"--max-batch", "B", "the scheduler's batch (1-256, default 8, as zipmoe serve)"},
      {"--step-tokens", "N", "tokens of one forward step (default 256, as zipmoe serve)"},
      {"--prefill-chunk", "N", "prompt tokens of one request per forward step (default 128, as zipmoe serve)"},
      {"--seed", "S", "the arrival times' seed (default 1)"},
      {"--trace-file", "TSV", "route each request from its own prompt of this activation trace (request n: prompt n mod prompts)"},
      {"--workload", "qwen|deepseek", "the same with ../shared/data/traces/qwen1.5-moe.tsv or deepseek-v2-lite.tsv"},
      {"--out", "FILE", "write the results as JSON"},
      {"--dtype", "auto|bf16|fp32", "compute type"},
      {"--threads", "N", "compute threads (0 = every CPU)"}};
  for (const OptionSpec& r : runtimeOptionSpecs()) specs.push_back(r);
  const CommandSpec spec{
      "zipmoe bench serve STORE --budget SIZE|PCT% [OPTIONS]",
      "Load on the OpenAI-compatible server over loopback HTTP: throughput, TTFT and inter-token latency p50/p99,\n"
      "expert loads per step and bytes read per token, for each scheduling + eviction configuration.",
      specs, 1, 1,
      "The budget is the whole memory of serving (experts + KV cache + activations), as for zipmoe serve."};
  const CommandLine line = CommandLine::parse(spec, arguments);
  if (line.help()) return printUsage(spec);
  const std::filesystem::path store = line.positional(0);
  std::vector<double> floors;
  for (int f : parseIntList("--expert-floors", line.text("--expert-floors", "50"), 0, 100)) floors.push_back(f / 100.0);
  const auto configs = parseConfigs(line.text("--configs", "fcfs+lru,fcfs+zipmoe,coserve+zipmoe"), floors);
  const int clients = line.integer<int>("--clients", 1, 256, 8);
  const double rate = line.number("--rate", 0.001, 1e6, 4);
  const double seconds = line.number("--duration", 1, 3600, 30);
  const int maxTokens = line.integer<int>("--max-tokens", 1, 4096, 32);
  const ServeOptions defaults;
  ServeOptions shape;
  shape.maxBatch = line.integer<int>("--max-batch", 1, 256, defaults.maxBatch);
  shape.maxStepTokens = line.integer<int>("--step-tokens", shape.maxBatch + 1, 65536, std::max(defaults.maxStepTokens, shape.maxBatch + 1));
  shape.prefillChunk = line.integer<int>("--prefill-chunk", 1, 65536, defaults.prefillChunk);
  const uint64_t seed = line.integer<uint64_t>("--seed", 0, UINT64_MAX, 1);
  EngineOptions options;
  if (const auto v = line.text("--dtype")) {
    if (*v == "bf16") options.model.dtype = ComputeDtype::BFloat16;
    else if (*v == "fp32") options.model.dtype = ComputeDtype::Float32;
    else if (*v != "auto") throw Error("option --dtype must be auto, bf16 or fp32, got '" + *v + "'");
  }
  options.model.threads = line.integer<int>("--threads", 0, 4096, 0);
  const auto budget = parseRuntimeOptions(line, options);
  if (line.has("--trace-file") + line.has("--workload") + line.has("--replay-trace") > 1)
    throw Error("give one of --trace-file, --workload and --replay-trace");
  if (line.has("--trace-prompt"))
    throw Error("option --trace-prompt: bench serve replays one trace prompt per request; drop --trace-prompt");
  if (const auto w = line.text("--workload")) {
    if (*w == "qwen") options.replayTrace = "../shared/data/traces/qwen1.5-moe.tsv";
    else if (*w == "deepseek") options.replayTrace = "../shared/data/traces/deepseek-v2-lite.tsv";
    else throw Error("option --workload must be qwen or deepseek, got '" + *w + "'");
  }
  if (const auto t = line.text("--trace-file")) options.replayTrace = *t;
  if (!options.replayTrace.empty() && !std::filesystem::is_regular_file(options.replayTrace))
    throw Error("the activation trace " + options.replayTrace.string() + " is not a file");
  if (!budget || !options.runtime) throw Error("bench serve needs --budget (a ZipMoE store served through its expert runtime)");

  std::string command = "zipmoe bench serve";
  for (const auto& a : arguments) command += " " + a;
  json out = {{"command", command}, {"host", hostIdentity()}, {"build", buildInfo()}, {"runs", json::array()}};
  std::printf("%-28s %5s %4s %9s %9s %9s %9s %9s %10s %11s %12s\n", "config", "reqs", "fail", "tok/s", "TTFT p50", "TTFT p99",
              "ITL p50", "ITL p99", "loads/step", "bytes/token", "RSS +MiB/ok");
  for (const Config& c : configs) {
    const json r = runOne(store, options, budget, c, clients, seconds, rate, maxTokens, shape, seed);
    const double mib = 1024.0 * 1024.0;
    const double growth = (r["rss_peak_bytes"].get<double>() - r["rss_idle_bytes"].get<double>()) / mib;
    std::printf("%-28s %5d %4d %9.1f %9.1f %9.1f %9.1f %9.1f %10.2f %11.0f %6.0f/%-5.0f\n", c.label.c_str(),
                r["requests"].get<int>(), r["failures"].get<int>(), r["throughput_tokens_per_s"].get<double>(),
                r["ttft_ms_p50"].get<double>(), r["ttft_ms_p99"].get<double>(), r["itl_ms_p50"].get<double>(),
                r["itl_ms_p99"].get<double>(), r["expert_loads_per_step"].get<double>(),
                r["bytes_read_per_token"].get<double>(), growth, r["rss_growth_allowed_bytes"].get<double>() / mib);
    std::fflush(stdout);
    out["runs"].push_back(r);
  }
  if (const auto path = line.text("--out")) {
    std::ofstream f(*path);
    if (!(f << out.dump(2) << "\n")) throw Error("--out: cannot write '" + *path + "'");
    std::fprintf(stderr, "zipmoe: wrote %s\n", path->c_str());
    // Figure specs beside it (zipmoe-plot --all DIR renders them): bytes per token and latencies.
    json categories = json::array(), bytes = json::array(), loads = json::array();
    json ttft50 = json::array(), ttft99 = json::array(), itl50 = json::array(), itl99 = json::array();
    for (const auto& r : out["runs"]) {
      categories.push_back(r["config"]);
      bytes.push_back(r["bytes_read_per_token"].get<double>() / (1024.0 * 1024.0));
      loads.push_back(r["expert_loads_per_step"]);
      ttft50.push_back(r["ttft_ms_p50"]);
      ttft99.push_back(r["ttft_ms_p99"]);
      itl50.push_back(r["itl_ms_p50"]);
      itl99.push_back(r["itl_ms_p99"]);
    }
    const std::string subtitle = std::to_string(clients) + " clients, " + line.text("--rate", "4") + " requests/s, " +
                                 std::to_string(maxTokens) + " tokens each, budget " + *budget;
    const std::string stem = std::filesystem::path(*path).replace_extension().string();
    const json traffic = {{"kind", "bar"},
                          {"title", "Serving: bytes read per generated token"},
                          {"subtitle", subtitle},
                          {"y", {{"label", "read per token"}, {"unit", "MiB"}, {"from_zero", true}}},
                          {"categories", categories},
                          {"series", json::array({json{{"name", "MiB read per token"}, {"values", bytes}}})},
                          {"legend", "none"}};
    const json latency = {{"kind", "bar"},
                          {"title", "Serving: time to first token and inter-token latency"},
                          {"subtitle", subtitle},
                          {"y", {{"label", "latency"}, {"unit", "ms"}, {"from_zero", true}}},
                          {"categories", categories},
                          {"series", json::array({json{{"name", "TTFT p50"}, {"values", ttft50}},
                                                  json{{"name", "TTFT p99"}, {"values", ttft99}},
                                                  json{{"name", "ITL p50"}, {"values", itl50}},
                                                  json{{"name", "ITL p99"}, {"values", itl99}}})},
                          {"legend", "top-left"}};
    for (const auto& [name, fig] : {std::pair<std::string, json>{"_traffic.json", traffic}, {"_latency.json", latency}}) {
      std::ofstream g(stem + name);
      if (!(g << fig.dump(2) << "\n")) throw Error("--out: cannot write '" + stem + name + "'");
    }
  }
  return 0;
}

}  // namespace zipmoe::cli
