// zipmoe plan --check (see plan_check.h).
#include "plan_check.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench_harness.h"
#include "runtime_options.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/store.h"

namespace zipmoe::cli {

namespace {

// The 1-, 5- and 15-minute load averages: how busy the (shared) machine was.
std::string loadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int runPlanCheck(const PlanCheckSettings& s, BudgetAdvisorInputs in) {
  const std::string loadBefore = loadAverage();
  WorkloadSpec spec;
  spec.label = "plan-check";
  spec.hf = s.hf;
  spec.store = s.store;
  spec.traceFile = s.trace;
  auto workload = BenchWorkload::open(spec);
  in.profile = workload->profile();
  const auto store = Store::open(s.store);
  const Manifest& m = store->manifest();

  RunSettings run;
  run.prompts = {0};
  run.promptTokens = s.promptTokens;
  run.tokens = s.tokens;
  run.warmup = s.warmup;
  RuntimeOptions base;
  base.pools = in.pools;
  base.decompressWorkers = in.decompressWorkers;
  base.history = in.counts;
  const BenchSystem zipmoe = parseBenchSystem("zipmoe", base, s.hf);
  std::fprintf(stderr, "plan --check: %s; warming up\n", workload->describe().c_str());
  workload->warmUp({zipmoe}, budgetBytes(s.budgets.front(), workload->expertBytes()), run);

  // The dense part, as the app measures it: the runtime's time between expert batches per step, from
  // a run at the calibration budget (not one of those compared). Its prefill share per prompt token
  // is that run's TTFT less the predicted prefill of the experts at that budget.
  const uint64_t calibrationBytes = budgetBytes(s.calibrationBudget, workload->expertBytes());
  const RunResult cal = workload->run(zipmoe, calibrationBytes, run);
  if (cal.skipped) throw Error("plan --check: the calibration run at " + std::to_string(s.calibrationBudget) + " % failed: " + cal.skipReason);
  const double layers = m.numLayers();
  in.observed = workload->observed();  // what the runtimes below open with
  in.promptTokens = s.promptTokens;
  in.denseSecondsPerToken = cal.denseMsPerStep / 1e3;
  in.densePrefillSecondsPerToken = 0;
  const double prefillExperts = BudgetAdvisor(*store, in).predict(calibrationBytes).ttftSeconds;
  const double dense = in.denseSecondsPerToken;
  const double densePrefill = std::max(0.0, (cal.ttftMs / 1e3 - prefillExperts) / s.promptTokens);
  in.densePrefillSecondsPerToken = densePrefill;
  std::printf("calibration at %d %%: TPOT %.1f ms, TTFT %.1f ms; dense %.1f ms per step (runtime), %.2f ms per prompt token\n",
              s.calibrationBudget, cal.tpotMs, cal.ttftMs, dense * 1e3, densePrefill * 1e3);

  std::printf("%7s %12s %12s %8s %12s %12s %8s %6s\n", "budget", "TPOT pred", "TPOT meas", "error", "TTFT pred", "TTFT meas",
              "error", "hit %");
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (int pct : s.budgets) {
    const uint64_t bytes = budgetBytes(pct, workload->expertBytes());
    // Predicted with what the runtime about to run opens with (the costs the runs so far observed).
    in.observed = workload->observed();
    const BudgetPrediction pred = BudgetAdvisor(*store, in).predict(bytes);
    const RunResult meas = workload->run(zipmoe, bytes, run);
    if (meas.skipped || !pred.feasible) {
      std::printf("%6d%%  skipped: %s\n", pct, meas.skipped ? meas.skipReason.c_str() : "below the working set");
      continue;
    }
    const double tpotErr = (pred.tpotSeconds * 1e3 - meas.tpotMs) / meas.tpotMs;
    const double ttftErr = (pred.ttftSeconds * 1e3 - meas.ttftMs) / meas.ttftMs;
    const double hit = 100.0 - meas.missPercent;
    const double rawErr = (pred.uncalibratedTpotSeconds * 1e3 - meas.tpotMs) / meas.tpotMs;
    std::printf("%6d%% %9.1f ms %9.1f ms %+7.1f%% %9.1f ms %9.1f ms %+7.1f%% %6.1f   (uncalibrated TPOT %.1f ms, %+.1f%%; ratio %.2f)\n",
                pct, pred.tpotSeconds * 1e3, meas.tpotMs, tpotErr * 100, pred.ttftSeconds * 1e3, meas.ttftMs, ttftErr * 100,
                hit, pred.uncalibratedTpotSeconds * 1e3, rawErr * 100, pred.calibration);
    rows.push_back({{"budget_percent", pct},
                    {"budget_bytes", bytes},
                    {"predicted_tpot_ms", pred.tpotSeconds * 1e3},
                    {"measured_tpot_ms", meas.tpotMs},
                    {"tpot_error", tpotErr},
                    {"uncalibrated_tpot_ms", pred.uncalibratedTpotSeconds * 1e3},
                    {"uncalibrated_tpot_error", rawErr},
                    {"calibration_ratio", pred.calibration},
                    {"predicted_ttft_ms", pred.ttftSeconds * 1e3},
                    {"measured_ttft_ms", meas.ttftMs},
                    {"ttft_error", ttftErr},
                    {"predicted_expert_ms_per_token", pred.expertSecondsPerToken * 1e3},
                    {"predicted_hit_rate", pred.expectedHitRate},
                    {"measured_hit_rate", hit / 100},
                    {"predicted_pool_ratio", {pred.ratio[0], pred.ratio[1], pred.ratio[2], pred.ratio[3]}},
                    {"measured_pool_ratio", {meas.poolRatio[0], meas.poolRatio[1], meas.poolRatio[2], meas.poolRatio[3]}},
                    {"measured_layer_ms", meas.layerMs},
                    {"measured_dense_ms_per_step", meas.denseMsPerStep},
                    {"predicted_layer_ms", pred.expertSecondsPerToken * 1e3 / layers}});
  }
  if (s.json) {
    nlohmann::ordered_json j;
    j["host"] = hostIdentity();
    j["store"] = s.store.string();
    j["model"] = workload->describe();
    j["trace"] = s.trace.string();
    j["prompt_tokens"] = s.promptTokens;
    j["tokens"] = s.tokens;
    j["warmup"] = s.warmup;
    j["profile"] = {{"u_ms", in.profile.smRead * 1e3},       {"v_ms", in.profile.eRead * 1e3},
                    {"c_ms", in.profile.decompress * 1e3},   {"recover_ms", in.profile.recover * 1e3},
                    {"ffn_ms", in.profile.computeBase * 1e3}, {"ffn_per_token_ms", in.profile.computePerToken * 1e3}};
    j["calibration_budget_percent"] = s.calibrationBudget;
    j["calibration_tpot_ms"] = cal.tpotMs;
    j["calibration_ttft_ms"] = cal.ttftMs;
    j["load_average_before"] = loadBefore;
    j["load_average_after"] = loadAverage();
    j["dense_ms_per_token"] = dense * 1e3;
    j["dense_prefill_ms_per_prompt_token"] = densePrefill * 1e3;
    j["results"] = rows;
    std::ofstream f(*s.json);
    f << j.dump(2) << "\n";
    if (!f) throw Error(s.json->string() + ": cannot write");
  }
  return 0;
}

}  // namespace zipmoe::cli
