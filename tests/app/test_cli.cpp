// The `zipmoe` program as a user runs it: make-model → convert → inspect → verify → bench codec,
// and the exit status and message of bad invocations.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

#include <algorithm>
#include <fstream>

#include "test_support.h"

using zipmoe::testing::TempDir;

namespace {

struct Run {
  int exitCode = -1;
  QString out, err;
};

Run runCli(const QStringList& args, int timeoutMs = 300000) {
  QProcess p;
  p.start(ZIPMOE_CLI_PATH, args);
  if (!p.waitForFinished(timeoutMs)) {
    p.kill();
    p.waitForFinished();
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

QString path(const std::filesystem::path& p) { return QString::fromStdString(p.string()); }

}  // namespace

QJsonObject readJsonFile(const std::filesystem::path& p) {
  QFile f(path(p));
  return f.open(QIODevice::ReadOnly) ? QJsonDocument::fromJson(f.readAll()).object() : QJsonObject();
}
void writeJsonFile(const std::filesystem::path& p, const QJsonObject& doc) {
  QFile f(path(p));
  if (f.open(QIODevice::WriteOnly | QIODevice::Truncate)) f.write(QJsonDocument(doc).toJson());
}
// The suite file with `system`'s `field` set to `value` (removed when value is undefined).
QJsonObject withField(QJsonObject doc, const QString& system, const QString& field, const QJsonValue& value) {
  QJsonArray results = doc["results"].toArray();
  for (qsizetype i = 0; i < results.size(); ++i) {
    QJsonObject r = results[i].toObject();
    if (r["system"].toString() != system) continue;
    if (value.isUndefined()) r.remove(field);
    else r[field] = value;
    results[i] = r;
  }
  doc["results"] = results;
  return doc;
}

class TestCli : public QObject {
  Q_OBJECT

  // `bench report` prints every suite as a Markdown table; `bench compare` sets two runs side by
  // side: a run against itself changes nothing, a changed figure is found and named, and files that
  // are not suite results are refused with their name.
  void checkReportAndCompare(const std::filesystem::path& suites) {
    Run r = runCli({"bench", "report", path(suites), "--workload", "tiny"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    for (const char* s : {"**Responsiveness vs budget**", "**Throughput vs batch size**", "**End-to-end latency vs output length**",
                          "**Cache-policy ablation**", "**Scheduler quality**", "**Threads**", "| zipmoe |", "| full-lru |",
                          "| zipmoe-fifo-schedule |", "| zipmoe-workers:2 |", "|---|"})
      QVERIFY2(r.out.contains(s), s);

    r = runCli({"bench", "compare", path(suites), path(suites)});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    for (const char* s : {"budget-tiny", "batch-tiny", "length-tiny", "ablation-tiny", "scheduler-tiny", "threads-tiny"})
      QVERIFY2(r.out.contains(s), s);
    QVERIFY2(!r.out.contains(QRegularExpression("max \\|Δ\\| +[1-9]")), qPrintable(r.out));
    const auto total = QRegularExpression("(\\d+) of (\\d+) timing figures within ±20 %").match(r.out);
    QVERIFY2(total.hasMatch() && total.captured(1) == total.captured(2) && total.captured(1).toInt() > 0, qPrintable(r.out));

    // Zipmoe fastest in the first run, slowest in the second: the changed figure and the changed winner are named.
    TempDir tmp;
    std::filesystem::create_directories(tmp / "a");
    std::filesystem::create_directories(tmp / "b");
    const QJsonObject ablation = readJsonFile(suites / "ablation-tiny.json");
    writeJsonFile(tmp / "a" / "ablation-tiny.json", withField(ablation, "zipmoe", "tpot_ms", 0.001));
    writeJsonFile(tmp / "b" / "ablation-tiny.json", withField(ablation, "zipmoe", "tpot_ms", 1e6));
    r = runCli({"bench", "compare", path(tmp / "a"), path(tmp / "b"), "--all"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("(zipmoe: 0.001 → 1e+06)"), qPrintable(r.out));
    QVERIFY2(r.out.contains("same at 0 of 1 point (zipmoe → "), qPrintable(r.out));
    QVERIFY2(!r.out.contains("budget-tiny"), "only the suites in both directories");

    // Bad input: each refusal names what is wrong and where.
    writeJsonFile(tmp / "b" / "ablation-tiny.json", withField(ablation, "zipmoe", "tpot_ms", QJsonValue::Undefined));
    r = runCli({"bench", "compare", path(tmp / "a"), path(tmp / "b")});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("ablation-tiny.json") && r.err.contains("'zipmoe' has no number 'tpot_ms'"), qPrintable(r.err));
    {
      std::ofstream broken(tmp / "b" / "batch-tiny.json");
      broken << "{\"suite\": \"batch\", \"results\": [";
    }
    r = runCli({"bench", "report", path(tmp / "b")});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("batch-tiny.json: not valid JSON"), qPrintable(r.err));
    r = runCli({"bench", "report", path(suites), "--workload", "qwen8"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("no suite results") && r.err.contains("'qwen8'"), qPrintable(r.err));
    r = runCli({"bench", "compare", path(tmp / "a"), path(tmp / "nope")});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("nope is not a directory"), qPrintable(r.err));
    r = runCli({"bench", "compare", path(suites), path(suites), "--tolerance", "-3"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--tolerance"), qPrintable(r.err));
  }

 private Q_SLOTS:
  void fullPipeline() {
    TempDir tmp;
    Run r = runCli({"make-model", "--family", "qwen2_moe", "--preset", "small", path(tmp / "hf")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    r = runCli({"convert", path(tmp / "hf"), path(tmp / "store"), "--codec", "zstd", "--level", "5", "--shards", "3"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("zstd:5"));
    QVERIFY(r.out.contains("K = 3"));
    QVERIFY2(!r.err.contains('\r'), "no progress redraws when stderr is not a terminal");
    r = runCli({"inspect", path(tmp / "store")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    for (const char* s : {"qwen2_moe", "zstd:5", "K = 3", "gate_proj", "entropy", "bound"})
      QVERIFY2(r.out.contains(s), s);
    r = runCli({"verify", path(tmp / "store"), path(tmp / "hf")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("bit-exact"));
    r = runCli({"bench", "codec", path(tmp / "store"), "--sample-mb", "1", "--repeat", "1", "--codecs", "huffman,lz4hc:9"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    for (const char* s : {"huffman", "lz4hc:9", "decode G exp/s", "split GB/s", "scalar"}) QVERIFY2(r.out.contains(s), s);
    r = runCli({"info"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("libtorch"));
  }

  void generateAndChatStreamAndReportTimings() {
    TempDir tmp;
    Run r = runCli({"make-model", "--family", "qwen2_moe", "--preset", "tiny", path(tmp / "hf")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    r = runCli({"convert", path(tmp / "hf"), path(tmp / "store")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    for (const char* model : {"hf", "store"}) {
      r = runCli({"generate", path(tmp / model), "--prompt", "Hello", "--max-tokens", "5", "--temperature", "0"});
      QVERIFY2(r.exitCode == 0, qPrintable(r.err));
      QVERIFY2(r.err.contains("time to first token") && r.err.contains("time per output token"), qPrintable(r.err));
    }
    QProcess chat;
    chat.start(ZIPMOE_CLI_PATH, {"chat", path(tmp / "store"), "--max-tokens", "4"});
    QVERIFY(chat.waitForStarted());
    chat.write("Hi there\n/reset\nAgain\n/exit\n");
    chat.closeWriteChannel();
    QVERIFY(chat.waitForFinished(120000));
    QCOMPARE(chat.exitCode(), 0);
    const QString err = QString::fromUtf8(chat.readAllStandardError());
    QCOMPARE(err.count("time to first token"), 2);

    r = runCli({"generate", path(tmp / "hf"), "--prompt", ""});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--prompt is empty"), qPrintable(r.err));
    r = runCli({"generate", path(tmp / "hf"), "--prompt", "x", "--temperature", "-1"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("temperature"), qPrintable(r.err));
    r = runCli({"make-model", "--family", "switch_transformers", "--preset", "tiny", path(tmp / "t5")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    r = runCli({"generate", path(tmp / "t5"), "--prompt", "x"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("switch_transformers") && r.err.contains("mixtral"), qPrintable(r.err));
  }

  void runtimeProfileTraceAndBench() {
    TempDir tmp;
    Run r = runCli({"make-model", "--family", "qwen2_moe", "--preset", "tiny", "--layers", "2", path(tmp / "hf")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    r = runCli({"convert", path(tmp / "hf"), path(tmp / "store")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QFile configFile(path(tmp / "hf" / "config.json"));
    QVERIFY(configFile.open(QIODevice::ReadOnly));
    const QJsonObject config = QJsonDocument::fromJson(configFile.readAll()).object();
    const int experts = config["num_experts"].toInt(), k = config["num_experts_per_tok"].toInt();
    {  // A small activation trace in the published format, skewed towards low expert ids.
      std::ofstream trace(tmp / "trace.tsv");
      trace << "# expert-activation trace: model=Synthetic top_k=" << k << " experts=" << experts << " layers=2; test\n";
      trace << "prompt\tlayer";
      for (int e = 0; e < experts; ++e) trace << "\te" << e;
      trace << "\n";
      for (int l = 0; l < 2; ++l) {
        std::vector<int> counts(static_cast<size_t>(experts), 0);
        for (int t = 0; t < 40; ++t)
          for (int j = 0; j < k; ++j) ++counts[static_cast<size_t>((t % 3 == 0 ? t + j * 3 : j) % experts)];
        trace << 0 << "\t" << l;
        for (int c : counts) trace << "\t" << c;
        trace << "\n";
      }
    }
    r = runCli({"profile", path(tmp / "store"), "--samples", "4"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("SM-chunk read") && r.out.contains("expert FFN"), qPrintable(r.out));
    QVERIFY(std::filesystem::exists(tmp / "store" / "profile.json"));

    const QStringList gen = {"generate", path(tmp / "store"), "--raw", "--prompt", "Hello", "--max-tokens", "6", "--temperature", "0"};
    r = runCli(gen);
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const QString resident = r.out;
    r = runCli(gen + QStringList{"--budget", "30%", "--trace", path(tmp / "t.json")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QCOMPARE(r.out, resident);  // bit-identical experts, the same greedy reply
    QVERIFY2(r.err.contains("zipmoe: budget") && r.err.contains("lower bound"), qPrintable(r.err));
    QFile traceJson(path(tmp / "t.json"));
    QVERIFY(traceJson.open(QIODevice::ReadOnly));
    QVERIFY(QJsonDocument::fromJson(traceJson.readAll()).object()["traceEvents"].toArray().size() > 10);
    r = runCli(gen + QStringList{"--budget", "40%", "--offload", "full", "--checkpoint", path(tmp / "hf"), "--eviction", "lfu"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QCOMPARE(r.out, resident);
    QVERIFY2(r.err.contains("full-tensor lfu"), qPrintable(r.err));
    r = runCli(gen + QStringList{"--budget", "20%", "--pools", "FS", "--replay-trace", path(tmp / "trace.tsv")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));

    r = runCli(gen + QStringList{"--budget", "1"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("below the minimum"), qPrintable(r.err));
    r = runCli(gen + QStringList{"--budget", "10%", "--offload", "full"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--checkpoint"), qPrintable(r.err));
    r = runCli(gen + QStringList{"--budget", "10%", "--pools", "FX"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--pools") && r.err.contains("'X'"), qPrintable(r.err));
    r = runCli(gen + QStringList{"--pools", "F"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--budget"), qPrintable(r.err));
    r = runCli({"generate", path(tmp / "hf"), "--prompt", "x", "--budget", "10%"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("zipmoe convert"), qPrintable(r.err));

    r = runCli({"bench", "runtime", "--hf", path(tmp / "hf"), "--store", path(tmp / "store"), "--budgets", "250,400",
                "--tokens", "4", "--warmup", "1", "--prompt-tokens", "3", "--trace-file", path(tmp / "trace.tsv"),
                "--systems", "zipmoe,zipmoe:FS,full-lru", "--json", path(tmp / "bench.json")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
    QVERIFY2(r.out.contains("pool split") && r.out.contains("speed-up"), qPrintable(r.out));
    QFile benchJson(path(tmp / "bench.json"));
    QVERIFY(benchJson.open(QIODevice::ReadOnly));
    QCOMPARE(QJsonDocument::fromJson(benchJson.readAll()).object()["results"].toArray().size(), 6);

    // Every evaluation suite, tiny settings: JSON results, figure specs, and their PNGs.
    const QStringList suite = {"--hf", path(tmp / "hf"), "--store", path(tmp / "store"), "--label", "tiny",
                               "--trace-file", path(tmp / "trace.tsv"), "--out", path(tmp / "suites"), "--budgets", "250,400",
                               "--budget", "300", "--batches", "1,2", "--lengths", "2,4", "--workers-list", "1,2",
                               "--tokens", "4", "--warmup", "1", "--prompt-tokens", "3", "--prompts", "0"};
    r = runCli(QStringList{"bench", "suite", "all"} + suite);
    QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
    for (const char* name : {"budget", "batch", "length", "ablation", "scheduler", "threads"}) {
      QFile f(path(tmp / "suites" / (std::string(name) + "-tiny.json")));
      QVERIFY2(f.open(QIODevice::ReadOnly), name);
      const QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
      QCOMPARE(doc["suite"].toString(), QString::fromLatin1(name));
      QVERIFY2(!doc["results"].toArray().isEmpty(), name);
      for (const auto fig : doc["figures"].toArray()) {
        const auto spec = tmp / "suites" / fig.toString().toStdString();
        QVERIFY2(std::filesystem::exists(spec), fig.toString().toUtf8().constData());
        auto png = spec;
        png.replace_extension(".png");
        QFile image(path(png));
        QVERIFY2(image.open(QIODevice::ReadOnly), qPrintable(path(png)));
        QCOMPARE(image.read(4), QByteArray("\x89PNG", 4));
      }
    }
    QVERIFY2(r.out.contains("makespan / lower bound"), qPrintable(r.out));
    QCOMPARE(r.err.count("bench: warm-up: read 2 files"), 1);  // once per process: the store's experts and the checkpoint
    checkReportAndCompare(tmp / "suites");

    // --repeat: every system measured three times at each point, in an order that rotates, so each
    // system ran once first, once second and once last; the figure is the median of the three.
    QStringList repeated = suite;
    repeated[repeated.indexOf("--out") + 1] = path(tmp / "repeated");
    r = runCli(QStringList{"bench", "suite", "budget", "--repeat", "3"} + repeated);
    QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
    QVERIFY2(r.err.contains("to prime 18 measurements"), qPrintable(r.err));  // 2 budgets × 3 systems × 3 rounds
    QVERIFY2(r.out.contains("250 % #3") && r.out.contains("400 % median"), qPrintable(r.out));
    {
      QFile f(path(tmp / "repeated" / "budget-tiny.json"));
      QVERIFY(f.open(QIODevice::ReadOnly));
      const QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
      QCOMPARE(doc["settings"].toObject()["repeat"].toInt(), 3);
      const QJsonArray results = doc["results"].toArray();
      QCOMPARE(results.size(), 6);
      for (const auto v : results) {
        const QJsonObject res = v.toObject();
        const QJsonArray samples = res["samples"].toArray();
        QCOMPARE(samples.size(), 3);
        std::vector<double> tpot;
        int positions = 0;
        for (const auto x : samples) {
          tpot.push_back(x.toObject()["tpot_ms"].toDouble());
          positions |= 1 << x.toObject()["position"].toInt();
        }
        QCOMPARE(positions, 0b111);
        std::sort(tpot.begin(), tpot.end());
        QCOMPARE(res["tpot_ms"].toDouble(), tpot[1]);
      }
    }
    r = runCli({"bench", "report", path(tmp / "repeated")});
    QVERIFY2(r.exitCode == 0 && r.out.contains("the median of 3 measurements"), qPrintable(r.err + r.out));
    r = runCli(QStringList{"bench", "suite", "budget", "--repeat", "0"} + repeated);
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--repeat") && r.err.contains("1..100"), qPrintable(r.err));
    r = runCli(QStringList{"bench", "suite", "speed"} + suite);
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("unknown suite 'speed'"), qPrintable(r.err));
    QStringList beyond = suite;
    beyond.last() = "3";  // --prompts 3: the trace has one prompt
    r = runCli(QStringList{"bench", "suite", "budget"} + beyond);
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--prompts") && r.err.contains("1 prompts"), qPrintable(r.err));
    r = runCli({"bench", "suite", "budget", "--hf", path(tmp / "hf")});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--label"), qPrintable(r.err));
  }

  void badInvocationsExplainThemselves() {
    TempDir tmp;
    Run r = runCli({"frobnicate"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY(r.err.contains("unknown command 'frobnicate'"));
    r = runCli({"convert", path(tmp / "nope"), path(tmp / "out")});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("zipmoe: error:") && r.err.contains("is not a directory"), qPrintable(r.err));
    r = runCli({"convert", "a", "b", "--codec", "brotli"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY(r.err.contains("unknown codec 'brotli'"));
    r = runCli({"convert", "a", "b", "--shards", "x"});
    QVERIFY(r.err.contains("option --shards: 'x' is not an integer"));
    r = runCli({"convert", "a"});
    QVERIFY(r.err.contains("expected 2 arguments, got 1"));
    r = runCli({"inspect", path(tmp.path())});
    QCOMPARE(r.exitCode, 1);
    QVERIFY(r.err.contains("is not a ZipMoE store"));
    r = runCli({"make-model", "--family", "gpt2", "--preset", "tiny", path(tmp / "m")});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("gpt2") && r.err.contains("mixtral"), qPrintable(r.err));
  }
};

QTEST_APPLESS_MAIN(TestCli)
#include "test_cli.moc"
