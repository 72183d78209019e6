// The `zipmoe` program as a user runs it: make-model → convert → inspect → verify → bench codec,
// and the exit status and message of bad invocations.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QtTest>

#include <cmath>
#include <vector>

#include <algorithm>
#include <array>
#include <map>
#include <set>
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
                          "| zipmoe-fifo-schedule |", "| zipmoe-workers:2 |", "|---|", "(median of 9 passes between two resident runs; TPOT / floor ",
                          ", over the best pass's floor ("})
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

    // An even number of figures: the median is the mean of the two middle changes. Every TPOT of
    // the second run is the first's times 1.1, 1.3, 1.5, 1.7, ... in turn (changes 10, 30, 50, 70 %...).
    {
      QJsonObject scaled = ablation;
      QJsonArray results = scaled["results"].toArray();
      std::vector<double> changes;
      for (qsizetype i = 0; i < results.size(); ++i) {
        QJsonObject res = results[i].toObject();
        if (!res["tpot_ms"].isDouble()) continue;
        const double factor = 1.1 + 0.2 * static_cast<double>(changes.size());
        res["tpot_ms"] = res["tpot_ms"].toDouble() * factor;
        changes.push_back(std::round((factor - 1) * 1000) / 10);
        results[i] = res;
      }
      if (changes.size() % 2) changes.pop_back(), results.removeLast();  // an even count
      scaled["results"] = results;
      QVERIFY(changes.size() >= 2);
      QJsonObject trimmed = ablation;
      QJsonArray original = ablation["results"].toArray();
      while (original.size() > results.size()) original.removeLast();
      trimmed["results"] = original;
      TempDir even;
      std::filesystem::create_directories(even / "a");
      std::filesystem::create_directories(even / "b");
      writeJsonFile(even / "a" / "ablation-tiny.json", trimmed);
      writeJsonFile(even / "b" / "ablation-tiny.json", scaled);
      r = runCli({"bench", "compare", path(even / "a"), path(even / "b")});
      QVERIFY2(r.exitCode == 0, qPrintable(r.err));
      const double median = (changes[changes.size() / 2 - 1] + changes[changes.size() / 2]) / 2;
      const QString expected = QStringLiteral("median |Δ| %1 %").arg(median, 5, 'f', 1);
      QVERIFY2(r.out.contains(expected), qPrintable(expected + QStringLiteral(" in:\n") + r.out));
    }

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
    for (const char* s : {"qwen2_moe", "zstd:5", "K = 3", "gate_proj", "entropy", "bound", "codec choice --codec: zstd:5"})
      QVERIFY2(r.out.contains(s), s);
    r = runCli({"verify", path(tmp / "store"), path(tmp / "hf")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("bit-exact"));
    r = runCli({"bench", "codec", path(tmp / "store"), "--sample-mb", "1", "--repeat", "1", "--codecs", "huffman,lz4hc:9",
                "--json", path(tmp / "codec.json")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    for (const char* s : {"huffman", "lz4hc:9", "decode G exp/s", "in cache G exp/s", "split GB/s", "scalar"})
      QVERIFY2(r.out.contains(s), s);
    const QJsonObject codecJson = readJsonFile(tmp / "codec.json");
    const QJsonArray codecRows = codecJson["codecs"].toArray();
    QVERIFY(codecRows.size() >= 2);  // huffman at each decoder level, then lz4hc:9
    QCOMPARE(codecRows.last().toObject()["codec"].toString(), QString("lz4hc:9"));
    for (const auto& row : codecRows) {
      QVERIFY(row.toObject()["decode_g_exp_per_s_in_cache"].toDouble() > 0);
      QVERIFY(row.toObject()["decode_g_exp_per_s_to_memory"].toDouble() > 0);
    }
    QVERIFY(!codecJson["bf16"].toArray().isEmpty());
    // bench kernels: every project kernel on the BF16 words and on the split planes, which give the
    // same products bit for bit (so the same error against libtorch).
    r = runCli({"bench", "kernels", "--shapes", "64x256", "--mb", "64", "--repeat", "1", "--threads", "1", "--prefill",
                "16,200", "--json", path(tmp / "kernels.json")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("scalar split"));
    QMap<QString, double> errors;
    for (const auto& k : readJsonFile(tmp / "kernels.json")["gemv"].toArray()[0].toObject()["kernels"].toArray()) {
      errors[k.toObject()["kernel"].toString()] = k.toObject()["max_relative_error"].toDouble();
      QVERIFY(k.toObject()["sustained_gb_per_s"].toDouble() > 0);
    }
    QVERIFY(errors.contains("libtorch") && errors.contains("scalar") && errors.contains("scalar split"));
    for (auto it = errors.cbegin(); it != errors.cend(); ++it)
      if (it.key().endsWith(" split")) QCOMPARE(it.value(), errors.value(it.key().chopped(6), -1));
    // Prefill's products: libtorch at both row counts; the tiles at 16 rows where the CPU has AMX,
    // never at 200 (above kMaxTileRows).
    const QJsonArray prefill = readJsonFile(tmp / "kernels.json")["prefill"].toArray();
    QCOMPARE(prefill.size(), 2);
    QCOMPARE(prefill[0].toObject()["batch"].toInt(), 16);
    for (const auto& p : prefill) QVERIFY(p.toObject()["libtorch_us"].toDouble() > 0);
    QCOMPARE(prefill[1].toObject()["tiles_us"].toDouble(), -1.0);
    r = runCli({"info"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("libtorch"));
    QVERIFY2(r.out.contains("measured by code 'code "), qPrintable(r.out));  // the cost profile's kernels
  }

  void generateAndChatStreamAndReportTimings() {
    TempDir tmp;
    Run r = runCli({"make-model", "--family", "qwen2_moe", "--preset", "tiny", path(tmp / "hf")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    r = runCli({"convert", path(tmp / "hf"), path(tmp / "store")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    // Without --codec, convert says which codec it measured as cheapest here, and why.
    QVERIFY2(r.out.contains("codec measured on this machine (--codec overrides): ") && r.out.contains(" s per GB of BF16"),
             qPrintable(r.out));
    for (const char* model : {"hf", "store"}) {
      r = runCli({"generate", path(tmp / model), "--prompt", "Hello", "--max-tokens", "5", "--temperature", "0"});
      QVERIFY2(r.exitCode == 0, qPrintable(r.err));
      QVERIFY2(r.err.contains("time to first token") && r.err.contains("time per output token"), qPrintable(r.err));
    }
    // The budget that follows free memory, a fixed-length reply, and the statistics of the runs
    // before (the store's first budgeted run above kept none: generate on "store" ran resident).
    r = runCli({"generate", path(tmp / "store"), "--prompt", "Hello", "--max-tokens", "12", "--ignore-eos", "--budget", "auto"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("zipmoe: --budget auto: ") && r.err.contains("it follows free memory between") &&
                 r.err.contains("; 12 generated;"),
             qPrintable(r.err));
    r = runCli({"generate", path(tmp / "store"), "--prompt", "Hello", "--max-tokens", "2", "--budget", "1M"});
    QVERIFY2(r.exitCode == 0 && r.err.contains("planning from the activation history of earlier runs"), qPrintable(r.err));
    r = runCli({"generate", path(tmp / "store"), "--prompt", "Hello", "--max-tokens", "2", "--budget", "1M", "--no-history"});
    QVERIFY2(r.exitCode == 0 && !r.err.contains("activation history"), qPrintable(r.err));
    r = runCli({"generate", path(tmp / "store"), "--prompt", "Hello", "--budget", "50%", "--free-margin", "1G"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--free-margin is for --budget auto"), qPrintable(r.err));
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

  // zipmoe chat keeps the KV cache between turns: on the demo model, turns 2 and 3 reuse what the
  // turn before left in the cache and prefill only the new turn (the stats line says so). That the
  // replies equal a fresh prefill's is ChatSession's test (test_chat_session).
  void chatReusesTheCacheBetweenTurns() {
    QProcess chat;
    chat.start(ZIPMOE_CLI_PATH, {"chat", QStringLiteral(ZIPMOE_SOURCE_DIR "/resources/demo-model"), "--temperature", "0",
                                 "--max-tokens", "16"});
    QVERIFY(chat.waitForStarted());
    chat.write("ROMEO: what news?\nAnd then?\nSpeak on.\n/exit\n");
    chat.closeWriteChannel();
    QVERIFY(chat.waitForFinished(-1));
    QCOMPARE(chat.exitCode(), 0);
    const QString err = QString::fromUtf8(chat.readAllStandardError());
    const QRegularExpression stats("\\[(\\d+) prompt tokens, (\\d+) reused, (\\d+) prefilled; (\\d+) generated");
    std::vector<std::array<int, 4>> turns;
    for (auto it = stats.globalMatch(err); it.hasNext();) {
      const auto m = it.next();
      turns.push_back({m.captured(1).toInt(), m.captured(2).toInt(), m.captured(3).toInt(), m.captured(4).toInt()});
    }
    QCOMPARE(turns.size(), size_t{3});
    QCOMPARE(turns[0][1], 0);
    for (size_t i = 1; i < 3; ++i) {
      QCOMPARE(turns[i][1], turns[i - 1][0] + turns[i - 1][3] - 1);  // all the last turn cached
      QCOMPARE(turns[i][0], turns[i][1] + turns[i][2]);
      QVERIFY2(turns[i][2] < 20, qPrintable(err));  // the new turn's few tokens, not the conversation
    }
  }

  // A conversation twice as long as the demo's 256-token context: zipmoe chat leaves out the oldest
  // turns and says so on the stats line; with --context-overflow error the turn is refused with a
  // message naming the limit, and the chat goes on (the refused message is not kept).
  void chatShortensOrRefusesAConversationLongerThanTheContext() {
    QString lines;
    for (int i = 0; i < 10; ++i)
      lines += QString("Turn %1: now is the winter of our discontent made glorious summer by this sun of York.\n").arg(i);
    for (const QString policy : {"drop-oldest", "error"}) {
      QProcess chat;
      chat.start(ZIPMOE_CLI_PATH, {"chat", QStringLiteral(ZIPMOE_SOURCE_DIR "/resources/demo-model"), "--temperature", "0",
                                   "--max-tokens", "24", "--context-overflow", policy});
      QVERIFY(chat.waitForStarted());
      chat.write((lines + "/exit\n").toUtf8());
      chat.closeWriteChannel();
      QVERIFY(chat.waitForFinished(-1));
      const QString err = QString::fromUtf8(chat.readAllStandardError());
      QVERIFY2(chat.exitCode() == 0, qPrintable(err));
      if (policy == "drop-oldest") {
        QVERIFY2(err.contains(QRegularExpression("the \\d+ oldest messages left out to fit the context window")), qPrintable(err));
        QVERIFY2(!err.contains("error:"), qPrintable(err));
        QCOMPARE(err.count("; stop: "), 10);  // every turn answered
      } else {
        QVERIFY2(err.contains("too long for this model") && err.contains("context holds 256 tokens") &&
                     err.contains("/reset starts a new conversation"),
                 qPrintable(err));
        QVERIFY2(!err.contains("left out"), qPrintable(err));
      }
    }
    // generate refuses a prompt that cannot fit either way, naming the limit.
    const Run r = runCli({"generate", QStringLiteral(ZIPMOE_SOURCE_DIR "/resources/demo-model"), "--prompt",
                          QString("Romeo ").repeated(300), "--context-overflow", "error"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("too long for this model") && r.err.contains("context holds 256 tokens"), qPrintable(r.err));
  }

  // bench chat answers every turn twice — the kept session and a fresh one — and checks that the
  // greedy replies are the same; the kept session prefills only the new turn from turn 2 on.
  void benchChatComparesReuseWithAFreshPrefill() {
    TempDir tmp;
    const Run r = runCli({"bench", "chat", QStringLiteral(ZIPMOE_SOURCE_DIR "/resources/demo-model"), "--text",
                          QStringLiteral(ZIPMOE_SOURCE_DIR "/resources/corpus/tinyshakespeare.txt"), "--turns", "3",
                          "--words", "12", "--max-tokens", "4", "--json", path(tmp / "chat.json")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
    QVERIFY2(r.out.contains("replies of the two sessions identical"), qPrintable(r.out));
    QFile f(path(tmp / "chat.json"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonObject j = QJsonDocument::fromJson(f.readAll()).object();
    QVERIFY(j["identical_replies"].toBool());
    const QJsonArray turns = j["turns"].toArray();
    QCOMPARE(turns.size(), 3);
    for (int i = 0; i < 3; ++i) {
      const QJsonObject reuse = turns[i].toObject()["reuse"].toObject(), fresh = turns[i].toObject()["fresh"].toObject();
      QCOMPARE(reuse["prompt_tokens"].toInt(), fresh["prompt_tokens"].toInt());
      QCOMPARE(fresh["reused_tokens"].toInt(), 0);
      QCOMPARE(reuse["reused_tokens"].toInt() + reuse["prefilled_tokens"].toInt(), reuse["prompt_tokens"].toInt());
      if (i > 0) {
        QVERIFY(reuse["reused_tokens"].toInt() > 0);
        QVERIFY(reuse["prefilled_tokens"].toInt() < fresh["prefilled_tokens"].toInt());
      }
    }
  }

  void runtimeProfileTraceAndBench() {
    TempDir tmp;
    Run r = runCli({"make-model", "--family", "qwen2_moe", "--preset", "small", "--layers", "2", path(tmp / "hf")});
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

    // `zipmoe plan`: the planner's predictions per budget, from the profile and the trace's counts.
    r = runCli({"plan", path(tmp / "store"), "--budgets", "25,50,100", "--activations", path(tmp / "trace.tsv"),
                "--dense-ms", "3", "--json", path(tmp / "plan.json")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("TPOT ms") && r.out.contains("knee") && r.out.contains("trace.tsv"), qPrintable(r.out));
    QFile planJson(path(tmp / "plan.json"));
    QVERIFY(planJson.open(QIODevice::ReadOnly));
    const QJsonArray predictions = QJsonDocument::fromJson(planJson.readAll()).object()["predictions"].toArray();
    QCOMPARE(predictions.size(), 3);
    for (const QJsonValue v : predictions)
      if (v.toObject()["feasible"].toBool()) QVERIFY(v.toObject()["tpot_ms"].toDouble() >= 3.0);
    r = runCli({"plan", path(tmp / "store"), "--budgets", "50", "--activations", path(tmp / "hf" / "config.json")});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("config.json") && r.err.contains("layers"), qPrintable(r.err));

    const QStringList gen = {"generate", path(tmp / "store"), "--raw", "--prompt", "Hello", "--max-tokens", "6", "--temperature", "0"};
    r = runCli(gen);
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const QString resident = r.out;
    r = runCli(gen + QStringList{"--budget", "60%", "--trace", path(tmp / "t.json")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QCOMPARE(r.out, resident);  // bit-identical experts, the same greedy reply
    QVERIFY2(r.err.contains("zipmoe: budget") && r.err.contains("lower bound"), qPrintable(r.err));
    {  // a prompt of 16+ tokens plans the layers at its prefill; --no-prompt-plan keeps the prior
      const QStringList longPrompt = {"generate", path(tmp / "store"), "--raw", "--max-tokens", "2", "--temperature", "0",
                                      "--budget", "60%", "--prompt",
                                      "the quick brown fox jumps over the lazy dog while the cat sleeps by the warm fire "
                                      "and the rain falls on the old stone roof of the quiet house"};
      const Run planned = runCli(longPrompt);
      QVERIFY2(planned.exitCode == 0, qPrintable(planned.err));
      QVERIFY2(planned.err.contains("(layers from history 0 (with the session's tokens 0), prompt ") &&
                   !planned.err.contains("prompt 0,"),
               qPrintable(planned.err));
      const Run prior = runCli(longPrompt + QStringList{"--no-prompt-plan"});
      QVERIFY2(prior.exitCode == 0 && prior.err.contains("prompt 0, prior"), qPrintable(prior.err));
      QCOMPARE(prior.out, planned.out);  // where experts live never changes the reply
      // Room is lent between layers by default; --own-shares keeps each layer within its share.
      QVERIFY2(planned.err.contains("(lent between layers "), qPrintable(planned.err));
      const Run own = runCli(longPrompt + QStringList{"--own-shares"});
      QVERIFY2(own.exitCode == 0 && !own.err.contains("lent between layers"), qPrintable(own.err));
      QCOMPARE(own.out, planned.out);
    }
    QFile traceJson(path(tmp / "t.json"));
    QVERIFY(traceJson.open(QIODevice::ReadOnly));
    QVERIFY(QJsonDocument::fromJson(traceJson.readAll()).object()["traceEvents"].toArray().size() > 10);
    r = runCli(gen + QStringList{"--budget", "50%", "--offload", "full", "--checkpoint", path(tmp / "hf"), "--eviction", "lfu"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QCOMPARE(r.out, resident);
    QVERIFY2(r.err.contains("full-tensor lfu"), qPrintable(r.err));
    // --warm-start fills the pools before the prompt, ZipMoE's and the baseline's: the same reply.
    for (const QStringList& system : {QStringList{}, QStringList{"--offload", "full", "--checkpoint", path(tmp / "hf")}}) {
      r = runCli(gen + QStringList{"--budget", "50%", "--warm-start"} + system);
      QVERIFY2(r.exitCode == 0, qPrintable(r.err));
      QCOMPARE(r.out, resident);
      QVERIFY2(r.err.contains("zipmoe: --warm-start: ") && r.err.contains(" kept in the pools over 2 MoE layers, ") &&
                   r.err.contains(" readied for their first use, in ") &&
                   !r.err.contains("(stopped)"),
               qPrintable(r.err));
    }
    {  // a suite with the product's defaults (a warm start) reports what each offloading system's warm start did
      r = runCli({"bench", "suite", "budget", "--hf", path(tmp / "hf"), "--store", path(tmp / "store"), "--label", "warm",
                  "--trace-file", path(tmp / "trace.tsv"), "--out", path(tmp / "warm"), "--budgets", "60", "--systems",
                  "zipmoe,full-lru", "--tokens", "3", "--warmup", "1", "--prompt-tokens", "3", "--no-resident",
                  "--no-plot", "--no-warm-up"});
      QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
      QVERIFY2(r.out.contains("drawn with --prompt-seed 1"), qPrintable(r.out));
      QFile f(path(tmp / "warm" / "budget-warm.json"));
      QVERIFY(f.open(QIODevice::ReadOnly));
      const QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
      QVERIFY(doc["settings"].toObject()["warm_start"].toBool());
      const QJsonArray results = doc["results"].toArray();
      QCOMPARE(results.size(), 2);
      for (const QJsonValue v : results)
        QVERIFY2(v.toObject()["warm_start"].toObject()["experts"].toInt() > 0 &&
                     v.toObject()["warm_start"].toObject().contains("prepared") &&
                     v.toObject()["indexed_on_demand"].toInt(-1) >= 0,
                 qPrintable(v.toObject()["system"].toString()));
    }
    r = runCli(gen + QStringList{"--budget", "50%", "--pools", "FS", "--replay-trace", path(tmp / "trace.tsv")});
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

    r = runCli({"bench", "runtime", "--hf", path(tmp / "hf"), "--store", path(tmp / "store"), "--budgets", "60,90",
                "--tokens", "4", "--warmup", "1", "--prompt-tokens", "3", "--trace-file", path(tmp / "trace.tsv"),
                "--systems", "zipmoe,zipmoe:FS,full-lru", "--json", path(tmp / "bench.json")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
    QVERIFY2(r.out.contains("pool split") && r.out.contains("speed-up"), qPrintable(r.out));
    QFile benchJson(path(tmp / "bench.json"));
    QVERIFY(benchJson.open(QIODevice::ReadOnly));
    QCOMPARE(QJsonDocument::fromJson(benchJson.readAll()).object()["results"].toArray().size(), 6);

    // Every evaluation suite, tiny settings: JSON results, figure specs, and their PNGs.
    const QStringList suite = {"--hf", path(tmp / "hf"), "--store", path(tmp / "store"), "--label", "tiny",
                               "--trace-file", path(tmp / "trace.tsv"), "--out", path(tmp / "suites"), "--budgets", "60,90",
                               "--budget", "75", "--batches", "1,2", "--lengths", "2,4", "--workers-list", "1,2",
                               "--tokens", "4", "--warmup", "1", "--prompt-tokens", "3", "--prompts", "0"};
    r = runCli(QStringList{"bench", "suite", "all"} + suite);
    QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
    for (const char* name : {"budget", "batch", "length", "ablation", "scheduler", "threads", "prefetch"}) {
      QFile f(path(tmp / "suites" / (std::string(name) + "-tiny.json")));
      QVERIFY2(f.open(QIODevice::ReadOnly), name);
      const QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
      QCOMPARE(doc["suite"].toString(), QString::fromLatin1(name));
      QVERIFY2(!doc["results"].toArray().isEmpty(), name);
      // The all-resident reference and the bandwidth floor (their figures are benchmarks: here only
      // that they are reported), and each measured result pointing at the reference of its shape.
      const QJsonObject reference = doc["reference"].toObject();
      QVERIFY2(reference["read_bandwidth_gb_per_s"].isDouble(), name);
      // The floor's bandwidth is the median pass; the best pass is reported beside it.
      QCOMPARE(reference["read_bandwidth_statistic"].toString(), QString("median of 9 passes between two resident runs"));
      QVERIFY2(reference["read_bandwidth_best_pass_gb_per_s"].isDouble(), name);
      const QJsonArray residents = reference["resident"].toArray();
      QVERIFY2(!residents.isEmpty(), name);
      std::set<double> residentTpot;
      for (const auto v : residents) {
        const QJsonObject ref = v.toObject();
        QVERIFY2(ref["tpot_ms"].isDouble() && ref["floor_ms"].isDouble(), name);
        // Each reference: two resident runs with its own bandwidth passes between them (the figures
        // are benchmarks: here only that each is reported).
        QCOMPARE(ref["runs"].toInt(), 2);
        QCOMPARE(ref["run_tpot_ms"].toArray().size(), 2);
        for (const char* field : {"best_pass_floor_ms", "read_bandwidth_gb_per_s", "read_bandwidth_best_pass_gb_per_s",
                                  "read_bandwidth_slowest_pass_gb_per_s"})
          QVERIFY2(ref[field].isDouble(), field);
        QVERIFY2(ref["weight_mb_per_step"].toDouble() > 0, name);  // bytes a step reads, not a time
        residentTpot.insert(ref["tpot_ms"].toDouble());
      }
      if (std::string(name) == "batch") QCOMPARE(residents.size(), 2);  // one per batch size
      for (const auto v : doc["results"].toArray()) {
        const QJsonObject res = v.toObject();
        if (res["skipped"].toBool()) continue;
        QVERIFY2(res["stall_ms_per_token"].isDouble(), name);
        QVERIFY2(residentTpot.count(res["resident_tpot_ms"].toDouble()) == 1, name);
      }
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
    {  // The prefetch suite: each prefetching result reports its predictor's recall, and the oracle
       // at accuracy 1 names more of the requested experts than at 0 (layer 0 of a step is named by
       // the previous step's experts in both, so neither is exactly 0 or 1 over all layers).
      QFile f(path(tmp / "suites" / "prefetch-tiny.json"));
      QVERIFY(f.open(QIODevice::ReadOnly));
      std::map<QString, double> recall;
      for (const auto v : QJsonDocument::fromJson(f.readAll()).object()["results"].toArray()) {
        const QJsonObject res = v.toObject();
        if (!res["skipped"].toBool() && res.contains("prefetch"))
          recall[res["system"].toString()] = res["prefetch"].toObject()["recall"].toDouble();
      }
      QVERIFY(recall.count("zipmoe-prefetch:0") && recall.count("zipmoe-prefetch:1"));
      QVERIFY(recall["zipmoe-prefetch:0"] < recall["zipmoe-prefetch:1"]);
    }
    QVERIFY2(r.out.contains("makespan / lower bound"), qPrintable(r.out));
    QCOMPARE(r.err.count("bench: warm-up: read 2 files"), 1);  // once per process: the store's experts and the checkpoint
    checkReportAndCompare(tmp / "suites");

    // --repeat: every system measured three times at each point, in an order that rotates, so each
    // system ran once first, once second and once last; the figure is the median of the three.
    QStringList repeated = suite;
    repeated[repeated.indexOf("--out") + 1] = path(tmp / "repeated");
    r = runCli(QStringList{"bench", "suite", "budget", "--repeat", "3", "--systems", "zipmoe,zipmoe-noplan,full-lru"} + repeated);
    QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
    QVERIFY2(r.err.contains("to prime 18 measurements"), qPrintable(r.err));  // 2 budgets × 3 systems × 3 rounds
    QVERIFY2(r.out.contains("60 % #3") && r.out.contains("90 % median"), qPrintable(r.out));
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
    r = runCli({"convert", "a", "b", "--level", "5"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--level 5 needs --codec"), qPrintable(r.err));
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

  // `--help` (and `-h`, and `zipmoe help COMMAND`) prints every command's and sub-command's usage,
  // exits 0 and does no work: the working directory stays empty (bench suite used to generate a
  // 10 GB model under out/bench before it looked at its arguments).
  void helpPrintsUsageOfEveryCommandAndDoesNoWork() {
    TempDir cwd;
    const auto runIn = [&cwd](const QStringList& args) {
      QProcess p;
      p.setWorkingDirectory(path(cwd.path()));
      p.start(ZIPMOE_CLI_PATH, args);
      if (!p.waitForFinished(120000)) {  // a generous bound for the condition "it ended"; help does no work
        p.kill();
        p.waitForFinished();
      }
      return Run{p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
                 QString::fromUtf8(p.readAllStandardError())};
    };
    const QList<QPair<QStringList, QStringList>> commands = {
        {{"convert"}, {"usage: zipmoe convert HF_DIR OUT_DIR", "--codec C", "--shards K"}},
        {{"inspect"}, {"usage: zipmoe inspect STORE"}},
        {{"verify"}, {"usage: zipmoe verify STORE HF_DIR"}},
        {{"make-model"}, {"usage: zipmoe make-model", "--family F", "--list-presets"}},
        {{"info"}, {"usage: zipmoe info"}},
        {{"generate"}, {"usage: zipmoe generate MODEL", "--prompt TEXT", "--budget SIZE|PCT%", "--stop STR", "--trace OUT.json", "--nodes ADDR,..."}},
        {{"chat"}, {"usage: zipmoe chat MODEL", "--budget SIZE|PCT%", "--system TEXT", "--nodes ADDR,..."}},
        {{"train-demo"}, {"usage: zipmoe train-demo", "--corpus FILE", "--bf16-autocast"}},
        {{"profile"}, {"usage: zipmoe profile STORE", "--samples N"}},
        {{"plan"}, {"usage: zipmoe plan STORE", "--budgets PCT", "--activations FILE", "--dense-ms MS", "--check"}},
        {{"node"}, {"usage: zipmoe node STORE --listen ADDR", "--experts-of PLACEMENT", "--token-file FILE"}},
        {{"bench"}, {"codec STORE", "runtime", "suite NAME", "report DIR", "compare DIR_A DIR_B", "tokenizer MODEL", "planner", "chat MODEL", "kernels", "dist --trace TSV"}},
        {{"bench", "dist"}, {"usage: zipmoe bench dist --trace TSV", "--bandwidth MBIT", "--simulate LIST", "--json FILE"}},
        {{"bench", "chat"}, {"usage: zipmoe bench chat MODEL", "--turns N", "--words W", "--budget SIZE|PCT%"}},
        {{"bench", "kernels"}, {"usage: zipmoe bench kernels", "--shapes LIST", "--batch B", "--json FILE"}},
        {{"bench", "tokenizer"}, {"usage: zipmoe bench tokenizer MODEL|TOKENIZER_JSON --text FILE", "--repeat R", "--json FILE"}},
        {{"bench", "planner"}, {"usage: zipmoe bench planner", "--layers N", "--top-k K", "--json FILE"}},
        {{"bench", "codec"}, {"usage: zipmoe bench codec STORE", "--codecs LIST"}},
        {{"bench", "runtime"}, {"usage: zipmoe bench runtime", "--budgets LIST", "--systems LIST", "--json OUT"}},
        {{"bench", "suite"}, {"usage: zipmoe bench suite NAME", "budget", "scheduler", "--budgets LIST", "--repeat N", "full-lru"}},
        {{"bench", "suite", "budget"}, {"usage: zipmoe bench suite NAME", "--workload"}},
        {{"bench", "report"}, {"usage: zipmoe bench report DIR", "--workload LABEL"}},
        {{"bench", "compare"}, {"usage: zipmoe bench compare DIR_A DIR_B", "--tolerance PCT", "--all"}},
    };
    for (const auto& [command, expected] : commands) {
      for (const char* flag : {"--help", "-h"}) {
        const Run r = runIn(command + QStringList{flag});
        const QString what = command.join(' ') + " " + flag;
        QVERIFY2(r.exitCode == 0, qPrintable(what + ": " + r.err));
        for (const QString& s : expected) QVERIFY2(r.out.contains(s), qPrintable(what + " lacks '" + s + "':\n" + r.out));
      }
      // `zipmoe help COMMAND` is `zipmoe COMMAND --help`.
      const Run r = runIn(QStringList{"help"} + command);
      QVERIFY2(r.exitCode == 0, qPrintable(command.join(' ') + ": " + r.err));
      QCOMPARE(r.out, runIn(command + QStringList{"--help"}).out);
    }
    // --help wins over anything else on the line, and a value that reads "--help" is a value.
    Run r = runIn({"bench", "suite", "budget", "--bogus", "--help"});
    QVERIFY2(r.exitCode == 0 && r.out.contains("usage: zipmoe bench suite"), qPrintable(r.err));
    r = runIn({"help"});
    QVERIFY2(r.exitCode == 0 && r.out.contains("commands:") && r.out.contains("--budget SIZE|PCT%"), qPrintable(r.err));
    const auto left = std::distance(std::filesystem::directory_iterator(cwd.path()), std::filesystem::directory_iterator());
    QVERIFY2(left == 0, "help wrote files into the working directory");
  }

  // Every option is checked before anything is generated, converted or loaded; each refusal names
  // the option and the value. Run in an empty directory, which stays empty (the default --workdir
  // out/bench would hold a generated model otherwise).
  void badCommandLinesAreRefusedBeforeAnyWork() {
    TempDir cwd;
    const auto runIn = [&cwd](const QStringList& args) {
      QProcess p;
      p.setWorkingDirectory(path(cwd.path()));
      p.start(ZIPMOE_CLI_PATH, args);
      if (!p.waitForFinished(120000)) {
        p.kill();
        p.waitForFinished();
      }
      return Run{p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
                 QString::fromUtf8(p.readAllStandardError())};
    };
    const QList<QPair<QStringList, QStringList>> refused = {
        {{"bench", "suite", "budget", "--bogus"}, {"unknown option '--bogus'"}},
        {{"bench", "suite", "nosuch"}, {"unknown suite 'nosuch'"}},
        {{"bench", "suite"}, {"expected 1 argument, got 0"}},
        {{"bench", "suite", "budget", "--systems", "zipmoe,nosuch"}, {"unknown system 'nosuch'"}},
        {{"bench", "suite", "budget", "--systems", "zipmoe-workers:4294967297"}, {"zipmoe-workers:4294967297", "out of range"}},
        {{"bench", "suite", "budget", "--systems", "zipmoe+smooth-1"}, {"zipmoe+smooth-1", "smoothing toward uniform"}},
        {{"bench", "suite", "budget", "--budgets", "25,150"}, {"--budgets", "'150'"}},
        {{"bench", "suite", "batch", "--batches", "1,,4"}, {"--batches", "empty item"}},
        {{"bench", "suite", "budget", "--workload", "nosuch"}, {"unknown --workload 'nosuch'"}},
        {{"bench", "suite", "budget", "--workload", "demo"}, {"resources/demo-model has no config.json"}},
        {{"bench", "suite", "length", "--repeat", "4294967297"}, {"--repeat", "4294967297", "out of range"}},
        {{"bench", "suite", "budget", "--tokens"}, {"option --tokens needs a value"}},
        {{"bench", "runtime", "--budgets", "nan"}, {"--budgets", "'nan'"}},
        {{"bench", "runtime", "--layers", "4294967304"}, {"--layers", "4294967304", "out of range"}},
        {{"bench", "runtime", "--systems", "bogus"}, {"unknown system 'bogus'"}},
        {{"bench", "codec", "store", "--repeat", "-1"}, {"--repeat", "-1"}},
        {{"bench", "codec", "store", "--sample-mb", "18446744073709551617"}, {"--sample-mb", "18446744073709551617"}},
        {{"bench", "report", "dir", "--bogus"}, {"unknown option '--bogus'"}},
        {{"bench", "frob"}, {"unknown bench sub-command 'frob'"}},
        {{"bench", "tokenizer", "model"}, {"needs --text FILE"}},
        {{"bench", "tokenizer", "model", "--text", "t.txt", "--repeat", "0"}, {"--repeat", "0 is out of range"}},
        {{"bench", "planner", "--top-k", "40", "--experts", "30"}, {"--top-k 40 is more than --experts 30"}},
        {{"bench", "planner", "--pools", "FX"}, {"--pools 'FX'"}},
        {{"bench", "chat", "model", "--turns", "0"}, {"--turns", "0 is out of range"}},
        {{"bench", "kernels", "--shapes", "12y5"}, {"--shapes", "'12y5' is not ROWSxCOLS"}},
        {{"bench", "kernels", "--batch", "9"}, {"--batch", "9 is out of range"}},
        {{"bench", "kernels", "--prefill", "16,0"}, {"--prefill", "0 rows is out of range"}},
        {{"generate", "model", "--prompt", "x", "--matmul", "gpu"}, {"--matmul", "'gpu'"}},
        {{"generate", "model", "--prompt", "x", "--context-overflow", "trim"}, {"--context-overflow", "'trim'", "drop-oldest or error"}},
        {{"serve", "model", "--context-overflow", "trim"}, {"--context-overflow", "'trim'"}},
        {{"bench", "chat", "model", "--temperature", "0.7"}, {"--temperature must be 0"}},
        {{"bench", "planner", "--layers", "4294967297"}, {"--layers", "4294967297", "out of range"}},
        {{"convert", "a", "b", "--shards", "4294967300"}, {"--shards", "4294967300", "out of range"}},
        {{"convert", "a", "b", "--level", "2147483653"}, {"--level", "2147483653", "out of range"}},
        {{"make-model", "--family", "mixtral", "--preset", "tiny", "--layers", "4294967297", "m"}, {"--layers", "4294967297"}},
        {{"make-model", "--family", "mixtral", "--preset", "tiny", "--sigma", "inf", "m"}, {"--sigma", "'inf'"}},
        {{"generate", "model", "--prompt", "x", "--budget", "150%"}, {"--budget", "'150%'"}},
        {{"generate", "model", "--prompt", "x", "--budget", "-1"}, {"--budget", "'-1'"}},
        {{"generate", "model", "--prompt", "x", "--budget", "10XB"}, {"--budget", "'10XB'"}},
        {{"generate", "model", "--prompt", "x", "--budget", "0%"}, {"--budget", "'0%'"}},
        {{"generate", "model", "--prompt", "x", "--temperature", "nan"}, {"--temperature", "'nan'"}},
        {{"generate", "model", "--prompt", "x", "--top-p", "0.5x"}, {"--top-p", "'0.5x'"}},
        {{"generate", "model", "--prompt", "x", "--max-tokens", "4294967297"}, {"--max-tokens", "4294967297"}},
        {{"generate", "model", "--prompt", "x", "--seed", "-1"}, {"--seed", "-1"}},
        {{"generate", "model", "--prompt", "x", "--max-tokens", "3", "--max-tokens", "4"}, {"--max-tokens is given more than once"}},
        {{"generate", "model", "--prompt", "x", "--budget", "50%", "--trace-prompt", "4294967296"}, {"--trace-prompt"}},
        {{"chat", "model", "--workers", "2"}, {"--budget"}},
        {{"chat", "model", "--budget", "50%", "--replay-trace", "nope.tsv"}, {"--replay-trace", "nope.tsv"}},
        {{"chat", "model", "--budget", "50%", "--offload", "full", "--checkpoint", "nope"}, {"--checkpoint", "nope"}},
        {{"profile", "store", "--samples", "0"}, {"--samples", "out of range"}},
        {{"plan", "store"}, {"--budgets is required"}},
        {{"plan", "store", "--budgets", "10,0"}, {"--budgets"}},
        {{"train-demo", "--corpus", "c", "--out", "o", "--threads", "4294967297"}, {"--threads", "4294967297"}},
        {{"info", "extra"}, {"'extra' is one too many"}},
    };
    for (const auto& [args, expected] : refused) {
      const Run r = runIn(args);
      const QString what = args.join(' ');
      QVERIFY2(r.exitCode == 1, qPrintable(what + ": exit " + QString::number(r.exitCode) + "\n" + r.err));
      for (const QString& s : expected) QVERIFY2(r.err.contains(s), qPrintable(what + " lacks '" + s + "':\n" + r.err));
    }
    const auto left = std::distance(std::filesystem::directory_iterator(cwd.path()), std::filesystem::directory_iterator());
    QVERIFY2(left == 0, "a refused command line wrote files into the working directory");
  }

  // `--budget N%` means N % of the model's expert bytes (BF16), the whole budget, in generate and
  // in both benchmarks: the same bytes for the same N (the CLI used to add the working set).
  void budgetPercentIsTheSameBytesInGenerateAndBench() {
    TempDir tmp;
    Run r = runCli({"make-model", "--family", "qwen2_moe", "--preset", "small", "--layers", "2", path(tmp / "hf")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    r = runCli({"convert", path(tmp / "hf"), path(tmp / "store")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    r = runCli({"generate", path(tmp / "store"), "--raw", "--prompt", "Hi", "--max-tokens", "2", "--budget", "70%"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const auto m = QRegularExpression("--budget 70%: (\\d+) bytes of (\\d+) bytes of experts").match(r.err);
    QVERIFY2(m.hasMatch(), qPrintable(r.err));
    const qint64 generateBytes = m.captured(1).toLongLong(), expertBytes = m.captured(2).toLongLong();
    QCOMPARE(generateBytes, static_cast<qint64>(0.7 * static_cast<double>(expertBytes)));

    {  // a one-prompt trace for bench runtime (it replays one)
      QFile config(path(tmp / "hf" / "config.json"));
      QVERIFY(config.open(QIODevice::ReadOnly));
      const QJsonObject c = QJsonDocument::fromJson(config.readAll()).object();
      const int experts = c["num_experts"].toInt(), k = c["num_experts_per_tok"].toInt();
      std::ofstream trace(tmp / "trace.tsv");
      trace << "# expert-activation trace: model=Synthetic top_k=" << k << " experts=" << experts << " layers=2; test\n";
      trace << "prompt\tlayer";
      for (int e = 0; e < experts; ++e) trace << "\te" << e;
      trace << "\n";
      for (int l = 0; l < 2; ++l) {
        trace << 0 << "\t" << l;
        for (int e = 0; e < experts; ++e) trace << "\t" << (e < k ? 10 : 1);
        trace << "\n";
      }
    }
    const QStringList small = {"--tokens", "2", "--warmup", "1", "--prompt-tokens", "2", "--no-warm-up"};
    r = runCli(QStringList{"bench", "runtime", "--hf", path(tmp / "hf"), "--store", path(tmp / "store"), "--budgets", "70",
                           "--systems", "zipmoe", "--trace-file", path(tmp / "trace.tsv"), "--json", path(tmp / "runtime.json")} +
               small);
    QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
    const QJsonArray runtime = readJsonFile(tmp / "runtime.json")["results"].toArray();
    QCOMPARE(runtime.size(), 1);
    QCOMPARE(runtime[0].toObject()["budget_bytes"].toInteger(), generateBytes);

    r = runCli(QStringList{"bench", "suite", "budget", "--hf", path(tmp / "hf"), "--store", path(tmp / "store"), "--label", "b",
                           "--out", path(tmp / "suite"), "--budgets", "70%", "--systems", "zipmoe", "--no-plot", "--no-prime"} +
               small);
    QVERIFY2(r.exitCode == 0, qPrintable(r.err + r.out));
    const QJsonArray suite = readJsonFile(tmp / "suite" / "budget-b.json")["results"].toArray();
    QCOMPARE(suite.size(), 1);
    QCOMPARE(suite[0].toObject()["budget_bytes"].toInteger(), generateBytes);

    // Below the runtime's minimum: refused, with the minimum in bytes and as a share of the experts.
    r = runCli({"generate", path(tmp / "store"), "--raw", "--prompt", "Hi", "--budget", "5%"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("--budget 5%") && r.err.contains("below the minimum") && r.err.contains("% of its"), qPrintable(r.err));
  }

  // zipmoe serve --budget whose forward activations leave the experts less than the runtime's
  // minimum (the demo model at 60 %, 256-token steps): refused at start, naming the budget, the
  // activations and --step-tokens, not a budget the user never gave.
  void aServingBudgetTooSmallForItsStepsNamesStepTokens() {
    TempDir tmp;
    Run r = runCli({"convert", QStringLiteral(ZIPMOE_SOURCE_DIR "/resources/demo-model"), path(tmp / "store")});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    const QStringList serve = {"serve", path(tmp / "store"), "--port", "0", "--budget", "60%", "--no-history"};
    r = runCli(serve);
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("activations") && r.err.contains("--step-tokens") && r.err.contains("15099494"),
             qPrintable(r.err));
  }

#ifdef ZIPMOE_CHAT_APP_PATH
  // zipmoe-chat --model DIR with a DIR that is missing or not a model says so and exits non-zero,
  // before any window, instead of opening the demo model; other bad options too.
  void chatAppRefusesABadModelDirectory() {
    TempDir tmp;
    std::filesystem::create_directories(tmp / "empty");
    std::filesystem::create_directories(tmp / "gpt2");
    {
      std::ofstream config(tmp / "gpt2" / "config.json");
      config << "{\"model_type\": \"gpt2\"}";
      std::ofstream weights(tmp / "gpt2" / "model.safetensors");
    }
    const QStringList isolated = {"--database", path(tmp / "chats.sqlite"), "--data-dir", path(tmp / "data")};
    const QList<QPair<QStringList, QStringList>> refused = {
        {{"--model", "/nonexistent/model"}, {"--model /nonexistent/model: not found"}},
        {{"--model", path(tmp / "empty")}, {"empty", "not an HF MoE directory", "nor a ZipMoE store"}},
        {{"--model", path(tmp / "gpt2")}, {"model_type 'gpt2' is not a supported family"}},
        {{"--model", path(tmp / "gpt2" / "config.json")}, {"not a directory"}},
        {{"--language", "fr"}, {"--language 'fr'"}},
        {{"--quit-after-reply"}, {"--quit-after-reply needs --send"}},
        {{"--context-overflow", "trim"}, {"--context-overflow 'trim'", "drop-oldest and error"}},
        {{"stray"}, {"unexpected argument 'stray'"}},
    };
    for (const auto& [args, expected] : refused) {
      QProcess app;
      app.start(ZIPMOE_CHAT_APP_PATH, args + isolated);
      QVERIFY(app.waitForFinished(120000));
      const QString err = QString::fromUtf8(app.readAllStandardError());
      QVERIFY2(app.exitStatus() == QProcess::NormalExit && app.exitCode() != 0, qPrintable(args.join(' ') + ": " + err));
      QVERIFY2(!err.contains("model ready"), qPrintable(err));
      for (const QString& s : expected) QVERIFY2(err.contains(s), qPrintable(args.join(' ') + " lacks '" + s + "':\n" + err));
    }
    QVERIFY2(!std::filesystem::exists(tmp / "data") && !std::filesystem::exists(tmp / "chats.sqlite"),
             "refused before anything was created");
  }
#endif
};

QTEST_APPLESS_MAIN(TestCli)
#include "test_cli.moc"
