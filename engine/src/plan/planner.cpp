// Cache-pool planning: ZipMoE paper §3.4, Appendix C (Algorithms 2–4) and Appendix D (eq. 23–24).
//
// planLayer and planModel do the per-layer work once — fitting q (IPF) and tabulating the hit
// distribution Φ of every rank interval [a, b) — so that each grid point of Algorithm 4 costs only
// table look-ups and the sum over hit patterns.
#include "zipmoe/plan/pool_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>

#include "zipmoe/base/error.h"

namespace zipmoe::plan {
namespace {

// f_i ≥ this counts as "always selected"; such ranks are fixed at q = 1 − kPinnedGap.
constexpr double kPinnedGap = 1e-12;

std::string num(double x) {
  std::ostringstream o;
  o.precision(12);
  o << x;
  return o.str();
}

[[noreturn]] void fail(const std::string& message) { throw Error("planner: " + message); }

void requireK(const char* where, int k, size_t n) {
  if (k < 1) fail(std::string(where) + ": k = " + std::to_string(k) + ", expected k >= 1");
  if (static_cast<size_t>(k) > n)
    fail(std::string(where) + ": k = " + std::to_string(k) + " exceeds the number of experts " + std::to_string(n));
}

void validateCost(const CostModel& c) {
  const auto check = [](const char* name, double v) {
    if (!std::isfinite(v) || v < 0) fail(std::string("cost.") + name + " = " + num(v) + ", expected a finite value >= 0");
  };
  check("u", c.u);
  check("v", c.v);
  check("c", c.c);
  check("recover", c.recover);
  check("missRead", c.missRead);
  check("fullRead", c.fullRead);
  check("compute", c.compute);
  check("computeSlowdown", c.computeSlowdown);
  check("decodeSlowdown", c.decodeSlowdown);
  check("ioSlowdown", c.ioSlowdown);
  check("cpuLayerFactor", c.cpuLayerFactor);
  const auto checkCount = [](const char* name, int v) {
    if (v < 1) fail(std::string("cost.") + name + " = " + std::to_string(v) + ", expected >= 1");
  };
  checkCount("threads", c.threads);
  checkCount("shards", c.shards);
  checkCount("tensorsPerExpert", c.tensorsPerExpert);
}

// A slowdown figure as a factor: 0 (not measured) and anything below 1 (noise) count as 1.
double factor(double slowdown) { return std::max(1.0, slowdown); }

// Algorithm 3 without argument checks (the grid search calls it for every pattern); the formula and
// our contention term are spelled out at estimateMakespan in pool_planner.h.
double makespan(int k, int hF, int hC, int hS, int hE, const CostModel& c, bool raw) {
  const double n = c.tensorsPerExpert;
  const double shards = c.shards;
  const int misses = k - hF - hC - hS - hE;
  const int zipMisses = raw ? 0 : misses;
  const double nSM = n * (hE + zipMisses);
  const double nE = n * shards * (hS + zipMisses);
  const int noCpu = hF + (c.cInPlace ? hC : 0) + (raw ? misses : 0);  // hits and misses with no CPU work
  const double nD = n * shards * (k - noCpu);
  double tIO = 0;
  if (c.missRead > 0)  // coalesced: one request per missed tensor
    tIO = n * hE * c.u + n * shards * hS * c.v + n * zipMisses * c.missRead;
  else
    tIO = nSM * c.u + nE * c.v;
  if (raw) tIO += n * misses * c.fullRead;
  const double tDecomp = (nE * c.v + nD * c.c) / c.threads;
  const double tRecover = c.recover > 0 ? n * (k - noCpu) * c.recover : 0.0;
  const double busy = std::max(tDecomp, tRecover);
  if (busy <= 0) return tIO;
  const double overlap = std::min(k * c.compute, busy);
  const double cpu = busy + (factor(c.decodeSlowdown) - 1) * overlap;
  const double penalty = (factor(c.computeSlowdown) - 1) * overlap;
  return (std::max(tIO * factor(c.ioSlowdown), cpu) + penalty) * factor(c.cpuLayerFactor);
}

// One Bernoulli(q) trial folded into a hit distribution truncated at degree H (Algorithm 2, line 8).
void addTrial(double* phi, int H, double q) {
  for (int h = H; h >= 1; --h) phi[h] = phi[h] * (1 - q) + phi[h - 1] * q;
  phi[0] *= 1 - q;
}

// Elementary symmetric polynomials e_0..e_d of a growing set of weights, kept as mantissas times
// 2^exponent so that neither large N nor extreme weights overflow (all terms are positive, so the
// scaling loses nothing).
struct ScaledEsp {
  std::vector<double> e;
  int exponent = 0;
};

void extendEsp(const ScaledEsp& from, double w, ScaledEsp& to) {
  const size_t d = from.e.size() - 1;
  to.e.resize(d + 1);
  to.e[0] = from.e[0];
  for (size_t j = 1; j <= d; ++j) to.e[j] = from.e[j] + w * from.e[j - 1];
  to.exponent = from.exponent;
  const double top = *std::max_element(to.e.begin(), to.e.end());
  if (top > 0) {
    int shift = 0;
    std::frexp(top, &shift);
    for (double& x : to.e) x = std::ldexp(x, -shift);
    to.exponent += shift;
  }
}

// Inclusion probabilities π_i = w_i · R(k−1, N∖{i}) / R(k, N) (eq. 24) for all i at once: prefix
// and suffix ESP tables truncated at degree k, combined as R(k−1, N∖{i}) = Σ_j e_j(prefix_i) ·
// e_{k−1−j}(suffix_{i+1}). O(N · k).
void inclusionProbabilities(const std::vector<double>& w, int k, std::vector<ScaledEsp>& prefix,
                            std::vector<ScaledEsp>& suffix, std::vector<double>& pi) {
  const size_t n = w.size();
  const size_t d = static_cast<size_t>(k);
  prefix.resize(n + 1);
  suffix.resize(n + 1);
  prefix[0].e.assign(d + 1, 0.0);
  prefix[0].e[0] = 1;
  prefix[0].exponent = 0;
  suffix[n] = prefix[0];
  for (size_t i = 0; i < n; ++i) extendEsp(prefix[i], w[i], prefix[i + 1]);
  for (size_t i = n; i-- > 0;) extendEsp(suffix[i + 1], w[i], suffix[i]);
  const double total = prefix[n].e[d];
  pi.resize(n);
  for (size_t i = 0; i < n; ++i) {
    double s = 0;
    for (size_t j = 0; j < d; ++j) s += prefix[i].e[j] * suffix[i + 1].e[d - 1 - j];
    pi[i] = w[i] * std::ldexp(s / total, prefix[i].exponent + suffix[i + 1].exponent - prefix[n].exponent);
  }
}

// One sweep of the fitting update over i = 0..N−1. With every other weight fixed, the odds of
// inclusion are linear in w_i: π_i / (1 − π_i) = w_i · R(k−1, N∖{i}) / R(k, N∖{i}). So
//   w_i ← w_i · [f_i / (1 − f_i)] / [π_i / (1 − π_i)],  π_i from eq. 24 at the current weights,
// makes π_i = f_i exactly. Applied in turn, each weight seeing the ones already updated, this is exact
// cyclic coordinate descent on the convex dual of the max-entropy problem (eq. 15), so it converges
// from any start. The fixed point is eq. 24's; the paper's step w_i ← w_i · f_i / π_i moves log π_i
// by only about (1 − π_i) of the gap and needed thousands of iterations when some f_i is near 1.
// `suffix` must hold the suffix tables of the current w (inclusionProbabilities leaves them);
// `prefix` is rebuilt from the updated weights as the sweep goes. O(N · k).
void oddsSweep(const std::vector<double>& target, int k, std::vector<ScaledEsp>& prefix,
               const std::vector<ScaledEsp>& suffix, std::vector<double>& w) {
  const size_t d = static_cast<size_t>(k);
  for (size_t i = 0; i < w.size(); ++i) {
    double without = 0;  // R(k − 1, N∖{i}) and R(k, N∖{i}), in the same binary scale
    double other = 0;
    for (size_t j = 0; j < d; ++j) without += prefix[i].e[j] * suffix[i + 1].e[d - 1 - j];
    for (size_t j = 0; j <= d; ++j) other += prefix[i].e[j] * suffix[i + 1].e[d - j];
    w[i] = target[i] / (1 - target[i]) * other / without;
    extendEsp(prefix[i], w[i], prefix[i + 1]);
  }
}

// Checks f and returns it rescaled to Σ = k exactly (entries clipped to 1).
std::vector<double> validatedFrequencies(std::span<const double> f, int k) {
  requireK("rank frequencies", k, f.size());
  double sum = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (!std::isfinite(f[i]) || f[i] < 0 || f[i] > 1 + 1e-9)
      fail("f[" + std::to_string(i) + "] = " + num(f[i]) + ", expected a value in [0, 1]");
    sum += f[i];
  }
  if (std::abs(sum - k) > 1e-6 * k)
    fail("the rank frequencies sum to " + num(sum) + ", expected k = " + std::to_string(k));
  std::vector<double> g(f.begin(), f.end());
  for (double& x : g) x = std::min(1.0, x * (k / sum));
  return g;
}

// Hit distributions of every rank interval [a, b), truncated at k hits: Algorithm 2 run once per
// start a and extended one rank at a time. O(N² · k) time and memory; a grid point then needs only
// look-ups.
class IntervalHits {
 public:
  IntervalHits(const std::vector<double>& q, int k) : n_(static_cast<int>(q.size())), k_(k) {
    const size_t width = static_cast<size_t>(k) + 1;
    const size_t n = q.size();
    base_.resize(n + 1);
    size_t rows = 0;
    for (size_t a = 0; a <= n; ++a) {
      base_[a] = rows;
      rows += n - a + 1;
    }
    table_.assign(rows * width, 0.0);
    for (size_t a = 0; a <= n; ++a) {
      double* row = &table_[base_[a] * width];
      row[0] = 1;
      for (size_t b = a; b < n; ++b) {
        double* next = row + width;
        std::copy(row, row + width, next);
        addTrial(next, k, q[b]);
        row = next;
      }
    }
  }

  // Φ_{[a,b)}(h) for h = 0..k.
  const double* at(int a, int b) const {
    const size_t width = static_cast<size_t>(k_) + 1;
    return &table_[(base_[static_cast<size_t>(a)] + static_cast<size_t>(b - a)) * width];
  }
  int ranks() const { return n_; }

 private:
  int n_;
  int k_;
  std::vector<size_t> base_;
  std::vector<double> table_;
};

// Algorithm 4, lines 7–29, for one set of capacities (S_F, S_C, S_S, S_E) packed from rank 0:
// the expected makespan with ZipMoE misses, and (when cost.fullRead > 0) with raw misses.
struct PointCost {
  double zip = 0, raw = std::numeric_limits<double>::infinity();
  double best() const { return std::min(zip, raw); }
  bool rawBetter() const { return raw < zip; }
};

PointCost expectedMakespan(const IntervalHits& hits, int k, const std::array<int, kNumPools>& capacity,
                           const CostModel& cost) {
  const int n = hits.ranks();
  std::array<const double*, kNumPools> phi{};
  int start = 0;
  for (int p = 0; p < kNumPools; ++p) {
    phi[static_cast<size_t>(p)] = hits.at(start, start + capacity[static_cast<size_t>(p)]);
    start += capacity[static_cast<size_t>(p)];
  }
  const double* phiM = hits.at(start, n);
  const double phiN = hits.at(0, n)[k];
  const int capF = std::min(k, capacity[0]);
  const bool withRaw = cost.fullRead > 0;
  double sum = 0, sumRaw = 0;
  for (int hF = 0; hF <= capF; ++hF) {
    const double pF = phi[0][hF];
    if (pF == 0) continue;
    const int capC = std::min(k - hF, capacity[1]);
    for (int hC = 0; hC <= capC; ++hC) {
      const double pFC = pF * phi[1][hC];
      if (pFC == 0) continue;
      const int capS = std::min(k - hF - hC, capacity[2]);
      for (int hS = 0; hS <= capS; ++hS) {
        const double pFCS = pFC * phi[2][hS];
        if (pFCS == 0) continue;
        const int capE = std::min(k - hF - hC - hS, capacity[3]);
        for (int hE = 0; hE <= capE; ++hE) {
          const double p = pFCS * phi[3][hE] * phiM[k - hF - hC - hS - hE];
          if (p == 0) continue;
          sum += p * makespan(k, hF, hC, hS, hE, cost, false);
          if (withRaw) sumRaw += p * makespan(k, hF, hC, hS, hE, cost, true);
        }
      }
    }
  }
  PointCost result;
  result.zip = sum / phiN;
  if (withRaw) result.raw = sumRaw / phiN;
  return result;
}

void validatePlanArguments(PoolMask pools, const std::array<double, kNumPools>& bytesPerExpert, double budgetBytes,
                           double gridStep) {
  if (pools == 0 || (pools & ~kAllPools) != 0)
    fail("pool mask " + std::to_string(pools) + " is invalid, expected a non-empty subset of 0xF");
  for (int p = 0; p < kNumPools; ++p) {
    const double b = bytesPerExpert[static_cast<size_t>(p)];
    if ((pools & (1u << p)) != 0 && (!std::isfinite(b) || b <= 0))
      fail(std::string("bytesPerExpert[") + std::string(1, poolLetter(static_cast<Pool>(p))) + "] = " + num(b) +
           ", expected > 0 for an enabled pool");
  }
  if (!std::isfinite(budgetBytes) || budgetBytes < 0)
    fail("budget = " + num(budgetBytes) + " bytes, expected a finite value >= 0");
  if (!std::isfinite(gridStep) || gridStep <= 0 || gridStep > 1)
    fail("grid step δ = " + num(gridStep) + ", expected a value in (0, 1]");
}

// S_p = floor(γ_p · budget / bytes_p), then capped in F, C, S, E order so that Σ S_p ≤ N. The tiny
// relative slack keeps ratios such as 0.35 · budget from flooring just below an exact integer.
int expertsThatFit(double bytes, double budgetBytes, int n) {
  const double x = budgetBytes / bytes;
  const double slack = 1e-9 * std::max(1.0, x);
  return static_cast<int>(std::min(static_cast<double>(n), std::floor(x + slack)));
}

LayerPlan searchGrid(const IntervalHits& hits, int k, PoolMask pools, const CostModel& cost,
                     const std::array<double, kNumPools>& bytesPerExpert, double budgetBytes, double gridStep) {
  const int n = hits.ranks();
  LayerPlan best;
  bool holdsAny = false;
  for (int p = 0; p < kNumPools; ++p)
    if ((pools & (1u << p)) != 0 && expertsThatFit(bytesPerExpert[static_cast<size_t>(p)], budgetBytes, n) > 0)
      holdsAny = true;
  if (!holdsAny) {
    const PointCost c = expectedMakespan(hits, k, best.capacity, cost);
    best.expectedMakespan = c.best();
    best.rawMisses = c.rawBetter();
    return best;
  }

  // The δ-grid: G = round(1/δ) divisions, γ_p = c_p / G; a δ that does not divide 1 is rounded to 1/G.
  const int divisions = std::max(1, static_cast<int>(std::lround(1.0 / gridStep)));
  std::array<int, kNumPools> enabled{};
  int numEnabled = 0;
  for (int p = 0; p < kNumPools; ++p)
    if ((pools & (1u << p)) != 0) enabled[static_cast<size_t>(numEnabled++)] = p;

  std::array<int, kNumPools> parts{};  // c_p of the enabled pools, in enabled order
  double minCost = std::numeric_limits<double>::infinity();
  std::array<int, kNumPools> lastCapacity{};
  PointCost lastCost;
  bool haveLast = false;

  const auto evaluate = [&] {
    std::array<double, kNumPools> ratio{};
    std::array<int, kNumPools> capacity{};
    for (int i = 0; i < numEnabled; ++i)
      ratio[static_cast<size_t>(enabled[static_cast<size_t>(i)])] =
          static_cast<double>(parts[static_cast<size_t>(i)]) / divisions;
    int used = 0;
    for (size_t p = 0; p < kNumPools; ++p) {
      if (ratio[p] == 0) continue;
      capacity[p] = std::min(n - used, expertsThatFit(bytesPerExpert[p], ratio[p] * budgetBytes, n));
      used += capacity[p];
    }
    // Neighbouring grid points often round to the same capacities; their cost is the same.
    const PointCost point = haveLast && capacity == lastCapacity ? lastCost : expectedMakespan(hits, k, capacity, cost);
    lastCapacity = capacity;
    lastCost = point;
    haveLast = true;
    const double c = point.best();
    if (c < minCost) {
      minCost = c;
      best.ratio = ratio;
      best.capacity = capacity;
      best.expectedMakespan = c;
      best.rawMisses = point.rawBetter();
    }
  };

  // Compositions of G into the enabled pools, lexicographically with the first pool descending, so
  // the first point is all-F (or all of the first enabled pool).
  const auto enumerate = [&](auto&& self, int index, int remaining) -> void {
    if (index == numEnabled - 1) {
      parts[static_cast<size_t>(index)] = remaining;
      evaluate();
      return;
    }
    for (int c = remaining; c >= 0; --c) {
      parts[static_cast<size_t>(index)] = c;
      self(self, index + 1, remaining - c);
    }
  };
  enumerate(enumerate, 0, divisions);
  return best;
}

}  // namespace


std::vector<double> priorRankFrequency(int numExperts, int k) {
  if (numExperts < 1) fail("prior: numExperts = " + std::to_string(numExperts) + ", expected >= 1");
  requireK("prior", k, static_cast<size_t>(numExperts));
  const size_t n = static_cast<size_t>(numExperts);
  std::vector<double> shape(n), f(n);
  for (size_t r = 0; r < n; ++r) shape[r] = std::pow(static_cast<double>(r + 1), -0.6);
  // Ranks 0..capped-1 sit at 1; the rest share k − capped in proportion to the shape. The profile
  // is non-increasing, so the capped ranks are always a prefix.
  size_t capped = 0;
  for (;;) {
    const double rest = std::accumulate(shape.begin() + static_cast<std::ptrdiff_t>(capped), shape.end(), 0.0);
    const double scale = (k - static_cast<double>(capped)) / rest;
    size_t newlyCapped = capped;
    while (newlyCapped < n && shape[newlyCapped] * scale >= 1) ++newlyCapped;
    if (newlyCapped == capped) {
      for (size_t r = 0; r < n; ++r) f[r] = r < capped ? 1.0 : shape[r] * scale;
      return f;
    }
    capped = newlyCapped;
    if (capped == n) return std::vector<double>(n, 1.0);
  }
}

std::vector<double> rankFrequency(std::span<const uint64_t> counts, uint64_t steps, int k) {
  if (counts.empty()) fail("rankFrequency: no experts (empty count list)");
  requireK("rankFrequency", k, counts.size());
  if (steps == 0) return priorRankFrequency(static_cast<int>(counts.size()), k);
  std::vector<uint64_t> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  std::vector<double> f(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i)
    f[i] = std::clamp(static_cast<double>(sorted[i]) / static_cast<double>(steps), 0.0, 1.0);
  return f;
}

std::vector<double> selectionProbabilities(std::span<const double> f, int k, int maxIterations, double tolerance) {
  const std::vector<double> g = validatedFrequencies(f, k);
  if (maxIterations < 0) fail("IPF: maxIterations = " + std::to_string(maxIterations) + ", expected >= 0");
  if (!std::isfinite(tolerance) || tolerance < 0)
    fail("IPF: tolerance = " + num(tolerance) + ", expected a finite value >= 0");

  // Ranks with f = 1 are in every selected set and ranks with f = 0 in none; IPF fits the others
  // with k reduced by the always-selected ones.
  std::vector<double> q(g.size(), 0.0);
  std::vector<size_t> free;
  int kFree = k;
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] >= 1 - kPinnedGap) {
      q[i] = 1 - kPinnedGap;
      --kFree;
    } else if (g[i] > 0) {
      free.push_back(i);
    }
  }
  if (kFree <= 0) return q;  // the free ranks carry only rounding residue
  if (free.size() <= static_cast<size_t>(kFree)) {
    for (size_t i : free) q[i] = 1 - kPinnedGap;  // rounding left them just below 1
    return q;
  }

  std::vector<double> target(free.size()), w(free.size()), pi;
  for (size_t j = 0; j < free.size(); ++j) target[j] = w[j] = g[free[j]];
  std::vector<ScaledEsp> prefix, suffix;
  for (int t = 0; t < maxIterations; ++t) {
    inclusionProbabilities(w, kFree, prefix, suffix, pi);
    double worst = 0;
    for (size_t j = 0; j < w.size(); ++j) worst = std::max(worst, std::abs(pi[j] - target[j]));
    if (worst <= tolerance) break;
    oddsSweep(target, kFree, prefix, suffix, w);
    const double top = *std::max_element(w.begin(), w.end());
    for (double& x : w) x /= top;  // P(S) ∝ Π w is scale-free; this only keeps w near 1
  }

  // Any positive scale s gives the same conditional k-subset distribution through q = s·w / (1 + s·w)
  // (the odds q/(1 − q) = s·w change by s^k for every k-subset). We pick the s with Σ q = k, so the
  // independent trials are centred on k: Φ_N(k) — the denominator of Algorithm 4's weights — is then
  // near the mode of the Poisson-binomial distribution instead of in a far tail, and the planner's
  // divisions stay well conditioned.
  const auto expectedHits = [&](double logScale) {
    const double s = std::exp(logScale);
    double sum = 0;
    for (double x : w) sum += s * x / (1 + s * x);
    return sum;
  };
  double lo = -1, hi = 1;
  while (lo > -700 && expectedHits(lo) > kFree) lo *= 2;
  while (hi < 700 && expectedHits(hi) < kFree) hi *= 2;
  for (int it = 0; it < 200 && hi - lo > 1e-14 * std::max(1.0, std::abs(hi)); ++it) {
    const double mid = 0.5 * (lo + hi);
    (expectedHits(mid) < kFree ? lo : hi) = mid;
  }
  const double s = std::exp(0.5 * (lo + hi));
  for (size_t j = 0; j < free.size(); ++j) q[free[j]] = s * w[j] / (1 + s * w[j]);
  return q;
}

std::vector<double> hitDistribution(std::span<const double> q, int maxHits) {
  if (maxHits < 0) fail("hitDistribution: maxHits = " + std::to_string(maxHits) + ", expected >= 0");
  for (size_t r = 0; r < q.size(); ++r)
    if (!(q[r] >= 0 && q[r] <= 1))
      fail("hitDistribution: q[" + std::to_string(r) + "] = " + num(q[r]) + ", expected a probability in [0, 1]");
  const int H = static_cast<int>(std::min(static_cast<size_t>(maxHits), q.size()));
  std::vector<double> phi(static_cast<size_t>(H) + 1, 0.0);
  phi[0] = 1;
  for (double x : q) addTrial(phi.data(), H, x);
  return phi;
}

double estimateMakespan(int k, const std::array<int, kNumPools>& hits, const CostModel& cost, bool rawMisses) {
  if (k < 1) fail("makespan: k = " + std::to_string(k) + ", expected k >= 1");
  validateCost(cost);
  int total = 0;
  for (int p = 0; p < kNumPools; ++p) {
    const int h = hits[static_cast<size_t>(p)];
    if (h < 0) fail(std::string("makespan: hits[") + std::string(1, poolLetter(static_cast<Pool>(p))) + "] = " + std::to_string(h) + " is negative");
    total += h;
  }
  if (total > k) fail("makespan: " + std::to_string(total) + " hits exceed k = " + std::to_string(k));
  if (rawMisses && !(cost.fullRead > 0)) fail("makespan: raw misses need cost.fullRead > 0");
  return makespan(k, hits[0], hits[1], hits[2], hits[3], cost, rawMisses);
}

LayerPlan planLayer(const LayerPlanInput& input) {
  validateCost(input.cost);
  validatePlanArguments(input.pools, input.bytesPerExpert, input.budgetBytes, input.gridStep);
  for (size_t i = 1; i < input.f.size(); ++i)
    if (input.f[i] > input.f[i - 1] + 1e-9)
      fail("rank frequencies must be non-increasing, but f[" + std::to_string(i) + "] = " + num(input.f[i]) +
           " > f[" + std::to_string(i - 1) + "] = " + num(input.f[i - 1]));
  const IntervalHits hits(selectionProbabilities(input.f, input.k), input.k);
  return searchGrid(hits, input.k, input.pools, input.cost, input.bytesPerExpert, input.budgetBytes, input.gridStep);
}

LayerPlan planModelLayer(const std::vector<double>& f, int layer, int layers, int k, PoolMask pools, const CostModel& cost,
                         const std::array<double, kNumPools>& bytesPerExpert, double totalBudgetBytes,
                         double gridStep) {
  LayerPlanInput input;
  input.f = f;
  input.k = k;
  if (k <= 0) {  // the layer's own k: its expected number of selected experts per step
    double sum = 0;
    for (double x : f) sum += x;
    input.k = std::max(1, static_cast<int>(std::lround(sum)));
  }
  input.pools = pools;
  input.cost = cost;
  input.bytesPerExpert = bytesPerExpert;
  input.budgetBytes = totalBudgetBytes / static_cast<double>(layers);
  input.gridStep = gridStep;
  try {
    return planLayer(input);
  } catch (const Error& e) {
    throw Error("layer " + std::to_string(layer) + ": " + e.what());
  }
}

std::vector<LayerPlan> planModel(const std::vector<std::vector<double>>& layerFrequencies, int k, PoolMask pools,
                                 const CostModel& cost, const std::array<double, kNumPools>& bytesPerExpert,
                                 double totalBudgetBytes, double gridStep) {
  std::vector<LayerPlan> plans;
  plans.reserve(layerFrequencies.size());
  const int layers = static_cast<int>(layerFrequencies.size());
  for (int layer = 0; layer < layers; ++layer)
    plans.push_back(planModelLayer(layerFrequencies[static_cast<size_t>(layer)], layer, layers, k, pools, cost,
                                   bytesPerExpert, totalBudgetBytes, gridStep));
  return plans;
}

}  // namespace zipmoe::plan
