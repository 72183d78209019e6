// `zipmoe bench planner`: how long Algorithm 4 takes to plan a whole model, the work behind every
// budget move of the app's slider. Layers get skewed activation histories (gamma-distributed counts,
// a different skew per layer, fixed seed), the costs are a profile's order of magnitude; each budget
// share is planned R times and min / median / max are printed. Before, a test printed one such
// timing; a timing is a measurement, not a check.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <fstream>
#include <numeric>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "commands.h"
#include "zipmoe/plan/pool_planner.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/error.h"

namespace zipmoe::cli {

int runBenchPlanner(const Args& arguments) {
  static const CommandSpec command{
      "zipmoe bench planner [OPTIONS]",
      "Time to plan every layer's pool split (Algorithm 4 with IPF and Algorithm 2) at several budgets, as a\n"
      "budget move does: min / median / max of R runs per budget.",
      {{"--layers", "N", "MoE layers (1-1024, default 24: Qwen1.5-MoE-A2.7B)"},
       {"--experts", "N", "routed experts per layer (2-1024, default 60)"},
       {"--top-k", "K", "experts per token, or per step of a batch (1-64, default 4; at most --experts)"},
       {"--pools", "FCSE", "the enabled pools (default FCSE)"},
       {"--repeat", "R", "runs per budget (1-1000, default 9)"},
       {"--json", "FILE", "also write the figures as JSON"}},
      0, 0, ""};
  const CommandLine line = CommandLine::parse(command, arguments);
  if (line.help()) return printUsage(command);
  const int layers = line.integer<int>("--layers", 1, 1024, 24);
  const int experts = line.integer<int>("--experts", 2, 1024, 60);
  const int k = line.integer<int>("--top-k", 1, 64, 4);
  const int repeats = line.integer<int>("--repeat", 1, 1000, 9);
  if (k > experts) throw Error("--top-k " + std::to_string(k) + " is more than --experts " + std::to_string(experts));
  const std::string poolText = line.text("--pools", "FCSE");
  const PoolMask pools = parsePoolMask(poolText, "--pools");

  std::mt19937 rng(31);
  std::vector<std::vector<double>> frequencies;
  for (int l = 0; l < layers; ++l) {
    std::gamma_distribution<double> skew(0.3 + 0.05 * (l % 24), 1.0);
    std::vector<uint64_t> counts(static_cast<size_t>(experts));
    for (auto& c : counts) c = static_cast<uint64_t>(skew(rng) * 1000) + 1;
    // Rank frequencies: the counts sorted non-increasing and scaled to Σ = k with none above 1 (the
    // capped ranks are a prefix), as a layer with this history would give the planner.
    std::vector<double> f(counts.begin(), counts.end());
    std::sort(f.begin(), f.end(), std::greater<>());
    size_t capped = 0;
    for (;;) {
      const double rest = std::accumulate(f.begin() + static_cast<std::ptrdiff_t>(capped), f.end(), 0.0);
      const double scale = (k - static_cast<double>(capped)) / rest;
      size_t next = capped;
      while (next < f.size() && f[next] * scale >= 1) ++next;
      if (next == capped) {
        for (size_t r = 0; r < f.size(); ++r) f[r] = r < capped ? 1.0 : f[r] * scale;
        break;
      }
      capped = next;
    }
    frequencies.push_back(std::move(f));
  }
  // Qwen1.5-MoE's expert tensors on this kind of machine (docs/RUNTIME.md's profile), K = 4, L = 2.
  plan::CostModel cost;
  cost.u = 3.4e-3;
  cost.v = 0.25e-3;
  cost.c = 0.27e-3;
  cost.recover = 0.33e-3;
  cost.threads = 2;
  cost.shards = 4;
  cost.tensorsPerExpert = 3;
  const std::array<double, kNumPools> bytes{17.3e6, 11.5e6, 8.65e6, 2.85e6};
  const double allExperts = bytes[0] * experts * layers;

  using Clock = std::chrono::steady_clock;
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  std::printf("planning %d layers x %d experts, k = %d, pools %s, grid step 0.05, %d runs per budget\n", layers, experts,
              k, poolText.c_str(), repeats);
  std::printf("%8s %10s %10s %10s\n", "budget", "min ms", "median ms", "max ms");
  for (double share : {0.1, 0.25, 0.5, 0.75, 1.0}) {
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = Clock::now();
      const auto plans = plan::planModel(frequencies, k, pools, cost, bytes, share * allExperts, 0.05);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (plans.size() != static_cast<size_t>(layers)) throw Error("planModel returned a plan per layer it was not given");
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
    std::printf("%7.0f%% %10.2f %10.2f %10.2f\n", share * 100, ms.front(), median, ms.back());
    results.push_back({{"budget_share", share}, {"min_ms", ms.front()}, {"median_ms", median}, {"max_ms", ms.back()}});
  }
  if (const auto out = line.text("--json")) {
    nlohmann::ordered_json j;
    j["host"] = hostIdentity();
    j["layers"] = layers;
    j["experts"] = experts;
    j["top_k"] = k;
    j["pools"] = poolText;
    j["repeat"] = repeats;
    j["results"] = results;
    std::ofstream f(*out);
    f << j.dump(2) << "\n";
    if (!f) throw Error(*out + ": cannot write");
  }
  return 0;
}

}  // namespace zipmoe::cli
