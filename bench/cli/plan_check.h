// `zipmoe plan STORE --check`: the budget advisor's predictions next to measurements. For each
// budget it predicts the TPOT and TTFT (zipmoe/plan/budget_advisor.h) and then measures them on the real
// runtime at that budget (the bench harness: routing replayed from an activation trace, a greedy
// generation, TPOT over the decode steps after a warm-up), and prints the prediction error. The
// dense part of the model (its time outside the expert layers) is measured as the app measures it
// (the runtime's time between expert batches per step) in one run at a calibration budget that is
// not among those compared; the prediction also gets the operation costs the runs observed, as
// the app's advisor gets the live runtime's. The runtime is seeded with the same activation counts
// the prediction plans from.
// Thread-safety: one thread. Cost: one generation per budget plus the resident calibration.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "zipmoe/plan/budget_advisor.h"

namespace zipmoe::cli {

struct PlanCheckSettings {
  std::filesystem::path store, hf, trace;
  std::vector<int> budgets;  // percentages of the expert bytes
  int promptTokens = 16, tokens = 28, warmup = 4;
  int calibrationBudget = 75;  // percent
  std::optional<std::filesystem::path> json;
};

// `inputs` as `zipmoe plan` made them (pools, workers; counts from --activations); its profile and
// dense figures are replaced by the workload's profile and the resident calibration. Returns 0.
int runPlanCheck(const PlanCheckSettings& settings, BudgetAdvisorInputs inputs);

}  // namespace zipmoe::cli
