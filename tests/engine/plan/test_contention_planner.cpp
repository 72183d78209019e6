// The planner's contention term and raw misses (pool_planner.h, estimateMakespan): with every
// contention figure zero the estimate and the plans are the paper's; with the model's compute slowed
// by busy decompression workers the plan moves towards F and raw misses; the formula by hand.
// No test here times anything.
#include <QtTest>

#include <array>
#include <cmath>
#include <vector>

#include "experts/planner_inputs.h"
#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/plan/pool_planner.h"

using namespace zipmoe;
using namespace zipmoe::plan;

namespace {

// Costs of the order measured for the Qwen1.5-MoE-shaped store (docs/runtime/qwen8-profile.json).
CostModel qwenCosts() {
  CostModel c;
  c.u = 1.41e-3;
  c.v = 0.34e-3;
  c.c = 0.23e-3;
  c.recover = 0.47e-3;
  c.threads = 2;
  c.shards = 4;
  c.tensorsPerExpert = 3;
  return c;
}

LayerPlanInput layer(double budgetShare, const CostModel& cost) {
  LayerPlanInput in;
  in.k = 4;
  in.f = priorRankFrequency(60, 4);
  in.cost = cost;
  const double full = 3 * 5.8e6;
  in.bytesPerExpert = {full, 0.66 * full, 0.5 * full, 0.16 * full};
  in.budgetBytes = budgetShare * 60 * full;
  return in;
}

bool samePlan(const LayerPlan& a, const LayerPlan& b) {
  return a.ratio == b.ratio && a.capacity == b.capacity && a.expectedMakespan == b.expectedMakespan &&
         a.rawMisses == b.rawMisses;
}

// The paper's Algorithm 3 with our recovery term, written out for comparison.
double paper(int k, const std::array<int, 4>& h, const CostModel& c) {
  const double n = c.tensorsPerExpert, K = c.shards;
  const double nSM = n * (k - h[0] - h[1] - h[2]);
  const double nE = n * K * (k - h[0] - h[1] - h[3]);
  const double nD = n * K * (k - h[0]);
  return std::max({nSM * c.u + nE * c.v, (nE * c.v + nD * c.c) / c.threads, n * (k - h[0]) * c.recover});
}

}  // namespace

class TestContentionPlanner : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void zeroContentionIsThePapersEstimate() {
    const CostModel c = qwenCosts();
    for (int hF = 0; hF <= 4; ++hF)
      for (int hC = 0; hF + hC <= 4; ++hC)
        for (int hS = 0; hF + hC + hS <= 4; ++hS)
          for (int hE = 0; hF + hC + hS + hE <= 4; ++hE) {
            const std::array<int, 4> h{hF, hC, hS, hE};
            QCOMPARE(estimateMakespan(4, h, c), paper(4, h, c));
          }
  }

  void slowdownsOfOneChangeNoPlan() {
    // Slowdowns of exactly 1 (and 0, unmeasured) are no contention, whatever the FFN time: the
    // plans are today's, bit for bit.
    for (double share : {0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0}) {
      const LayerPlan base = planLayer(layer(share, qwenCosts()));
      CostModel one = qwenCosts();
      one.compute = 1.4e-3;
      one.computeSlowdown = one.decodeSlowdown = one.ioSlowdown = 1;
      QVERIFY2(samePlan(planLayer(layer(share, one)), base), qPrintable(QString("share %1").arg(share)));
      one.computeSlowdown = one.decodeSlowdown = one.ioSlowdown = 0.5;  // below 1: noise, no speed-up
      QVERIFY(samePlan(planLayer(layer(share, one)), base));
      QVERIFY(!base.rawMisses);
    }
  }

  void theContentionTermByHand() {
    CostModel c = qwenCosts();
    c.compute = 1e-3;
    c.computeSlowdown = 2.5;
    c.decodeSlowdown = 1.5;
    c.ioSlowdown = 1.2;
    // One C hit and three F hits: no I/O; B = max{(12·c)/2, 3·recover} = 1.41 ms, X = 4 ms.
    const std::array<int, 4> h{3, 1, 0, 0};
    const double B = std::max(12 * c.c / 2, 3 * c.recover);
    const double O = std::min(4 * c.compute, B);
    QCOMPARE(estimateMakespan(4, h, c), B + 0.5 * O + 1.5 * O);
    // Four F hits: nothing to do.
    QCOMPARE(estimateMakespan(4, {4, 0, 0, 0}, c), 0.0);
    // Two raw misses and two F hits: reads only, no slowdown (no CPU work).
    c.fullRead = 2.25e-3;
    QCOMPARE(estimateMakespan(4, {2, 0, 0, 0}, c, true), 2 * 3 * c.fullRead);
    // The same as ZipMoE misses: I/O with busy workers, and the penalty.
    const double tIO = 6 * c.u + 24 * c.v;
    const double B2 = std::max((24 * c.v + 24 * c.c) / 2, 6 * c.recover);
    const double O2 = std::min(4 * c.compute, B2);
    QCOMPARE(estimateMakespan(4, {2, 0, 0, 0}, c), std::max(tIO * 1.2, B2 + 0.5 * O2) + 1.5 * O2);
    // Coalesced miss reads replace u + K·v per missed tensor.
    c.missRead = 1.5e-3;
    const double tIO3 = 6 * c.missRead;
    QCOMPARE(estimateMakespan(4, {2, 0, 0, 0}, c), std::max(tIO3 * 1.2, B2 + 0.5 * O2) + 1.5 * O2);
    ZIPMOE_EXPECT_ERROR(estimateMakespan(4, {0, 0, 0, 0}, qwenCosts(), true), "fullRead");
    c.computeSlowdown = -1;
    ZIPMOE_EXPECT_ERROR(estimateMakespan(4, {0, 0, 0, 0}, c), "computeSlowdown");
  }

  void heavyContentionPrefersFAndRawMisses() {
    CostModel heavy = qwenCosts();
    heavy.compute = 1.4e-3;
    heavy.computeSlowdown = 3;
    heavy.decodeSlowdown = 2;
    heavy.ioSlowdown = 1.3;
    for (double share : {0.1, 0.25, 0.5, 0.75}) {
      const LayerPlan calm = planLayer(layer(share, qwenCosts()));
      const LayerPlan busy = planLayer(layer(share, heavy));
      // More of the budget goes to F, the pool whose hits need no CPU.
      QVERIFY2(busy.ratio[0] >= calm.ratio[0],
               qPrintable(QString("share %1: F %2 under contention, %3 without").arg(share).arg(busy.ratio[0]).arg(calm.ratio[0])));
      QVERIFY(busy.expectedMakespan >= calm.expectedMakespan);
      // With raw reads available at the measured cost, they serve the misses.
      CostModel raw = heavy;
      raw.fullRead = 2.25e-3;
      const LayerPlan rawPlan = planLayer(layer(share, raw));
      QVERIFY2(rawPlan.rawMisses, qPrintable(QString("share %1: raw misses not chosen").arg(share)));
      QVERIFY(rawPlan.expectedMakespan <= busy.expectedMakespan);
      // A raw read so slow that it never pays: not chosen, and the plan is the one without it.
      raw.fullRead = 1.0;
      const LayerPlan slowRaw = planLayer(layer(share, raw));
      QVERIFY(!slowRaw.rawMisses);
      QVERIFY(samePlan(slowRaw, busy));
    }
    // At a budget that holds every expert in F, F takes it all under contention.
    const LayerPlan all = planLayer(layer(1.0, heavy));
    QCOMPARE(all.ratio[0], 1.0);
  }

  void planModelCarriesTheChoicePerLayer() {
    CostModel raw = qwenCosts();
    raw.fullRead = 2.25e-3;
    raw.compute = 1.4e-3;
    raw.computeSlowdown = 3;
    const std::vector<std::vector<double>> f(3, priorRankFrequency(60, 4));
    const double full = 3 * 5.8e6;
    const auto plans = planModel(f, 4, kAllPools, raw, {full, 0.66 * full, 0.5 * full, 0.16 * full}, 3 * 0.25 * 60 * full);
    QCOMPARE(plans.size(), size_t{3});
    for (const auto& p : plans) QVERIFY(p.rawMisses);
    const auto none = planModel(f, 4, kAllPools, qwenCosts(), {full, 0.66 * full, 0.5 * full, 0.16 * full},
                                3 * 0.25 * 60 * full);
    for (const auto& p : none) QVERIFY(!p.rawMisses);
  }

  void cpuLayerFactorScalesOnlyLayersWithCpuWork() {
    CostModel c = qwenCosts();
    c.fullRead = 2.25e-3;
    CostModel f = c;
    f.cpuLayerFactor = 1.7;
    // A layer with CPU work (C hits, ZipMoE misses) costs 1.7 × more; one that only reads does not.
    for (const std::array<int, kNumPools>& hits : {std::array<int, kNumPools>{0, 2, 0, 0}, {1, 1, 1, 1}, {0, 0, 0, 0}})
      QVERIFY(std::abs(estimateMakespan(4, hits, f) - 1.7 * estimateMakespan(4, hits, c)) < 1e-12);
    QCOMPARE(estimateMakespan(4, {2, 0, 0, 0}, f, true), estimateMakespan(4, {2, 0, 0, 0}, c, true));
    // Below 1 counts as 1.
    f.cpuLayerFactor = 0.5;
    QCOMPARE(estimateMakespan(4, {0, 2, 0, 0}, f), estimateMakespan(4, {0, 2, 0, 0}, c));
    f.cpuLayerFactor = -1;
    ZIPMOE_EXPECT_ERROR(estimateMakespan(4, {0, 2, 0, 0}, f), "cpuLayerFactor");
    // Decoding that costs what it was observed to cost here turns a plan that kept C hits and
    // decoded its misses into F with raw misses (docs/RUNTIME.md, "Pricing plans with observed costs").
    CostModel observed = c;
    observed.fullRead = 1.1 * observed.missRead + 0.9e-3;
    const LayerPlan before = planLayer(layer(0.25, observed));
    observed.cpuLayerFactor = 2.0;
    const LayerPlan after = planLayer(layer(0.25, observed));
    QVERIFY(after.rawMisses);
    QVERIFY2(after.ratio[0] >= before.ratio[0], qPrintable(QString("F %1 then %2").arg(before.ratio[0]).arg(after.ratio[0])));
  }

  void observedCostsReplaceTheProfilesFigures() {
    // Running means over a window.
    ObservedCost a;
    for (double s : {1.0, 2.0, 3.0}) a.add(s);
    QCOMPARE(a.count, uint64_t{3});
    QVERIFY(std::abs(a.seconds - 2.0) < 1e-12);
    ObservedCost w;
    for (uint64_t i = 0; i < 2 * ObservedCost::kObservedWindow; ++i) w.add(i < ObservedCost::kObservedWindow ? 0.0 : 1.0);
    QCOMPARE(w.count, ObservedCost::kObservedWindow);
    QVERIFY2(w.seconds > 0.6, qPrintable(QString("old operations still weigh: %1").arg(w.seconds)));
    ObservedCost m = a, none;
    m.merge(none);
    QCOMPARE(m.seconds, a.seconds);
    ObservedCost b;
    b.add(5.0);
    m.merge(b);
    QCOMPARE(m.count, uint64_t{4});
    QVERIFY(std::abs(m.seconds - (1 + 2 + 3 + 5) / 4.0) < 1e-12);

    CostModel c = qwenCosts();
    c.missRead = 4.3e-3;
    c.fullRead = 5.3e-3;
    c.decodeSlowdown = 1.9;
    c.ioSlowdown = 1.2;
    ObservedCosts seen;
    // Too few operations: nothing changes.
    for (int i = 0; i < 3; ++i) seen.tensorRead.add(3.0e-3);
    CostModel same = experts::observedCostModel(c, seen);
    QCOMPARE(same.missRead, c.missRead);
    QCOMPARE(same.ioSlowdown, c.ioSlowdown);
    // Enough: the observed mean replaces the figure, the unobserved reads scale with it, and the
    // group's contention factor is 1 (it is in the observed times).
    for (uint64_t i = 0; i < experts::kMinObservedOps; ++i) seen.tensorRead.add(3.0e-3);
    const CostModel io = experts::observedCostModel(c, seen);
    QVERIFY(std::abs(io.missRead - 3.0e-3) < 1e-12);
    QVERIFY(std::abs(io.fullRead - c.fullRead * 3.0e-3 / 4.3e-3) < 1e-12);
    QVERIFY(std::abs(io.u - c.u * 3.0e-3 / 4.3e-3) < 1e-12);
    QCOMPARE(io.ioSlowdown, 1.0);
    QCOMPARE(io.c, c.c);  // CPU figures untouched until observed
    QCOMPARE(io.decodeSlowdown, c.decodeSlowdown);
    QCOMPARE(io.cpuLayerFactor, 0.0);
    for (uint64_t i = 0; i < experts::kMinObservedOps; ++i) {
      seen.decompress.add(2 * c.c);
      seen.cpuLayer.add(1.9);
      seen.readLayer.add(1.1);
    }
    const CostModel cpu = experts::observedCostModel(c, seen);
    QVERIFY(std::abs(cpu.c - 2 * c.c) < 1e-12);
    QVERIFY(std::abs(cpu.recover - 2 * c.recover) < 1e-12);
    QCOMPARE(cpu.decodeSlowdown, 1.0);
    QVERIFY(std::abs(cpu.cpuLayerFactor - 1.9 / 1.1) < 1e-12);
  }
};

QTEST_GUILESS_MAIN(TestContentionPlanner)
#include "test_contention_planner.moc"
