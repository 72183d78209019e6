// A node that dies or stalls mid-generation: real `zipmoe node` processes on loopback, one killed
// (SIGKILL) or stopped (SIGSTOP) between two decoding steps. With the default policy the engine
// notices within the call deadline, computes that node's experts from its own store (counted apart)
// and its greedy output stays identical to the all-resident run; with --node-failure fail the request
// fails with an error naming the node. Nothing here measures time: a hang would be CTest's timeout.
#include <QProcess>
#include <QtTest>

#include <csignal>
#include <fstream>

#include <nlohmann/json.hpp>

#include "dist_fixture.h"
#include "node_process.h"
#include "zipmoe/dist/distributed_experts.h"
#include "zipmoe/base/error.h"
#include "zipmoe/dist/expert_node.h"
#include "zipmoe/plan/expert_placement.h"

using namespace zipmoe;
using namespace zipmoe::testing;

class TestNodeFailure : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;
  std::filesystem::path store_, placement_;
  GreedyRun expected_;

  // Both nodes hold half the experts each; the engine holds none, so every expert goes over the wire.
  std::shared_ptr<DistributedExperts> connect(const NodeProcess& a, const NodeProcess& b, NodeFailurePolicy policy) {
    DistributedOptions d;
    d.nodes = {a.address(), b.address()};
    d.token = kTestToken;
    d.deadline = std::chrono::milliseconds(2000);
    d.onFailure = policy;
    return DistributedExperts::connect(makeResidentExperts(store_), nullptr, d);
  }

 private Q_SLOTS:
  void initTestCase() {
    store_ = demoStore(dir_);
    auto resident = MoeModel::load(store_);
    expected_ = greedyRun(*resident, 10);
    const int layers = resident->config().numMoeLayers(), experts = resident->config().numExperts;
    ExpertPlacement p;
    p.expertsPerLayer.assign(static_cast<size_t>(layers), experts);
    p.held = {expertsWhere(layers, experts, 2, {0}), expertsWhere(layers, experts, 2, {1})};
    placement_ = dir_ / "placement.json";
    std::ofstream(placement_) << placementToJson(p, {"even", "odd"}).dump();
  }

  void killedNodeFallsBackToTheLocalStore() {
    NodeProcess even(store_, placement_, "even"), odd(store_, placement_, "odd");
    auto distributed = connect(even, odd, NodeFailurePolicy::Local);
    ModelOptions mo;
    mo.experts = distributed;
    auto model = MoeModel::load(store_, mo);
    const GreedyRun got = greedyRun(*model, 10, [&](int step) {
      if (step == 4) odd.killAndReap();
    });
    QVERIFY2(identical(got, expected_), "the run with a killed node differs from the all-resident run");
    const DistributedStats s = distributed->stats();
    QVERIFY(s.fallbackExperts > 0);
    QVERIFY(s.remoteExperts > 0);
    QVERIFY(s.failedCalls >= 1);
    QCOMPARE(s.downNodes.size(), size_t{1});
    QVERIFY(s.downNodes[0].find(odd.address()) == 0);
  }

  void stalledNodeIsPassedByAtTheDeadline() {
    NodeProcess even(store_, placement_, "even"), odd(store_, placement_, "odd");
    auto distributed = connect(even, odd, NodeFailurePolicy::Local);
    ModelOptions mo;
    mo.experts = distributed;
    auto model = MoeModel::load(store_, mo);
    const GreedyRun got = greedyRun(*model, 10, [&](int step) {
      if (step == 3) even.signal(SIGSTOP);  // alive, connected, silent
    });
    QVERIFY2(identical(got, expected_), "the run with a stalled node differs from the all-resident run");
    const DistributedStats s = distributed->stats();
    QVERIFY(s.fallbackExperts > 0);
    QCOMPARE(s.downNodes.size(), size_t{1});
    QVERIFY2(s.downNodes[0].find("DEADLINE_EXCEEDED") != std::string::npos, s.downNodes[0].c_str());
    even.signal(SIGCONT);
  }

  void failPolicyNamesTheNode() {
    NodeProcess even(store_, placement_, "even"), odd(store_, placement_, "odd");
    auto distributed = connect(even, odd, NodeFailurePolicy::Fail);
    ModelOptions mo;
    mo.experts = distributed;
    auto model = MoeModel::load(store_, mo);
    const std::string address = odd.address();
    ZIPMOE_EXPECT_ERROR(greedyRun(*model, 10, [&](int step) {
                          if (step == 2) odd.killAndReap();
                        }),
                        "node " + address, "failed layer", "--node-failure fail");
    // The engine still serves the next request from what is alive... and names the dead node again.
    auto fresh = MoeModel::load(store_, mo);
    ZIPMOE_EXPECT_ERROR(greedyRun(*fresh, 2), address, "down");
  }
};

QTEST_GUILESS_MAIN(TestNodeFailure)
#include "test_node_failure.moc"
