// The `zipmoe` program as a user runs it: make-model → convert → inspect → verify → bench codec,
// and the exit status and message of bad invocations.
#include <QProcess>
#include <QtTest>

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

class TestCli : public QObject {
  Q_OBJECT

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
