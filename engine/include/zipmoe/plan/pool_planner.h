// Pool planning — how the ZipMoE runtime splits a memory budget between its four pools (ZipMoE paper
// §3.4, Appendix C–D): the rank-frequency model, modified iterative proportional fitting (eq. 24),
// Poisson-binomial hit distributions (Algorithm 2), the layer-makespan estimate (Algorithm 3) and
// the grid search over pool ratios (Algorithm 4). Public so that tools can plan without a runtime
// (`zipmoe bench planner`); the runtime feeds it from its profile and history
// (engine/src/experts/planner_inputs.h).
//
// Ranks are 0-based here: rank 0 is the most frequently activated expert of a layer. Pools are
// ordered F ≺ C ≺ S ≺ E (zipmoe/base/pools.h) and map onto consecutive rank intervals in that order
// (disabled pools take no ranks); ranks after the last pool form the miss pool M.
// Thread-safety: pure functions. Cost: see each function; planModel is what a budget move calls.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "zipmoe/base/pools.h"

namespace zipmoe::plan {

// Pools, PoolMask, kNumPools, kAllPools: zipmoe/base/pools.h.

// Measured costs (seconds) of the operations on one expert *tensor*, from the profiler.
//
// Every field after `recover` is our addition to the paper's model, and each is off at its default
// (0): with all of them 0 the estimate is the paper's Algorithm 3 (with `recover` 0: exactly).
//   missRead    one request for a missed tensor's K E-chunks and SM-chunk (coalesced reads, as the
//               runtime issues them); 0 = the paper's u + K·v.
//   fullRead    one request for the whole BF16 tensor from the HF checkpoint (a *raw* miss: no
//               decompression, no recovery); 0 = raw misses are not available.
//   compute     the expert FFN of one expert for one token, on the model's threads, alone.
//   computeSlowdown   that FFN's time while the L decompression workers are busy, over its time alone.
//   decodeSlowdown    decompression / recovery time while the model computes, over their time alone.
//   ioSlowdown        a read's time while the workers are busy, over its time alone.
// A slowdown of 0 or below 1 counts as 1 (no contention).
struct CostModel {
  double u = 0;        // read one SM-chunk
  double v = 0;        // read one E-chunk
  double c = 0;        // decompress one E-chunk
  double recover = 0;  // recover (merge) one tensor; 0 reproduces the paper's Algorithm 3 exactly
  int threads = 1;     // L, decompression workers
  int shards = 1;      // K, E-chunks per tensor
  int tensorsPerExpert = 3;  // n
  double missRead = 0;
  double fullRead = 0;
  double compute = 0;
  double computeSlowdown = 0;
  double decodeSlowdown = 0;
  double ioSlowdown = 0;
  // Observed in the runtime's layers (ObservedCosts): a layer with CPU work (decompression or
  // recovery) takes this many times its estimate, relative to a layer without; 0 or below 1 = 1.
  // What the terms above do not capture on a small machine: the decoders and the model's own
  // compute share the cores for the whole layer, not only while the expert FFNs run.
  double cpuLayerFactor = 0;
  // C hits cost no CPU work: decoding reads their `nibble` codes in place (RuntimeOptions::
  // readCodesInPlace), so they count with the F hits in n_D and T_recover below.
  bool cInPlace = false;
};

// Rank-based marginal inclusion probabilities f_r from activation counts of one layer: the counts
// sorted non-increasing, divided by `steps` (the number of forward steps they were counted over),
// each clipped to [0, 1]. Returns numExperts values, non-increasing. steps == 0 → the prior.
std::vector<double> rankFrequency(std::span<const uint64_t> counts, uint64_t steps, int k);

// The prior used when a layer has no history: a Zipf-like profile f_r ∝ (r + 1)^−0.6 scaled so that
// Σ f_r = k with every f_r ≤ 1 (iteratively capping at 1 and rescaling the rest).
std::vector<double> priorRankFrequency(int numExperts, int k);

// Modified iterative proportional fitting (eq. 23–24, Chen–Dempster–Liu 1994): finds weights w with
// P(S) ∝ Π_{i∈S} w_i over k-subsets reproducing the inclusion probabilities f, and returns the
// selection probabilities q_i = w_i / (1 + w_i) (so that independent Bernoulli(q_i) trials
// conditioned on Σ = k give that distribution). f must have Σ f = k (within 1e-6·k; it is rescaled)
// and 0 ≤ f_i ≤ 1; entries with f_i == 0 get q_i = 0, entries with f_i == 1 get q_i = 1 − 1e-12.
// Each iteration is one sweep of w_i ← w_i · odds(f_i) / odds(f_i^(t)) over the ranks (the paper's
// fixed point, solved coordinate by coordinate; see planner.cpp), typically 5–60 iterations.
// Iterates until max_i |f_i^(t) − f_i| ≤ tolerance or maxIterations. Cost: O(iterations · N · k).
std::vector<double> selectionProbabilities(std::span<const double> f, int k, int maxIterations = 200,
                                           double tolerance = 1e-9);

// Algorithm 2: Φ(h) = P(exactly h of the independent Bernoulli(q_r) trials succeed) for
// h = 0..min(maxHits, |q|); returns that many + 1 values. Cost: O(|q| · maxHits).
std::vector<double> hitDistribution(std::span<const double> q, int maxHits);

// Algorithm 3: estimated sparse-layer makespan for hit pattern hits[p] (experts of the k selected
// that were found in pool p; hits of disabled pools are 0; m = k − Σ hits are misses). With
// n tensors per expert, K shards, L workers:
//   reads     n_SM = n·(h_E + m'),  n_E = n·K·(h_S + m'),  n_D = n·K·(k − h_F − m_raw)
//             where m' = m for ZipMoE misses and 0 for raw misses (m_raw = m when `rawMisses`;
//             with cost.cInPlace, h_C counts with h_F in n_D and in T_recover)
//   T_I/O     = n_SM·u + n_E·v                        (paper; with missRead > 0 the misses' part is
//                                                      n·m·missRead instead), + n·m·fullRead for raw misses
//   T_decomp  = (n_E·v + n_D·c) / L                   (paper)
//   T_recover = n·(k − h_F − m_raw)·recover           (ours; 0 when recover = 0)
// The paper's estimate is max{T_I/O, T_decomp, T_recover}. Our contention term, for machines where
// the model computes on the same cores as the decompression workers (docs/RUNTIME.md, "A planner
// that knows the machine has two cores"): let B = max{T_decomp, T_recover} (the time the workers and
// the recovery stream are busy, alone), X = k·compute (the layer's expert FFNs, alone) and
// O = min{X, B} (the time both run at once). Then
//   busy      = B + (decodeSlowdown − 1)·O            (the workers run slower while the model computes)
//   penalty   = (computeSlowdown − 1)·O               (the FFNs run slower while the workers decode)
//   T_I/O'    = T_I/O · ioSlowdown when B > 0, else T_I/O
//   estimate  = max{T_I/O', busy} + penalty.
// With every contention figure 0 (or 1) this is exactly the paper's max{T_I/O, T_decomp, T_recover}.
// A layer that needs no CPU work (F hits and raw misses only) costs its reads alone.
double estimateMakespan(int k, const std::array<int, kNumPools>& hits, const CostModel& cost, bool rawMisses = false);

struct LayerPlanInput {
  std::vector<double> f;  // rank-frequency, non-increasing, Σ = k
  int k = 1;              // experts selected per step (for batches: round(Σ f))
  PoolMask pools = kAllPools;
  CostModel cost;
  std::array<double, kNumPools> bytesPerExpert{};  // memory one expert takes in pool p
  double budgetBytes = 0;                          // for this layer's pools
  double gridStep = 0.05;                          // δ of Algorithm 4, in (0, 1]; the grid uses 1/round(1/δ)
};

struct LayerPlan {
  std::array<double, kNumPools> ratio{};  // γ_p, Σ over enabled pools = 1 (all 0 if budget holds no expert)
  std::array<int, kNumPools> capacity{};  // S_p = floor(γ_p · budget / bytesPerExpert_p), capped so Σ S_p ≤ N
  double expectedMakespan = 0;            // Algorithm 4's minimum cost
  // Serve this layer's misses by raw reads of the whole BF16 tensor (cost.fullRead) instead of
  // reading and decoding the store's chunks. Only chosen when cost.fullRead > 0.
  bool rawMisses = false;
};

// Algorithm 4 for one layer: enumerates every ratio vector on the δ-grid over the enabled pools,
// packs the pools onto ranks in F, C, S, E order, and returns the one with the least expected
// makespan (ties: the earlier in enumeration order, which starts from all-F). The expectation is
// over hit patterns with Σ h_p ≤ k weighted by Φ_M(k_rem) / Φ_N(k) · Π Φ_p(h_p). When
// cost.fullRead > 0 every grid point is also costed with raw misses, and the cheaper of the two
// (ZipMoE misses on a tie) is that point's cost; the plan records which (LayerPlan::rawMisses).
LayerPlan planLayer(const LayerPlanInput& input);

// Plans every layer (each with its own rank-frequency list and budgetBytes = total / layers) and
// returns the plans in layer order. k ≤ 0: each layer uses round(Σ f) of its own list (batches). Cost: layers × grid points × O(N · k + patterns).
std::vector<LayerPlan> planModel(const std::vector<std::vector<double>>& layerFrequencies, int k, PoolMask pools,
                                 const CostModel& cost, const std::array<double, kNumPools>& bytesPerExpert,
                                 double totalBudgetBytes, double gridStep = 0.05);
// One layer of planModel's result, planned alone: `f` is that layer's list, `layers` the model's
// layer count (its share is totalBudgetBytes / layers); errors name the layer.
LayerPlan planModelLayer(const std::vector<double>& f, int layer, int layers, int k, PoolMask pools, const CostModel& cost,
                         const std::array<double, kNumPools>& bytesPerExpert, double totalBudgetBytes,
                         double gridStep = 0.05);

}  // namespace zipmoe::plan
