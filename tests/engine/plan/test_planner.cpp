// Cache-pool planner (paper Appendix C–D): rank frequencies, IPF, Algorithms 2–4, each checked
// against brute-force enumeration over subsets on small layers.
#include <QtTest>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>

#include "zipmoe/plan/pool_planner.h"
#include "test_support.h"
#include "zipmoe/base/error.h"

using namespace zipmoe;
using namespace zipmoe::plan;

namespace {

// A feasible rank-frequency list: `shape` sorted non-increasing, scaled to Σ = k with every value
// capped at 1 (the capped ranks are a prefix).
std::vector<double> feasibleFrequencies(std::vector<double> shape, int k) {
  std::sort(shape.begin(), shape.end(), std::greater<>());
  size_t capped = 0;
  for (;;) {
    const double rest = std::accumulate(shape.begin() + static_cast<std::ptrdiff_t>(capped), shape.end(), 0.0);
    const double scale = (k - static_cast<double>(capped)) / rest;
    size_t next = capped;
    while (next < shape.size() && shape[next] * scale >= 1) ++next;
    if (next == capped) {
      for (size_t r = 0; r < shape.size(); ++r) shape[r] = r < capped ? 1.0 : shape[r] * scale;
      return shape;
    }
    capped = next;
  }
}

std::vector<double> randomFrequencies(std::mt19937& rng, int n, int k) {
  std::uniform_real_distribution<double> u(0.01, 1.0);
  std::vector<double> shape(static_cast<size_t>(n));
  for (double& x : shape) x = std::pow(u(rng), 3);  // skewed, like real routing
  return feasibleFrequencies(shape, k);
}

// Every k-subset of n ranks (as bitmasks) with its max-entropy probability P(S) ∝ Π q/(1 − q).
struct SubsetDistribution {
  std::vector<unsigned> sets;
  std::vector<double> probability;
};

SubsetDistribution subsetsOf(const std::vector<double>& q, int k) {
  SubsetDistribution d;
  const unsigned n = static_cast<unsigned>(q.size());
  double total = 0;
  for (unsigned m = 0; m < (1u << n); ++m) {
    if (std::popcount(m) != k) continue;
    double p = 1;
    for (unsigned i = 0; i < n; ++i)
      if ((m >> i) & 1u) p *= q[i] / (1 - q[i]);
    d.sets.push_back(m);
    d.probability.push_back(p);
    total += p;
  }
  for (double& p : d.probability) p /= total;
  return d;
}

// The pool a rank lands in for these capacities (F, C, S, E packed from rank 0); 4 = miss.
int poolOfRank(int rank, const std::array<int, kNumPools>& capacity) {
  int end = 0;
  for (int p = 0; p < kNumPools; ++p) {
    end += capacity[static_cast<size_t>(p)];
    if (rank < end) return p;
  }
  return kNumPools;
}

double bruteForceMakespan(const std::vector<double>& q, int k, const std::array<int, kNumPools>& capacity,
                          const CostModel& cost) {
  const auto d = subsetsOf(q, k);
  double expected = 0;
  for (size_t s = 0; s < d.sets.size(); ++s) {
    std::array<int, kNumPools> hits{};
    for (int r = 0; r < static_cast<int>(q.size()); ++r)
      if ((d.sets[s] >> r) & 1u) {
        const int p = poolOfRank(r, capacity);
        if (p < kNumPools) ++hits[static_cast<size_t>(p)];
      }
    expected += d.probability[s] * estimateMakespan(k, hits, cost);
  }
  return expected;
}

CostModel sampleCost() {
  CostModel c;
  c.u = 1.0;
  c.v = 0.35;
  c.c = 0.6;
  c.threads = 3;
  c.shards = 2;
  c.tensorsPerExpert = 3;
  return c;
}

bool near(double a, double b, double rel) { return std::abs(a - b) <= rel * std::max({1.0, std::abs(a), std::abs(b)}); }

}  // namespace

class TestPlanner : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void rankFrequencySortsDividesAndClips() {
    const std::vector<uint64_t> counts{3, 10, 0, 12, 7};
    const auto f = rankFrequency(counts, 10, 2);
    const std::vector<double> expected{1.0, 1.0, 0.7, 0.3, 0.0};  // 12/10 clipped to 1
    QCOMPARE(f.size(), expected.size());
    for (size_t i = 0; i < f.size(); ++i) QCOMPARE(f[i], expected[i]);
  }

  void rankFrequencyWithoutHistoryIsThePrior() {
    const std::vector<uint64_t> counts(16, 0);
    QVERIFY(rankFrequency(counts, 0, 4) == priorRankFrequency(16, 4));
  }

  void priorSumsToKWithEveryValueAtMostOne() {
    for (const auto& [n, k] : std::vector<std::pair<int, int>>{{1, 1}, {8, 1}, {8, 6}, {8, 8}, {60, 4}, {64, 6}, {128, 64}}) {
      const auto f = priorRankFrequency(n, k);
      QCOMPARE(static_cast<int>(f.size()), n);
      QVERIFY2(near(std::accumulate(f.begin(), f.end(), 0.0), k, 1e-12), qPrintable(QString("n=%1 k=%2").arg(n).arg(k)));
      for (size_t r = 0; r < f.size(); ++r) {
        QVERIFY(f[r] > 0 && f[r] <= 1);
        if (r > 0) QVERIFY(f[r] <= f[r - 1]);
        // Uncapped ranks follow (r + 1)^−0.6.
        if (r > 0 && f[r - 1] < 1)
          QVERIFY(near(f[r] / f[r - 1], std::pow(static_cast<double>(r + 1) / static_cast<double>(r), -0.6), 1e-12));
      }
    }
    const auto tight = priorRankFrequency(8, 6);  // forces capping
    QCOMPARE(tight[0], 1.0);
    QVERIFY(tight[7] < 1);
    for (double x : priorRankFrequency(5, 5)) QCOMPARE(x, 1.0);
  }

  void hitDistributionMatchesEnumeration() {
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int n = 0; n <= 12; ++n) {
      std::vector<double> q(static_cast<size_t>(n));
      for (double& x : q) x = u(rng);
      if (n >= 3) {
        q[0] = 0;  // certain outcomes mixed in
        q[1] = 1;
      }
      std::vector<double> exact(static_cast<size_t>(n) + 1, 0.0);
      for (unsigned m = 0; m < (1u << n); ++m) {
        double p = 1;
        for (int i = 0; i < n; ++i) p *= ((m >> i) & 1u) ? q[static_cast<size_t>(i)] : 1 - q[static_cast<size_t>(i)];
        exact[static_cast<size_t>(std::popcount(m))] += p;
      }
      const auto phi = hitDistribution(q, n);
      QCOMPARE(phi.size(), exact.size());
      for (size_t h = 0; h < phi.size(); ++h) QVERIFY(near(phi[h], exact[h], 1e-13));
      QVERIFY(near(std::accumulate(phi.begin(), phi.end(), 0.0), 1.0, 1e-13));
      // Truncation keeps the low-order values exact.
      const auto truncated = hitDistribution(q, 3);
      QCOMPARE(truncated.size(), static_cast<size_t>(std::min(n, 3) + 1));
      for (size_t h = 0; h < truncated.size(); ++h) QVERIFY(near(truncated[h], exact[h], 1e-13));
    }
    QCOMPARE(hitDistribution(std::vector<double>{0.25, 0.5}, 0), std::vector<double>{0.375});
  }

  void ipfReproducesTheFrequencies() {
    std::mt19937 rng(5);
    std::vector<std::pair<std::vector<double>, int>> cases{
        {priorRankFrequency(10, 3), 3},
        {priorRankFrequency(12, 4), 4},
        {priorRankFrequency(8, 6), 6},                       // capped ranks (f = 1)
        {{1.0, 0.9, 0.5, 0.35, 0.25, 0.0, 0.0}, 3},          // always and never selected ranks
        {{0.999, 0.6, 0.3, 0.1, 0.001}, 2},                  // near-certain and near-impossible
    };
    for (int i = 0; i < 6; ++i) cases.emplace_back(randomFrequencies(rng, 6 + i, 1 + i % 4), 1 + i % 4);
    for (const auto& [f, k] : cases) {
      const auto q = selectionProbabilities(f, k);
      QCOMPARE(q.size(), f.size());
      double sumQ = 0;
      for (size_t i = 0; i < q.size(); ++i) {
        QVERIFY(q[i] >= 0 && q[i] < 1);
        if (f[i] == 0) QCOMPARE(q[i], 0.0);
        sumQ += q[i];
      }
      QVERIFY2(std::abs(sumQ - k) < 1e-6, qPrintable(QString("Σq = %1, k = %2").arg(sumQ).arg(k)));
      const auto d = subsetsOf(q, k);
      for (size_t i = 0; i < f.size(); ++i) {
        double inclusion = 0;
        for (size_t s = 0; s < d.sets.size(); ++s)
          if ((d.sets[s] >> i) & 1u) inclusion += d.probability[s];
        QVERIFY2(std::abs(inclusion - f[i]) < 1e-6,
                 qPrintable(QString("k=%1 rank %2: inclusion %3, f %4").arg(k).arg(i).arg(inclusion).arg(f[i])));
      }
    }
  }

  void ipfConvergesOnLargeSkewedLayers() {
    // Too many subsets to enumerate: π_i = q_i · Φ_{N∖i}(k − 1) / Φ_N(k) from Algorithm 2 instead.
    std::mt19937 rng(9);
    std::vector<std::pair<std::vector<double>, int>> cases{{priorRankFrequency(60, 4), 4},
                                                           {priorRankFrequency(64, 16), 16},
                                                           {priorRankFrequency(128, 64), 64},
                                                           {randomFrequencies(rng, 60, 8), 8},
                                                           {randomFrequencies(rng, 160, 6), 6}};
    std::vector<double> steep(60);
    for (size_t r = 0; r < steep.size(); ++r) steep[r] = std::pow(static_cast<double>(r + 1), -2.0);
    cases.emplace_back(feasibleFrequencies(steep, 8), 8);  // several ranks at or near 1
    for (const auto& [f, k] : cases) {
      const auto q = selectionProbabilities(f, k);
      const double phiN = hitDistribution(q, k)[static_cast<size_t>(k)];
      for (size_t i = 0; i < q.size(); ++i) {
        std::vector<double> others(q);
        others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
        const double inclusion = q[i] * hitDistribution(others, k)[static_cast<size_t>(k) - 1] / phiN;
        QVERIFY2(std::abs(inclusion - f[i]) < 1e-7,
                 qPrintable(QString("N=%1 k=%2 rank %3: inclusion %4, f %5").arg(q.size()).arg(k).arg(i).arg(inclusion).arg(f[i])));
      }
    }
  }

  void ipfOfUniformFrequenciesGivesEqualQ() {
    const std::vector<double> f(10, 0.4);
    const auto q = selectionProbabilities(f, 4);
    for (double x : q) QVERIFY(near(x, 0.4, 1e-12));  // equal, and Σ q = k
  }

  void ipfRescalesASumWithinTolerance() {
    std::vector<double> f = priorRankFrequency(10, 3);
    const auto exact = selectionProbabilities(f, 3);
    for (double& x : f) x *= 1 + 3e-7;
    const auto scaled = selectionProbabilities(f, 3);
    for (size_t i = 0; i < f.size(); ++i) QVERIFY(near(scaled[i], exact[i], 1e-8));
  }

  void makespanFollowsAlgorithm3() {
    CostModel c;
    c.u = 1;
    c.v = 0.5;
    c.c = 0.25;
    c.threads = 2;
    c.shards = 2;
    c.tensorsPerExpert = 3;
    // k=4, h=(1,1,1,0): n_SM = 3·1 = 3, n_E = 3·2·2 = 12, T_IO = 3 + 6 = 9;
    // n_D = 3·2·3 = 18, T_decomp = (6 + 4.5) / 2 = 5.25 → 9.
    QCOMPARE(estimateMakespan(4, {1, 1, 1, 0}, c), 9.0);
    // All hits in F: nothing to do.
    QCOMPARE(estimateMakespan(4, {4, 0, 0, 0}, c), 0.0);
    c.u = 0.1;
    c.v = 0.1;
    c.c = 2;
    c.threads = 1;
    // All misses: n_SM = 12, n_E = 24, T_IO = 1.2 + 2.4 = 3.6; n_D = 24, T_decomp = 2.4 + 48 = 50.4.
    QVERIFY(near(estimateMakespan(4, {0, 0, 0, 0}, c), 50.4, 1e-15));
    // h=(0,0,2,2): n_SM = 3·2 = 6, n_E = 3·2·2 = 12, T_IO = 0.6 + 1.2 = 1.8; n_D = 24, T_decomp = 1.2 + 48.
    QVERIFY(near(estimateMakespan(4, {0, 0, 2, 2}, c), 49.2, 1e-15));
    // Our recovery term: n · (k − h_F) · recover = 3 · 3 · 100.
    c.recover = 100;
    QVERIFY(near(estimateMakespan(4, {1, 0, 0, 0}, c), 900.0, 1e-15));
    // C hits read in place: no CPU work, as F hits. h=(1,2,0,0), one miss: n_SM = 3, n_E = 6, T_IO = 0.3 + 0.6;
    // n_D = 3·2·1 = 6, T_decomp = (0.6 + 12) / 1 = 12.6, T_recover = 3·1·100 = 300.
    c.cInPlace = true;
    QVERIFY(near(estimateMakespan(4, {1, 2, 0, 0}, c), 300.0, 1e-12));
    QCOMPARE(estimateMakespan(4, {2, 2, 0, 0}, c), estimateMakespan(4, {4, 0, 0, 0}, c));
    c.recover = 0;
    QVERIFY(near(estimateMakespan(4, {1, 2, 0, 0}, c), 12.6, 1e-12));
    c.cInPlace = false;  // decoded: n_D = 3·2·3 = 18, T_decomp = 0.6 + 36
    QVERIFY(near(estimateMakespan(4, {1, 2, 0, 0}, c), 36.6, 1e-12));
  }

  void hitPatternProbabilitiesSumToOne() {
    std::mt19937 rng(3);
    const int k = 4;
    const auto q = selectionProbabilities(randomFrequencies(rng, 20, k), k);
    const auto slice = [&](int a, int b) {
      return hitDistribution(std::span<const double>(q).subspan(static_cast<size_t>(a), static_cast<size_t>(b - a)), k);
    };
    const double phiN = slice(0, 20)[k];
    for (const auto& cap : std::vector<std::array<int, 4>>{{0, 0, 0, 0}, {2, 3, 1, 4}, {5, 0, 5, 0}, {1, 1, 1, 17}}) {
      std::array<std::vector<double>, 4> phi;
      int start = 0;
      for (size_t p = 0; p < 4; ++p) {
        phi[p] = slice(start, start + cap[p]);
        phi[p].resize(static_cast<size_t>(k) + 1, 0.0);
        start += cap[p];
      }
      auto phiM = slice(start, 20);
      phiM.resize(static_cast<size_t>(k) + 1, 0.0);
      double total = 0;
      for (int a = 0; a <= k; ++a)
        for (int b = 0; a + b <= k; ++b)
          for (int c = 0; a + b + c <= k; ++c)
            for (int d = 0; a + b + c + d <= k; ++d)
              total += phi[0][static_cast<size_t>(a)] * phi[1][static_cast<size_t>(b)] * phi[2][static_cast<size_t>(c)] *
                       phi[3][static_cast<size_t>(d)] * phiM[static_cast<size_t>(k - a - b - c - d)] / phiN;
      QVERIFY2(near(total, 1.0, 1e-12), qPrintable(QString::number(total, 'g', 17)));
    }
    // Through the planner: with only the E pool and v = 0 an E hit saves nothing, so every pattern
    // costs the all-miss makespan and the expectation equals it iff the weights sum to 1.
    LayerPlanInput in;
    in.f = randomFrequencies(rng, 20, k);
    in.k = k;
    in.pools = poolBit(Pool::E);
    in.cost = sampleCost();
    in.cost.v = 0;
    in.bytesPerExpert = {4, 3, 2, 1};
    const double allMiss = estimateMakespan(k, {0, 0, 0, 0}, in.cost);
    for (double budget : {0.0, 1.0, 5.0, 13.0, 20.0, 100.0}) {
      in.budgetBytes = budget;
      QVERIFY(near(planLayer(in).expectedMakespan, allMiss, 1e-12));
    }
  }

  void planCostEqualsTheBruteForceExpectation() {
    std::mt19937 rng(17);
    for (int trial = 0; trial < 4; ++trial) {
      const int n = 9 + trial % 2;
      const int k = 2 + trial % 2;
      LayerPlanInput in;
      in.f = trial == 0 ? priorRankFrequency(n, k) : randomFrequencies(rng, n, k);
      in.k = k;
      in.pools = trial == 3 ? (poolBit(Pool::F) | poolBit(Pool::S) | poolBit(Pool::E)) : kAllPools;
      in.cost = sampleCost();
      in.cost.recover = trial == 2 ? 0.4 : 0.0;
      in.bytesPerExpert = {4.0, 2.5, 3.0, 1.5};
      in.budgetBytes = 10.3 + 3 * trial;
      in.gridStep = 0.25;
      const auto plan = planLayer(in);
      const auto q = selectionProbabilities(in.f, k);
      QVERIFY(near(plan.expectedMakespan, bruteForceMakespan(q, k, plan.capacity, in.cost), 1e-9));

      // Algorithm 4 by hand: every point of the 0.25-grid over the enabled pools; the plan is the minimum.
      double best = std::numeric_limits<double>::infinity();
      for (int a = 0; a <= 4; ++a)
        for (int b = 0; a + b <= 4; ++b)
          for (int c = 0; a + b + c <= 4; ++c) {
            const std::array<int, 4> parts{a, b, c, 4 - a - b - c};
            std::array<int, 4> cap{};
            bool feasible = true;
            int used = 0;
            for (size_t p = 0; p < 4; ++p) {
              if (parts[p] > 0 && (in.pools & (1u << p)) == 0) feasible = false;
              cap[p] = std::min(n - used, static_cast<int>(std::floor(parts[p] * 0.25 * in.budgetBytes / in.bytesPerExpert[p])));
              used += cap[p];
            }
            if (feasible) best = std::min(best, bruteForceMakespan(q, k, cap, in.cost));
          }
      QVERIFY2(near(plan.expectedMakespan, best, 1e-9),
               qPrintable(QString("trial %1: plan %2, grid minimum %3").arg(trial).arg(plan.expectedMakespan).arg(best)));
    }
  }

  void budgetForEveryExpertInFGivesAllF() {
    LayerPlanInput in;
    in.f = priorRankFrequency(60, 4);
    in.k = 4;
    in.cost = sampleCost();
    in.cost.recover = 0.01;
    in.bytesPerExpert = {3.0, 2.0, 1.5, 1.0};
    in.budgetBytes = 60 * 3.0;
    const auto plan = planLayer(in);
    QCOMPARE(plan.ratio, (std::array<double, 4>{1, 0, 0, 0}));
    QCOMPARE(plan.capacity, (std::array<int, 4>{60, 0, 0, 0}));
    QCOMPARE(plan.expectedMakespan, 0.0);
  }

  void budgetBelowOneExpertGivesNoCapacity() {
    LayerPlanInput in;
    in.f = priorRankFrequency(16, 2);
    in.k = 2;
    in.cost = sampleCost();
    in.bytesPerExpert = {3.0, 2.0, 1.5, 1.0};
    in.budgetBytes = 0.99;
    const auto plan = planLayer(in);
    QCOMPARE(plan.ratio, (std::array<double, 4>{}));
    QCOMPARE(plan.capacity, (std::array<int, 4>{}));
    QVERIFY(near(plan.expectedMakespan, estimateMakespan(2, {0, 0, 0, 0}, in.cost), 1e-12));
  }

  void disabledPoolsGetNothing() {
    LayerPlanInput in;
    in.f = priorRankFrequency(32, 4);
    in.k = 4;
    in.cost = sampleCost();
    in.bytesPerExpert = {3.0, 2.0, 1.5, 1.0};
    for (PoolMask mask : {poolBit(Pool::F) | poolBit(Pool::E), poolBit(Pool::C) | poolBit(Pool::S), poolBit(Pool::S),
                          poolBit(Pool::C) | poolBit(Pool::S) | poolBit(Pool::E)}) {
      in.pools = mask;
      for (double budget : {5.0, 20.0, 45.0, 80.0}) {
        in.budgetBytes = budget;
        const auto plan = planLayer(in);
        double sum = 0;
        for (int p = 0; p < kNumPools; ++p) {
          const auto i = static_cast<size_t>(p);
          if ((mask & (1u << p)) == 0) {
            QCOMPARE(plan.ratio[i], 0.0);
            QCOMPARE(plan.capacity[i], 0);
          }
          QVERIFY(plan.capacity[i] >= 0);
          QVERIFY(plan.capacity[i] <= static_cast<int>(std::floor(plan.ratio[i] * budget / in.bytesPerExpert[i] + 1e-9)));
          sum += plan.ratio[i];
        }
        QVERIFY(near(sum, 1.0, 1e-12));
        QVERIFY(plan.capacity[0] + plan.capacity[1] + plan.capacity[2] + plan.capacity[3] <= 32);
      }
    }
  }

  void moreBudgetNeverCostsMore() {
    // Growing the budget raises every S_p of each grid point, so each rank moves to the same or an
    // earlier pool. That is never worse when each pool dominates the later ones: F ≺ C ≺ {S, E}.
    // S and E are not comparable (an S hit saves an SM read, an E hit an E read and decompression
    // time), so pool sets holding both are left out: there more budget can legitimately cost more.
    std::mt19937 rng(23);
    const std::vector<PoolMask> masks{poolBit(Pool::F),
                                      poolBit(Pool::F) | poolBit(Pool::C),
                                      poolBit(Pool::F) | poolBit(Pool::E),
                                      poolBit(Pool::C) | poolBit(Pool::E),
                                      poolBit(Pool::F) | poolBit(Pool::C) | poolBit(Pool::S),
                                      poolBit(Pool::F) | poolBit(Pool::C) | poolBit(Pool::E)};
    for (PoolMask mask : masks) {
      LayerPlanInput in;
      in.f = randomFrequencies(rng, 24, 3);
      in.k = 3;
      in.pools = mask;
      in.cost = sampleCost();
      in.bytesPerExpert = {3.0, 2.2, 1.7, 0.9};
      in.gridStep = 0.1;
      double previous = std::numeric_limits<double>::infinity();
      for (double budget = 0; budget <= 80; budget += 0.7) {
        in.budgetBytes = budget;
        const double cost = planLayer(in).expectedMakespan;
        QVERIFY2(cost <= previous * (1 + 1e-12),
                 qPrintable(QString("mask %1 budget %2: %3 > %4").arg(mask).arg(budget).arg(cost).arg(previous)));
        previous = cost;
      }
      if ((mask & poolBit(Pool::F)) != 0) QCOMPARE(previous, 0.0);  // the last budgets hold every expert in F
    }
  }

  void planModelPlansEveryLayerWithAnEqualShare() {
    std::mt19937 rng(29);
    std::vector<std::vector<double>> layers;
    for (int l = 0; l < 5; ++l) layers.push_back(randomFrequencies(rng, 16, 2));
    const auto cost = sampleCost();
    const std::array<double, 4> bytes{3.0, 2.0, 1.5, 1.0};
    const auto plans = planModel(layers, 2, kAllPools, cost, bytes, 5 * 12.5, 0.1);
    QCOMPARE(plans.size(), layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      LayerPlanInput in;
      in.f = layers[l];
      in.k = 2;
      in.cost = cost;
      in.bytesPerExpert = bytes;
      in.budgetBytes = 12.5;
      in.gridStep = 0.1;
      const auto one = planLayer(in);
      QCOMPARE(plans[l].ratio, one.ratio);
      QCOMPARE(plans[l].capacity, one.capacity);
      QCOMPARE(plans[l].expectedMakespan, one.expectedMakespan);
    }
    QVERIFY(planModel({}, 2, kAllPools, cost, bytes, 10, 0.1).empty());
    ZIPMOE_EXPECT_ERROR(planModel({layers[0], {0.5, 0.5}}, 2, kAllPools, cost, bytes, 10, 0.1), "layer 1");
  }

  void invalidInputsAreRefusedByName() {
    const auto f = priorRankFrequency(8, 2);
    ZIPMOE_EXPECT_ERROR(selectionProbabilities(f, 0), "k = 0");
    ZIPMOE_EXPECT_ERROR(selectionProbabilities(f, 9), "k = 9", "8");
    ZIPMOE_EXPECT_ERROR(selectionProbabilities(f, 3), "sum to 2", "k = 3");
    ZIPMOE_EXPECT_ERROR(selectionProbabilities(std::vector<double>{1.5, 0.5, 0.0}, 2), "f[0] = 1.5");
    ZIPMOE_EXPECT_ERROR(selectionProbabilities(std::vector<double>{1.0, 1.2, -0.2}, 2), "f[1] = 1.2");
    ZIPMOE_EXPECT_ERROR(selectionProbabilities(std::vector<double>{0.5, 0.5, 0.5, NAN}, 2), "f[3] = nan");
    ZIPMOE_EXPECT_ERROR(hitDistribution(std::vector<double>{0.5, 1.5}, 2), "q[1] = 1.5");
    ZIPMOE_EXPECT_ERROR(hitDistribution(std::vector<double>{0.5}, -1), "maxHits = -1");
    ZIPMOE_EXPECT_ERROR(priorRankFrequency(4, 5), "k = 5");
    ZIPMOE_EXPECT_ERROR(priorRankFrequency(0, 1), "numExperts = 0");
    ZIPMOE_EXPECT_ERROR(rankFrequency(std::vector<uint64_t>{}, 3, 1), "empty");

    CostModel bad = sampleCost();
    bad.u = -1;
    ZIPMOE_EXPECT_ERROR(estimateMakespan(2, {0, 0, 0, 0}, bad), "cost.u = -1");
    bad = sampleCost();
    bad.threads = 0;
    ZIPMOE_EXPECT_ERROR(estimateMakespan(2, {0, 0, 0, 0}, bad), "cost.threads = 0");
    ZIPMOE_EXPECT_ERROR(estimateMakespan(2, {1, 1, 1, 0}, sampleCost()), "3 hits", "k = 2");
    ZIPMOE_EXPECT_ERROR(estimateMakespan(2, {0, -1, 0, 0}, sampleCost()), "hits[C] = -1");
    ZIPMOE_EXPECT_ERROR(estimateMakespan(0, {0, 0, 0, 0}, sampleCost()), "k = 0");

    LayerPlanInput in;
    in.f = f;
    in.k = 2;
    in.cost = sampleCost();
    in.bytesPerExpert = {3.0, 2.0, 1.5, 1.0};
    in.budgetBytes = 10;
    in.gridStep = 0;
    ZIPMOE_EXPECT_ERROR(planLayer(in), "grid step", "= 0");
    in.gridStep = 1.5;
    ZIPMOE_EXPECT_ERROR(planLayer(in), "grid step", "1.5");
    in.gridStep = 0.1;
    in.budgetBytes = -5;
    ZIPMOE_EXPECT_ERROR(planLayer(in), "budget = -5");
    in.budgetBytes = 10;
    in.bytesPerExpert[1] = 0;
    ZIPMOE_EXPECT_ERROR(planLayer(in), "bytesPerExpert[C] = 0");
    in.pools = poolBit(Pool::F);  // a disabled pool's size does not matter
    QVERIFY(planLayer(in).capacity[0] == 3);
    in.pools = 0;
    ZIPMOE_EXPECT_ERROR(planLayer(in), "pool mask 0");
    in.pools = 0x10;
    ZIPMOE_EXPECT_ERROR(planLayer(in), "pool mask 16");
    in.pools = kAllPools;
    in.bytesPerExpert[1] = 2;
    in.cost.v = -0.5;
    ZIPMOE_EXPECT_ERROR(planLayer(in), "cost.v = -0.5");
    in.cost = sampleCost();
    in.f = {0.2, 0.3, 0.5, 1.0};
    ZIPMOE_EXPECT_ERROR(planLayer(in), "non-increasing", "f[1] = 0.3");
  }
};

QTEST_APPLESS_MAIN(TestPlanner)
#include "test_planner.moc"
