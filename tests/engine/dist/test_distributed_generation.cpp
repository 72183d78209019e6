// Experts computed on other machines: three expert nodes on loopback (real gRPC servers, real
// sockets) hold parts of the model, the engine computes the rest, and its greedy logits and tokens
// are bit-identical to the single-process all-resident run — on the demo model (Mixtral) and on a
// generated DeepSeek-V2 (a dense first layer and shared experts). Also: the token is required, a node
// of another model is refused, and addresses must be explicit.
#include <QtTest>

#include "dist_fixture.h"
#include "zipmoe/dist/distributed_experts.h"
#include "zipmoe/base/error.h"
#include "zipmoe/dist/expert_node.h"

using namespace zipmoe;
using namespace zipmoe::testing;

class TestDistributedGeneration : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;

  // Three nodes: experts e % 4 == 0 and 1 on the first, 1 on the second (a duplicate), 2 on the third;
  // e % 4 == 3 stays with the engine.
  void checkIdentical(const std::filesystem::path& store) {
    auto resident = MoeModel::load(store);
    const GreedyRun expected = greedyRun(*resident, 12);
    const int layers = resident->config().numMoeLayers(), experts = resident->config().numExperts;
    resident.reset();

    std::vector<std::unique_ptr<ExpertNode>> nodes;
    for (const auto& residues : std::vector<std::vector<int>>{{0, 1}, {1}, {2}}) {
      ExpertNodeOptions o;
      o.store = store;
      o.listen = "127.0.0.1:0";
      o.token = kTestToken;
      o.experts = expertsWhere(layers, experts, 4, residues);
      nodes.push_back(ExpertNode::start(o));
    }
    DistributedOptions d;
    for (const auto& n : nodes) d.nodes.push_back(n->address());
    d.token = kTestToken;
    d.onFailure = NodeFailurePolicy::Fail;  // nothing may silently fall back here
    auto distributed = DistributedExperts::connect(makeResidentExperts(store), nullptr, d);
    const ExpertPlacement p = distributed->placement();
    QCOMPARE(p.nodes(), 4);
    const std::vector<std::vector<int>> here = expertsWhere(layers, experts, 4, {3});
    QVERIFY(p.held.at(0) == here);  // what no node holds stays with the engine
    ModelOptions mo;
    mo.experts = distributed;
    auto model = MoeModel::load(store, mo);
    const GreedyRun got = greedyRun(*model, 12);
    QVERIFY2(identical(got, expected), "the distributed run differs from the all-resident run");
    const DistributedStats s = distributed->stats();
    QVERIFY(s.localExperts > 0);
    QVERIFY(s.remoteExperts > 0);
    QCOMPARE(s.fallbackExperts, uint64_t{0});
    QCOMPARE(s.failedCalls, uint64_t{0});
    QVERIFY(s.bytesSent > 0 && s.bytesReceived > 0);
    uint64_t computedByNodes = 0;
    for (const auto& n : nodes) computedByNodes += n->stats().expertsComputed;
    QCOMPARE(computedByNodes, s.remoteExperts);
    QVERIFY(nodes[2]->stats().expertsComputed > 0);
    model.reset();
    distributed.reset();
    for (auto& n : nodes) n->stop();
  }

 private Q_SLOTS:
  void demoModelOnThreeNodesIsIdentical() { checkIdentical(demoStore(dir_)); }
  void generatedDeepseekOnThreeNodesIsIdentical() { checkIdentical(generatedStore(dir_)); }

  void refusesWrongTokenOtherModelAndWildcards() {
    const auto store = demoStore(dir_);
    ExpertNodeOptions o;
    o.store = store;
    o.listen = "127.0.0.1:0";
    o.token = kTestToken;
    auto node = ExpertNode::start(o);
    DistributedOptions d;
    d.nodes = {node->address()};
    d.token = "another-token-0123456789";
    ZIPMOE_EXPECT_ERROR(DistributedExperts::connect(makeResidentExperts(store), nullptr, d), node->address(),
                        "UNAUTHENTICATED");
    QVERIFY(node->stats().refusedCalls >= 1);
    d.token = kTestToken;
    ZIPMOE_EXPECT_ERROR(DistributedExperts::connect(makeResidentExperts(generatedStore(dir_)), nullptr, d),
                        node->address(), "serves another model");
    ExpertNodeOptions wild = o;
    wild.listen = "0.0.0.0:7001";
    ZIPMOE_EXPECT_ERROR(ExpertNode::start(wild), "0.0.0.0:7001", "wildcard");
    ZIPMOE_EXPECT_ERROR(checkNodeAddress("[::]:7001", "--nodes", false), "wildcard");
    ZIPMOE_EXPECT_ERROR(checkNodeAddress("example.com:7001", "--nodes", false), "example.com:7001");
    ZIPMOE_EXPECT_ERROR(checkNodeAddress("127.0.0.1:0", "--nodes", false), "port 0");
    checkNodeAddress("[::1]:7001", "--nodes", false);
    checkNodeAddress("localhost:7001", "--nodes", false);
    ExpertNodeOptions shortToken = o;
    shortToken.token = "short";
    ZIPMOE_EXPECT_ERROR(ExpertNode::start(shortToken), "16 characters");
  }
};

QTEST_APPLESS_MAIN(TestDistributedGeneration)
#include "test_distributed_generation.moc"
