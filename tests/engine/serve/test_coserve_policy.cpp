// The CoServe policy's pieces and the memory split: a request's own observed usage, the batch's
// warm experts, the group with the fewest expected loads, the aging bound, the split's arithmetic.
#include <QtTest>

#include "serve/coserve_policy.h"
#include "model/attention_bounds.h"
#include "serve/memory_split.h"
#include "zipmoe/base/error.h"

using namespace zipmoe;
using namespace zipmoe::serve;

class TestCoservePolicy : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void usageIsObservedShare() {
    UsageProfile u(2, 4);
    QVERIFY(u.empty());
    const std::vector<int32_t> ids = {0, 1, 0, 2};  // two tokens, k = 2
    u.observe(0, ids, 2);
    u.observe(1, ids, 2);
    QVERIFY(!u.empty());
    QCOMPARE(u.probability(0, 0), 1.0);
    QCOMPARE(u.probability(0, 1), 0.5);
    QCOMPARE(u.probability(0, 3), 0.0);
  }

  void footprintDecays() {
    BatchFootprint f(1, 4, 1);
    const std::vector<int32_t> ids = {2};
    f.observe(0, ids);
    QVERIFY(f.warm(0, 2));
    f.endStep();  // half
    QVERIFY(!f.warm(0, 2));
  }

  void fewestLoadsFirst() {
    BatchFootprint f(1, 4);
    const std::vector<int32_t> warm = {0, 1};
    f.observe(0, warm);  // the batch uses experts 0 and 1
    UsageProfile onWarm(1, 4), onCold(1, 4), unknown;
    const std::vector<int32_t> a = {0, 1}, b = {2, 3};
    onWarm.observe(0, a, 2);
    onCold.observe(0, b, 2);
    const std::vector<Candidate> c = {{&onCold, 3}, {&unknown, 2}, {&onWarm, 1}};
    const auto order = chooseGroup(c, f, 3, 100, 2);
    QCOMPARE(order.size(), size_t{3});
    QCOMPARE(order[0], size_t{2});  // needs nothing new
    // Then: the unknown one expects 2 × (2 open / 4) = 1 load; the cold one 2.
    QCOMPARE(order[1], size_t{1});
    QCOMPARE(order[2], size_t{0});
    std::vector<char> covered = {1, 1, 0, 0};
    QCOMPARE(expectedLoads(onCold, covered, 1, 4, 2), 2.0);
    QCOMPARE(expectedLoads(onWarm, covered, 1, 4, 2), 0.0);
  }

  void agingGoesFirst() {
    BatchFootprint f(1, 4);
    const std::vector<int32_t> warm = {0, 1};
    f.observe(0, warm);
    UsageProfile onWarm(1, 4), onCold(1, 4);
    const std::vector<int32_t> a = {0, 1}, b = {2, 3};
    onWarm.observe(0, a, 2);
    onCold.observe(0, b, 2);
    const std::vector<Candidate> c = {{&onWarm, 1}, {&onCold, 40}};
    uint64_t aged = 0;
    const auto order = chooseGroup(c, f, 1, 32, 2, &aged);
    QCOMPARE(order.size(), size_t{1});
    QCOMPARE(order[0], size_t{1});  // waited past the bound: first, though it needs two loads
    QCOMPARE(aged, uint64_t{1});
    QCOMPARE(chooseGroup(c, f, 1, 64, 2)[0], size_t{0});  // below the bound: the cheap one
  }

  void splitArithmetic() {
    MemorySplit s(1000, 100, 200, 0.5);  // room 900, floor max(200, 450)
    QCOMPARE(s.expertFloor(), uint64_t{450});
    QCOMPARE(s.kvLimit(), uint64_t{450});
    QCOMPARE(s.experts(), uint64_t{900});
    QVERIFY(s.fits(450));
    QVERIFY(!s.fits(451));
    s.addKv(300);
    QCOMPARE(s.experts(), uint64_t{600});
    QCOMPARE(s.activations() + s.kv() + s.experts(), s.total());
    s.releaseKv(300);
    QCOMPARE(s.kv(), uint64_t{0});
    QVERIFY(!MemorySplit().limited());
    QVERIFY_THROWS_EXCEPTION(Error, MemorySplit(250, 100, 200, 0.5));  // cannot hold activations + minimum
  }

  // The activation reserve: attention's scores are one query chunk's, not the step's; the context
  // is the longest a sequence can reach, which a small budget bounds below the model's window.
  void activationReserve() {
    ModelConfig c;
    c.vocabSize = 1000;
    c.hiddenSize = 64;
    c.numLayers = 2;
    c.numHeads = 4;
    c.numKvHeads = 2;
    c.headDim = 16;
    c.numExperts = 8;
    c.numExpertsPerTok = 2;
    c.moeIntermediateSize = 32;
    const int window = 32768;
    // Past one query chunk, a longer step adds only its per-token buffers, whatever the context.
    const auto growth = [&](int context) {
      return activationBytes(c, 2 * kAttentionQueryChunk, 1, context) - activationBytes(c, kAttentionQueryChunk, 1, context);
    };
    QCOMPARE(growth(window), growth(16));
    // Logits: one row per step, at most one per token.
    QCOMPARE(activationBytes(c, 8, 3, 16) - activationBytes(c, 8, 2, 16), uint64_t{2 * 4 * 1000});
    QCOMPARE(activationBytes(c, 2, 3, 16), activationBytes(c, 2, 2, 16));
    // KV per token at the least: 2 layers × (K and V) × 2 heads × 16 × BF16.
    QCOMPARE(minKvBytesPerToken(c), uint64_t{2 * 2 * 2 * 16 * 2});
    const uint64_t fixed = activationBytes(c, 64, 8, 1);
    // A budget whose KV room (half of what the context-free part leaves) holds 100 tokens: the
    // reserve is for a context of 101 tokens, not the window.
    const uint64_t small = fixed + 2 * 100 * minKvBytesPerToken(c);
    QCOMPARE(servingActivationBytes(c, 64, 4, window, small, 0.5), activationBytes(c, 64, 8, 101));
    // A budget that holds the whole window: the window.
    const uint64_t large = fixed + 4 * uint64_t{window} * minKvBytesPerToken(c);
    QCOMPARE(servingActivationBytes(c, 64, 4, window, large, 0.5), activationBytes(c, 64, 8, window));
    // Multi-head latent attention caches the latent and the rotary key.
    c.kvLoraRank = 32;
    c.qkRopeHeadDim = 8;
    QCOMPARE(minKvBytesPerToken(c), uint64_t{2 * 40 * 2});
  }
};

QTEST_GUILESS_MAIN(TestCoservePolicy)
#include "test_coserve_policy.moc"
