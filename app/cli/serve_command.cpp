// `zipmoe serve MODEL [OPTIONS]` — an OpenAI- and Anthropic-compatible HTTP server for one model (docs/SERVER.md).
//
// Opens the engine (with the runtime options, like generate and chat), starts its generation core
// (the serving scheduler, zipmoe/serve/serve_scheduler.h, with this command's batch and policy) and the
// HTTP server (zipmoe/serve/openai_server.h) on loopback unless --host says otherwise (another address
// needs an API key, or --allow-no-key), prints
// "zipmoe: listening on http://HOST:PORT" on stdout (an IPv6 host in brackets), and serves until SIGTERM or SIGINT: then it
// stops accepting, fails the requests still open with 503 and frees their sequences, joins every thread and exits 0. The signals are blocked in every thread (the mask is set
// before the engine starts its threads) and taken by the main thread with sigwait.
// GET /metrics (Prometheus text, zipmoe/serve/serve_metrics.h) is fed by the scheduler's onStep, the
// HTTP handlers, the expert runtime's stats and the expert nodes' calls; it needs the key unless
// --metrics-public.
// With --budget, the budget is the whole memory of serving: experts + KV cache + activations.
// With --replay-trace (benchmarks: `zipmoe bench serve --trace-file`), each request replays its own
// trace prompt — the n-th admitted request prompt n mod the trace's prompts (RequestTraceRouting) —
// instead of the model's router; the API never names a prompt.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "command_line.h"
#include "commands.h"
#include "distributed_options.h"
#include "runtime_options.h"
#include "zipmoe/base/error.h"
#include "zipmoe/serve/listen_address.h"
#include "zipmoe/serve/openai_server.h"
#include "zipmoe/serve/serve_scheduler.h"

namespace zipmoe::cli {
namespace {

std::vector<OptionSpec> serveOptionSpecs() {
  std::vector<OptionSpec> o = {
      {"--host", "ADDR", "the address to listen on (default 127.0.0.1: loopback only; another needs --api-key)"},
      {"--port", "N", "the port (default 8080; 0 = any free port, printed)"},
      {"--api-key", "KEY", "require 'Authorization: Bearer KEY' on every /v1 request (/v1/messages: or 'x-api-key: KEY')"},
      {"--api-key-file", "FILE", "the same, the key read from FILE (its first line)"},
      {"--metrics-public", "", "serve GET /metrics without the API key (Prometheus scrapers)"},
      {"--allow-no-key", "", "serve a non-loopback --host without an API key (anyone who reaches it may use it)"},
      {"--allowed-host", "NAME", "also accept this name in the Host header", true},
      {"--cors", "ORIGIN", "let web pages of ORIGIN (http://host[:port]) call the API (default: no cross-origin calls)", true},
      {"--model-id", "NAME", "the model's name in the API (default: MODEL's directory name)"},
      {"--max-batch", "B", "requests decoding together (1-256, default 8)"},
      {"--schedule", "fcfs|coserve", "admission policy (default fcfs; coserve: fewest expert loads, with aging)"},
      {"--aging-steps", "N", "coserve: a request waiting N forward steps goes first (default 128)"},
      {"--prefill-chunk", "N", "prompt tokens of one request per forward step (default 128)"},
      {"--step-tokens", "N", "tokens of one forward step, all requests together (default 256)"},
      {"--cached-sequences", "N", "finished conversations kept for prefix reuse (0-1024, default 8)"},
      {"--prompt-cache", "DIR", "keep finished conversations' KV cache in DIR for reuse, also after a restart"},
      {"--prompt-cache-size", "SIZE", "with --prompt-cache: the files' total size (default 2G; least recently used go first)"},
      {"--expert-floor", "PCT", "with --budget: the least share of it the experts keep (0-100, default 50)"},
      {"--default-max-tokens", "N", "max_tokens of a request that names none (default 256)"},
      {"--max-body", "SIZE", "the largest request body accepted (default 1M)"},
      {"--max-connections", "N", "requests served at once (4-1024, default 64; connections still sending a request wait apart)"},
      {"--read-timeout", "S", "a request's head within S seconds, its body within S + 1 per 64 KiB (1-3600, default 10)"},
      {"--dtype", "auto|bf16|fp32", "compute type (auto: bf16 where the CPU has it)"},
      {"--threads", "N", "compute threads (0 = every CPU this process may use, up to 4096)"},
      contextOverflowOptionSpec(),
  };
  for (const OptionSpec& r : runtimeOptionSpecs()) o.push_back(r);
  return o;
}

const CommandSpec& serveSpec() {
  static const CommandSpec spec{
      "zipmoe serve MODEL [OPTIONS]",
      "Serves MODEL over an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, /v1/models, /health)\n"
      "and Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) with continuous batching, until\n"
      "SIGTERM or SIGINT.",
      serveOptionSpecs(), 1, 1,
      "MODEL is an HF directory or a ZipMoE store. With --budget (a store), the budget is the whole memory of\n"
      "serving: the experts, the KV cache (reserved per request for prompt + max_tokens) and the activations;\n"
      "requests wait for memory instead of exceeding it. With --replay-trace TSV (benchmarks), the n-th admitted request\n"
      "is routed from the trace's prompt n mod its prompts. docs/SERVER.md lists the OpenAI and Anthropic fields mapped and refused."};
  return spec;
}

// An origin as browsers send it: scheme://host[:port], nothing after.
std::string checkedOrigin(const std::string& origin) {
  const size_t scheme = origin.find("://");
  const bool ok = scheme != std::string::npos && scheme > 0 && origin.size() > scheme + 3 &&
                  origin.find_first_of("/?# ", scheme + 3) == std::string::npos;
  if (!ok)
    throw Error("option --cors: '" + origin + "' is not an origin: give scheme://host[:port], e.g. http://localhost:3000");
  return origin;
}

std::string checkedHostName(const std::string& name) {
  if (name.empty() || name.find_first_of("/?# @") != std::string::npos)
    throw Error("option --allowed-host: '" + name + "' is not a host name: give a name such as my-pc.lan");
  return name;
}

std::string readKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("option --api-key-file: cannot read '" + path + "'");
  std::string key;
  std::getline(in, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) throw Error("option --api-key-file: '" + path + "' holds no key on its first line");
  return key;
}

}  // namespace

int runServe(const Args& args) {
  const CommandSpec& spec = serveSpec();
  const CommandLine line = CommandLine::parse(spec, args);
  if (line.help()) return printUsage(spec);
  const std::filesystem::path dir = line.positional(0);

  ServerOptions server;
  server.host = line.text("--host", "127.0.0.1");
  server.port = line.integer<int>("--port", 0, 65535, 8080);
  if (line.has("--api-key") && line.has("--api-key-file")) throw Error("give --api-key or --api-key-file, not both");
  if (const auto k = line.text("--api-key")) {
    if (k->empty()) throw Error("option --api-key: the key is empty");
    server.apiKey = *k;
  }
  if (const auto f = line.text("--api-key-file")) server.apiKey = readKeyFile(*f);
  if (!isLoopbackHost(server.host) && server.apiKey.empty() && !line.has("--allow-no-key"))
    throw Error("option --host: '" + server.host +
                "' is not a loopback address, and without an API key anyone who reaches this machine could use the "
                "server: give --api-key KEY (or --api-key-file FILE), or --allow-no-key to serve without one");
  for (const std::string& h : line.texts("--allowed-host")) server.allowedHosts.push_back(checkedHostName(h));
  for (const std::string& o : line.texts("--cors")) server.corsOrigins.push_back(checkedOrigin(o));
  server.readTimeoutSeconds = line.integer<int>("--read-timeout", 1, 3600, 10);
  server.modelId = line.text("--model-id", std::filesystem::absolute(dir).lexically_normal().filename().string());
  if (server.modelId.empty()) server.modelId = "zipmoe";
  server.metricsPublic = line.has("--metrics-public");
  server.metrics = std::make_shared<ServeMetrics>();
  server.maxConnections = line.integer<int>("--max-connections", 4, 1024, 64);
  if (const auto v = line.text("--max-body")) server.maxBodyBytes = static_cast<size_t>(parseByteSize("--max-body", *v));

  ServeOptions serve;
  serve.maxBatch = line.integer<int>("--max-batch", 1, 256, 8);
  serve.policy = parseSchedulePolicy(line.text("--schedule", "fcfs"));
  serve.agingSteps = line.integer<int>("--aging-steps", 0, 1 << 20, 128);
  serve.prefillChunk = line.integer<int>("--prefill-chunk", 1, 1 << 16, 128);
  serve.maxStepTokens = line.integer<int>("--step-tokens", 2, 1 << 20, std::max(256, serve.maxBatch + 1));
  serve.cachedSequences = line.integer<int>("--cached-sequences", 0, 1024, 8);
  serve.expertFloorShare = line.number("--expert-floor", 0, 100, 50) / 100.0;
  serve.limits.defaultMaxTokens = line.integer<int>("--default-max-tokens", 1, 1 << 20, 256);
  serve.contextOverflow = parseContextOverflowOption(line);
  if (const auto d = line.text("--prompt-cache")) {
    if (d->empty()) throw Error("option --prompt-cache: the directory is empty");
    serve.promptCacheDir = *d;
  }
  if (const auto v = line.text("--prompt-cache-size")) {
    if (serve.promptCacheDir.empty()) throw Error("option --prompt-cache-size needs --prompt-cache DIR");
    serve.promptCacheBytes = parseByteSize("--prompt-cache-size", *v);
    if (serve.promptCacheBytes == 0) throw Error("option --prompt-cache-size: '" + *v + "' leaves no room for a file");
  }

  EngineOptions options;
  if (const auto v = line.text("--dtype")) {
    if (*v == "auto") options.model.dtype = ComputeDtype::Auto;
    else if (*v == "bf16") options.model.dtype = ComputeDtype::BFloat16;
    else if (*v == "fp32") options.model.dtype = ComputeDtype::Float32;
    else throw Error("option --dtype must be auto, bf16 or fp32, got '" + *v + "'");
  }
  options.model.threads = line.integer<int>("--threads", 0, 4096, 0);
  const auto budget = parseRuntimeOptions(line, options);
  if (!options.replayTrace.empty()) {
    if (line.has("--trace-prompt"))
      throw Error("option --trace-prompt: zipmoe serve replays one trace prompt per request (the n-th admitted "
                  "request replays prompt n mod the trace's prompts); drop --trace-prompt");
    options.replayPerRequest = true;
  }

  // Every thread started from here on inherits the mask: only sigwait below takes these signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const std::filesystem::path replayTrace = options.replayTrace;
  // The budget is serving's whole memory: the engine opens the runtime with the experts' part of it.
  // With --budget auto the experts' budget follows free memory; the KV cache lives in the margin.
  if (budget && !options.followFreeMemory) serve.memoryBudget = options.runtime->budget;
  serve.onStep = server.metrics->chainStepObserver(std::move(serve.onStep));
  options.serve = serve;
  auto engine = openEngine(dir, std::move(options), budget);
  ServeScheduler& scheduler = engine->scheduler();
  server.metrics->setSources({engine->sharedRuntime(), [] { return remoteExpertCalls(); }});
  OpenAiServer http(scheduler, server);
  const int port = http.start();
  std::printf("zipmoe: listening on %s (model '%s', schedule %s, max batch %d%s)\n", httpUrl(server.host, port).c_str(),
              server.modelId.c_str(), schedulePolicyName(serve.policy), serve.maxBatch,
              server.apiKey.empty() ? "" : ", API key required");
  if (isWildcardHost(server.host))
    std::fprintf(stderr,
                 "zipmoe: listening on every interface (%s): this machine reaches it at %s, other machines at this "
                 "machine's address, port %d\n",
                 server.host.c_str(), httpUrl(server.host.find(':') == std::string::npos ? "127.0.0.1" : "::1", port).c_str(),
                 port);
  if (engine->requestRouting())
    std::fprintf(stderr, "zipmoe: routing replayed from %s, one of its %d prompts per request\n",
                 replayTrace.filename().string().c_str(), engine->requestRouting()->trace().numPrompts());
  std::fflush(stdout);

  int received = 0;
  sigwait(&signals, &received);
  std::fprintf(stderr, "zipmoe: %s received, shutting down\n", received == SIGTERM ? "SIGTERM" : "SIGINT");
  http.stop();
  scheduler.stop();
  const ServeCounters c = scheduler.counters();
  std::fprintf(stderr, "zipmoe: served %llu requests (%llu cancelled, %llu failed), %llu tokens in %llu steps\n",
               static_cast<unsigned long long>(c.completed), static_cast<unsigned long long>(c.cancelled),
               static_cast<unsigned long long>(c.failed), static_cast<unsigned long long>(c.generatedTokens),
               static_cast<unsigned long long>(c.steps));
  return 0;
}

}  // namespace zipmoe::cli
