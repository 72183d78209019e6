// The cache-affinity scheduler (sched/schedule.h): DAG shapes per compression state, Algorithm 1's block
// structure, the simulation's precedence and work-conserving priority rules, the lower bound, and the
// approximation guarantee of Theorem 3.1 on random workloads.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "sched/schedule.h"
#include "test_support.h"
#include "zipmoe/base/error.h"

using namespace zipmoe::sched;

namespace {

struct Workload {
  std::vector<TaskSpec> tasks;
  std::vector<double> p;
  Costs costs;
  std::vector<int> ready;
};

// A random sparse layer: 1-10 selected experts with 1-3 tensors each, states drawn per expert (or, in a
// quarter of the layers, per tensor), some experts in F (ready), random costs and K, L.
Workload randomWorkload(std::mt19937& rng, bool withRecovery, int maxExperts = 10) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto uniform = [&](double lo, double hi) { return lo + (hi - lo) * unit(rng); };
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Workload w;
  w.costs.shards = pick(1, 5);
  w.costs.workers = pick(1, 4);
  w.costs.u = uniform(0.05, 4.0);
  w.costs.v = uniform(0.0, 1.5);
  w.costs.c = uniform(0.01, 3.0);
  w.costs.recover = withRecovery ? uniform(0.0, 1.0) : 0.0;
  const int experts = pick(1, maxExperts);
  const int tensors = pick(1, 3);
  const bool perTensor = pick(0, 3) == 0;
  const double computeScale = uniform(0.05, 4.0);
  w.p.resize(static_cast<size_t>(experts + pick(0, 3)));
  for (double& p : w.p) p = computeScale * uniform(0.0, 3.0);
  const TaskState states[] = {TaskState::Miss, TaskState::C, TaskState::S, TaskState::E};
  for (int e = 0; e < experts; ++e) {
    if (pick(0, 5) == 0) continue;  // not selected by the gate
    if (pick(0, 5) == 0) {
      w.ready.push_back(e);  // all tensors in F
      continue;
    }
    TaskState s = states[pick(0, 3)];
    for (int t = 0; t < tensors; ++t) {
      if (perTensor) s = states[pick(0, 3)];
      w.tasks.push_back(TaskSpec{e, t, s});
    }
  }
  return w;
}

double lowerBoundOf(const Workload& w) { return lowerBound(w.tasks, w.p, w.costs, w.ready); }
Schedule algorithm1(const Workload& w) { return buildSchedule(w.tasks, w.p, w.costs, w.ready); }
Schedule fifo(const Workload& w) { return fifoSchedule(w.tasks, w.costs, w.ready); }
Simulation run(const Workload& w, const Schedule& s) { return simulate(w.tasks, w.p, w.costs, s); }

bool readsE(TaskState s) { return s == TaskState::Miss || s == TaskState::S; }

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }
#define EXPECT_NEAR(a, b) \
  QVERIFY2(near((a), (b)),  \
           qPrintable(QString("%1 = %2, expected %3").arg(#a).arg((a), 0, 'g', 12).arg((b), 0, 'g', 12)))

using OpKey = std::tuple<OpKind, int, int>;  // kind, task (or expert for Compute), shard

// Every property a simulation of `s` must have: each op of the lists once, plus one Compute per expert of
// computeOrder, on its lane, with its duration; no overlap on a lane; each op after its predecessors; the
// I/O thread reading back to back from 0 in list order; work conservation (a lane, or for decompressions
// all L workers, is busy whenever an op of its list is ready and not started); priority (an op that was
// ready when a later op of its list started has started no later); makespan = last compute end.
void checkSimulation(const Workload& w, const Schedule& s, const Simulation& sim) {
  const int K = w.costs.shards, L = w.costs.workers;
  std::map<OpKey, const SimulatedOp*> byKey;
  for (const SimulatedOp& op : sim.ops) {
    const OpKey key{op.op.kind, op.op.kind == OpKind::Compute ? op.op.expert : op.op.task, op.op.shard};
    QVERIFY2(byKey.emplace(key, &op).second, "an op was simulated twice");
  }
  QCOMPARE(sim.ops.size(), s.io.size() + s.decompress.size() + s.recover.size() + s.computeOrder.size());

  const auto find = [&](OpKind kind, int id, int shard) -> const SimulatedOp* {
    const auto it = byKey.find(OpKey{kind, id, shard});
    return it == byKey.end() ? nullptr : it->second;
  };
  // Ready time of each simulated op: the latest end among its predecessors (0 without any).
  std::map<const SimulatedOp*, double> readyAt;
  std::map<int, double> expertReady;
  for (const SimulatedOp& op : sim.ops) {
    const TaskSpec* task = op.op.task >= 0 ? &w.tasks[static_cast<size_t>(op.op.task)] : nullptr;
    double ready = 0, duration = 0;
    int laneLo = 0, laneHi = 0;
    switch (op.op.kind) {
      case OpKind::ReadE: duration = w.costs.v; break;
      case OpKind::ReadSM: duration = w.costs.u; break;
      case OpKind::Decompress:
        duration = w.costs.c, laneLo = 1, laneHi = L;
        if (readsE(task->state)) {
          const SimulatedOp* read = find(OpKind::ReadE, op.op.task, op.op.shard);
          QVERIFY(read);
          ready = read->end;
        }
        break;
      case OpKind::Recover:
        duration = w.costs.recover, laneLo = laneHi = L + 1;
        for (int k = 0; k < K; ++k) {
          const SimulatedOp* dec = find(OpKind::Decompress, op.op.task, k);
          QVERIFY(dec);
          ready = std::max(ready, dec->end);
        }
        if (isTypeI(task->state)) {
          const SimulatedOp* sm = find(OpKind::ReadSM, op.op.task, -1);
          QVERIFY(sm);
          ready = std::max(ready, sm->end);
        }
        expertReady[task->expert] = std::max(expertReady[task->expert], op.end);
        break;
      case OpKind::Compute:
        duration = w.p[static_cast<size_t>(op.op.expert)], laneLo = laneHi = L + 2;
        break;
    }
    QVERIFY2(op.lane >= laneLo && op.lane <= laneHi, opKindName(op.op.kind));
    EXPECT_NEAR(op.end - op.start, duration);
    readyAt[&op] = ready;
  }
  for (const SimulatedOp& op : sim.ops) {
    if (op.op.kind != OpKind::Compute) continue;
    readyAt[&op] = expertReady.count(op.op.expert) ? expertReady[op.op.expert] : 0.0;
    for (size_t t = 0; t < w.tasks.size(); ++t)
      if (w.tasks[t].expert == op.op.expert) QVERIFY(find(OpKind::Recover, static_cast<int>(t), -1));
  }
  for (const auto& [op, ready] : readyAt)
    QVERIFY2(op->start >= ready, qPrintable(QString("%1 of task %2 starts at %3 before its inputs at %4")
                                                .arg(opKindName(op->op.kind))
                                                .arg(op->op.task)
                                                .arg(op->start)
                                                .arg(ready)));

  // Lanes: no overlap; busy intervals for the work-conservation check.
  std::map<int, std::vector<std::pair<double, double>>> busy;
  for (const SimulatedOp& op : sim.ops) busy[op.lane].emplace_back(op.start, op.end);
  for (auto& [lane, intervals] : busy) {
    std::sort(intervals.begin(), intervals.end());
    for (size_t i = 1; i < intervals.size(); ++i)
      QVERIFY2(intervals[i].first >= intervals[i - 1].second - 1e-12,
               qPrintable(QString("overlap on lane %1").arg(lane)));
  }
  const auto busyThroughout = [&](int lane, double from, double to) {
    double covered = from;
    for (const auto& [a, b] : busy[lane]) {
      if (a > covered + 1e-9) break;
      covered = std::max(covered, b);
      if (covered >= to - 1e-9) return true;
    }
    return covered >= to - 1e-9;
  };
  for (const auto& [op, ready] : readyAt) {
    if (op->start <= ready + 1e-9) continue;
    if (op->op.kind == OpKind::Decompress) {
      for (int lane = 1; lane <= L; ++lane)
        QVERIFY2(busyThroughout(lane, ready, op->start), "a worker idled while a decompression was ready");
    } else {
      QVERIFY2(busyThroughout(op->lane, ready, op->start),
               qPrintable(QString("lane %1 idled while %2 was ready").arg(op->lane).arg(opKindName(op->op.kind))));
    }
  }

  // Priority: within each list, an earlier op ready when a later one started did not start after it.
  const auto checkPriority = [&](const std::vector<const SimulatedOp*>& list) {
    for (size_t y = 0; y < list.size(); ++y)
      for (size_t x = 0; x < y; ++x)
        if (readyAt[list[x]] <= list[y]->start)
          QVERIFY2(list[x]->start <= list[y]->start + 1e-12, "a later op of a list overtook a ready earlier one");
  };
  const auto lookup = [&](const std::vector<Op>& ops) {
    std::vector<const SimulatedOp*> out;
    for (const Op& op : ops) out.push_back(find(op.kind, op.task, op.shard));
    return out;
  };
  std::vector<const SimulatedOp*> io = lookup(s.io), computes;
  for (const SimulatedOp* op : io) QVERIFY(op);
  checkPriority(io);
  checkPriority(lookup(s.decompress));
  checkPriority(lookup(s.recover));
  for (const int e : s.computeOrder) computes.push_back(find(OpKind::Compute, e, -1));
  checkPriority(computes);

  double clock = 0;  // reads have no predecessors: the I/O thread never waits
  for (const SimulatedOp* op : io) {
    EXPECT_NEAR(op->start, clock);
    clock = op->end;
  }
  double last = 0;
  for (const SimulatedOp* op : computes) last = std::max(last, op->end);
  EXPECT_NEAR(sim.makespan, last);
}

// Checks the lists of `s` against Algorithm 1's structure and the DAG of every task.
void checkStructure(const Workload& w, const Schedule& s, bool blockIo) {
  const int K = w.costs.shards;
  std::vector<int> concatenated;
  for (const auto& b : s.blocks) concatenated.insert(concatenated.end(), b.begin(), b.end());
  QVERIFY(concatenated == s.taskOrder);
  std::vector<int> sorted = s.taskOrder;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> all(w.tasks.size());
  std::iota(all.begin(), all.end(), 0);
  QVERIFY2(sorted == all, "every task appears exactly once in taskOrder");

  // Per-task op counts: the DAG of its state.
  std::vector<std::map<OpKind, int>> counts(w.tasks.size());
  for (const auto* list : {&s.io, &s.decompress, &s.recover})
    for (const Op& op : *list) {
      ++counts[static_cast<size_t>(op.task)][op.kind];
      QCOMPARE(op.expert, w.tasks[static_cast<size_t>(op.task)].expert);
    }
  for (size_t t = 0; t < w.tasks.size(); ++t) {
    const TaskState st = w.tasks[t].state;
    QCOMPARE(counts[t][OpKind::ReadE], readsE(st) ? K : 0);
    QCOMPARE(counts[t][OpKind::Decompress], K);
    QCOMPARE(counts[t][OpKind::ReadSM], isTypeI(st) ? 1 : 0);
    QCOMPARE(counts[t][OpKind::Recover], 1);
  }

  // Decompressions and recoveries in task order; I/O per block (E-chunks then SM-chunks) or per task.
  size_t d = 0, r = 0, i = 0;
  for (const int t : s.taskOrder) {
    for (int k = 0; k < K; ++k, ++d) QVERIFY(s.decompress[d].task == t && s.decompress[d].shard == k);
    QCOMPARE(s.recover[r++].task, t);
  }
  for (const auto& block : s.blocks) {
    if (blockIo) {
      for (const int t : block)
        if (readsE(w.tasks[static_cast<size_t>(t)].state))
          for (int k = 0; k < K; ++k, ++i)
            QVERIFY(s.io[i].kind == OpKind::ReadE && s.io[i].task == t && s.io[i].shard == k);
      for (const int t : block)
        if (isTypeI(w.tasks[static_cast<size_t>(t)].state)) {
          QVERIFY(s.io[i].kind == OpKind::ReadSM && s.io[i].task == t);
          ++i;
        }
    } else {
      for (const int t : block) {
        if (readsE(w.tasks[static_cast<size_t>(t)].state))
          for (int k = 0; k < K; ++k, ++i) QVERIFY(s.io[i].kind == OpKind::ReadE && s.io[i].task == t);
        if (isTypeI(w.tasks[static_cast<size_t>(t)].state)) {
          QVERIFY(s.io[i].kind == OpKind::ReadSM && s.io[i].task == t);
          ++i;
        }
      }
    }
  }
  QCOMPARE(i, s.io.size());

  // computeOrder: ready experts first, then experts by their first task.
  std::vector<int> expected = w.ready;
  for (const int t : s.taskOrder) {
    const int e = w.tasks[static_cast<size_t>(t)].expert;
    if (std::find(expected.begin(), expected.end(), e) == expected.end()) expected.push_back(e);
  }
  QVERIFY(s.computeOrder == expected);
}

// Pulls QVERIFY failures out of a helper.
#define CHECK(call)                                 \
  do {                                              \
    call;                                           \
    if (QTest::currentTestFailed()) return;         \
  } while (0)

}  // namespace

class TestSchedule : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void dagOfEachStateHasItsOperations() {
    for (const TaskState st : {TaskState::Miss, TaskState::C, TaskState::S, TaskState::E}) {
      Workload w;
      w.costs = Costs{2.0, 0.5, 1.0, 0.1, 3, 2};
      w.p = {1.0};
      w.tasks = {TaskSpec{0, 0, st}};
      for (const Schedule& s : {algorithm1(w), fifo(w)}) {
        const auto count = [&](const std::vector<Op>& ops, OpKind k) {
          return std::count_if(ops.begin(), ops.end(), [&](const Op& op) { return op.kind == k; });
        };
        const long K = 3;
        QCOMPARE(count(s.io, OpKind::ReadE), readsE(st) ? K : 0L);
        QCOMPARE(count(s.io, OpKind::ReadSM), isTypeI(st) ? 1L : 0L);
        QCOMPARE(count(s.decompress, OpKind::Decompress), K);
        QCOMPARE(count(s.recover, OpKind::Recover), 1L);
        QCOMPARE(s.computeOrder, std::vector<int>{0});
        CHECK(checkSimulation(w, s, run(w, s)));
      }
    }
    QVERIFY(isTypeI(TaskState::Miss) && isTypeI(TaskState::E));
    QVERIFY(!isTypeI(TaskState::C) && !isTypeI(TaskState::S));
  }

  void blocksFollowAlgorithm1OnRandomWorkloads() {
    std::mt19937 rng(20240601);
    for (int iter = 0; iter < 1500; ++iter) {
      const Workload w = randomWorkload(rng, iter % 2 == 1);
      const Schedule s = algorithm1(w);
      CHECK(checkStructure(w, s, true));
      const auto pOf = [&](int t) { return w.p[static_cast<size_t>(w.tasks[static_cast<size_t>(t)].expert)]; };
      const auto typeI = [&](int t) { return isTypeI(w.tasks[static_cast<size_t>(t)].state); };
      const bool anyTypeI =
          std::any_of(w.tasks.begin(), w.tasks.end(), [](const TaskSpec& t) { return isTypeI(t.state); });
      for (size_t b = 0; b < s.blocks.size(); ++b) {
        QVERIFY(!s.blocks[b].empty());
        if (typeI(s.blocks[b].front())) continue;
        // Only the last block may start with a type-II task, and then it holds only type-II tasks.
        QCOMPARE(b + 1, s.blocks.size());
        QVERIFY(std::none_of(s.blocks[b].begin(), s.blocks[b].end(), typeI));
      }
      if (!anyTypeI) QVERIFY(s.blocks.size() <= 1);
      // Block bases come from the head of σ_I: non-increasing p.
      for (size_t b = 1; b < s.blocks.size(); ++b)
        if (typeI(s.blocks[b].front())) QVERIFY(pOf(s.blocks[b - 1].front()) >= pOf(s.blocks[b].front()));
      CHECK(checkStructure(w, fifo(w), false));
    }
  }

  void simulationRespectsPrecedenceLanesAndPriority() {
    std::mt19937 rng(7);
    for (int iter = 0; iter < 600; ++iter) {
      const Workload w = randomWorkload(rng, iter % 2 == 0);
      for (const Schedule& s : {algorithm1(w), fifo(w)}) {
        const Simulation sim = run(w, s);
        CHECK(checkSimulation(w, s, sim));
        const Simulation again = run(w, s);  // deterministic
        QCOMPARE(again.makespan, sim.makespan);
        QCOMPARE(again.ops.size(), sim.ops.size());
        for (size_t i = 0; i < sim.ops.size(); ++i)
          QVERIFY(again.ops[i].start == sim.ops[i].start && again.ops[i].lane == sim.ops[i].lane);
      }
    }
  }

  void makespanIsNeverBelowTheLowerBound() {
    std::mt19937 rng(99);
    for (int iter = 0; iter < 4000; ++iter) {
      const Workload w = randomWorkload(rng, iter % 3 != 0);
      const double lb = lowerBoundOf(w);
      for (const Schedule& s : {algorithm1(w), fifo(w)}) {
        const double makespan = run(w, s).makespan;
        QVERIFY2(makespan >= lb - 1e-9 * std::max(1.0, lb),
                 qPrintable(QString("iteration %1: makespan %2 < lower bound %3").arg(iter).arg(makespan).arg(lb)));
      }
    }
  }

  void approximationGuaranteeHoldsOnRandomWorkloads() {
    // Theorem 3.1 with OPT replaced by the lower bound (≤ OPT), recovery 0 as in the paper's model.
    std::mt19937 rng(31337);
    const int n = 5000;
    double sumAlg = 0, maxAlg = 0, sumFifo = 0, maxFifo = 0;
    int algBetter = 0, fifoBetter = 0, counted = 0;
    for (int iter = 0; iter < n; ++iter) {
      const Workload w = randomWorkload(rng, false);
      const double lb = lowerBoundOf(w);
      const double alg = run(w, algorithm1(w)).makespan;
      const double fif = run(w, fifo(w)).makespan;
      const double bound = 3.0 - 1.0 / w.costs.workers;
      QVERIFY2(alg <= bound * lb + 1e-9,
               qPrintable(QString("iteration %1: ALG %2 > (3 - 1/%3) * LB %4")
                              .arg(iter)
                              .arg(alg)
                              .arg(w.costs.workers)
                              .arg(lb)));
      QVERIFY(alg <= bound * fif + 1e-9);  // FIFO ≥ OPT
      if (lb <= 0) continue;
      ++counted;
      sumAlg += alg / lb, maxAlg = std::max(maxAlg, alg / lb);
      sumFifo += fif / lb, maxFifo = std::max(maxFifo, fif / lb);
      algBetter += alg < fif - 1e-9;
      fifoBetter += fif < alg - 1e-9;
    }
    qInfo("makespan / lower bound over %d random layers: Algorithm 1 mean %.4f max %.4f; FIFO mean %.4f max %.4f; "
          "Algorithm 1 shorter on %d, FIFO shorter on %d",
          counted, sumAlg / counted, maxAlg, sumFifo / counted, maxFifo, algBetter, fifoBetter);
  }

  void approximationGuaranteeAgainstBestOrderOnTinyWorkloads() {
    // On layers of at most 4 tasks, the best of all FIFO orders (and Algorithm 1) is an upper bound on OPT:
    // the lower bound must not exceed it, and Theorem 3.1 must hold against it.
    std::mt19937 rng(4242);
    int tried = 0, algOptimal = 0;
    double worst = 0;
    while (tried < 400) {
      Workload w = randomWorkload(rng, tried % 2 == 1, 4);
      if (w.tasks.empty() || w.tasks.size() > 4) continue;
      ++tried;
      const double alg = run(w, algorithm1(w)).makespan;
      double best = alg;
      std::vector<size_t> perm(w.tasks.size());
      std::iota(perm.begin(), perm.end(), 0);
      do {
        Workload permuted = w;
        for (size_t i = 0; i < perm.size(); ++i) permuted.tasks[i] = w.tasks[perm[i]];
        best = std::min(best, run(permuted, fifo(permuted)).makespan);
      } while (std::next_permutation(perm.begin(), perm.end()));
      const double lb = lowerBoundOf(w);
      QVERIFY2(lb <= best + 1e-9, qPrintable(QString("lower bound %1 > achievable %2").arg(lb).arg(best)));
      QVERIFY(alg <= (3.0 - 1.0 / w.costs.workers) * best + 1e-9);
      algOptimal += alg <= best + 1e-9;
      worst = std::max(worst, alg / best);
    }
    qInfo("tiny layers: Algorithm 1 matches the best FIFO order on %d of %d, worst ratio %.4f", algOptimal, tried,
          worst);
  }

  void largeLayersAreScheduledInCappedBlocks() {
    // A prefill-shaped layer: 42 experts × 3 tensors, mostly misses, reads far slower than decoding
    // (this machine's costs): no block ever becomes compute-dominant, so without the cap one block
    // would take all 126 tasks (and cost cubic time to build).
    std::mt19937 rng(126);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    Workload prefill;
    prefill.costs = Costs{1.786, 0.275, 0.068, 0.0, 4, 2};
    prefill.p.resize(60);
    for (int e = 0; e < 42; ++e) {
      prefill.p[static_cast<size_t>(e)] = 2.0 + unit(rng);
      const double r = unit(rng);
      const TaskState st = r < 0.75 ? TaskState::Miss : r < 0.85 ? TaskState::E : r < 0.95 ? TaskState::S : TaskState::C;
      for (int t = 0; t < 3; ++t) prefill.tasks.push_back(TaskSpec{e, t, st});
    }
    std::vector<Workload> layers{prefill};
    while (layers.size() < 300) {
      Workload w = randomWorkload(rng, layers.size() % 2 == 0, 80);
      if (w.tasks.size() > kMaxBlockTasks) layers.push_back(std::move(w));
    }
    for (const Workload& w : layers) {
      const Schedule s = algorithm1(w);
      CHECK(checkStructure(w, s, true));
      // Blocks built around a type-I base are capped; the last block of leftover type-II tasks
      // (no probing, no SM reads) is not.
      for (const auto& block : s.blocks)
        QVERIFY(!block.empty() && (!isTypeI(w.tasks[static_cast<size_t>(block.front())].state) ||
                                   block.size() <= kMaxBlockTasks));
      const Simulation sim = run(w, s);
      CHECK(checkSimulation(w, s, sim));
      const double lb = lowerBoundOf(w);
      QVERIFY(sim.makespan >= lb - 1e-9 * std::max(1.0, lb));
      if (w.costs.recover == 0)
        QVERIFY2(sim.makespan <= (3.0 - 1.0 / w.costs.workers) * lb + 1e-9,
                 qPrintable(QString("%1 tasks: ALG %2 > (3 - 1/L) * LB %3").arg(w.tasks.size()).arg(sim.makespan).arg(lb)));
    }
    QElapsedTimer timer;
    timer.start();
    const Schedule s = algorithm1(prefill);
    const double buildMs = static_cast<double>(timer.nsecsElapsed()) / 1e6;  // printed, never asserted
    QCOMPARE(s.blocks.size(), (prefill.tasks.size() + kMaxBlockTasks - 1) / kMaxBlockTasks);
    const double makespan = run(prefill, s).makespan, lb = lowerBoundOf(prefill);
    qInfo("prefill-shaped layer of %zu tasks: %zu blocks built in %.2f ms, makespan %.2f, lower bound %.2f, FIFO %.2f",
          prefill.tasks.size(), s.blocks.size(), buildMs, makespan, lb, run(prefill, fifo(prefill)).makespan);
  }

  void handComputedSingleTasks() {
    // Miss, K = 2, L = 2: reads E0 [0,1], E1 [1,2], SM [2,5]; decompress [1,3], [2,4]; recover [5,5.5];
    // compute [5.5,9.5]. Nothing can do better: the lower bound is the same.
    Workload w;
    w.costs = Costs{3.0, 1.0, 2.0, 0.5, 2, 2};
    w.p = {4.0};
    w.tasks = {TaskSpec{0, 0, TaskState::Miss}};
    EXPECT_NEAR(run(w, algorithm1(w)).makespan, 9.5);
    EXPECT_NEAR(lowerBoundOf(w), 9.5);

    // C, K = 3 on L = 2: decompress [0,1] [0,1] [1,2], recover 0, compute [2,3].
    w.costs = Costs{5.0, 1.0, 1.0, 0.0, 3, 2};
    w.p = {1.0};
    w.tasks = {TaskSpec{0, 0, TaskState::C}};
    EXPECT_NEAR(run(w, algorithm1(w)).makespan, 3.0);
    EXPECT_NEAR(lowerBoundOf(w), 3.0);

    // E with a slow SM read: SM [0,5] dominates decompress [0,1]; compute [5,7].
    w.costs = Costs{5.0, 1.0, 1.0, 0.0, 2, 2};
    w.p = {2.0};
    w.tasks = {TaskSpec{0, 0, TaskState::E}};
    EXPECT_NEAR(run(w, algorithm1(w)).makespan, 7.0);
    EXPECT_NEAR(lowerBoundOf(w), 7.0);

    // S, K = 4, L = 1, v = c = 1: reads and decompressions overlap, done at 5. Eq. 3 as printed in the paper
    // (ρu + Kc/min(K, L) = 4 + 4 = 8) would overstate the critical path; the lower bound must not.
    w.costs = Costs{0.0, 1.0, 1.0, 0.0, 4, 1};
    w.p = {0.0};
    w.tasks = {TaskSpec{0, 0, TaskState::S}};
    EXPECT_NEAR(run(w, algorithm1(w)).makespan, 5.0);
    EXPECT_NEAR(lowerBoundOf(w), 5.0);
  }

  void readyExpertsComputeFirstAndComputeIsWorkConserving() {
    // Expert 5 is all in F: it computes at 0 while expert 0's C task decompresses [0,1].
    Workload w;
    w.costs = Costs{1.0, 1.0, 1.0, 0.0, 1, 1};
    w.p = {3.0, 0, 0, 0, 0, 2.0};
    w.tasks = {TaskSpec{0, 0, TaskState::C}};
    w.ready = {5};
    Schedule s = algorithm1(w);
    QCOMPARE(s.computeOrder, (std::vector<int>{5, 0}));
    EXPECT_NEAR(run(w, s).makespan, 5.0);
    EXPECT_NEAR(lowerBoundOf(w), 5.0);

    // FIFO lists the slow Miss expert 0 first in computeOrder, but expert 1 (C) is ready long before: the
    // compute lane takes it first instead of waiting.
    w.costs = Costs{10.0, 1.0, 1.0, 0.0, 1, 1};
    w.p = {1.0, 1.0};
    w.tasks = {TaskSpec{0, 0, TaskState::Miss}, TaskSpec{1, 0, TaskState::C}};
    w.ready = {};
    s = fifo(w);
    QCOMPARE(s.computeOrder, (std::vector<int>{0, 1}));
    const Simulation sim = run(w, s);
    CHECK(checkSimulation(w, s, sim));
    double start0 = -1, start1 = -1;
    for (const SimulatedOp& op : sim.ops)
      if (op.op.kind == OpKind::Compute) (op.op.expert == 0 ? start0 : start1) = op.start;
    EXPECT_NEAR(start1, 1.0);   // C: decompress [0,1]
    EXPECT_NEAR(start0, 11.0);  // Miss: E [0,1], SM [1,11]
    EXPECT_NEAR(sim.makespan, 12.0);

    // Nothing to do.
    w.tasks.clear();
    EXPECT_NEAR(run(w, algorithm1(w)).makespan, 0.0);
    EXPECT_NEAR(lowerBoundOf(w), 0.0);
  }

  void algorithm1InterleavesWhereFifoStalls() {
    // K = L = 1, v = 1, u = 4, c = 4, p = 0.5: two Miss tasks requested first, two S tasks after.
    // FIFO: A.E [0,1] A.SM [1,5] B.E [5,6] B.SM [6,10] X.E [10,11] Y.E [11,12]; the worker decompresses
    // A [1,5], B [6,10], X [11,15], Y [15,19]; last compute [19,19.5].
    // Algorithm 1 builds blocks [A, X] and [B, Y] (each compute-dominant once its S task joins): A.E [0,1]
    // X.E [1,2] A.SM [2,6] B.E [6,7] Y.E [7,8] B.SM [8,12]; decompress A [1,5] X [5,9] B [9,13] Y [13,17];
    // last compute [17,17.5] — optimal: the worker cannot start before 1 and has 16 of work.
    Workload w;
    w.costs = Costs{4.0, 1.0, 4.0, 0.0, 1, 1};
    w.p = {0.5, 0.5, 0.5, 0.5};
    w.tasks = {TaskSpec{0, 0, TaskState::Miss}, TaskSpec{1, 0, TaskState::Miss}, TaskSpec{2, 0, TaskState::S},
               TaskSpec{3, 0, TaskState::S}};
    const Schedule s = algorithm1(w);
    QCOMPARE(s.blocks, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
    EXPECT_NEAR(run(w, s).makespan, 17.5);
    EXPECT_NEAR(run(w, fifo(w)).makespan, 19.5);
    EXPECT_NEAR(lowerBoundOf(w), 17.5);

    // The same pattern at scale, with C tasks too and two workers: Algorithm 1 finishes earlier.
    w = Workload{};
    w.costs = Costs{3.0, 0.5, 1.5, 0.0, 4, 2};
    for (int e = 0; e < 12; ++e) {
      w.p.push_back(0.5);
      const TaskState st = e < 6 ? TaskState::Miss : e < 9 ? TaskState::S : TaskState::C;
      for (int t = 0; t < 3; ++t) w.tasks.push_back(TaskSpec{e, t, st});
    }
    const double alg = run(w, algorithm1(w)).makespan, fif = run(w, fifo(w)).makespan;
    qInfo("Miss-first layer: Algorithm 1 %.2f, FIFO %.2f, lower bound %.2f", alg, fif, lowerBoundOf(w));
    QVERIFY(alg < fif);
  }

  void largeLayerIsScheduled() {
    // 64 experts × 3 tensors in mixed states: the schedule is well-formed and within the bound.
    std::mt19937 rng(5);
    Workload w;
    w.costs = Costs{2.0, 0.3, 0.8, 0.1, 4, 4};
    const TaskState states[] = {TaskState::Miss, TaskState::C, TaskState::S, TaskState::E};
    for (int e = 0; e < 64; ++e) {
      w.p.push_back(std::uniform_real_distribution<double>(0.1, 2.0)(rng));
      const TaskState st = states[std::uniform_int_distribution<int>(0, 3)(rng)];
      for (int t = 0; t < 3; ++t) w.tasks.push_back(TaskSpec{e, t, st});
    }
    const Schedule s = algorithm1(w);
    CHECK(checkStructure(w, s, true));
    const Simulation sim = run(w, s);
    CHECK(checkSimulation(w, s, sim));
    QVERIFY(sim.makespan >= lowerBoundOf(w) - 1e-9);
    QVERIFY(sim.makespan <= (3.0 - 1.0 / 4) * lowerBoundOf(w));
  }

  void badInputIsRefused() {
    const std::vector<TaskSpec> tasks{TaskSpec{0, 0, TaskState::Miss}, TaskSpec{1, 0, TaskState::C}};
    const std::vector<double> p{1.0, 1.0};
    const Costs ok{1.0, 1.0, 1.0, 0.0, 2, 2};
    Costs bad = ok;
    bad.u = -1;
    ZIPMOE_EXPECT_ERROR(buildSchedule(tasks, p, bad), "Costs.u", "-1");
    bad = ok;
    bad.c = std::nan("");
    ZIPMOE_EXPECT_ERROR(lowerBound(tasks, p, bad), "Costs.c", "nan");
    bad = ok;
    bad.workers = 0;
    ZIPMOE_EXPECT_ERROR(buildSchedule(tasks, p, bad), "workers", "0");
    bad = ok;
    bad.shards = 0;
    ZIPMOE_EXPECT_ERROR(fifoSchedule(tasks, bad), "shards", "0");
    ZIPMOE_EXPECT_ERROR(buildSchedule(tasks, std::vector<double>{1.0}, ok), "task 1", "expert id 1", "size 1");
    ZIPMOE_EXPECT_ERROR(buildSchedule(tasks, std::vector<double>{1.0, -2.0}, ok), "expertCompute[1]", "-2");
    const std::vector<TaskSpec> twice{TaskSpec{0, 2, TaskState::Miss}, TaskSpec{0, 2, TaskState::C}};
    ZIPMOE_EXPECT_ERROR(buildSchedule(twice, p, ok), "tasks 0 and 1", "expert 0, tensor 2");
    ZIPMOE_EXPECT_ERROR(fifoSchedule(twice, ok), "tasks 0 and 1");
    ZIPMOE_EXPECT_ERROR(buildSchedule(tasks, p, ok, std::vector<int>{1}), "ready expert 1", "has tasks");
    ZIPMOE_EXPECT_ERROR(lowerBound(tasks, p, ok, std::vector<int>{7}), "ready expert id 7");

    // simulate refuses lists that do not match the DAGs.
    Schedule s = buildSchedule(tasks, p, ok);
    Schedule broken = s;
    broken.recover.pop_back();
    ZIPMOE_EXPECT_ERROR(simulate(tasks, p, ok, broken), "lacks Recover");
    broken = s;
    broken.decompress.push_back(broken.decompress.front());
    ZIPMOE_EXPECT_ERROR(simulate(tasks, p, ok, broken), "appears twice");
    broken = s;
    broken.io.push_back(Op{OpKind::ReadE, 1, 0, 1});  // task 1 is C: its E-chunks are in memory
    ZIPMOE_EXPECT_ERROR(simulate(tasks, p, ok, broken), "io list entry", "state C");
    broken = s;
    broken.computeOrder = {0};
    ZIPMOE_EXPECT_ERROR(simulate(tasks, p, ok, broken), "computeOrder lacks expert 1");
  }
};

QTEST_APPLESS_MAIN(TestSchedule)
#include "test_schedule.moc"
