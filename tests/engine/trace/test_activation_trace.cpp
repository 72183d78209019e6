// ActivationTrace (parsing the real traces, rejecting bad files with file:line and the field) and
// TraceRouting (distinct ascending experts, exact reproduction of a row, determinism, layer mapping).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "test_support.h"
#include "zipmoe/trace/activation_trace.h"
#include "zipmoe/base/error.h"

using namespace zipmoe;

namespace {

void writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// 6 experts, top-2, 3 layers of which layer 1 is dense (all zero); prompt 0 has 5 tokens, prompt 1 has 3.
constexpr const char* kSmallTrace =
    "# expert-activation trace: model=Small top_k=2 experts=6 layers=3; one row per (prompt, layer)\n"
    "prompt\tlayer\te0\te1\te2\te3\te4\te5\n"
    "0\t0\t5\t3\t1\t1\t0\t0\n"
    "0\t1\t0\t0\t0\t0\t0\t0\n"
    "0\t2\t0\t0\t2\t2\t3\t3\n"
    "1\t0\t1\t1\t1\t1\t1\t1\n"
    "1\t1\t0\t0\t0\t0\t0\t0\n"
    "1\t2\t3\t0\t0\t3\t0\t0\n";

std::shared_ptr<const ActivationTrace> smallTrace(const testing::TempDir& tmp) {
  const auto path = tmp / "small.tsv";
  writeFile(path, kSmallTrace);
  return ActivationTrace::load(path);
}

std::filesystem::path realTrace(const char* name) {
  const auto shared = testing::sharedDir();
  return shared.empty() ? shared : shared / "data" / "traces" / name;
}

// Runs `tokens` tokens through choose() in steps of the given sizes (cycled), as a prefill and
// decodes would, and returns the experts.
std::vector<int64_t> run(TraceRouting& routing, int moeLayer, int64_t tokens, int k,
                         const std::vector<int64_t>& steps = {1}) {
  std::vector<int64_t> out(static_cast<size_t>(tokens * k));
  int64_t done = 0;
  for (size_t s = 0; done < tokens; ++s) {
    const int64_t n = std::min(steps[s % steps.size()], tokens - done);
    const std::span<int64_t> part(out.data() + done * k, static_cast<size_t>(n * k));
    routing.choose(moeLayer, n, k, part);
    done += n;
  }
  return out;
}

std::vector<uint32_t> histogram(const std::vector<int64_t>& experts, int numExperts) {
  std::vector<uint32_t> h(static_cast<size_t>(numExperts), 0);
  for (const int64_t e : experts) ++h[static_cast<size_t>(e)];
  return h;
}

bool distinctAscending(const std::vector<int64_t>& experts, int k, int numExperts) {
  for (size_t t = 0; t < experts.size(); t += static_cast<size_t>(k))
    for (size_t j = 0; j < static_cast<size_t>(k); ++j) {
      const int64_t e = experts[t + j];
      if (e < 0 || e >= numExperts || (j > 0 && e <= experts[t + j - 1])) return false;
    }
  return true;
}

// Replays every prompt of `trace` on every active layer and checks that the experts drawn over the
// prompt's tokens reproduce the row exactly; a second pass (after the multiset restarts) too.
void checkExactReproduction(const std::shared_ptr<const ActivationTrace>& trace, uint64_t seed) {
  const int k = trace->topK(), layers = static_cast<int>(trace->activeLayers().size());
  TraceRouting routing(trace, layers, trace->numExperts(), k, seed);
  for (int p = 0; p < trace->numPrompts(); ++p) {
    routing.setPrompt(p);
    const int64_t tokens = trace->tokens(p);
    for (int l = 0; l < layers; ++l) {
      const auto row = trace->counts(p, trace->activeLayers()[static_cast<size_t>(l)]);
      const std::vector<uint32_t> expected(row.begin(), row.end());
      for (int pass = 0; pass < 2; ++pass) {
        const auto experts = run(routing, l, tokens, k, {7, 1, 1, 3});
        QVERIFY(distinctAscending(experts, k, trace->numExperts()));
        QVERIFY2(histogram(experts, trace->numExperts()) == expected,
                 qPrintable(QString("prompt %1 MoE layer %2 pass %3").arg(p).arg(l).arg(pass)));
      }
    }
  }
}

}  // namespace

class TestActivationTrace : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void realTraces_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("experts");
    QTest::addColumn<int>("topK");
    QTest::addColumn<int>("layers");
    QTest::addColumn<int>("prompts");
    QTest::addColumn<int>("firstActive");
    QTest::newRow("qwen1.5-moe") << "qwen1.5-moe.tsv" << "Qwen1.5-MoE-A2.7B" << 60 << 4 << 24 << 500 << 0;
    QTest::newRow("deepseek-v2-lite") << "deepseek-v2-lite.tsv" << "DeepSeek-V2-Lite" << 64 << 6 << 27 << 476 << 1;
  }
  void realTraces() {
    QFETCH(QString, file);
    QFETCH(QString, model);
    QFETCH(int, experts);
    QFETCH(int, topK);
    QFETCH(int, layers);
    QFETCH(int, prompts);
    QFETCH(int, firstActive);
    const auto path = realTrace(file.toStdString().c_str());
    if (path.empty()) QSKIP("../shared/data/traces is absent");
    const auto trace = ActivationTrace::load(path);
    QCOMPARE(QString::fromStdString(trace->model()), model);
    QCOMPARE(trace->numExperts(), experts);
    QCOMPARE(trace->topK(), topK);
    QCOMPARE(trace->numLayers(), layers);
    QCOMPARE(trace->numPrompts(), prompts);
    std::vector<int> active;
    for (int l = firstActive; l < layers; ++l) active.push_back(l);
    QCOMPARE(trace->activeLayers(), active);
    for (int p = 0; p < prompts; ++p) {
      QVERIFY(trace->tokens(p) > 0);
      for (int l = 0; l < layers; ++l) {
        const auto row = trace->counts(p, l);
        QCOMPARE(row.size(), static_cast<size_t>(experts));
        uint64_t sum = 0;
        for (const uint32_t c : row) sum += c;
        QCOMPARE(sum, l < firstActive ? uint64_t{0} : static_cast<uint64_t>(trace->tokens(p) * topK));
      }
    }
    ZIPMOE_EXPECT_ERROR(trace->counts(prompts, 0), "out of range");
    ZIPMOE_EXPECT_ERROR(trace->counts(0, layers), "out of range");
  }

  void realTracesReproduceExactly_data() {
    QTest::addColumn<QString>("file");
    QTest::newRow("qwen1.5-moe") << "qwen1.5-moe.tsv";
    QTest::newRow("deepseek-v2-lite") << "deepseek-v2-lite.tsv";
  }
  void realTracesReproduceExactly() {
    QFETCH(QString, file);
    const auto path = realTrace(file.toStdString().c_str());
    if (path.empty()) QSKIP("../shared/data/traces is absent");
    checkExactReproduction(ActivationTrace::load(path), 12345);
  }

  void smallTraceParses() {
    testing::TempDir tmp;
    const auto trace = smallTrace(tmp);
    QCOMPARE(QString::fromStdString(trace->model()), QString("Small"));
    QCOMPARE(trace->topK(), 2);
    QCOMPARE(trace->numExperts(), 6);
    QCOMPARE(trace->numLayers(), 3);
    QCOMPARE(trace->numPrompts(), 2);
    QCOMPARE(trace->activeLayers(), (std::vector<int>{0, 2}));
    QCOMPARE(trace->tokens(0), int64_t{5});
    QCOMPARE(trace->tokens(1), int64_t{3});
    const auto row = trace->counts(0, 2);
    QCOMPARE(std::vector<uint32_t>(row.begin(), row.end()), (std::vector<uint32_t>{0, 0, 2, 2, 3, 3}));
  }

  void badInput_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QStringList>("fragments");
    const QString comment = "# expert-activation trace: model=M top_k=2 experts=4 layers=2; rows\n";
    const QString header = "prompt\tlayer\te0\te1\te2\te3\n";
    const QString good0 = "0\t0\t1\t1\t1\t1\n", good1 = "0\t1\t2\t0\t1\t1\n";
    QTest::newRow("empty file") << "" << QStringList{":1:", "empty file"};
    QTest::newRow("missing comment") << header + good0 << QStringList{":1:", "comment line", "'prompt"};
    QTest::newRow("comment lacks experts") << "# model=M top_k=2 layers=2\n" + header + good0 + good1
                                           << QStringList{":1:", "lacks experts="};
    QTest::newRow("non-numeric comment value") << "# model=M top_k=two experts=4 layers=2\n" + header
                                               << QStringList{":1:", "comment top_k", "'two'"};
    QTest::newRow("top_k above experts") << "# model=M top_k=5 experts=4 layers=2\n" + header
                                         << QStringList{":1:", "top_k=5 exceeds experts=4"};
    QTest::newRow("missing header") << comment + good0 + good1 << QStringList{":2:", "header", "'0\t0\t1"};
    QTest::newRow("header with too few experts") << comment + "prompt\tlayer\te0\te1\te2\n" + good0
                                                 << QStringList{":2:", "header", "found 3 expert columns"};
    QTest::newRow("no rows") << comment + header << QStringList{":2:", "no rows"};
    QTest::newRow("too few columns") << comment + header + good0 + "0\t1\t2\t0\t2\n"
                                     << QStringList{":4:", "5 columns, expected 6"};
    QTest::newRow("too many columns") << comment + header + "0\t0\t1\t1\t1\t1\t0\n"
                                      << QStringList{":3:", "7 columns, expected 6"};
    QTest::newRow("negative count") << comment + header + good0 + "0\t1\t2\t-1\t1\t1\n"
                                    << QStringList{":4:", "column 4 (e1)", "'-1'", "not a non-negative integer"};
    QTest::newRow("non-numeric count") << comment + header + "0\t0\tx\t1\t1\t1\n"
                                       << QStringList{":3:", "column 3 (e0)", "'x'"};
    QTest::newRow("trailing garbage") << comment + header + "0\t0\t1\t1\t1\t1x\n"
                                      << QStringList{":3:", "column 6 (e3)", "'1x'"};
    QTest::newRow("non-numeric prompt") << comment + header + "a\t0\t1\t1\t1\t1\n"
                                        << QStringList{":3:", "column 1 (prompt)", "'a'"};
    QTest::newRow("layer out of range") << comment + header + good0 + "0\t2\t2\t0\t1\t1\n"
                                        << QStringList{":4:", "column 2 (layer)", "2 is out of range 0 .. 1",
                                                       "layers=2"};
    QTest::newRow("rows out of order") << comment + header + good1 + good0
                                       << QStringList{":3:", "expected prompt 0 layer 0, found prompt 0 layer 1"};
    QTest::newRow("prompt skipped") << comment + header + good0 + good1 + "2\t0\t1\t1\t1\t1\n"
                                    << QStringList{":5:", "expected prompt 1 layer 0, found prompt 2 layer 0"};
    QTest::newRow("file ends inside a prompt") << comment + header + good0 + good1 + "1\t0\t1\t1\t1\t1\n"
                                               << QStringList{":5:", "ends inside prompt 1"};
    QTest::newRow("sum not a multiple of top_k") << comment + header + "0\t0\t1\t1\t1\t0\n"
                                                 << QStringList{":3:", "sum to 3", "not a multiple of top_k=2"};
    QTest::newRow("expert above tokens") << comment + header + "0\t0\t3\t1\t0\t0\n"
                                         << QStringList{":3:", "serves 3 of 2 tokens"};
    QTest::newRow("layers disagree on tokens") << comment + header + good0 + "0\t1\t2\t2\t1\t1\n"
                                               << QStringList{":4:", "cover 3 tokens", "earlier layers 2"};
    QTest::newRow("row after blank line") << comment + header + good0 + "\n" + good1
                                          << QStringList{":5:", "blank line"};
  }
  void badInput() {
    QFETCH(QString, text);
    QFETCH(QStringList, fragments);
    testing::TempDir tmp;
    const auto path = tmp / "bad.tsv";
    writeFile(path, text.toStdString());
    bool thrown = false;
    try {
      ActivationTrace::load(path);
    } catch (const Error& e) {
      thrown = true;
      const QString message = QString::fromStdString(e.what());
      QVERIFY2(message.startsWith(QString::fromStdString(path.string()) + ":"), qPrintable(message));
      for (const QString& fragment : fragments)
        QVERIFY2(message.contains(fragment), qPrintable("'" + message + "' lacks '" + fragment + "'"));
    }
    QVERIFY(thrown);
  }

  void goodEndings() {
    testing::TempDir tmp;
    const auto path = tmp / "crlf.tsv";
    std::string text = kSmallTrace;
    for (size_t pos = 0; (pos = text.find('\n', pos)) != std::string::npos; pos += 2) text.replace(pos, 1, "\r\n");
    writeFile(path, text + "\r\n\n");  // CRLF and trailing blank lines
    QCOMPARE(ActivationTrace::load(path)->numPrompts(), 2);
    std::string noNewline = kSmallTrace;
    noNewline.pop_back();
    writeFile(path, noNewline);
    QCOMPARE(ActivationTrace::load(path)->numPrompts(), 2);
    ZIPMOE_EXPECT_ERROR(ActivationTrace::load(tmp / "missing.tsv"), "missing.tsv");
  }

  void routingDistinctAscending() {
    testing::TempDir tmp;
    const auto trace = smallTrace(tmp);
    for (const int k : {1, 2, 3, 6}) {
      TraceRouting routing(trace, 2, 6, k, 1);
      for (int p = 0; p < 2; ++p) {
        routing.setPrompt(p);
        for (int l = 0; l < 2; ++l) QVERIFY(distinctAscending(run(routing, l, 50, k, {4, 1}), k, 6));
      }
    }
  }

  void routingReproducesRows() {
    testing::TempDir tmp;
    checkExactReproduction(smallTrace(tmp), 1);
    checkExactReproduction(smallTrace(tmp), 99);
  }

  void routingFollowsSkew() {
    // Over many restarts the frequencies are the row's: expert 0 of prompt 0 layer 0 serves every token.
    testing::TempDir tmp;
    TraceRouting routing(smallTrace(tmp), 1, 6, 2, 3);
    const auto experts = run(routing, 0, 5 * 40, 2, {3});
    QCOMPARE(histogram(experts, 6), (std::vector<uint32_t>{200, 120, 40, 40, 0, 0}));
  }

  void routingIsDeterministic() {
    testing::TempDir tmp;
    const auto trace = smallTrace(tmp);
    TraceRouting a(trace, 2, 6, 2, 42), b(trace, 2, 6, 2, 42), c(trace, 2, 6, 2, 43);
    const auto first = run(a, 0, 500, 2, {5, 1});
    QCOMPARE(run(b, 0, 500, 2, {2, 3}), first);  // how tokens are split into calls does not matter
    QVERIFY(run(c, 0, 500, 2) != first);
    // setPrompt restarts the prompt's draws, whatever ran before.
    a.setPrompt(1);
    run(a, 1, 7, 2);
    a.setPrompt(0);
    QCOMPARE(run(a, 0, 500, 2), first);
    // Layers have their own streams: replaying MoE layer 0 does not depend on layer 1 having run.
    TraceRouting d(trace, 3, 6, 2, 42);
    run(d, 1, 13, 2);
    QCOMPARE(run(d, 0, 500, 2), first);
  }

  void routingMapsLayers() {
    testing::TempDir tmp;
    const auto trace = smallTrace(tmp);
    TraceRouting routing(trace, 5, 6, 2, 1);
    QCOMPARE(routing.traceLayer(0), 0);
    QCOMPARE(routing.traceLayer(1), 2);
    QCOMPARE(routing.traceLayer(2), 0);
    QCOMPARE(routing.traceLayer(3), 2);
    QCOMPARE(routing.traceLayer(4), 0);
    routing.setPrompt(1);
    QCOMPARE(routing.prompt(), 1);
    QCOMPARE(histogram(run(routing, 1, 3, 2), 6), (std::vector<uint32_t>{3, 0, 0, 3, 0, 0}));
    QCOMPARE(histogram(run(routing, 3, 3, 2), 6), (std::vector<uint32_t>{3, 0, 0, 3, 0, 0}));
    QCOMPARE(histogram(run(routing, 2, 3, 2), 6), (std::vector<uint32_t>{1, 1, 1, 1, 1, 1}));
  }

  void routingTopsUpNarrowRows() {
    // k = 3 on a row with only two experts that have counts (prompt 1, trace layer 2): both are in
    // every token, the third comes from the layer's counts over all prompts.
    testing::TempDir tmp;
    TraceRouting routing(smallTrace(tmp), 2, 6, 3, 5);
    routing.setPrompt(1);
    const auto experts = run(routing, 1, 40, 3, {3, 1});
    QVERIFY(distinctAscending(experts, 3, 6));
    const auto h = histogram(experts, 6);
    QCOMPARE(h[0], 40u);
    QCOMPARE(h[3], 40u);
    QCOMPARE(h[1] + h[2] + h[4] + h[5], 40u);
  }

  // Continuation: the row first, exactly; then a Pólya urn over what the prompt routed so far plus
  // the layer's counts over all prompts (prompt 0 layer 0 + prompt 1 layer 0 + 1: 7 5 3 3 2 2).
  void routingContinuesFromAnUrn() {
    testing::TempDir tmp;
    const auto trace = smallTrace(tmp);
    const std::vector<uint32_t> row{5, 3, 1, 1, 0, 0};
    TraceRouting routing(trace, 1, 6, 2, 7);
    QCOMPARE(routing.continuation(), 0.0);
    routing.setContinuation(50);
    QCOMPARE(routing.continuation(), 50.0);
    const auto prompt = run(routing, 0, 5, 2, {3, 1});
    QCOMPARE(histogram(prompt, 6), row);  // the prompt's tokens replay its row as before
    const auto later = run(routing, 0, 400, 2, {1});
    QVERIFY(distinctAscending(later, 2, 6));
    const auto h = histogram(later, 6);
    // Experts the row never routed to come in (the restart would never draw them), and the row's
    // favourite stays the favourite.
    QVERIFY2(h[4] > 0 && h[5] > 0, "the urn's prior reaches every expert");
    QVERIFY(std::max_element(h.begin(), h.end()) == h.begin());
    // Deterministic for a seed; setPrompt starts the row (and the urn's counts) again.
    routing.setPrompt(0);
    QCOMPARE(run(routing, 0, 5, 2, {5}), prompt);
    QCOMPARE(run(routing, 0, 400, 2, {4, 1}), later);
    // A tiny prior keeps the prompt's experts (weights: a routed token 65,536, the prior at least 1).
    routing.setContinuation(1e-9);
    routing.setPrompt(0);
    run(routing, 0, 5, 2);
    const auto kept = histogram(run(routing, 0, 400, 2), 6);
    QCOMPARE(kept[4] + kept[5], 0u);
    // 0 restores the restart: every pass reproduces the row.
    routing.setContinuation(0);
    checkExactReproduction(trace, 7);
    routing.setPrompt(0);
    run(routing, 0, 5, 2);
    QCOMPARE(histogram(run(routing, 0, 5, 2), 6), row);
    ZIPMOE_EXPECT_ERROR(routing.setContinuation(-1), "continuation prior", "-1");
    ZIPMOE_EXPECT_ERROR(routing.setContinuation(2e6), "0 .. 1000000");
    ZIPMOE_EXPECT_ERROR(routing.setContinuation(std::nan("")), "continuation prior", "nan");
    QCOMPARE(routing.continuation(), 0.0);  // a refused value changes nothing
  }

  void routingErrors() {
    testing::TempDir tmp;
    const auto trace = smallTrace(tmp);
    ZIPMOE_EXPECT_ERROR(TraceRouting(trace, 2, 8, 2, 1), "8 experts per layer", "the trace 6");
    ZIPMOE_EXPECT_ERROR(TraceRouting(trace, 2, 6, 7, 1), "k = 7", "1 .. 6");
    ZIPMOE_EXPECT_ERROR(TraceRouting(trace, 2, 6, 0, 1), "k = 0");
    ZIPMOE_EXPECT_ERROR(TraceRouting(trace, 0, 6, 2, 1), "0 MoE layers");
    TraceRouting routing(trace, 2, 6, 2, 1);
    ZIPMOE_EXPECT_ERROR(routing.setPrompt(2), "prompt 2", "0 .. 1");
    std::vector<int64_t> out(6);
    ZIPMOE_EXPECT_ERROR(routing.choose(2, 3, 2, out), "MoE layer 2", "0 .. 1");
    ZIPMOE_EXPECT_ERROR(routing.choose(0, 2, 3, out), "asked for 3 experts per token");
    ZIPMOE_EXPECT_ERROR(routing.choose(0, 2, 2, out), "given 6");

    const auto zeros = tmp / "zeros.tsv";
    writeFile(zeros, "# model=Z top_k=1 experts=2 layers=1\nprompt\tlayer\te0\te1\n0\t0\t0\t0\n");
    const auto zeroTrace = ActivationTrace::load(zeros);
    QVERIFY(zeroTrace->activeLayers().empty());
    ZIPMOE_EXPECT_ERROR(TraceRouting(zeroTrace, 1, 2, 1, 1), "no active layer");
  }
};

QTEST_GUILESS_MAIN(TestActivationTrace)
#include "test_activation_trace.moc"
