// `zipmoe` — the command-line face of the engine: convert, inspect, verify, make-model, bench, info,
// generate, chat.
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>

#include "commands.h"
#include "zipmoe/error.h"

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
  long long v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty())
    throw Error("option " + option + ": '" + text + "' is not an integer");
  return v;
}

double parseNumber(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw Error("option " + option + ": '" + text + "' is not a number");
  return v;
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
    "usage: zipmoe COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  convert HF_DIR OUT_DIR [--codec C] [--level N] [--shards K]   convert an HF checkpoint to a store\n"
    "  inspect STORE                          sizes, ratios, exponent entropy and bound of a store\n"
    "  verify STORE HF_DIR                    bit-exact round trip of every tensor against the source\n"
    "  make-model --family F --preset P OUT_DIR   write a test model (HF directory) of any family\n"
    "  bench codec STORE                      compare exponent codecs on a store's expert tensors\n"
    "  bench runtime [OPTIONS]                ZipMoE vs full-tensor offloading: TPOT at several budgets\n"
    "  bench suite NAME [OPTIONS]             the paper's evaluation: budget, batch, length, ablation, scheduler,\n"
    "                                         threads or all; JSON and PNG figures (docs/BENCHMARKS.md)\n"
    "  bench report DIR [--workload LABEL]    the suites' results in DIR as Markdown tables\n"
    "  bench compare DIR_A DIR_B [--workload LABEL] [--tolerance PCT] [--all]\n"
    "                                         a rerun beside an earlier run: change of every figure\n"
    "  profile STORE [--buffered] [--out F]   measure this machine's I/O, decompression and compute costs\n"
    "  info                                   build and CPU facts\n"
    "  generate MODEL --prompt TEXT [OPTIONS] generate a reply (chat template applied unless --raw)\n"
    "  chat MODEL [OPTIONS]                   interactive chat on stdin (/exit, /reset, /system TEXT)\n"
    "  train-demo --corpus FILE --out DIR     train the demo MoE model (BPE + Mixtral) on a corpus\n"
    "\n"
    "codecs: huffman (default), zstd[:LEVEL], lz4[:ACCEL], lz4hc[:LEVEL], raw\n"
    "\n"
    "generate/chat OPTIONS: [--system TEXT] [--raw] [--max-tokens N] [--temperature T] [--top-k K]\n"
    "  [--top-p P] [--min-p P] [--repetition-penalty R] [--seed S] [--stop STR]... [--dtype auto|bf16|fp32]\n"
    "  [--threads N]; MODEL is an HF directory or a ZipMoE store\n"
    "runtime OPTIONS (stores): [--budget SIZE|PCT%] [--pools FCSE] [--offload zipmoe|full --checkpoint HF_DIR]\n"
    "  [--eviction zipmoe|lru|fifo|lfu|marking] [--no-plan] [--fifo-schedule] [--workers L] [--buffered]\n"
    "  [--profile FILE] [--replay-trace TSV [--trace-prompt N]]; generate also takes [--trace OUT.json]\n";

int dispatch(const std::string& command, Args args) {
  if (command == "convert") return runConvert(args);
  if (command == "inspect") return runInspect(args);
  if (command == "verify") return runVerify(args);
  if (command == "make-model") return runMakeModel(args);
  if (command == "info") return runInfo(args);
  if (command == "generate") return runGenerate(args);
  if (command == "chat") return runChat(args);
  if (command == "train-demo") return runTrainDemo(args);
  if (command == "profile") return runProfile(args);
  if (command == "bench") {
    const std::string which = args.empty() ? "" : args[0];
    if (!args.empty()) args.erase(args.begin());
    if (which == "suite") return runBenchSuite(args);
    if (which == "report") return runBenchReport(args);
    if (which == "compare") return runBenchCompare(args);
    if (which == "codec") return runBenchCodec(args);
    if (which == "runtime") return runBenchRuntime(args);
    throw Error("usage: zipmoe bench codec STORE | runtime [OPTIONS] | suite NAME [OPTIONS] | report DIR | compare DIR_A DIR_B");
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
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
