// DanceMoE placement (seed 002 §III): Algorithm 1's counts, Algorithm 2's assignment checked against
// brute force on small instances, coverage and memory on random and real-shaped instances, a dense
// layer, an infeasible memory size, Eqs. 3-4, and the placement file.
#include <QtTest>

#include <algorithm>
#include <bit>
#include <functional>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/plan/expert_placement.h"

using namespace zipmoe;

namespace {

// Skewed counts per node: each node prefers its own experts (a rotated Zipf-like profile).
PlacementInput randomInput(std::mt19937& rng, int nodes, std::vector<int> experts, std::vector<int> memoryInExperts) {
  PlacementInput in;
  in.expertsPerLayer = std::move(experts);
  in.expertBytes = 1000;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int n = 0; n < nodes; ++n) {
    in.memoryBytes.push_back(static_cast<uint64_t>(memoryInExperts[static_cast<size_t>(n)]) * in.expertBytes + 999);
    std::vector<std::vector<double>> layers;
    for (const int E : in.expertsPerLayer) {
      std::vector<double> f(static_cast<size_t>(E));
      for (double& x : f) x = std::floor(100 * std::pow(u(rng), 3));
      layers.push_back(f);
    }
    in.frequency.push_back(layers);
  }
  return in;
}

// The least Eq. 2 cost over every assignment with these counts that covers every layer.
double bruteForceCost(const PlacementInput& in, const std::vector<std::vector<int>>& counts) {
  const int nodes = static_cast<int>(counts.size());
  double total = 0;
  for (size_t l = 0; l < in.expertsPerLayer.size(); ++l) {
    const int E = in.expertsPerLayer[l];
    std::vector<std::vector<unsigned>> choices(static_cast<size_t>(nodes));
    for (int n = 0; n < nodes; ++n)
      for (unsigned m = 0; m < (1u << E); ++m)
        if (std::popcount(m) == counts[static_cast<size_t>(n)][l]) choices[static_cast<size_t>(n)].push_back(m);
    double best = 1e300;
    std::function<void(int, unsigned, double)> walk = [&](int n, unsigned covered, double cost) {
      if (n == nodes) {
        if (covered == (1u << E) - 1) best = std::min(best, cost);
        return;
      }
      for (const unsigned m : choices[static_cast<size_t>(n)]) {
        double c = 0;
        for (int e = 0; e < E; ++e)
          if (!((m >> e) & 1u)) c += in.frequency[static_cast<size_t>(n)][l][static_cast<size_t>(e)];
        walk(n + 1, covered | m, cost + c);
      }
    };
    walk(0, 0, 0);
    total += best;
  }
  return total;
}

}  // namespace

class TestExpertPlacement : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void countsFollowEntropyAndAreClampedToTheLayer() {
    // One node, two layers: layer 0 used evenly (high entropy), layer 1 by one expert only (entropy 0).
    PlacementInput in;
    in.expertsPerLayer = {4, 4};
    in.expertBytes = 10;
    in.memoryBytes = {80};  // 8 slots: every expert
    in.frequency = {{{5, 5, 5, 5}, {9, 0, 0, 0}}};
    // The paper's ⌊8 · 2/2⌋ = 8 for layer 0 exceeds its 4 experts: clamped, the rest to layer 1.
    const auto N = allocateExpertCounts(in);
    QCOMPARE(N[0][0], 4);
    QCOMPARE(N[0][1], 4);
    // Less memory: the diverse layer gets more slots than the concentrated one, coverage permitting.
    PlacementInput two = in;
    two.memoryBytes = {60, 60};  // 6 + 6 slots for 8 experts
    two.frequency = {{{5, 5, 5, 5}, {9, 0, 0, 0}}, {{5, 5, 5, 5}, {9, 0, 0, 0}}};
    const auto M = allocateExpertCounts(two);
    for (int n = 0; n < 2; ++n) {
      QCOMPARE(M[static_cast<size_t>(n)][0] + M[static_cast<size_t>(n)][1], 6);
      QVERIFY(M[static_cast<size_t>(n)][0] >= M[static_cast<size_t>(n)][1]);
      QVERIFY(M[static_cast<size_t>(n)][0] <= 4 && M[static_cast<size_t>(n)][1] <= 4);
    }
    QVERIFY(M[0][1] + M[1][1] >= 4);  // layer 1 still covered
  }

  void greedyEqualsBruteForceOnSmallInstances() {
    std::mt19937 rng(7);
    int compared = 0, repaired = 0;
    for (int trial = 0; trial < 300; ++trial) {
      const int nodes = 2 + trial % 2;
      std::vector<int> experts = {4 + trial % 3, 3 + trial % 2};
      const int total = experts[0] + experts[1];
      std::vector<int> memory;
      for (int n = 0; n < nodes; ++n) memory.push_back(std::max(1, total / nodes) + static_cast<int>(rng() % 3));
      int sum = 0;
      for (int m : memory) sum += m;
      if (sum < total) memory[0] += total - sum;
      const PlacementInput in = randomInput(rng, nodes, experts, memory);
      const auto counts = allocateExpertCounts(in);
      const ExpertPlacement p = assignExperts(in, counts);
      checkPlacement(in, p);
      for (int n = 0; n < nodes; ++n)
        for (size_t l = 0; l < experts.size(); ++l)
          QCOMPARE(static_cast<int>(p.held[static_cast<size_t>(n)][l].size()), counts[static_cast<size_t>(n)][l]);
      const double greedy = remoteInvocationCost(in, p), best = bruteForceCost(in, counts);
      QVERIFY2(greedy == best, qPrintable(QString("trial %1: greedy %2, brute force %3").arg(trial).arg(greedy).arg(best)));
      ++compared;
      // Count the instances where the top-N sets left an expert uncovered (the repair ran).
      for (size_t l = 0; l < experts.size(); ++l) {
        std::vector<bool> covered(static_cast<size_t>(experts[l]), false);
        for (int n = 0; n < nodes; ++n) {
          std::vector<int> order(static_cast<size_t>(experts[l]));
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
            return in.frequency[static_cast<size_t>(n)][l][static_cast<size_t>(a)] >
                   in.frequency[static_cast<size_t>(n)][l][static_cast<size_t>(b)];
          });
          for (int i = 0; i < counts[static_cast<size_t>(n)][l]; ++i) covered[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
        }
        if (std::find(covered.begin(), covered.end(), false) != covered.end()) {
          ++repaired;
          break;
        }
      }
    }
    QCOMPARE(compared, 300);
    QVERIFY2(repaired > 20, qPrintable(QString("only %1 instances needed the coverage repair").arg(repaired)));
  }

  void coverageAndMemoryHoldOnRealShapes() {
    // DeepSeek-V2-Lite: 26 MoE layers of 64 routed experts, 6 active per token (not 8, as the paper has it);
    // Mixtral: 32 layers of 8. Three nodes with unequal memory, 35-45 % of the experts each.
    std::mt19937 rng(11);
    for (const auto& [layers, experts] : {std::pair{26, 64}, std::pair{32, 8}}) {
      const int total = layers * experts;
      const PlacementInput in = randomInput(rng, 3, std::vector<int>(static_cast<size_t>(layers), experts),
                                            {total * 45 / 100, total * 40 / 100, total * 35 / 100});
      const ExpertPlacement p = placeExperts(in);  // checks coverage and memory itself
      checkPlacement(in, p);
      for (int n = 0; n < 3; ++n)
        QVERIFY(static_cast<uint64_t>(p.expertsHeld(n)) * in.expertBytes <= in.memoryBytes[static_cast<size_t>(n)]);
      const ExpertPlacement uniform = uniformPlacement(in), global = globalFrequencyPlacement(in);
      checkPlacement(in, uniform);
      checkPlacement(in, global);
      // Locality pays: DanceMoE keeps more of each node's own activations local than either baseline.
      QVERIFY(localShare(in, p) > localShare(in, uniform));
      QVERIFY(localShare(in, p) >= localShare(in, global));
    }
  }

  void denseAndUnobservedLayers() {
    PlacementInput in;
    in.expertsPerLayer = {0, 4, 4};  // a dense first layer, like DeepSeek's
    in.expertBytes = 1;
    in.memoryBytes = {5, 5};
    in.frequency = {{{}, {0, 0, 0, 0}, {1, 2, 3, 4}}, {{}, {0, 0, 0, 0}, {4, 3, 2, 1}}};  // layer 1 never seen
    const ExpertPlacement p = placeExperts(in);
    QVERIFY(p.held[0][0].empty() && p.held[1][0].empty());
    for (int e = 0; e < 4; ++e) QVERIFY(!p.holders(1, e).empty());
    // A cluster that has observed nothing at all still gets a covering placement.
    PlacementInput blank = in;
    blank.frequency = {{{}, {0, 0, 0, 0}, {0, 0, 0, 0}}, {{}, {0, 0, 0, 0}, {0, 0, 0, 0}}};
    checkPlacement(blank, placeExperts(blank));
    QCOMPARE(remoteInvocationCost(blank, placeExperts(blank)), 0.0);
  }

  void infeasibleMemoryIsNamed() {
    PlacementInput in;
    in.expertsPerLayer = {8, 8};
    in.expertBytes = 1000;
    in.memoryBytes = {5000, 7999};  // 5 + 7 = 12 experts for 16
    in.frequency = {{std::vector<double>(8, 1), std::vector<double>(8, 1)}, {std::vector<double>(8, 1), std::vector<double>(8, 1)}};
    in.nodeNames = {"desktop", "laptop"};
    ZIPMOE_EXPECT_ERROR(placeExperts(in), "infeasible", "16 experts", "1000 bytes", "16000 bytes", "desktop 5000 bytes",
                        "laptop 7999 bytes", "room for 12 experts");
    in.frequency[1][0][3] = -1;
    ZIPMOE_EXPECT_ERROR(placeExperts(in), "laptop", "layer 0", "expert 3", "frequency");
  }

  void migrationFollowsEquations3And4() {
    PlacementInput in;
    in.expertsPerLayer = {4};
    in.expertBytes = 1'000'000;
    in.memoryBytes = {2'000'000, 2'000'000};
    in.frequency = {{{1, 1, 50, 50}}, {{50, 50, 1, 1}}};  // the workload has switched
    ExpertPlacement stale;
    stale.expertsPerLayer = {4};
    stale.held = {{{0, 1}}, {{2, 3}}};
    const ExpertPlacement fresh = placeExperts(in);
    QCOMPARE(fresh.held[0][0], (std::vector<int>{2, 3}));
    QCOMPARE(fresh.held[1][0], (std::vector<int>{0, 1}));
    // Eq. 3: each node loads two experts of 1 MB, at 10 MB/s and 1 MB/s.
    QCOMPARE(migrationSeconds(stale, fresh, in.expertBytes, {1e7, 1e6}), 2 * 0.1 + 2 * 1.0);
    QCOMPARE(migrationSeconds(fresh, fresh, in.expertBytes, {1e7, 1e6}), 0.0);
    // Eq. 4: 200 remote calls now, 4 after; at 10 ms a call that is 2.0 s against 0.04 s + 2.2 s: stay.
    MigrationInputs m{{1e7, 1e6}, 0.01, 1};
    MigrationDecision d = decideMigration(in, stale, fresh, m);
    QVERIFY(!d.migrate);
    QCOMPARE(d.currentSeconds, 2.0);
    QCOMPARE(d.candidateSeconds, 0.04);
    QCOMPARE(d.migrationSeconds, 2.2);
    // Over a longer horizon (the pattern recurs 5×) the move pays.
    m.horizonRepeats = 5;
    d = decideMigration(in, stale, fresh, m);
    QVERIFY2(d.migrate, d.reason.c_str());
    QVERIFY(!decideMigration(in, fresh, fresh, m).migrate);
    ZIPMOE_EXPECT_ERROR(migrationSeconds(stale, fresh, 1, {1e7, 0}), "node 1", "load speed");
  }

  void placementFileRoundTrips() {
    std::mt19937 rng(3);
    const PlacementInput in = randomInput(rng, 3, {6, 6, 6}, {8, 7, 6});
    const ExpertPlacement p = placeExperts(in);
    std::vector<std::string> names;
    const ExpertPlacement back = placementFromJson(placementToJson(p, {"a:1", "b:2", "c:3"}), "p.json", &names);
    QVERIFY(back == p);
    QCOMPARE(names, (std::vector<std::string>{"a:1", "b:2", "c:3"}));
    nlohmann::json bad = placementToJson(p, {});
    bad["nodes"][1]["layers"][2] = {0, 9};
    ZIPMOE_EXPECT_ERROR(placementFromJson(bad, "p.json"), "p.json", "node 1", "layer 2", "expert 9", "outside 0..5");
    ZIPMOE_EXPECT_ERROR(placementFromJson(nlohmann::json::array(), "q.json"), "q.json", "experts_per_layer");
  }
};

QTEST_APPLESS_MAIN(TestExpertPlacement)
#include "test_expert_placement.moc"
