// The budget advisor (zipmoe/plan/budget_advisor.h) and the schedule prediction
// (zipmoe/plan/schedule_prediction.h) against the real runtime on a real store: the advisor plans exactly
// what a runtime opened at that budget plans (same working set, same pool split), its curve and knee
// behave, bad input is named; a layer's schedule predicted again from the runtime's trace is the
// schedule the runtime's own simulation predicted (the same makespan, layer by layer). No timing is
// asserted.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/experts/runtime_fixture.h"
#include "test_support.h"
#include "zipmoe/plan/budget_advisor.h"
#include "zipmoe/base/error.h"
#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/plan/schedule_prediction.h"

using namespace zipmoe;
using zipmoe::testing::Fixture;
using zipmoe::testing::makeFixture;
using zipmoe::testing::requestStream;
using zipmoe::testing::runStream;

namespace {

// Counts skewed enough, and long enough (≥ 16 steps), that every layer plans from its history.
ActivationCounts skewedCounts(int layers, int experts) {
  ActivationCounts c;
  c.layers = layers;
  c.experts = experts;
  for (int l = 0; l < layers; ++l) {
    for (int e = 0; e < experts; ++e) c.counts.push_back(static_cast<uint64_t>(400 / (1 + (e + l) % experts)));
    c.steps.push_back(200);
  }
  return c;
}

}  // namespace

class TestBudgetAdvisor : public QObject {
  Q_OBJECT

 private:
  Fixture f_;
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() / "zipmoe-test-budget-advisor";

 private Q_SLOTS:
  void initTestCase() {
    std::filesystem::remove_all(dir_);
    makeFixture(f_, dir_, CodecSpec{}, 4);
  }
  void cleanupTestCase() { std::filesystem::remove_all(dir_); }

  void plansWhatTheRuntimePlansAtThatBudget() {
    const Manifest& m = f_.opened->manifest();
    const ActivationCounts counts = skewedCounts(m.numLayers(), m.numExperts);
    BudgetAdvisorInputs in;
    in.profile = f_.directProfile;
    in.counts = counts;
    in.decompressWorkers = 2;
    const BudgetAdvisor advisor(*f_.opened, in);
    for (double share : {0.1, 0.3, 0.6, 1.0}) {
      RuntimeOptions o;
      o.decompressWorkers = 2;
      o.budget = MemoryBudget::poolsForShare(share);
      o.history = counts;
      auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
      rt->waitForPlan();
      QCOMPARE(advisor.minimumBudget(), rt->minimumBudget());
      QCOMPARE(advisor.expertBytes(), rt->expertBytes());
      const RuntimeStats st = rt->stats();
      const BudgetPrediction p = advisor.predict(st.budgetBytes);
      QVERIFY(p.feasible);
      QCOMPARE(p.layerMakespanSeconds.size(), static_cast<size_t>(m.numLayers()));
      for (size_t i = 0; i < kNumPools; ++i)
        QVERIFY2(std::abs(p.ratio[i] - st.pools[i].ratio) < 1e-9,
                 qPrintable(QStringLiteral("share %1, pool %2: advisor %3, runtime %4")
                                .arg(share).arg(i).arg(p.ratio[i]).arg(st.pools[i].ratio)));
      // (This profile has no FFN time: a budget that holds every expert in F costs nothing here.)
      QVERIFY(p.tpotSeconds >= 0 && p.ttftSeconds >= 0);
      if (share < 0.5) QVERIFY(p.tpotSeconds > 0 && p.ttftSeconds > 0);
      QVERIFY(p.expectedHitRate >= 0 && p.expectedHitRate <= 1 + 1e-9);
    }
  }

  void theCurveSpansTheBudgetRangeAndMoreMemoryNeverCostsTime() {
    BudgetAdvisorInputs in;
    in.profile = f_.directProfile;
    in.denseSecondsPerToken = 0.010;
    in.densePrefillSecondsPerToken = 0.002;
    const BudgetAdvisor advisor(*f_.opened, in);
    const auto curve = advisor.curve(9);
    QCOMPARE(curve.size(), size_t{9});
    QCOMPARE(curve.front().budgetBytes, advisor.minimumBudget());
    QCOMPARE(curve.back().budgetBytes, advisor.minimumBudget() + advisor.expertBytes());
    for (const BudgetPrediction& p : curve) {
      QVERIFY(p.feasible);
      QVERIFY(p.tpotSeconds >= 0.010);  // the dense part is in it
      QCOMPARE(p.tpotSeconds, 0.010 + p.expertSecondsPerToken);
    }
    QVERIFY(curve.back().tpotSeconds <= curve.front().tpotSeconds + 1e-12);
    QVERIFY(curve.back().expectedHitRate >= curve.front().expectedHitRate);
    // Below the working set nothing is predicted.
    QVERIFY(!advisor.predict(advisor.minimumBudget() - 1).feasible);
    const int knee = BudgetAdvisor::knee(curve);
    QVERIFY(knee >= 0 && knee < 9);
    const double best = curve.back().tpotSeconds;
    QVERIFY(curve[static_cast<size_t>(knee)].tpotSeconds - best < 0.05 * curve[static_cast<size_t>(knee)].tpotSeconds);
    if (knee > 0) QVERIFY(curve[static_cast<size_t>(knee) - 1].tpotSeconds - best >= 0.05 * curve[static_cast<size_t>(knee) - 1].tpotSeconds);
  }

  void theRuntimesObservedEstimateErrorCalibratesTheLayers() {
    BudgetAdvisorInputs in;
    in.profile = f_.directProfile;
    const BudgetAdvisor plain(*f_.opened, in);
    ObservedCosts seen;
    for (int i = 0; i < 16; ++i) seen.cpuLayer.add(0.5);  // layers ran at half the estimate
    in.observed = seen;
    const BudgetAdvisor calibrated(*f_.opened, in);
    const uint64_t budget = plain.minimumBudget() + plain.expertBytes() / 5;
    const BudgetPrediction a = plain.predict(budget), b = calibrated.predict(budget);
    QCOMPARE(a.calibration, 0.0);
    QCOMPARE(a.tpotSeconds, a.uncalibratedTpotSeconds);
    QCOMPARE(b.calibration, 0.5);
    QCOMPARE(b.uncalibratedTpotSeconds, a.tpotSeconds);  // the same plan, priced the same way
    for (size_t l = 0; l < b.layerSeconds.size(); ++l)
      QVERIFY(std::abs(b.layerSeconds[l] - std::max(b.layerMakespanSeconds[l] * 0.5, 0.0)) < 1e-12 ||
              b.layerSeconds[l] > b.layerMakespanSeconds[l] * 0.5);  // or the k FFNs, when longer
    QVERIFY(b.tpotSeconds < a.tpotSeconds);
  }

  void theKneeIsWhereTheRemainingGainFallsBelowTheThreshold() {
    std::vector<BudgetPrediction> curve(5);
    const double tpot[] = {1.0, 0.6, 0.42, 0.41, 0.40};
    for (size_t i = 0; i < 5; ++i) {
      curve[i].feasible = true;
      curve[i].budgetBytes = i * 100;
      curve[i].tpotSeconds = tpot[i];
    }
    QCOMPARE(BudgetAdvisor::knee(curve, 0.05), 2);  // (0.42 − 0.40) / 0.42 < 5 %
    QCOMPARE(BudgetAdvisor::knee(curve, 0.01), 4);
    curve[0].feasible = false;
    QCOMPARE(BudgetAdvisor::knee(curve, 0.5), 1);
    for (auto& p : curve) p.feasible = false;
    QCOMPARE(BudgetAdvisor::knee(curve), -1);
  }

  void badInputIsNamed() {
    BudgetAdvisorInputs in;
    in.profile = f_.directProfile;
    in.counts = skewedCounts(7, 3);
    ZIPMOE_EXPECT_ERROR((void)BudgetAdvisor(*f_.opened, in), "7 layers x 3 experts", "the store has");
    in.counts.reset();
    in.denseSecondsPerToken = -1;
    ZIPMOE_EXPECT_ERROR((void)BudgetAdvisor(*f_.opened, in), "denseSecondsPerToken");
    in.denseSecondsPerToken = 0;
    in.promptTokens = 0;
    ZIPMOE_EXPECT_ERROR((void)BudgetAdvisor(*f_.opened, in), "promptTokens");
  }

  void aLayerPredictedFromItsTraceIsTheRuntimesOwnPrediction() {
    const Manifest& m = f_.opened->manifest();
    // One token per expert (a decode step): the prediction prices each FFN for one token.
    auto stream = requestStream(6, m.numLayers(), m.numExperts, 2, 11);
    for (auto& step : stream)
      for (auto& layer : step)
        for (auto& r : layer) r.tokens = 1;
    RuntimeOptions o;
    o.decompressWorkers = 2;
    o.replanEverySteps = 0;
    o.outputSlots = 3;  // the requests' tensors are recovered into them: every operation kind runs
    o.budget = MemoryBudget::poolsForShare(0.3);
    auto rt = ExpertRuntime::open(f_.opened, o, f_.directProfile);
    runStream(f_, *rt, stream);
    std::vector<TraceEvent> events;
    rt->drainTrace(events);
    const RuntimeStats st = rt->stats();
    QCOMPARE(st.droppedTraceEvents, uint64_t{0});
    std::map<std::pair<int, int>, std::vector<TraceEvent>> layers;
    for (const TraceEvent& e : events)
      if (e.layer >= 0) layers[{e.token, e.layer}].push_back(e);
    QCOMPARE(layers.size(), static_cast<size_t>(6 * m.numLayers()));
    double predicted = 0;
    int withTasks = 0;
    for (const auto& [key, layerEvents] : layers) {
      const LayerSchedulePrediction p = predictLayerSchedule(layerEvents, f_.directProfile, rt->lanes().workers);
      predicted += p.makespanSeconds;
      withTasks += p.tasks > 0;
      for (const TraceEvent& e : p.events) {
        QCOMPARE(e.token, key.first);
        QCOMPARE(static_cast<int>(e.layer), key.second);
        QVERIFY(e.lane < rt->lanes().count());
        QVERIFY(e.endNs >= e.startNs);
      }
      if (p.tasks > 0) {  // a layer with work has every operation kind on its lanes
        QVERIFY(std::any_of(p.events.begin(), p.events.end(), [](const TraceEvent& e) { return e.op == TraceOp::Recover; }));
        QVERIFY(std::any_of(p.events.begin(), p.events.end(), [](const TraceEvent& e) { return e.op == TraceOp::ExpertCompute; }));
      }
    }
    QVERIFY(withTasks > 0);
    QVERIFY2(std::abs(predicted - st.predictedMakespan) <= 1e-9 + 1e-6 * st.predictedMakespan,
             qPrintable(QStringLiteral("from the trace %1 s, the runtime's %2 s").arg(predicted).arg(st.predictedMakespan)));
  }

  void aLayerWithoutOperationsPredictsNothing() {
    const LayerSchedulePrediction p = predictLayerSchedule({}, f_.directProfile, 2);
    QCOMPARE(p.events.size(), size_t{0});
    QCOMPARE(p.makespanSeconds, 0.0);
    TraceEvent bad;
    bad.layer = 0;
    bad.op = TraceOp::Decompress;
    bad.lane = 9;
    bad.expert = 1;
    bad.tensor = 0;
    const std::vector<TraceEvent> events{bad};
    ZIPMOE_EXPECT_ERROR(predictLayerSchedule(events, f_.directProfile, 2), "lane 9");
  }
};

QTEST_GUILESS_MAIN(TestBudgetAdvisor)
#include "test_budget_advisor.moc"
