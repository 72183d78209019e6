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
#include <limits>
#include <optional>

#include <algorithm>
#include <cctype>
#include <fstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "distributed_options.h"
#include "runtime_options.h"
#include "terminal_progress.h"
#include "zipmoe/chat_session.h"
#include "zipmoe/text/chat_template.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/error.h"
#include "zipmoe/model/generator.h"
#include "zipmoe/model/model.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe::cli {
namespace {

std::vector<OptionSpec> samplingOptionSpecs() {
  return {
      {"--max-tokens", "N", "stop after N generated tokens (1-100000000)"},
      {"--temperature", "T", "sampling temperature, 0 = greedy"},
      {"--top-k", "K", "sample from the K most likely tokens (0 = off)"},
      {"--top-p", "P", "nucleus sampling: the smallest set of tokens with probability P (0-1)"},
      {"--min-p", "P", "drop tokens below P × the top token's probability (0-1)"},
      {"--repetition-penalty", "R", "penalise tokens already in the context (1 = off)"},
      {"--seed", "S", "sampling seed (0 or more)"},
      {"--stop", "STR", "stop when the reply contains STR", true},
      {"--dtype", "auto|bf16|fp32", "compute type (auto: bf16 where the CPU has it)"},
      {"--threads", "N", "compute threads (0 = every CPU this process may use, up to 4096)"},
      {"--matmul", "KERNEL", "decoding's matrix products: auto (default), libtorch, scalar, avx2, avx512-bf16"},
  };
}

std::vector<OptionSpec> concat(std::vector<OptionSpec> a, const std::vector<OptionSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::string kModelNote =
    "MODEL is an HF directory or a ZipMoE store; the runtime options need a store. --budget PCT% is PCT % of the\n"
    "model's expert bytes in BF16, the whole budget (the runtime's working set comes out of it); a budget below\n"
    "the runtime's minimum is refused with the minimum in bytes and percent.";

const CommandSpec& generateSpec() {
  static const CommandSpec spec{
      "zipmoe generate MODEL --prompt TEXT [OPTIONS]",
      "Generates a reply to TEXT, streamed to stdout; time to first token and per output token go to stderr.",
      concat(concat({{"--prompt", "TEXT", "the user message (or, with --raw, the text to continue)"},
                     {"--system", "TEXT", "a system message"},
                     {"--raw", "", "no chat template: encode the prompt as is"},
                     {"--ignore-eos", "", "generate through end-of-sequence tokens until --max-tokens (benchmarks: a fixed length)"},
                     {"--trace", "OUT.json", "write the runtime's operations as Chrome trace JSON (needs --budget)"},
                     contextOverflowOptionSpec()},
                    samplingOptionSpecs()),
             runtimeOptionSpecs()),
      1, 1, kModelNote};
  return spec;
}

const CommandSpec& chatSpec() {
  static const CommandSpec spec{
      "zipmoe chat MODEL [OPTIONS]",
      "Interactive chat on stdin: /exit, /reset and /system TEXT are commands, EOF ends.",
      concat(concat({{"--system", "TEXT", "a system message"}, contextOverflowOptionSpec()}, samplingOptionSpecs()),
             runtimeOptionSpecs()),
      1, 1,
      kModelNote};
  return spec;
}

SamplingParams parseSampling(const CommandLine& line) {
  SamplingParams p;
  p.maxTokens = line.integer<int>("--max-tokens", 1, 100000000, p.maxTokens);
  p.temperature = line.number("--temperature", 0, 1e6, p.temperature);
  p.topK = line.integer<int>("--top-k", 0, 100000000, p.topK);
  p.topP = line.number("--top-p", 0, 1, p.topP);
  p.minP = line.number("--min-p", 0, 1, p.minP);
  p.repetitionPenalty = line.number("--repetition-penalty", 0, 1e6, p.repetitionPenalty);
  p.seed = line.integer<uint64_t>("--seed", 0, std::numeric_limits<uint64_t>::max(), p.seed);
  p.stopStrings = line.texts("--stop");
  validate(p);
  return p;
}

ModelOptions parseModelOptions(const CommandLine& line) {
  ModelOptions o;
  if (const auto v = line.text("--dtype")) {
    if (*v == "auto") o.dtype = ComputeDtype::Auto;
    else if (*v == "bf16") o.dtype = ComputeDtype::BFloat16;
    else if (*v == "fp32") o.dtype = ComputeDtype::Float32;
    else throw Error("option --dtype must be auto, bf16 or fp32, got '" + *v + "'");
  }
  o.threads = line.integer<int>("--threads", 0, 4096, 0);
  if (const auto v = line.text("--matmul")) {
    bool known = false;
    for (const MatmulKernel k : {MatmulKernel::Auto, MatmulKernel::Libtorch, MatmulKernel::Scalar, MatmulKernel::Avx2,
                                 MatmulKernel::Avx512Bf16})
      if (*v == matmulKernelName(k)) {
        o.matmul = k;
        known = true;
      }
    if (!known) throw Error("option --matmul must be auto, libtorch, scalar, avx2 or avx512-bf16, got '" + *v + "'");
    if (!matmulKernelSupported(o.matmul)) throw Error("option --matmul " + *v + ": this CPU does not have its instructions");
  }
  return o;
}

struct Session {
  std::unique_ptr<Engine> engine;
  Tokenizer* tokenizer = nullptr;
  MoeModel* model = nullptr;
  const ChatTemplate* chatTemplate = nullptr;
  PrefetchPredictor prefetch = PrefetchPredictor::Off;
};

Session open(const std::filesystem::path& dir, EngineOptions options, const std::optional<std::string>& budget,
             bool awaitWarmStart) {
  Session s;
  s.prefetch = options.model.prefetch.predictor;
  s.engine = openEngine(dir, std::move(options), budget, awaitWarmStart);
  s.tokenizer = &s.engine->tokenizer();
  s.model = &s.engine->model();
  s.chatTemplate = s.engine->chatTemplate();
  std::fprintf(stderr, "zipmoe: loaded %s (%s, %s) in %.1f s\n", dir.string().c_str(), familyName(s.model->config().family),
               s.model->computeDtype() == ComputeDtype::BFloat16 ? "bf16" : "fp32", s.engine->loadSeconds());
  return s;
}

void printStats(const GenerationStats& s) {
  std::fprintf(stderr, "[%d prompt tokens, %d reused, %d prefilled", s.promptTokens, s.reusedTokens, s.prefilledTokens);
  if (s.droppedMessages > 0)
    std::fprintf(stderr, " (the %d oldest message%s left out to fit the context window)", s.droppedMessages,
                 s.droppedMessages == 1 ? "" : "s");
  std::fprintf(stderr, "; %d generated; time to first token %.1f ms", s.generatedTokens, s.timeToFirstTokenMs);
  if (s.generatedTokens > 1 && s.timePerOutputTokenMs > 0)
    std::fprintf(stderr, "; time per output token %.1f ms (%.2f tokens/s)", s.timePerOutputTokenMs,
                 1000.0 / s.timePerOutputTokenMs);
  if (s.weightBytesPerToken > 0)
    std::fprintf(stderr, "; weights read per token %.1f MB", static_cast<double>(s.weightBytesPerToken) / 1e6);
  std::fprintf(stderr, "; stop: %s]\n", stopReasonName(s.stopReason));
}

// Streams the reply to the user's message to stdout; Ctrl-C (the interrupt flag) stops it.
GenerationStats reply(Session& s, ChatSession& chat, const std::string& message, const SamplingParams& params) {
  const std::atomic<bool>* interrupted = installInterruptHandler();
  resetInterrupt();
  const GenerationStats turn = chat.send(message, params, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  }, interrupted);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (interrupted->load()) std::fprintf(stderr, "[interrupted]\n");
  printStats(turn);
  if (s.engine->runtime()) std::fprintf(stderr, "%s\n", describeRuntime(*s.engine->runtime()).c_str());
  if (const std::string a = describePrefetchAccuracy(*s.model, s.prefetch); !a.empty()) std::fprintf(stderr, "%s\n", a.c_str());
  if (const std::string d = describeDistributed(); !d.empty()) std::fprintf(stderr, "%s\n", d.c_str());
  return turn;
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
  const CommandLine line = CommandLine::parse(generateSpec(), arguments);
  if (line.help()) return printUsage(generateSpec());
  const std::optional<std::string> promptText = line.text("--prompt");
  const bool haveSystem = line.has("--system");
  const std::string prompt = promptText.value_or(""), system = line.text("--system", "");
  const bool raw = line.has("--raw");
  const std::optional<std::string> tracePathText = line.text("--trace");
  const bool trace = tracePathText.has_value();
  const std::string tracePath = tracePathText.value_or("");
  const SamplingParams params = parseSampling(line);
  const ContextOverflow overflow = parseContextOverflowOption(line);
  EngineOptions options;
  options.model = parseModelOptions(line);
  const auto budget = parseRuntimeOptions(line, options);
  const Args& args = line.positionals();
  if (!promptText) throw Error("generate needs --prompt TEXT\nusage: " + generateSpec().synopsis);
  if (prompt.empty()) throw Error("--prompt is empty: give the text to answer (or, with --raw, to continue)");
  if (trace && !budget) throw Error("--trace records the expert runtime's operations: give --budget SIZE|PCT% too");
  if (trace && !std::ofstream(tracePath, std::ios::binary | std::ios::trunc))  // fail before generating
    throw Error("--trace: cannot write " + tracePath);
  Session s = open(args[0], options, budget, line.has("--warm-start"));

  const bool useTemplate = !raw && s.chatTemplate;
  if (!raw && !s.chatTemplate) std::fprintf(stderr, "zipmoe: note: %s has no chat template; using the raw prompt\n", args[0].c_str());
  if (haveSystem && !useTemplate) std::fprintf(stderr, "zipmoe: note: --system is ignored without a chat template\n");
  ChatSession chat(*s.engine, ChatSessionOptions{useTemplate, overflow, line.has("--ignore-eos")});
  if (useTemplate && haveSystem) chat.setSystemPrompt(system);
  const GenerationStats stats = reply(s, chat, prompt, params);
  if (trace) {
    std::vector<TraceEvent> events;
    s.engine->runtime()->drainTrace(events);
    writeChromeTraceFile(tracePath, events, s.engine->runtime()->lanes());
    std::fprintf(stderr, "zipmoe: wrote %zu trace events to %s\n", events.size(), tracePath.c_str());
  }
  return stats.stopReason == StopReason::Stopped ? 130 : 0;
}

int runChat(const Args& arguments) {
  const CommandLine cmdline = CommandLine::parse(chatSpec(), arguments);
  if (cmdline.help()) return printUsage(chatSpec());
  const std::string system = cmdline.text("--system", "");
  const SamplingParams params = parseSampling(cmdline);
  const ContextOverflow overflow = parseContextOverflowOption(cmdline);
  EngineOptions options;
  options.model = parseModelOptions(cmdline);
  const auto budget = parseRuntimeOptions(cmdline, options);
  const Args& args = cmdline.positionals();
  const std::filesystem::path dir = args[0];
  if (!ChatTemplate::hasChatTemplate(dir / "tokenizer_config.json"))
    throw Error(dir.string() + " has no chat template (tokenizer_config.json has no chat_template), so `chat` cannot "
                "format a conversation; use `zipmoe generate MODEL --raw --prompt TEXT` for plain completion");
  Session s = open(dir, options, budget, cmdline.has("--warm-start"));

  const bool interactive = ::isatty(STDIN_FILENO) == 1;
  if (interactive) std::fprintf(stderr, "chat: /exit to quit, /reset to clear the conversation, /system TEXT to set the system prompt\n");
  const std::atomic<bool>* interrupted = installInterruptHandler();
  ChatSession chat(*s.engine, ChatSessionOptions{true, overflow});
  chat.setSystemPrompt(system);
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
      chat.clear();
      std::fprintf(stderr, "[conversation cleared]\n");
      continue;
    }
    if (line->rfind("/system", 0) == 0 && (line->size() == 7 || (*line)[7] == ' ')) {
      chat.setSystemPrompt(line->size() > 8 ? line->substr(8) : std::string());
      std::fprintf(stderr, chat.systemPrompt().empty() ? "[system prompt cleared]\n" : "[system prompt set]\n");
      continue;
    }
    try {
      reply(s, chat, *line, params);
    } catch (const Cancelled&) {
      throw;
    } catch (const Error& e) {
      // A template that refuses the conversation or a message over the context window ends this turn only.
      std::fprintf(stderr, "zipmoe: error: %s\n", e.what());
      if (std::string(e.what()).find("too long") != std::string::npos)
        std::fprintf(stderr, "zipmoe: /reset starts a new conversation\n");
    }
  }
  return 0;
}

namespace {

const CommandSpec& benchChatSpec() {
  static const CommandSpec spec{
      "zipmoe bench chat MODEL [OPTIONS]",
      "Time to first token of every turn of a conversation, answered twice: by one ChatSession that keeps its\n"
      "KV cache between turns (reuse), and by a fresh session per turn that prefills the whole conversation\n"
      "(the turns interleaved, so both meet the expert caches in the same state; one untimed warm-up turn first).\n"
      "User messages are cut from --text; replies are greedy, so both answers of a turn must be the same text\n"
      "(checked). Turns that no longer fit the context window leave the oldest messages out (the dropped column).",
      concat(concat({{"--text", "FILE", "where the user messages come from (default resources/corpus/tinyshakespeare.txt)"},
                     {"--turns", "N", "user turns (1-50, default 3)"},
                     {"--words", "W", "words per user message (1-10000, default 150)"},
                     {"--json", "FILE", "also write every turn's figures as JSON"}},
                    samplingOptionSpecs()),
             runtimeOptionSpecs()),
      1, 1, kModelNote};
  return spec;
}

// The next `words` whitespace-separated words of `text` from `pos`, joined by single spaces.
std::string takeWords(const std::string& text, size_t& pos, int words) {
  std::string out;
  for (int w = 0; w < words && pos < text.size(); ++w) {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
    const size_t start = pos;
    while (pos < text.size() && !std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
    if (pos == start) continue;
    if (!out.empty()) out += ' ';  // two appends: GCC 12's -O3 -Wrestrict misreads `"" + substr`
    out.append(text, start, pos - start);
  }
  return out;
}

nlohmann::ordered_json turnJson(const GenerationStats& t) {
  return {{"prompt_tokens", t.promptTokens},     {"reused_tokens", t.reusedTokens},
          {"prefilled_tokens", t.prefilledTokens}, {"dropped_messages", t.droppedMessages},
          {"generated_tokens", t.generatedTokens},
          {"ttft_ms", t.timeToFirstTokenMs}, {"tpot_ms", t.timePerOutputTokenMs}};
}

}  // namespace

int runBenchChat(const Args& arguments) {
  const CommandLine line = CommandLine::parse(benchChatSpec(), arguments);
  if (line.help()) return printUsage(benchChatSpec());
  const std::filesystem::path textPath = line.text("--text", "resources/corpus/tinyshakespeare.txt");
  const int turns = line.integer<int>("--turns", 1, 50, 3);
  const int words = line.integer<int>("--words", 1, 10000, 150);
  SamplingParams params = parseSampling(line);
  if (!line.has("--temperature")) params.temperature = 0;
  if (!line.has("--max-tokens")) params.maxTokens = 32;
  if (params.temperature != 0) throw Error("bench chat compares greedy replies: --temperature must be 0");
  EngineOptions options;
  options.model = parseModelOptions(line);
  const auto budget = parseRuntimeOptions(line, options);
  const std::filesystem::path dir = line.positional(0);
  if (!std::filesystem::is_regular_file(textPath)) throw Error(textPath.string() + ": no such text file (--text)");
  if (!ChatTemplate::hasChatTemplate(dir / "tokenizer_config.json"))
    throw Error(dir.string() + " has no chat template (tokenizer_config.json has no chat_template): bench chat needs one");
  const std::string text = readInputFile(textPath);
  Session s = open(dir, options, budget, line.has("--warm-start"));

  const auto discard = [](std::string_view) { return true; };
  {  // Untimed warm-up: libtorch's first calls and the first expert reads are not what is measured.
    ChatSession warmUp(*s.engine);
    size_t warmPos = 0;
    warmUp.send(takeWords(text, warmPos, words), params, discard);
  }
  ChatSession kept(*s.engine);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  size_t pos = 0;
  bool sameReplies = true;
  std::printf("%-5s %8s %8s %10s %8s %12s %12s %8s\n", "turn", "prompt", "reused", "prefilled", "dropped", "TTFT reuse",
              "TTFT fresh", "speedup");
  for (int turn = 1; turn <= turns; ++turn) {
    const std::string message = takeWords(text, pos, words);
    if (message.empty()) throw Error(textPath.string() + ": the text ran out after " + std::to_string(turn - 1) + " turns");
    // The fresh session first: it gets the same conversation the kept session is about to answer.
    std::vector<ChatMessage> history = kept.messages();
    history.push_back({"user", message});
    ChatSession fresh(*s.engine);
    fresh.setMessages(history);
    const GenerationStats f = fresh.reply(params, discard);
    const GenerationStats k = kept.send(message, params, discard);
    if (k.text != f.text) sameReplies = false;
    const double speedup = f.timeToFirstTokenMs / std::max(1e-9, k.timeToFirstTokenMs);
    std::printf("%-5d %8d %8d %10d %8d %9.1f ms %9.1f ms %7.2fx\n", turn, k.promptTokens, k.reusedTokens,
                k.prefilledTokens, k.droppedMessages, k.timeToFirstTokenMs, f.timeToFirstTokenMs, speedup);
    rows.push_back({{"turn", turn}, {"reuse", turnJson(k)}, {"fresh", turnJson(f)}, {"ttft_speedup", speedup}});
  }
  std::printf("replies of the two sessions %s\n", sameReplies ? "identical" : "DIFFER");
  if (s.engine->runtime()) std::printf("%s\n", describeRuntime(*s.engine->runtime()).c_str());
  if (const auto out = line.text("--json")) {
    nlohmann::ordered_json j;
    j["model"] = dir.string();
    j["host"] = hostIdentity();
    j["budget"] = budget ? *budget : "resident";
    j["dtype"] = s.model->computeDtype() == ComputeDtype::BFloat16 ? "bf16" : "fp32";
    j["words_per_message"] = words;
    j["max_tokens"] = params.maxTokens;
    j["identical_replies"] = sameReplies;
    j["turns"] = rows;
    std::ofstream f(*out);
    f << j.dump(2) << "\n";
    if (!f) throw Error(*out + ": cannot write");
  }
  return sameReplies ? 0 : 1;
}

}  // namespace zipmoe::cli
