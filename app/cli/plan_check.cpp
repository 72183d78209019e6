// zipmoe plan --check (see plan_check.h).
#include "plan_check.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench_harness.h"
#include "runtime_options.h"
#include "zipmoe/error.h"
#include "zipmoe/store.h"

namespace zipmoe::cli {

int runPlanCheck(const PlanCheckSettings& s, BudgetAdvisorInputs in) {
  WorkloadSpec spec;
  spec.label = "plan-check";
  spec.hf = s.hf;
  spec.store = s.store;
  spec.traceFile = s.trace;
  auto workload = BenchWorkload::open(spec);
  in.profile = workload->profile();
  const auto store = Store::open(s.store);
  const Manifest& m = store->manifest();
  const int k = static_cast<int>(m.config->value("num_experts_per_tok", 1));

  RunSettings run;
  run.prompts = {0};
  run.promptTokens = s.promptTokens;
  run.tokens = s.tokens;
  run.warmup = s.warmup;
  RuntimeOptions base;
  base.pools = in.pools;
  base.decompressWorkers = in.decompressWorkers;
  base.history = in.counts;
  const BenchSystem resident = parseBenchSystem("resident", base, s.hf);
  const BenchSystem zipmoe = parseBenchSystem("zipmoe", base, s.hf);
  std::fprintf(stderr, "plan --check: %s; warming up\n", workload->describe().c_str());
  workload->warmUp({zipmoe}, budgetBytes(s.budgets.front(), workload->expertBytes()), run);

  // The dense part, from the all-resident run: its TPOT less k FFNs per MoE layer, its TTFT less the
  // prefill's FFNs (every expert computed once with its share of the prompt's tokens, at most).
  const RunResult ref = workload->run(resident, 0, run);
  const double p = in.profile.expertCompute(1), layers = m.numLayers();
  const double dense = ref.tpotMs / 1e3 - layers * k * p;
  const double prefillFfn = layers * (std::min<double>(m.numExperts, s.promptTokens * k) * in.profile.computeBase +
                                      in.profile.computePerToken * s.promptTokens * k);
  const double densePrefill = (ref.ttftMs / 1e3 - prefillFfn) / s.promptTokens;
  if (!(dense > 0) || !(densePrefill > 0))
    throw Error("plan --check: the resident run (TPOT " + std::to_string(ref.tpotMs) + " ms, TTFT " + std::to_string(ref.ttftMs) +
                " ms) leaves no time for the dense part next to the profile's FFN; re-measure the profile");
  in.denseSecondsPerToken = dense;
  in.densePrefillSecondsPerToken = densePrefill;
  in.promptTokens = s.promptTokens;
  std::printf("resident reference: TPOT %.1f ms, TTFT %.1f ms -> dense %.1f ms per token, %.2f ms per prompt token\n",
              ref.tpotMs, ref.ttftMs, dense * 1e3, densePrefill * 1e3);
  const BudgetAdvisor advisor(*store, in);

  std::printf("%7s %12s %12s %8s %12s %12s %8s %6s\n", "budget", "TPOT pred", "TPOT meas", "error", "TTFT pred", "TTFT meas",
              "error", "hit %");
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (int pct : s.budgets) {
    const uint64_t bytes = budgetBytes(pct, workload->expertBytes());
    const BudgetPrediction pred = advisor.predict(bytes);
    const RunResult meas = workload->run(zipmoe, bytes, run);
    if (meas.skipped || !pred.feasible) {
      std::printf("%6d%%  skipped: %s\n", pct, meas.skipped ? meas.skipReason.c_str() : "below the working set");
      continue;
    }
    const double tpotErr = (pred.tpotSeconds * 1e3 - meas.tpotMs) / meas.tpotMs;
    const double ttftErr = (pred.ttftSeconds * 1e3 - meas.ttftMs) / meas.ttftMs;
    const double hit = 100.0 - meas.missPercent;
    std::printf("%6d%% %9.1f ms %9.1f ms %+7.1f%% %9.1f ms %9.1f ms %+7.1f%% %6.1f\n", pct, pred.tpotSeconds * 1e3, meas.tpotMs,
                tpotErr * 100, pred.ttftSeconds * 1e3, meas.ttftMs, ttftErr * 100, hit);
    rows.push_back({{"budget_percent", pct},
                    {"budget_bytes", bytes},
                    {"predicted_tpot_ms", pred.tpotSeconds * 1e3},
                    {"measured_tpot_ms", meas.tpotMs},
                    {"tpot_error", tpotErr},
                    {"predicted_ttft_ms", pred.ttftSeconds * 1e3},
                    {"measured_ttft_ms", meas.ttftMs},
                    {"ttft_error", ttftErr},
                    {"predicted_expert_ms_per_token", pred.expertSecondsPerToken * 1e3},
                    {"predicted_hit_rate", pred.expectedHitRate},
                    {"measured_hit_rate", hit / 100},
                    {"predicted_pool_ratio", {pred.ratio[0], pred.ratio[1], pred.ratio[2], pred.ratio[3]}},
                    {"measured_pool_ratio", {meas.poolRatio[0], meas.poolRatio[1], meas.poolRatio[2], meas.poolRatio[3]}},
                    {"measured_layer_ms", meas.layerMs},
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
    j["resident_tpot_ms"] = ref.tpotMs;
    j["resident_ttft_ms"] = ref.ttftMs;
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
