// The command-line face of the cluster: `zipmoe generate` and `zipmoe chat` with --nodes (two
// `zipmoe node` processes holding half the experts each) print exactly what they print alone, plus
// the cluster's summary; `zipmoe node` and the --nodes options refuse bad input with messages that
// name it.
#include <QProcess>
#include <QtTest>

#include <fstream>

#include "dist_fixture.h"
#include "node_process.h"
#include "zipmoe/plan/expert_placement.h"

using namespace zipmoe;
using namespace zipmoe::testing;

namespace {

struct Result {
  int exitCode = -1;
  QString out, err;
};

Result runCli(const QStringList& arguments, bool withToken = true, const QByteArray& input = {}) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.remove("ZIPMOE_NODE_TOKEN");
  if (withToken) env.insert("ZIPMOE_NODE_TOKEN", QString::fromStdString(kTestToken));
  p.setProcessEnvironment(env);
  p.start(ZIPMOE_CLI_PATH, arguments);
  p.write(input);
  p.closeWriteChannel();
  if (!p.waitForFinished(600000)) {  // the condition is "it ended"; the bound is only a way out
    p.kill();
    p.waitForFinished();
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace

class TestNodeCommand : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;
  std::filesystem::path store_, placement_;
  const QString demo_ = QString(ZIPMOE_SOURCE_DIR) + "/resources/demo-model";

 private Q_SLOTS:
  void initTestCase() {
    store_ = demoStore(dir_);
    ExpertPlacement p;
    p.expertsPerLayer.assign(4, 8);
    p.held = {expertsWhere(4, 8, 2, {0}), expertsWhere(4, 8, 2, {1})};
    placement_ = dir_ / "placement.json";
    std::ofstream(placement_) << placementToJson(p, {"even", "odd"}).dump();
  }

  void generateAndChatThroughNodesPrintTheSame() {
    NodeProcess even(store_, placement_, "even"), odd(store_, placement_, "odd");
    const QString nodes = QString::fromStdString(even.address() + "," + odd.address());
    const QStringList generate = {"generate", demo_, "--prompt", "To be, or not to be", "--max-tokens", "16", "--temperature", "0"};
    const Result alone = runCli(generate);
    const Result shared = runCli(generate + QStringList{"--nodes", nodes});
    QCOMPARE(alone.exitCode, 0);
    QCOMPARE(shared.exitCode, 0);
    QVERIFY(!alone.out.trimmed().isEmpty());
    QCOMPARE(shared.out, alone.out);
    QVERIFY2(shared.err.contains("[distributed: 0.0% of expert activations computed here") &&
                 shared.err.contains("0 fallbacks here") && shared.err.contains("0 failed"),
             qPrintable(shared.err));
    // A store as the model: this machine then keeps in memory only the experts it computes.
    const QStringList fromStore = {"generate", QString::fromStdString(store_.string()), "--prompt", "To be, or not to be",
                                   "--max-tokens", "16", "--temperature", "0"};
    const Result storeAlone = runCli(fromStore), storeShared = runCli(fromStore + QStringList{"--nodes", nodes});
    QCOMPARE(storeShared.exitCode, 0);
    QCOMPARE(storeShared.out, storeAlone.out);
    QCOMPARE(storeShared.out, alone.out);
    const QStringList chat = {"chat", demo_, "--max-tokens", "12", "--temperature", "0"};
    const QByteArray turns = "Good morning\nWhat news?\n/exit\n";
    const Result chatAlone = runCli(chat, true, turns), chatShared = runCli(chat + QStringList{"--nodes", nodes}, true, turns);
    QCOMPARE(chatShared.exitCode, 0);
    QCOMPARE(chatShared.out, chatAlone.out);
    QVERIFY(chatShared.err.contains("[distributed:"));
  }

  void badInputIsNamed() {
    const QString store = QString::fromStdString(store_.string());
    Result r = runCli({"node", store, "--listen", "0.0.0.0:7001"});
    QVERIFY(r.exitCode != 0);
    QVERIFY2(r.err.contains("0.0.0.0:7001") && r.err.contains("wildcard"), qPrintable(r.err));
    r = runCli({"node", store, "--listen", "127.0.0.1:0"}, false);
    QVERIFY(r.exitCode != 0);
    QVERIFY2(r.err.contains("ZIPMOE_NODE_TOKEN"), qPrintable(r.err));
    r = runCli({"node", store, "--listen", "127.0.0.1:0", "--experts-of", QString::fromStdString(placement_.string()),
                "--member", "nobody"});
    QVERIFY(r.exitCode != 0);
    QVERIFY2(r.err.contains("no member 'nobody'") && r.err.contains("even, odd"), qPrintable(r.err));
    r = runCli({"node", demo_, "--listen", "127.0.0.1:0"});
    QVERIFY(r.exitCode != 0);
    QVERIFY2(r.err.contains("not a ZipMoE store"), qPrintable(r.err));
    r = runCli({"generate", demo_, "--prompt", "x", "--node-deadline", "100"});
    QVERIFY(r.exitCode != 0);
    QVERIFY2(r.err.contains("--node-deadline") && r.err.contains("--nodes"), qPrintable(r.err));
    r = runCli({"generate", demo_, "--prompt", "x", "--nodes", "example.com:7001"});
    QVERIFY(r.exitCode != 0);
    QVERIFY2(r.err.contains("example.com:7001"), qPrintable(r.err));
    r = runCli({"generate", demo_, "--prompt", "x", "--nodes", "127.0.0.1:7001", "--node-failure", "retry"});
    QVERIFY(r.exitCode != 0);
    QVERIFY2(r.err.contains("--node-failure") && r.err.contains("retry"), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestNodeCommand)
#include "test_node_command.moc"
