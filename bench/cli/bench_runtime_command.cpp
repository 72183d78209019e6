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
#include "command_line.h"
#include "commands.h"
#include "runtime_options.h"
#include "zipmoe/base/error.h"

namespace zipmoe::cli {

int runBenchRuntime(const Args& arguments) {
  static const CommandSpec command{
      "zipmoe bench runtime [OPTIONS]",
      "ZipMoE against full-tensor offloading (and any other systems) at several budgets, on one store, with the\n"
      "same trace-replayed routing and prompts: TPOT, TTFT, hit rates, pool split, replanning time.",
      {{"--workdir", "DIR", "where the generated model and store are kept (default out/bench)"},
       {"--hf", "HF_DIR", "an existing HF checkpoint instead of the generated one (with --store)"},
       {"--store", "STORE", "an existing store instead of the generated one"},
       {"--layers", "N", "layers of the generated Qwen1.5-MoE-shaped model (1-24, default 8)"},
       {"--budgets", "LIST", "budgets, each PCT or PCT% (0-100) of the expert bytes (default 10,25,50)"},
       {"--systems", "LIST", "compared systems (default zipmoe,full-lru; see bench suite --help)"},
       {"--trace-file", "TSV", "activation trace to replay (default ../shared/data/traces/qwen1.5-moe.tsv)"},
       {"--trace-prompts", "LIST", "the trace's prompts, one request each (default 0)"},
       {"--prompt-tokens", "N", "prompt length (1-4096, default 16)"},
       {"--tokens", "N", "decode steps (2-100000, default 24)"},
       {"--warmup", "N", "decode steps left out of TPOT (below --tokens, default 4)"},
       {"--workers", "L", "decompression workers (0 = the runtime's default, up to 256)"},
       {"--threads", "N", "compute threads (0 = every CPU this process may use, up to 4096)"},
       {"--pools", "FCSE", "ZipMoE pools to use"},
       {"--buffered", "", "page-cache reads instead of O_DIRECT"},
       {"--no-warm-up", "", "skip the unmeasured warm-up pass"},
       {"--json", "OUT", "results file (default WORKDIR/bench-runtime.json)"}},
      0, 0,
      "A budget PCT is PCT % of the model's expert bytes in BF16, the whole budget (working set included), as in\n"
      "`bench suite` and `generate --budget PCT%`; a system whose minimum is above it is reported as skipped."};
  const CommandLine line = CommandLine::parse(command, arguments);
  if (line.help()) return printUsage(command);
  const std::string workdir = line.text("--workdir", "out/bench"), hfArg = line.text("--hf", ""),
                    storeArg = line.text("--store", "");
  const std::string json = line.text("--json", workdir + "/bench-runtime.json");
  const int layers = line.integer<int>("--layers", 1, 24, 8);
  const int promptTokens = line.integer<int>("--prompt-tokens", 1, 4096, 16);
  const int tokens = line.integer<int>("--tokens", 2, 100000, 24);
  const int warmup = line.integer<int>("--warmup", 0, 100000, 4);
  const int threads = line.integer<int>("--threads", 0, 4096, 0);
  const int workers = line.integer<int>("--workers", 0, 256, 0);
  if (warmup >= tokens) throw Error("option --warmup must be below --tokens");
  std::vector<double> budgets = {10, 25, 50};
  if (const auto v = line.text("--budgets")) {
    budgets.clear();
    for (const auto& b : splitList(*v)) budgets.push_back(parseBudgetPercent("--budgets", b));
    if (budgets.empty()) throw Error("option --budgets needs at least one percentage");
  }
  std::vector<std::string> systems = {"zipmoe", "full-lru"};
  if (const auto v = line.text("--systems")) systems = splitList(*v);
  if (systems.empty()) throw Error("option --systems needs at least one system");
  const std::filesystem::path traceFile = line.text("--trace-file", "../shared/data/traces/qwen1.5-moe.tsv");
  const std::vector<int> tracePrompts =
      line.has("--trace-prompts") ? parseIntList("--trace-prompts", *line.text("--trace-prompts"), 0, 1 << 20) : std::vector<int>{0};
  const PoolMask pools = line.has("--pools") ? parsePoolMask(*line.text("--pools"), "option --pools") : kAllPools;
  const ReadMode mode = line.has("--buffered") ? ReadMode::Buffered : ReadMode::Direct;
  const bool warmUp = !line.has("--no-warm-up");
  const std::string tag = "qwen1.5-moe-" + std::to_string(layers) + "l";
  const std::filesystem::path hfDir =
      hfArg.empty() ? std::filesystem::path(workdir) / (tag + "-hf") : std::filesystem::path(hfArg);
  RuntimeOptions base;
  base.pools = pools;
  base.decompressWorkers = workers;
  base.readMode = mode;
  std::vector<BenchSystem> parsed;
  for (const auto& s : systems) parsed.push_back(parseBenchSystem(s, base, hfDir));
  if (!std::filesystem::exists(traceFile))
    throw Error("trace file " + traceFile.string() + " not found (give --trace-file ../shared/data/traces/qwen1.5-moe.tsv)");

  // The model and the store, made once (generated and converted when absent).
  WorkloadSpec spec;
  spec.label = tag;
  spec.hf = hfDir;
  spec.store = storeArg.empty() ? std::filesystem::path(workdir) / (tag + "-store") : std::filesystem::path(storeArg);
  if (!hfArg.empty() && !std::filesystem::exists(spec.hf / "config.json")) throw Error(spec.hf.string() + " has no config.json");
  if (!storeArg.empty() && !std::filesystem::exists(spec.store / "manifest.json"))
    throw Error(spec.store.string() + " is not a store (no manifest.json)");
  std::filesystem::create_directories(workdir);
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
  if (profile.hasContention())
    std::fprintf(stderr, "bench: contention with %d busy decoders: FFN (1 token) %.2f → %.2f ms (×%.2f), decompression ×%.2f, "
                 "whole-tensor read ×%.2f\n", profile.contentionWorkers, profile.computeBusy.front() * 1e3,
                 profile.computeBusy.back() * 1e3, profile.computeSlowdown(), profile.decompressSlowdown(),
                 profile.readSlowdown());

  RunSettings settings;
  settings.prompts = tracePrompts;
  settings.promptTokens = promptTokens;
  settings.tokens = tokens;
  settings.warmup = warmup;

  if (warmUp && !budgets.empty() && !parsed.empty())
    workload->warmUp(parsed, budgetBytes(budgets.front(), expertBytes), settings);

  nlohmann::json results = nlohmann::json::array();
  std::printf("%-22s %7s %10s %10s %8s %8s %8s %8s %8s %9s %10s %10s\n", "system", "budget", "TPOT ms", "TTFT ms", "F/C/S/E%",
              "", "", "", "miss%", "MiB/token", "layer ms", "meas/LB");
  for (double budgetPct : budgets) {
    const uint64_t bytes = budgetBytes(budgetPct, expertBytes);
    for (const BenchSystem& sys : parsed) {
      // The prompts one after the other on one runtime, as a chat would run them.
      RunSettings run = settings;
      run.measureReplan = true;
      const RunResult sum = workload->run(sys, bytes, run);
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
                          {"budget_bytes", bytes},
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
                                           {"full_read_ms", profile.fullRead * 1e3},
                                           {"tensor_read_ms", profile.tensorRead * 1e3},
                                           {"ffn_1_token_busy_ms", [&] {
                                              std::vector<double> v;
                                              for (double t : profile.computeBusy) v.push_back(t * 1e3);
                                              return v;
                                            }()},
                                           {"compute_slowdown", profile.computeSlowdown()},
                                           {"decompress_slowdown", profile.decompressSlowdown()},
                                           {"read_slowdown", profile.readSlowdown()}}},
                              {"results", results}};
  std::ofstream out(json);
  out << doc.dump(2) << "\n";
  if (!out) throw Error("cannot write " + json);
  std::fprintf(stderr, "bench: wrote %s\n", json.c_str());
  return 0;
}

}  // namespace zipmoe::cli
