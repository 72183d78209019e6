// `zipmoe` — the command-line face of the engine: convert, inspect, verify, make-model, bench, info,
// generate, chat.
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>

#include "command_line.h"
#include "commands.h"
#include "zipmoe/base/error.h"

namespace zipmoe::cli {

bool takeOption(Args& args, const std::string& name, std::string& value) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) {
      if (i + 1 >= args.size()) throw Error("option " + name + " needs a value");
      value = args[i + 1];
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      return true;
    }
    if (args[i].rfind(name + "=", 0) == 0) {
      value = args[i].substr(name.size() + 1);
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
  }
  return false;
}

bool takeFlag(Args& args, const std::string& name) {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == name) {
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
  return false;
}

long long parseInteger(const std::string& option, const std::string& text) {
  return parseIntegerIn(option, text, std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max());
}

double parseNumber(const std::string& option, const std::string& text) {
  return parseNumberIn(option, text, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max());
}

std::string percentText(double percent) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g %%", percent);
  return buf;
}

void expectPositionals(const Args& args, size_t count, const std::string& usage) {
  for (const auto& a : args)
    if (a.size() > 1 && a[0] == '-') throw Error("unknown option '" + a + "'\nusage: " + usage);
  if (args.size() != count)
    throw Error("expected " + std::to_string(count) + " argument" + (count == 1 ? "" : "s") + ", got " +
                std::to_string(args.size()) + "\nusage: " + usage);
}

namespace {

constexpr const char* kUsage =
    "usage: zipmoe COMMAND [ARGS]     (zipmoe COMMAND --help, or zipmoe help COMMAND, lists a command's options)\n"
    "\n"
    "commands:\n"
    "  convert HF_DIR OUT_DIR [OPTIONS]   convert an HF checkpoint to a store\n"
    "  inspect STORE                      sizes, ratios, exponent entropy and bound of a store\n"
    "  verify STORE HF_DIR                bit-exact round trip of every tensor against the source\n"
    "  make-model [OPTIONS] OUT_DIR       write a synthetic model (HF directory) of any family\n"
    "  bench codec STORE [OPTIONS]        compare exponent codecs on a store's expert tensors\n"
    "  bench runtime [OPTIONS]            ZipMoE vs full-tensor offloading: TPOT at several budgets\n"
    "  bench suite NAME [OPTIONS]         the paper's evaluation: budget, batch, length, ablation, scheduler,\n"
    "                                     threads or all; JSON and PNG figures (docs/BENCHMARKS.md)\n"
    "  bench report DIR [OPTIONS]         the suites' results in DIR as Markdown tables\n"
    "  bench compare DIR_A DIR_B [OPTIONS]  a rerun beside an earlier run: change of every figure\n"
    "  bench tokenizer MODEL --text FILE  encode and decode speed of a model's tokenizer\n"
    "  bench constrain MODEL  what tool calls / structured output add to a decode step\n"
    "  bench prefetch-accuracy MODEL --text FILE  how well the prefetch predictors name the next experts\n"
    "  bench planner [OPTIONS]            time to plan every layer's pool split at several budgets\n"
    "  bench chat MODEL [OPTIONS]         time to first token per turn, with and without KV-cache reuse\n"
    "  bench kernels [OPTIONS]            memory read bandwidth and the BF16 GEMV kernels' speed\n"
    "  bench serve MODEL [OPTIONS]        load on the HTTP server: throughput, TTFT, inter-token latency\n"
    "  bench dist --trace TSV [OPTIONS]   experts shared by 3 node processes: local share, calls, bytes, TPOT\n"
    "  profile STORE [OPTIONS]            measure this machine's I/O, decompression and compute costs\n"
    "  plan STORE --budgets PCT,... [OPTIONS]  the planner's predicted TPOT / TTFT at each budget\n"
    "  info                               build and CPU facts\n"
    "  generate MODEL --prompt TEXT [OPTIONS]  generate a reply (chat template applied unless --raw)\n"
    "  chat MODEL [OPTIONS]               interactive chat on stdin (/exit, /reset, /system TEXT)\n"
    "  serve MODEL [OPTIONS]              an OpenAI-compatible HTTP server with continuous batching\n"
    "  node STORE --listen ADDR [OPTIONS]  serve this machine's share of the experts to other machines (gRPC)\n"
    "  train-demo --corpus FILE --out DIR [OPTIONS]  train the demo MoE model (BPE + Mixtral) on a corpus\n"
    "\n"
    "codecs: huffman8, huffman, nibble, zstd[:LEVEL], lz4[:ACCEL], lz4hc[:LEVEL], raw; without --codec, convert\n"
    "  measures huffman8, nibble and zstd on this machine and its disk and takes the cheapest (zipmoe inspect: why)\n"
    "--budget SIZE|PCT% (generate, chat; PCT in bench): PCT % of the model's expert bytes in BF16, 0 < PCT <= 100,\n"
    "  the whole budget with the runtime's working set in it; a budget below the runtime's minimum is refused.\n";

constexpr const char* kBenchUsage =
    "usage: zipmoe bench SUB-COMMAND [ARGS]   (zipmoe bench SUB-COMMAND --help lists its options)\n"
    "\n"
    "sub-commands:\n"
    "  codec STORE            every exponent codec on a sample of a store's expert tensors\n"
    "  runtime                ZipMoE vs full-tensor offloading at several budgets\n"
    "  suite NAME             the paper's evaluation: budget, batch, length, ablation, scheduler, threads, prefetch, all\n"
    "  report DIR             the suites' results in DIR as Markdown tables\n"
    "  compare DIR_A DIR_B    a rerun beside an earlier run: the change of every figure\n"
    "  tokenizer MODEL        encode and decode speed of a model's tokenizer on a text\n"
    "  constrain MODEL        constrained decoding's cost per decode step on a model's vocabulary\n"
    "  prefetch-accuracy MODEL  the prefetch predictors' accuracy on held-out text\n"
    "  planner                time to plan every layer's pool split at several budgets\n"
    "  chat MODEL             time to first token per turn, with and without KV-cache reuse\n"
    "  kernels                memory read bandwidth and the BF16 GEMV kernels' speed\n"
    "  serve MODEL            load on the HTTP server: throughput, TTFT, inter-token latency, expert loads\n"
    "  dist --trace TSV       experts shared by 3 node processes (DanceMoE placement vs baselines)\n";

// `bench report` and `bench compare` read their own arguments; their command lines are checked (and
// their --help answered) here first, so that they too refuse an unknown option before any work.
const CommandSpec kReportSpec{"zipmoe bench report DIR [OPTIONS]",
                              "The suites' results in DIR (SUITE-LABEL.json) as the Markdown tables of docs/BENCHMARKS.md.",
                              {{"--workload", "LABEL", "only the results of this workload label"}},
                              1, 1, ""};
const CommandSpec kCompareSpec{"zipmoe bench compare DIR_A DIR_B [OPTIONS]",
                               "A rerun (DIR_B) beside an earlier run (DIR_A): the change of every figure, and whether "
                               "the fastest system holds.",
                               {{"--workload", "LABEL", "only the results of this workload label"},
                                {"--tolerance", "PCT", "a timing within ±PCT % counts as the same (default 20)"},
                                {"--all", "", "list every figure, not only those outside the tolerance"}},
                               2, 2, ""};

int runChecked(const CommandSpec& spec, const Args& args, int (*run)(const Args&)) {
  if (CommandLine::parse(spec, args).help()) return printUsage(spec);
  return run(args);
}

bool asksForHelp(const Args& args) {
  return !args.empty() && (args[0] == "--help" || args[0] == "-h");
}

int dispatch(const std::string& command, Args args) {
  if (command == "convert") return runConvert(args);
  if (command == "inspect") return runInspect(args);
  if (command == "verify") return runVerify(args);
  if (command == "make-model") return runMakeModel(args);
  if (command == "info") return runInfo(args);
  if (command == "plan") return runPlan(args);
  if (command == "generate") return runGenerate(args);
  if (command == "chat") return runChat(args);
  if (command == "serve") return runServe(args);
  if (command == "train-demo") return runTrainDemo(args);
  if (command == "profile") return runProfile(args);
  if (command == "node") return runNode(args);
  if (command == "bench") {
    if (args.empty()) throw Error(std::string("bench needs a sub-command\n") + kBenchUsage);
    if (asksForHelp(args)) {
      std::fputs(kBenchUsage, stdout);
      return 0;
    }
    const std::string which = args[0];
    args.erase(args.begin());
    if (which == "suite") return runBenchSuite(args);
    if (which == "report") return runChecked(kReportSpec, args, runBenchReport);
    if (which == "compare") return runChecked(kCompareSpec, args, runBenchCompare);
    if (which == "codec") return runBenchCodec(args);
    if (which == "runtime") return runBenchRuntime(args);
    if (which == "tokenizer") return runBenchTokenizer(args);
    if (which == "constrain") return runBenchConstrain(args);
    if (which == "prefetch-accuracy") return runBenchPrefetchAccuracy(args);
    if (which == "planner") return runBenchPlanner(args);
    if (which == "chat") return runBenchChat(args);
    if (which == "kernels") return runBenchKernels(args);
    if (which == "serve") return runBenchServe(args);
    if (which == "dist") return runBenchDist(args);
    throw Error("unknown bench sub-command '" + which + "'\n" + kBenchUsage);
  }
  if (command == "help" || command == "--help" || command == "-h") {
    if (args.empty()) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    // help COMMAND [SUB-COMMAND]: that command's --help.
    const std::string what = args[0];
    if (what == "help" || what == "--help" || what == "-h") throw Error("usage: zipmoe help [COMMAND [SUB-COMMAND]]");
    args.erase(args.begin());
    args.resize(std::min<size_t>(args.size(), 1));
    args.push_back("--help");
    return dispatch(what, std::move(args));
  }
  throw Error("unknown command '" + command + "'\n" + kUsage);
}

}  // namespace
}  // namespace zipmoe::cli

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(zipmoe::cli::kUsage, stderr);
    return 2;
  }
  zipmoe::cli::Args args(argv + 2, argv + argc);
  try {
    return zipmoe::cli::dispatch(argv[1], std::move(args));
  } catch (const zipmoe::Cancelled& e) {
    std::fprintf(stderr, "\nzipmoe: %s\n", e.what());
    return 130;
  } catch (const zipmoe::Error& e) {
    std::fprintf(stderr, "zipmoe: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "zipmoe: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zipmoe: internal error: %s\n", e.what());
    return 3;
  }
}
