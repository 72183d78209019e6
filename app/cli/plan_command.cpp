// `zipmoe plan STORE --budgets 10,25,50,75 [--activations FILE]`: what the runtime's planner predicts
// at each budget before any budget is moved — the pool split it would choose, the expected hit rate,
// each layer's expected makespan, and the time per output token (TPOT) and to the first token (TTFT)
// — from the store's cost profile and activation statistics (zipmoe/plan/budget_advisor.h, the same
// prediction the app's budget advisor draws).
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "commands.h"
#include "plan_check.h"
#include "zipmoe/trace/activation_trace.h"
#include "zipmoe/plan/budget_advisor.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/store.h"

namespace zipmoe::cli {

namespace {

// An activation trace (.tsv, as --replay-trace takes: MoE layer l counts the trace's active layer
// l mod their number, summed over its prompts) or the JSON the app exports
// ({"layers", "experts", "counts": [[per expert] per layer], "steps": [per layer]}).
ActivationCounts loadActivations(const std::filesystem::path& path, int layers, int experts) {
  ActivationCounts c;
  c.layers = layers;
  c.experts = experts;
  c.counts.assign(static_cast<size_t>(layers) * static_cast<size_t>(experts), 0);
  c.steps.assign(static_cast<size_t>(layers), 0);
  if (path.extension() == ".tsv") {
    const auto trace = ActivationTrace::load(path);
    if (trace->numExperts() != experts)
      throw Error(path.string() + ": the trace has " + std::to_string(trace->numExperts()) + " experts per layer, the store " +
                  std::to_string(experts));
    const std::vector<int>& active = trace->activeLayers();
    if (active.empty()) throw Error(path.string() + ": the trace has no layer with activations");
    for (int l = 0; l < layers; ++l) {
      const int traceLayer = active[static_cast<size_t>(l) % active.size()];
      for (int p = 0; p < trace->numPrompts(); ++p) {
        const auto row = trace->counts(p, traceLayer);
        for (int e = 0; e < experts; ++e) c.counts[static_cast<size_t>(l * experts + e)] += row[static_cast<size_t>(e)];
        c.steps[static_cast<size_t>(l)] += static_cast<uint64_t>(trace->tokens(p));
      }
    }
    return c;
  }
  std::ifstream in(path);
  if (!in) throw Error(path.string() + ": cannot open");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw Error(path.string() + ": not JSON (" + e.what() + ")");
  }
  const auto field = [&](const char* name) -> const nlohmann::json& {
    if (!j.is_object() || !j.contains(name)) throw Error(path.string() + ": no field '" + name + "'");
    return j.at(name);
  };
  if (!field("layers").is_number_integer() || field("layers").get<int>() != layers || !field("experts").is_number_integer() ||
      field("experts").get<int>() != experts)
    throw Error(path.string() + ": counts for " + field("layers").dump() + " layers x " + field("experts").dump() +
                " experts, but the store has " + std::to_string(layers) + " x " + std::to_string(experts));
  const nlohmann::json& counts = field("counts");
  const nlohmann::json& steps = field("steps");
  if (!counts.is_array() || counts.size() != static_cast<size_t>(layers) || !steps.is_array() ||
      steps.size() != static_cast<size_t>(layers))
    throw Error(path.string() + ": 'counts' and 'steps' must be arrays of " + std::to_string(layers) + " layers");
  for (int l = 0; l < layers; ++l) {
    const nlohmann::json& row = counts[static_cast<size_t>(l)];
    if (!row.is_array() || row.size() != static_cast<size_t>(experts))
      throw Error(path.string() + ": counts[" + std::to_string(l) + "] must hold " + std::to_string(experts) + " counts");
    for (int e = 0; e < experts; ++e) {
      const nlohmann::json& v = row[static_cast<size_t>(e)];
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<long long>() >= 0))
        throw Error(path.string() + ": counts[" + std::to_string(l) + "][" + std::to_string(e) + "] = " + v.dump() +
                    ", expected a count >= 0");
      c.counts[static_cast<size_t>(l * experts + e)] = v.get<uint64_t>();
    }
    const nlohmann::json& s = steps[static_cast<size_t>(l)];
    if (!s.is_number_unsigned() && !(s.is_number_integer() && s.get<long long>() >= 0))
      throw Error(path.string() + ": steps[" + std::to_string(l) + "] = " + s.dump() + ", expected a count >= 0");
    c.steps[static_cast<size_t>(l)] = s.get<uint64_t>();
  }
  return c;
}

std::string splitText(const std::array<double, kNumPools>& ratio) {
  std::string s;
  for (Pool p : kPools) {
    const double r = ratio[static_cast<size_t>(poolIndex(p))];
    if (r < 0.005) continue;
    if (!s.empty()) s += ' ';
    s += poolLetter(p);
    s += std::to_string(static_cast<int>(r * 100 + 0.5));
  }
  return s.empty() ? "-" : s;
}

}  // namespace

int runPlan(const Args& arguments) {
  static const CommandSpec spec{
      "zipmoe plan STORE --budgets PCT,PCT,... [OPTIONS]",
      "What the planner predicts at each budget (a % of the expert bytes in BF16, the runtime's working set\n"
      "included): the pool split, expected hit rate, per-layer makespan, TPOT and TTFT, from the store's cost\n"
      "profile and activation statistics. Nothing is read from the experts and no runtime is opened.",
      {{"--budgets", "PCT,...", "budgets as whole percentages of the expert bytes (1-100)"},
       {"--activations", "FILE", "activation counts: a trace (.tsv, as --replay-trace) or the app's JSON export;\n"
                                 "                        none: every layer plans from the prior"},
       {"--profile", "FILE", "the cost profile (default STORE/profile.json; `zipmoe profile STORE` makes it)"},
       {"--workers", "N", "decompression workers L (0 = one per core, the default)"},
       {"--pools", "FCSE", "the enabled pools (default FCSE)"},
       {"--dense-ms", "MS", "the model's time per token outside the expert batches (default 0: expert path only)"},
       {"--dense-prefill-ms", "MS", "the same per prompt token during prefill (default: --dense-ms)"},
       {"--prompt-tokens", "N", "prompt length of the TTFT prediction (1-100000, default 64)"},
       {"--json", "FILE", "also write the predictions as JSON"},
       {"--check", "", "measure each budget too (needs --hf and --replay-trace) and print the prediction error"},
       {"--hf", "DIR", "--check: the store's HF checkpoint (the all-resident reference reads it)"},
       {"--replay-trace", "TSV", "--check: force the routing from this activation trace (prompt 0)"},
       {"--tokens", "N", "--check: decode steps per measurement (6-4096, default 28; TPOT leaves out the first 4)"},
       {"--calibrate", "PCT", "--check: the budget whose run measures the dense time (1-100, default 75)"}},
      1, 1,
      "TPOT = dense + sum over layers of max(E[makespan] + p, k p), p = one expert FFN for one token\n"
      "(docs/APP.md, \"The budget advisor\"). The app measures the dense time of its replies; give it here with\n"
      "--dense-ms to compare with a measured TPOT."};
  const CommandLine line = CommandLine::parse(spec, arguments);
  if (line.help()) return printUsage(spec);
  const auto budgetsText = line.text("--budgets");
  if (!budgetsText) throw Error("zipmoe plan: --budgets is required (e.g. --budgets 10,25,50,75)");
  const std::vector<int> budgets = parseIntList("--budgets", *budgetsText, 1, 100);
  const std::filesystem::path dir = line.positional(0);
  const auto store = Store::open(dir);

  BudgetAdvisorInputs in;
  in.decompressWorkers = line.integer<int>("--workers", 0, 256, 0);
  in.pools = parsePoolMask(line.text("--pools", "FCSE"), "--pools");
  in.denseSecondsPerToken = line.number("--dense-ms", 0, 1e7, 0) * 1e-3;
  in.densePrefillSecondsPerToken = line.number("--dense-prefill-ms", 0, 1e7, in.denseSecondsPerToken * 1e3) * 1e-3;
  in.promptTokens = line.integer<int>("--prompt-tokens", 1, 100000, 64);
  const Manifest& m = store->manifest();
  std::string activations = "none (the prior)";
  if (const auto file = line.text("--activations")) {
    in.counts = loadActivations(*file, m.numLayers(), m.numExperts);
    activations = *file;
  }
  if (line.has("--check")) {
    PlanCheckSettings check;
    check.store = dir;
    const auto hf = line.text("--hf"), trace = line.text("--replay-trace");
    if (!hf || !trace) throw Error("zipmoe plan --check: give --hf DIR (the checkpoint) and --replay-trace TSV (the routing)");
    check.hf = *hf;
    check.trace = *trace;
    check.budgets = budgets;
    check.promptTokens = in.promptTokens;
    check.tokens = line.integer<int>("--tokens", 6, 4096, 28);
    check.calibrationBudget = line.integer<int>("--calibrate", 1, 100, 75);
    if (const auto out = line.text("--json")) check.json = *out;
    return runPlanCheck(check, in);
  }
  // (--check loads or measures the profile itself, as the benchmarks do.)
  const std::filesystem::path profilePath = line.text("--profile", (dir / "profile.json").string());
  if (!std::filesystem::exists(profilePath))
    throw Error(profilePath.string() + ": no cost profile (measure one with `zipmoe profile " + dir.string() + "`)");
  in.profile = loadCostProfile(profilePath);
  const BudgetAdvisor advisor(*store, in);

  std::printf("store          %s (%d MoE layers x %d experts, top-%d)\n", dir.string().c_str(), advisor.layers(),
              m.numExperts, advisor.topK());
  std::printf("profile        %s\nactivations    %s\n", profilePath.string().c_str(), activations.c_str());
  std::printf("expert bytes   %.1f MiB; working set (the least budget) %.1f MiB\n",
              static_cast<double>(advisor.expertBytes()) / 1048576.0, static_cast<double>(advisor.minimumBudget()) / 1048576.0);
  std::printf("dense          %.2f ms per token, %.3f ms per prompt token%s\n", in.denseSecondsPerToken * 1e3,
              in.densePrefillSecondsPerToken * 1e3, in.denseSecondsPerToken > 0 ? "" : "  (TPOT and TTFT: expert path only)");
  std::printf("%7s %11s %-16s %6s %10s %11s %9s %10s\n", "budget", "MiB", "split %", "hit %", "layer ms", "experts ms",
              "TPOT ms", "TTFT ms");
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (int pct : budgets) {
    const uint64_t bytes = MemoryBudget::shareBytes(pct / 100.0, advisor.expertBytes());
    const BudgetPrediction p = advisor.predict(bytes);
    if (!p.feasible) {
      std::printf("%6d%% %11.1f  below the working set of %.1f MiB\n", pct, static_cast<double>(bytes) / 1048576.0,
                  static_cast<double>(advisor.minimumBudget()) / 1048576.0);
      rows.push_back({{"budget_percent", pct}, {"budget_bytes", bytes}, {"feasible", false}});
      continue;
    }
    const double meanLayer =
        std::accumulate(p.layerMakespanSeconds.begin(), p.layerMakespanSeconds.end(), 0.0) / advisor.layers();
    std::printf("%6d%% %11.1f %-16s %6.1f %10.2f %11.1f %9.1f %10.1f\n", pct, static_cast<double>(bytes) / 1048576.0,
                splitText(p.ratio).c_str(), p.expectedHitRate * 100, meanLayer * 1e3, p.expertSecondsPerToken * 1e3,
                p.tpotSeconds * 1e3, p.ttftSeconds * 1e3);
    nlohmann::ordered_json layers = nlohmann::ordered_json::array();
    for (double s : p.layerMakespanSeconds) layers.push_back(s * 1e3);
    rows.push_back({{"budget_percent", pct},
                    {"budget_bytes", bytes},
                    {"feasible", true},
                    {"pool_ratio", {{"F", p.ratio[0]}, {"C", p.ratio[1]}, {"S", p.ratio[2]}, {"E", p.ratio[3]}}},
                    {"expected_hit_rate", p.expectedHitRate},
                    {"layer_makespan_ms", layers},
                    {"expert_ms_per_token", p.expertSecondsPerToken * 1e3},
                    {"tpot_ms", p.tpotSeconds * 1e3},
                    {"ttft_ms", p.ttftSeconds * 1e3}});
  }
  const auto curve = advisor.curve(41);
  const int knee = BudgetAdvisor::knee(curve);
  if (knee >= 0) {
    const BudgetPrediction& k = curve[static_cast<size_t>(knee)];
    std::printf("knee           beyond %.1f MiB (%.0f %% of the expert bytes) TPOT improves by less than 5 %%\n",
                static_cast<double>(k.budgetBytes) / 1048576.0, k.shareOfExperts * 100);
  }
  if (const auto out = line.text("--json")) {
    nlohmann::ordered_json j;
    j["store"] = dir.string();
    j["profile"] = profilePath.string();
    j["activations"] = activations;
    j["expert_bytes"] = advisor.expertBytes();
    j["working_set_bytes"] = advisor.minimumBudget();
    j["dense_ms"] = in.denseSecondsPerToken * 1e3;
    j["dense_prefill_ms_per_token"] = in.densePrefillSecondsPerToken * 1e3;
    j["prompt_tokens"] = in.promptTokens;
    j["predictions"] = rows;
    if (knee >= 0) j["knee_bytes"] = curve[static_cast<size_t>(knee)].budgetBytes;
    std::ofstream f(*out);
    f << j.dump(2) << "\n";
    if (!f) throw Error(*out + ": cannot write");
  }
  return 0;
}

}  // namespace zipmoe::cli
