// `zipmoe plan STORE --check`: the budget advisor's predictions next to measurements. For each
// budget it predicts the TPOT and TTFT (zipmoe/budget_advisor.h) and then measures them on the real
// runtime at that budget (the bench harness: routing replayed from an activation trace, a greedy
// generation, TPOT over the decode steps after a warm-up), and prints the prediction error. The
// dense part of the model (its time outside the expert layers) is calibrated once, from the
// all-resident run: its TPOT less the FFNs of the experts it computed — never from the budgets
// compared. The runtime is seeded with the same activation counts the prediction plans from.
// Thread-safety: one thread. Cost: one generation per budget plus the resident calibration.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "zipmoe/budget_advisor.h"

namespace zipmoe::cli {

struct PlanCheckSettings {
  std::filesystem::path store, hf, trace;
  std::vector<int> budgets;  // percentages of the expert bytes
  int promptTokens = 16, tokens = 28, warmup = 4;
  std::optional<std::filesystem::path> json;
};

// `inputs` as `zipmoe plan` made them (pools, workers; counts from --activations); its profile and
// dense figures are replaced by the workload's profile and the resident calibration. Returns 0.
int runPlanCheck(const PlanCheckSettings& settings, BudgetAdvisorInputs inputs);

}  // namespace zipmoe::cli
