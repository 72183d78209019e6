// The bounded load test (label `load`): `zipmoe serve` on a ZipMoE store of the demo model under a
// memory budget, coserve scheduling and usage-probability eviction, with 32 concurrent clients
// (tests/app/serve/load_client.py, Python's http.client) sending requests for 60 seconds on
// loopback. It stops by itself. Checks: no failed request; the server's accounting (experts held
// + KV capacity + activations after every forward step) never exceeded the budget; nothing left
// running; a clean SIGTERM. ZIPMOE_LOAD_SECONDS shortens or lengthens the run (default 60).
#include <QProcess>
#include <QStandardPaths>
#include <QtTest>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_support.h"
#include "zipmoe/format/converter.h"

using namespace zipmoe;
using nlohmann::json;

class TestServeLoad : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void thirtyTwoClientsForAMinute() {
    if (QStandardPaths::findExecutable("python3").isEmpty()) QSKIP("python3 is not installed (scripts/deps.sh)");
    if (QStandardPaths::findExecutable("curl").isEmpty()) QSKIP("curl is not installed (scripts/deps.sh)");
    const std::filesystem::path demo = std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model";
    if (!std::filesystem::exists(demo / "config.json")) QSKIP("resources/demo-model is absent");
    testing::TempDir dir;
    const auto store = dir / "store";
    convertCheckpoint(demo, store, ConvertOptions{});

    QProcess server;
    server.start(ZIPMOE_CLI_PATH, {"serve", QString::fromStdString(store.string()), "--port", "0", "--api-key", "k",
                                   "--model-id", "demo", "--budget", "100%", "--eviction", "usage", "--schedule",
                                   "coserve", "--max-batch", "8", "--step-tokens", "64", "--prefill-chunk", "32"});
    QVERIFY(server.waitForStarted(-1));
    QByteArray out;
    while (!out.contains('\n')) {
      QVERIFY2(server.state() == QProcess::Running, server.readAllStandardError().constData());
      server.waitForReadyRead(1000);
      out += server.readAllStandardOutput();
    }
    const qsizetype colon = out.lastIndexOf(':', out.indexOf(" (model"));
    const QString port = QString::fromUtf8(out.mid(colon + 1, out.indexOf(' ', colon) - colon - 1));
    QVERIFY2(port.toInt() > 0, out.constData());

    const QString seconds = qEnvironmentVariable("ZIPMOE_LOAD_SECONDS", "60");
    QProcess load;
    load.start("python3", {QString(ZIPMOE_SOURCE_DIR) + "/tests/app/serve/load_client.py", port, "k", "demo", "32", seconds});
    QVERIFY(load.waitForFinished(-1));
    const json summary = json::parse(load.readAllStandardOutput().toStdString(), nullptr, false);
    QVERIFY2(summary.is_object(), load.readAllStandardError().constData());
    qInfo("%s", summary.dump().c_str());
    QVERIFY(summary["requests"].get<int>() > 32);
    QVERIFY2(summary["failures"].get<int>() == 0, summary.dump().c_str());

    QProcess curl;
    curl.start("curl", {"-sS", "http://127.0.0.1:" + port + "/health"});
    QVERIFY(curl.waitForFinished(-1));
    const json health = json::parse(curl.readAllStandardOutput().toStdString(), nullptr, false);
    qInfo("%s", health.dump().c_str());
    QCOMPARE(health["memory"]["over_budget_steps"].get<uint64_t>(), uint64_t{0});
    QVERIFY(health["memory"]["budget_bytes"].get<uint64_t>() > 0);
    QVERIFY(health["memory"]["peak_used_bytes"].get<uint64_t>() <= health["memory"]["budget_bytes"].get<uint64_t>());
    QCOMPARE(health["running"].get<int>(), 0);
    QCOMPARE(health["failed"].get<int>(), 0);

    server.terminate();
    QVERIFY(server.waitForFinished(-1));
    QCOMPARE(server.exitCode(), 0);
  }
};

QTEST_GUILESS_MAIN(TestServeLoad)
#include "test_serve_load.moc"
