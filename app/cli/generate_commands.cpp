// `zipmoe generate` and `zipmoe chat`: text generation from an HF directory or a ZipMoE store.
//
//   zipmoe generate MODEL --prompt TEXT [--system TEXT] [--raw] [SAMPLING] [--dtype auto|bf16|fp32] [--threads N]
//                         [RUNTIME] [--trace OUT.json]
//   zipmoe chat MODEL [--system TEXT] [SAMPLING] [--dtype ...] [--threads N] [RUNTIME]
//   SAMPLING: [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p P]
//             [--repetition-penalty R] [--seed S] [--stop STR]...
// generate applies the model's chat template (system + user message, generation prompt) unless --raw
// is given or the model has none (then the prompt is encoded as is, with the tokenizer's bos). chat
// keeps the conversation, re-renders the template every turn and streams each reply; /exit, /reset and
// /system TEXT are commands, EOF ends. The reply goes to stdout as it is generated; time to first token
// and time per output token go to stderr after each reply. RUNTIME (see runtime_options.h): with
// --budget the experts come from the ZipMoE runtime (or a full-tensor baseline) under that memory
// budget, and its pool split, hit rates and makespans are printed after each reply; --trace writes
// every runtime operation as Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev). Ctrl-C stops the reply in progress (in
// chat, the conversation goes on; at the chat prompt it ends the chat).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <fstream>

#include "commands.h"
#include "runtime_options.h"
#include "terminal_progress.h"
#include "zipmoe/chat_template.h"
#include "zipmoe/error.h"
#include "zipmoe/generator.h"
#include "zipmoe/model.h"
#include "zipmoe/tokenizer.h"

namespace zipmoe::cli {
namespace {

constexpr const char* kSamplingUsage =
    "[--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R] [--seed S] "
    "[--stop STR]... [--dtype auto|bf16|fp32] [--threads N]";

std::string generateUsage() {
  return std::string("zipmoe generate MODEL --prompt TEXT [--system TEXT] [--raw] ") + kSamplingUsage + " " +
         kRuntimeUsage + " [--trace OUT.json]";
}
std::string chatUsage() { return std::string("zipmoe chat MODEL [--system TEXT] ") + kSamplingUsage + " " + kRuntimeUsage; }

SamplingParams parseSampling(Args& args) {
  SamplingParams p;
  std::string v;
  if (takeOption(args, "--max-tokens", v)) {
    const long long n = parseInteger("--max-tokens", v);
    if (n < 1 || n > 100000000) throw Error("option --max-tokens must be in 1..100000000, got " + v);
    p.maxTokens = static_cast<int>(n);
  }
  if (takeOption(args, "--temperature", v)) p.temperature = parseNumber("--temperature", v);
  if (takeOption(args, "--top-k", v)) {
    const long long k = parseInteger("--top-k", v);
    if (k < 0 || k > 100000000) throw Error("option --top-k must be in 0..100000000 (0 = off), got " + v);
    p.topK = static_cast<int>(k);
  }
  if (takeOption(args, "--top-p", v)) p.topP = parseNumber("--top-p", v);
  if (takeOption(args, "--min-p", v)) p.minP = parseNumber("--min-p", v);
  if (takeOption(args, "--repetition-penalty", v)) p.repetitionPenalty = parseNumber("--repetition-penalty", v);
  if (takeOption(args, "--seed", v)) {
    const long long s = parseInteger("--seed", v);
    if (s < 0) throw Error("option --seed must not be negative, got " + v);
    p.seed = static_cast<uint64_t>(s);
  }
  while (takeOption(args, "--stop", v)) p.stopStrings.push_back(v);
  validate(p);
  return p;
}

ModelOptions parseModelOptions(Args& args) {
  ModelOptions o;
  std::string v;
  if (takeOption(args, "--dtype", v)) {
    if (v == "auto") o.dtype = ComputeDtype::Auto;
    else if (v == "bf16") o.dtype = ComputeDtype::BFloat16;
    else if (v == "fp32") o.dtype = ComputeDtype::Float32;
    else throw Error("option --dtype must be auto, bf16 or fp32, got '" + v + "'");
  }
  if (takeOption(args, "--threads", v)) {
    const long long n = parseInteger("--threads", v);
    if (n < 0 || n > 4096) throw Error("option --threads must be in 0..4096 (0 = libtorch's default), got " + v);
    o.threads = static_cast<int>(n);
  }
  return o;
}

struct Session {
  std::unique_ptr<Engine> engine;
  Tokenizer* tokenizer = nullptr;
  MoeModel* model = nullptr;
  const ChatTemplate* chatTemplate = nullptr;
};

Session open(const std::filesystem::path& dir, EngineOptions options, const std::optional<BudgetSpec>& budget) {
  Session s;
  s.engine = openEngine(dir, std::move(options), budget);
  s.tokenizer = &s.engine->tokenizer();
  s.model = &s.engine->model();
  s.chatTemplate = s.engine->chatTemplate();
  std::fprintf(stderr, "zipmoe: loaded %s (%s, %s) in %.1f s\n", dir.string().c_str(), familyName(s.model->config().family),
               s.model->computeDtype() == ComputeDtype::BFloat16 ? "bf16" : "fp32", s.engine->loadSeconds());
  return s;
}

void printStats(const GenerationStats& s) {
  std::fprintf(stderr, "[%d prompt tokens, %d generated; time to first token %.1f ms", s.promptTokens,
               s.generatedTokens, s.timeToFirstTokenMs);
  if (s.generatedTokens > 1 && s.timePerOutputTokenMs > 0)
    std::fprintf(stderr, "; time per output token %.1f ms (%.2f tokens/s)", s.timePerOutputTokenMs,
                 1000.0 / s.timePerOutputTokenMs);
  std::fprintf(stderr, "; stop: %s]\n", s.stopReason.c_str());
}

// Streams one reply to stdout; Ctrl-C (the interrupt flag) stops it.
GenerationStats reply(Session& s, const std::vector<int32_t>& ids, const SamplingParams& params) {
  const std::atomic<bool>* interrupted = installInterruptHandler();
  resetInterrupt();
  const GenerationStats stats = generate(*s.model, *s.tokenizer, ids, params, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  }, interrupted);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (interrupted->load()) std::fprintf(stderr, "[interrupted]\n");
  printStats(stats);
  if (s.engine->runtime()) std::fprintf(stderr, "%s\n", describeRuntime(*s.engine->runtime()).c_str());
  return stats;
}

std::vector<ChatMessage> withSystem(const std::string& system, const std::vector<ChatMessage>& history) {
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  messages.insert(messages.end(), history.begin(), history.end());
  return messages;
}

// One line from stdin without the newline; nullopt at EOF or when interrupted.
std::optional<std::string> readLine() {
  char* buf = nullptr;
  size_t cap = 0;
  const ssize_t n = ::getline(&buf, &cap, stdin);
  std::optional<std::string> line;
  if (n >= 0) {
    line.emplace(buf, static_cast<size_t>(n));
    while (!line->empty() && (line->back() == '\n' || line->back() == '\r')) line->pop_back();
  }
  std::free(buf);
  return line;
}

}  // namespace

int runGenerate(const Args& arguments) {
  Args args = arguments;
  std::string prompt, system;
  const bool havePrompt = takeOption(args, "--prompt", prompt);
  const bool haveSystem = takeOption(args, "--system", system);
  const bool raw = takeFlag(args, "--raw");
  std::string tracePath;
  const bool trace = takeOption(args, "--trace", tracePath);
  const SamplingParams params = parseSampling(args);
  EngineOptions options;
  options.model = parseModelOptions(args);
  const auto budget = parseRuntimeOptions(args, options);
  expectPositionals(args, 1, generateUsage());
  if (!havePrompt) throw Error("generate needs --prompt TEXT\nusage: " + generateUsage());
  if (prompt.empty()) throw Error("--prompt is empty: give the text to answer (or, with --raw, to continue)");
  if (trace && !budget) throw Error("--trace records the expert runtime's operations: give --budget SIZE|PCT% too");
  std::ofstream traceOut;
  if (trace) {
    traceOut.open(tracePath, std::ios::binary | std::ios::trunc);
    if (!traceOut) throw Error("--trace: cannot write " + tracePath);
  }
  Session s = open(args[0], options, budget);

  std::vector<int32_t> ids;
  if (!raw && s.chatTemplate) {
    std::vector<ChatMessage> messages;
    if (haveSystem) messages.push_back({"system", system});
    messages.push_back({"user", prompt});
    ids = s.tokenizer->encode(s.chatTemplate->render(messages, true), false);  // the template writes bos
  } else {
    if (!raw) std::fprintf(stderr, "zipmoe: note: %s has no chat template; using the raw prompt\n", args[0].c_str());
    if (haveSystem) std::fprintf(stderr, "zipmoe: note: --system is ignored without a chat template\n");
    ids = s.tokenizer->encode(prompt, true);
  }
  const GenerationStats stats = reply(s, ids, params);
  if (trace) {
    std::vector<TraceEvent> events;
    s.engine->runtime()->drainTrace(events);
    writeChromeTrace(traceOut, events, s.engine->runtime()->lanes());
    traceOut.close();
    if (!traceOut) throw Error("--trace: writing " + tracePath + " failed");
    std::fprintf(stderr, "zipmoe: wrote %zu trace events to %s\n", events.size(), tracePath.c_str());
  }
  return stats.stopReason == "stopped" ? 130 : 0;
}

int runChat(const Args& arguments) {
  Args args = arguments;
  std::string system;
  takeOption(args, "--system", system);
  const SamplingParams params = parseSampling(args);
  EngineOptions options;
  options.model = parseModelOptions(args);
  const auto budget = parseRuntimeOptions(args, options);
  expectPositionals(args, 1, chatUsage());
  const std::filesystem::path dir = args[0];
  if (!ChatTemplate::hasChatTemplate(dir / "tokenizer_config.json"))
    throw Error(dir.string() + " has no chat template (tokenizer_config.json has no chat_template), so `chat` cannot "
                "format a conversation; use `zipmoe generate MODEL --raw --prompt TEXT` for plain completion");
  Session s = open(dir, options, budget);

  const bool interactive = ::isatty(STDIN_FILENO) == 1;
  if (interactive) std::fprintf(stderr, "chat: /exit to quit, /reset to clear the conversation, /system TEXT to set the system prompt\n");
  const std::atomic<bool>* interrupted = installInterruptHandler();
  std::vector<ChatMessage> history;
  for (;;) {
    resetInterrupt();
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    const std::optional<std::string> line = readLine();
    if (!line) {
      if (interactive || interrupted->load()) std::fputc('\n', stdout);
      break;
    }
    if (line->empty()) continue;
    if (*line == "/exit" || *line == "/quit") break;
    if (*line == "/reset") {
      history.clear();
      std::fprintf(stderr, "[conversation cleared]\n");
      continue;
    }
    if (line->rfind("/system", 0) == 0 && (line->size() == 7 || (*line)[7] == ' ')) {
      system = line->size() > 8 ? line->substr(8) : std::string();
      std::fprintf(stderr, system.empty() ? "[system prompt cleared]\n" : "[system prompt set]\n");
      continue;
    }
    history.push_back({"user", *line});
    try {
      const std::string text = s.chatTemplate->render(withSystem(system, history), true);
      const GenerationStats stats = reply(s, s.tokenizer->encode(text, false), params);
      history.push_back({"assistant", stats.text});
    } catch (const Cancelled&) {
      throw;
    } catch (const Error& e) {
      // A template that refuses the conversation or a prompt over the context window ends this turn only.
      history.pop_back();
      std::fprintf(stderr, "zipmoe: error: %s\n", e.what());
      if (std::string(e.what()).find("context window") != std::string::npos)
        std::fprintf(stderr, "zipmoe: /reset starts a new conversation\n");
    }
  }
  return 0;
}

}  // namespace zipmoe::cli
