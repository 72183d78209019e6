// Internal: what the ZipMoE runtime gives Algorithm 4 (plan/planner.h), from what it knows — each
// layer's rank frequencies from its activation counts (a Zipf-like prior until the layer has
// kMinHistorySteps steps of history; rescaled so that Σ f = k, the experts a step selects), the cost
// model from the measured profile, and the bytes an expert takes in each pool — and the plan that
// needs no search: fixed ratios over the enabled pools.
// Thread-safety: pure functions. Cost: planPools is Algorithm 4's (docs/RUNTIME.md).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "cache/expert_cache.h"
#include "zipmoe/plan/pool_planner.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/pools.h"
#include "zipmoe/experts/runtime_options.h"

namespace zipmoe::experts {

// A layer plans from the prior until it has this many steps of history.
inline constexpr uint64_t kMinHistorySteps = 16;
// ... or, with RuntimeOptions::planFromPrompt, until this many tokens routed through it (a prompt's
// prefill is one step of many tokens).
inline constexpr uint64_t kMinPromptTokens = 16;

// ... and with a history, the history weighs as much as this many of the session's own tokens
// (cache::SessionBlend): a 16-token prompt gets w = 0.8. Chosen on the Qwen8 trace with 100 prompts
// of history (docs/RUNTIME.md "A chat's tokens blended into stored history"): with 16 (w = 0.5) the
// plan at 75 % stayed mostly C; with 4 mostly F. The trace replays each prompt's own distribution, so
// it favours trusting the session; real chats drift, and this weight should be fitted on real
// routing sequences (the demo model's router over held-out text) — not done yet.
inline constexpr double kSessionPriorTokens = 4;
// The session's window (cache::SessionBlend::windowTokens): about one conversation's tokens, so that
// the chat in front of the user, not the app's whole run, is what the blend trusts. Not fitted: a
// chosen size, like the weight above.
inline constexpr uint64_t kSessionWindowTokens = 1024;
// What a layer has seen may be smoothed toward uniform as if this many more tokens (steps, for a
// history) had been routed evenly over its experts: f ← (n·f + τ·k/N) / (n + τ) for n tokens or
// steps of evidence, so that an expert none of them routed to is planned for as the next token may
// well route to it (docs/RUNTIME.md, "Smoothing toward uniform"). Fitted on the traces' prompts by
// held-out likelihood (scripts/dev/fit_session_weight.py --uniform, docs/bench/run15): τ = 24 for
// Qwen1.5-MoE and 16 for DeepSeek-V2-Lite at 16 tokens (kFittedSmoothingTokens); a prompt's routing
// is close to uniform over a layer's experts in both traces. Off by default (τ = 0, the counts
// alone): with τ = 16 the plans cover the tail with C, misses fall, and at 75 % the all-C plans that
// follow are 1.3–2× slower on this two-core machine, whose price for a C hit is too low (BENCHMARKS.md
// run 15). RuntimeOptions::smoothingTokens.
inline constexpr double kFittedSmoothingTokens = 16;
inline constexpr double kSmoothingTokens = 0;

// Where a layer's rank frequencies come from.
enum class FrequencySource : uint8_t {
  Prior,    // too little of either: the Zipf-like prior
  Prompt,   // fewer than kMinHistorySteps steps but kMinPromptTokens tokens: per token
  History,  // kMinHistorySteps steps or more: per step
  Session,  // History, and kMinPromptTokens tokens of the session (counted tokens) blended into it
};
// The blend the runtime uses (ranks, eviction and plans alike) for a model selecting topK experts
// a token; with fromPrompt off, none.
cache::SessionBlend sessionBlend(int topK, bool fromPrompt, double priorTokens = kSessionPriorTokens);
// The source for `layer` of these counts (Prompt and Session only with `fromPrompt` and the counts'
// tokens).
FrequencySource frequencySource(const ActivationCounts& counts, int layer, int experts, int topK, bool fromPrompt);

struct PoolPlanInputs {
  int layers = 0, experts = 0, topK = 1;
  bool fromPrompt = false;  // RuntimeOptions::planFromPrompt
  double sessionPriorTokens = kSessionPriorTokens;  // RuntimeOptions::sessionPriorTokens
  double smoothingTokens = kSmoothingTokens;        // RuntimeOptions::smoothingTokens
  std::array<double, kNumPools> bytesPerExpert{};
  plan::CostModel cost;
  double gridStep = 0.05;
};

// The cost model of Algorithm 3 from a measured profile (u, v, c, recovery), with L workers, K
// shards and n tensors per expert; with `coalesced` reads, a miss's read is the measured one-request
// tensor read (when the profile has it); with `rawMisses`, the whole-tensor read prices a raw miss;
// the contention figures (when measured) for L busy workers (the nearest measured count).
plan::CostModel costModel(const CostProfile& profile, int workers, int shards, int tensorsPerExpert,
                          bool coalesced = false, bool rawMisses = false);
// An observed figure prices plans once it covers this many operations.
inline constexpr uint64_t kMinObservedOps = 8;
// The cost model with the operations' costs as observed in the runtime's layers (ObservedCosts)
// instead of the profile's: each figure observed over kMinObservedOps operations or more is the
// observed mean; each one not (yet) observed is the profile's, scaled by how its group's observed
// figures compare with theirs in the profile (reads: the disk and the host's cache; CPU work:
// decompression and recovery, sharing the cores with the model). The contention factors of a
// calibrated group become 1: its observed times already include the contention.
plan::CostModel observedCostModel(plan::CostModel cost, const ObservedCosts& observed);
// Rescales f (non-increasing, each ≤ 1) so that Σ f = k, keeping every value ≤ 1.
std::vector<double> normaliseFrequencies(std::vector<double> f, int k);
// f smoothed toward uniform by `tau` tokens against `evidence` (kSmoothingTokens): each value
// becomes (evidence·f + tau·Σf/N) / (evidence + tau). Keeps the order and Σ f; unchanged when tau
// is 0.
std::vector<double> smoothTowardUniform(std::vector<double> f, double evidence, double tau);
// One layer's rank frequencies from the counts, from the source frequencySource gives: the prior;
// a prompt's tokens (the share of tokens routed to each expert); the steps' counts; or the session's
// blend of the two (cache::SessionBlend::value of each expert). Every source but the prior is then
// smoothed toward uniform (smoothTowardUniform) by `smoothingTokens` against its evidence: the
// prompt's tokens, the history's steps, or the larger of the two for the session's blend.
std::vector<double> layerFrequency(const ActivationCounts& counts, int layer, int experts, int topK, bool fromPrompt,
                                   double sessionPriorTokens = kSessionPriorTokens,
                                   double smoothingTokens = kSmoothingTokens);
// Each layer's rank frequencies (layerFrequency of every layer).
std::vector<std::vector<double>> layerFrequencies(const ActivationCounts& counts, int layers, int experts, int topK,
                                                  bool fromPrompt = false, double sessionPriorTokens = kSessionPriorTokens,
                                                  double smoothingTokens = kSmoothingTokens);

// Algorithm 4 for every layer, each layer getting an equal share of `poolBytes`.
std::vector<plan::LayerPlan> planPools(const PoolPlanInputs& in, double poolBytes, PoolMask pools,
                                       const ActivationCounts& counts);
// Algorithm 4 for one layer, with its equal share of `poolBytes` (the same plan planPools gives it).
plan::LayerPlan planPoolsOfLayer(const PoolPlanInputs& in, double poolBytes, PoolMask pools,
                                 const ActivationCounts& counts, int layer);
// The same split for every layer: `ratios` normalised over the enabled pools, capacities filling
// the layer's share of `poolBytes` pool by pool.
std::vector<plan::LayerPlan> fixedRatioPlan(const PoolPlanInputs& in, double poolBytes, PoolMask pools,
                                            const std::array<double, kNumPools>& ratios);

}  // namespace zipmoe::experts
