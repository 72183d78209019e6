// `zipmoe bench runtime`: ZipMoE against full-tensor offloading with an LRU cache (and any other
// systems asked for) in one run, on one store, with the same trace-replayed routing, the same
// prompts and the same memory budgets; cold reads (O_DIRECT) unless --buffered.
//
// Without --hf/--store it generates a Qwen1.5-MoE-A2.7B-shaped model (real shapes, --layers of
// them) in --workdir and converts it, once. The dense weights are loaded once; for every budget and
// system a fresh runtime is plugged in. Per run: prefill of --prompt-tokens, then --tokens greedy
// decode steps; TPOT is the mean decode step after --warmup steps, TTFT the prefill. Prints a table,
// the pool split the planner chose, hit rates, bytes read, layer makespans against the lower bound,
// and replanning times; writes everything as JSON (--json, default WORKDIR/bench-runtime.json).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench_harness.h"
#include "commands.h"
#include "runtime_options.h"
#include "zipmoe/error.h"

namespace zipmoe::cli {

int runBenchRuntime(const Args& arguments) {
  Args args = arguments;
  const std::string usage =
      "zipmoe bench runtime [--workdir DIR] [--hf HF_DIR --store STORE] [--layers N] [--budgets 10,25,50]\n"
      "  [--systems zipmoe,full-lru] [--trace-file TSV] [--trace-prompts 0,1] [--prompt-tokens N] [--tokens N]\n"
      "  [--warmup N] [--workers L] [--threads N] [--pools FCSE] [--buffered] [--no-warm-up] [--json OUT]";
  std::string v, workdir = "out/bench", hfArg, storeArg, json;
  int layers = 8, promptTokens = 16, tokens = 24, warmup = 4, threads = 0, workers = 0;
  std::vector<double> budgets = {10, 25, 50};
  std::vector<std::string> systems = {"zipmoe", "full-lru"};
  std::vector<int> tracePrompts = {0};
  std::filesystem::path traceFile = "../shared/data/traces/qwen1.5-moe.tsv";  // read at run time, never copied
  unsigned pools = 0xF;
  takeOption(args, "--workdir", workdir);
  takeOption(args, "--hf", hfArg);
  takeOption(args, "--store", storeArg);
  json = workdir + "/bench-runtime.json";
  takeOption(args, "--json", json);
  auto positive = [&](const char* name, int& out, int lo, int hi) {
    if (takeOption(args, name, v)) {
      const long long n = parseInteger(name, v);
      if (n < lo || n > hi) throw Error(std::string("option ") + name + " must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + v);
      out = static_cast<int>(n);
    }
  };
  positive("--layers", layers, 1, 24);
  positive("--prompt-tokens", promptTokens, 1, 4096);
  positive("--tokens", tokens, 2, 100000);
  positive("--warmup", warmup, 0, 100000);
  positive("--threads", threads, 0, 4096);
  positive("--workers", workers, 0, 256);
  if (warmup >= tokens) throw Error("option --warmup must be below --tokens");
  if (takeOption(args, "--budgets", v)) {
    budgets.clear();
    for (const auto& b : splitList(v)) {
      const double x = parseNumber("--budgets", b);
      if (!(x > 0 && x <= 1000)) throw Error("option --budgets: " + b + " is not a percentage in (0, 1000]");
      budgets.push_back(x);
    }
  }
  if (takeOption(args, "--systems", v)) systems = splitList(v);
  if (takeOption(args, "--trace-file", v)) traceFile = v;
  if (takeOption(args, "--trace-prompts", v)) {
    tracePrompts.clear();
    for (const auto& p : splitList(v)) tracePrompts.push_back(static_cast<int>(parseInteger("--trace-prompts", p)));
  }
  if (takeOption(args, "--pools", v)) pools = parsePools(v);
  const ReadMode mode = takeFlag(args, "--buffered") ? ReadMode::Buffered : ReadMode::Direct;
  const bool warmUp = !takeFlag(args, "--no-warm-up");
  expectPositionals(args, 0, usage);
  if (!std::filesystem::exists(traceFile))
    throw Error("trace file " + traceFile.string() + " not found (give --trace-file ../shared/data/traces/qwen1.5-moe.tsv)");

  // The model and the store, made once (generated and converted when absent).
  std::filesystem::create_directories(workdir);
  const std::string tag = "qwen1.5-moe-" + std::to_string(layers) + "l";
  WorkloadSpec spec;
  spec.label = tag;
  spec.hf = hfArg.empty() ? std::filesystem::path(workdir) / (tag + "-hf") : std::filesystem::path(hfArg);
  spec.store = storeArg.empty() ? std::filesystem::path(workdir) / (tag + "-store") : std::filesystem::path(storeArg);
  if (!hfArg.empty() && !std::filesystem::exists(spec.hf / "config.json")) throw Error(spec.hf.string() + " has no config.json");
  if (!storeArg.empty() && !std::filesystem::exists(spec.store / "manifest.json"))
    throw Error(spec.store.string() + " is not a store (no manifest.json)");
  spec.generateFamily = "qwen2_moe";
  spec.generatePreset = "qwen1.5-moe-a2.7b";
  spec.generateLayers = layers;
  spec.traceFile = traceFile;
  spec.readMode = mode;
  spec.threads = threads;
  auto workload = BenchWorkload::open(spec);
  const CostProfile& profile = workload->profile();
  const uint64_t expertBytes = workload->expertBytes();
  std::fprintf(stderr, "bench: profile u %.2f ms, v %.2f ms, c %.2f ms, recovery %.2f ms, BF16 tensor read %.2f ms, FFN %.2f + %.3f·t ms\n",
               profile.smRead * 1e3, profile.eRead * 1e3, profile.decompress * 1e3, profile.recover * 1e3,
               profile.fullRead * 1e3, profile.computeBase * 1e3, profile.computePerToken * 1e3);

  RuntimeOptions base;
  base.pools = pools;
  base.decompressWorkers = workers;
  base.readMode = mode;
  std::vector<BenchSystem> parsed;
  for (const auto& s : systems) parsed.push_back(parseBenchSystem(s, base, spec.hf));
  RunSettings settings;
  settings.prompts = tracePrompts;
  settings.promptTokens = promptTokens;
  settings.tokens = tokens;
  settings.warmup = warmup;

  if (warmUp && !budgets.empty() && !parsed.empty())
    workload->warmUp(parsed, static_cast<uint64_t>(budgets.front() / 100.0 * static_cast<double>(expertBytes)), settings);

  nlohmann::json results = nlohmann::json::array();
  std::printf("%-22s %7s %10s %10s %8s %8s %8s %8s %8s %9s %10s %10s\n", "system", "budget", "TPOT ms", "TTFT ms", "F/C/S/E%",
              "", "", "", "miss%", "MiB/token", "layer ms", "meas/LB");
  for (double budgetPct : budgets) {
    const auto budgetBytes = static_cast<uint64_t>(budgetPct / 100.0 * static_cast<double>(expertBytes));
    for (const BenchSystem& sys : parsed) {
      // The prompts one after the other on one runtime, as a chat would run them.
      RunSettings run = settings;
      run.measureReplan = true;
      const RunResult sum = workload->run(sys, budgetBytes, run);
      if (sum.skipped) {
        std::printf("%-22s %6.1f%%  skipped: %s\n", sys.name.c_str(), budgetPct, sum.skipReason.c_str());
        continue;
      }
      const double tpot = sum.tpotMs / 1e3, ttftMs = sum.ttftMs, mibPerToken = sum.mibReadPerToken, layerMs = sum.layerMs,
                   ratio = sum.makespanOverBound;
      const int decodeSteps = (tokens - warmup) * static_cast<int>(tracePrompts.size());
      const auto& hit = sum.hitPercent;
      std::printf("%-22s %6.1f%% %10.1f %10.1f %7.1f %8.1f %8.1f %8.1f %8.1f %9.1f %10.2f %10.2f\n", sys.name.c_str(), budgetPct,
                  tpot * 1e3, ttftMs, hit[0], hit[1], hit[2], hit[3], sum.missPercent, mibPerToken, layerMs, ratio);
      if (sys.options.mode == OffloadMode::ZipMoE)
        std::printf("%-22s         pool split F %.0f%% C %.0f%% S %.0f%% E %.0f%% (mean over layers); replanning %.2f ms mean, %.2f ms max\n",
                    "", 100 * sum.poolRatio[0], 100 * sum.poolRatio[1], 100 * sum.poolRatio[2], 100 * sum.poolRatio[3],
                    sum.replanMeanMs, sum.replanMaxMs);
      std::fflush(stdout);
      nlohmann::json r = {{"system", sys.name},
                          {"budget_percent", budgetPct},
                          {"budget_bytes", budgetBytes},
                          {"tpot_ms", tpot * 1e3},
                          {"ttft_ms", ttftMs},
                          {"decode_steps", decodeSteps},
                          {"hit_percent", hit},
                          {"miss_percent", sum.missPercent},
                          {"mib_read_per_token", mibPerToken},
                          {"layer_makespan_ms", layerMs},
                          {"makespan_over_lower_bound", ratio},
                          {"pool_ratio", sum.poolRatio},
                          {"pool_capacity_bytes", sum.poolCapacityBytes},
                          {"working_set_bytes", sum.workingSetBytes},
                          {"replan_ms_mean", sum.replanMeanMs},
                          {"replan_ms_max", sum.replanMaxMs},
                          {"stall_s", sum.stallSeconds}};
      results.push_back(r);
    }
  }
  // TPOT ratios against the first full-tensor system at each budget.
  std::printf("\nTPOT speed-up of each system over the full-tensor baseline at the same budget:\n");
  for (double budgetPct : budgets) {
    const nlohmann::json* baseline = nullptr;
    for (const auto& r : results)
      if (r["budget_percent"] == budgetPct && r["system"].get<std::string>().rfind("full-", 0) == 0) {
        baseline = &r;
        break;
      }
    if (!baseline) continue;
    for (const auto& r : results)
      if (r["budget_percent"] == budgetPct && &r != baseline)
        std::printf("  %5.1f%%  %-22s %.2f× (vs %s)\n", budgetPct, r["system"].get<std::string>().c_str(),
                    (*baseline)["tpot_ms"].get<double>() / r["tpot_ms"].get<double>(),
                    (*baseline)["system"].get<std::string>().c_str());
  }
  const nlohmann::json doc = {{"command", "zipmoe bench runtime"},
                              {"store", spec.store.string()},
                              {"trace_file", traceFile.string()},
                              {"trace_prompts", tracePrompts},
                              {"prompt_tokens", promptTokens},
                              {"tokens", tokens},
                              {"warmup", warmup},
                              {"read_mode", mode == ReadMode::Direct ? "direct" : "buffered"},
                              {"host", profile.host},
                              {"profile", {{"u_ms", profile.smRead * 1e3}, {"v_ms", profile.eRead * 1e3},
                                           {"c_ms", profile.decompress * 1e3}, {"recover_ms", profile.recover * 1e3},
                                           {"full_read_ms", profile.fullRead * 1e3}}},
                              {"results", results}};
  std::ofstream out(json);
  out << doc.dump(2) << "\n";
  if (!out) throw Error("cannot write " + json);
  std::fprintf(stderr, "bench: wrote %s\n", json.c_str());
  return 0;
}

}  // namespace zipmoe::cli
