// The app's "Local server" switch (App.localServer) with the real controller, worker and engine on
// the demo model: it serves the loaded model on loopback with a generated key (curl gets 401
// without it and a reply with it), the app's own chat goes on meanwhile (through the same
// scheduler), the server's requests reach the schedule chart like the app's own (the runtime's
// trace), they run within the app's budget (experts + KV + activations, /health's memory), and
// switching off stops it and gives the experts the whole budget back.
#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "chat_controller.h"
#include "local_server_controller.h"
#include "message_model.h"
#include "runtime_monitor.h"
#include "timeline_model.h"

using namespace zipmoe::app;

namespace {

constexpr int kTimeoutMs = 180000;

struct Reply {
  int code = 0;
  QByteArray body;
};

Reply curl(const QStringList& args) {
  QProcess p;
  p.start("curl", QStringList{"-sS", "--max-time", "600", "-w", "\n%{http_code}"} + args);
  if (!p.waitForFinished(-1)) return {};
  const QByteArray out = p.readAllStandardOutput();
  const qsizetype nl = out.lastIndexOf('\n');
  return {out.mid(nl + 1).toInt(), out.left(nl)};
}

}  // namespace

class TestLocalServer : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void servesTheLoadedModelWhileTheAppChats() {
    if (QStandardPaths::findExecutable("curl").isEmpty()) QSKIP("curl is not installed (scripts/deps.sh)");
    QTemporaryDir dir;
    ControllerOptions o;
    o.databasePath = dir.filePath("chat.sqlite");
    o.storesDir = dir.filePath("stores");
    o.demoModelDir = QStringLiteral(ZIPMOE_DEMO_MODEL_DIR);
    ChatController c(o);
    LocalServerController& server = *c.localServer();

    // Without a model there is nothing to serve: the error says so.
    QSignalSpy changed(&server, &LocalServerController::changed);
    server.setEnabled(true);
    QTRY_VERIFY_WITH_TIMEOUT(!server.busy(), kTimeoutMs);
    QVERIFY(!server.running());
    QVERIFY(!server.error().isEmpty());

    c.openModel();
    QTRY_VERIFY_WITH_TIMEOUT(c.modelState() != "loading", kTimeoutMs);
    QCOMPARE(c.modelState(), QStringLiteral("ready"));
    c.runtime()->refresh();
    const double appBudget = c.runtime()->budgetBytes();
    QVERIFY(appBudget > 0);
    server.setEnabled(true);
    QTRY_VERIFY_WITH_TIMEOUT(!server.busy(), kTimeoutMs);
    QVERIFY2(server.running(), qPrintable(server.error()));
    QVERIFY(server.url().startsWith("http://127.0.0.1:"));
    QVERIFY(server.apiKey().size() >= 32);
    // The server runs within the app's budget: it is the whole memory of serving (experts, KV
    // caches, activations), and the budget page still shows the user's figure.
    const QString health = server.url().chopped(3) + "/health";
    const auto memory = [&] { return nlohmann::json::parse(curl({health}).body.toStdString())["memory"]; };
    QCOMPARE(memory()["budget_bytes"].get<double>(), appBudget);
    c.runtime()->refresh();
    QCOMPARE(c.runtime()->budgetBytes(), appBudget);

    QCOMPARE(curl({server.url() + "/models"}).code, 401);
    c.runtime()->refresh();
    c.timeline()->clear();
    const nlohmann::json body = {{"model", c.modelInfo().value("name").toString().toStdString()},
                                 {"messages", nlohmann::json::array({{{"role", "user"}, {"content", "ROMEO: speak."}}})},
                                 {"max_tokens", 12},
                                 {"temperature", 0}};
    const Reply r = curl({"-H", "Authorization: Bearer " + server.apiKey(), "-H", "Content-Type: application/json",
                          "--data-binary", QString::fromStdString(body.dump()), server.url() + "/chat/completions"});
    QCOMPARE(r.code, 200);
    const auto j = nlohmann::json::parse(r.body.toStdString());
    QVERIFY(j["usage"]["completion_tokens"].get<int>() > 0);
    const auto used = memory();
    QVERIFY(used["peak_used_bytes"].get<double>() > 0);
    QVERIFY(used["peak_used_bytes"].get<double>() <= appBudget);
    QCOMPARE(used["over_budget_steps"].get<int>(), 0);
    // The server's request ran on the app's expert runtime: the schedule chart shows it.
    c.runtime()->refresh();
    QVERIFY(c.timeline()->eventCount() > 0);

    // The app's own chat goes on while the server runs.
    QSignalSpy finished(&c, &ChatController::replyFinished);
    QVERIFY(c.send("JULIET: what news?"));
    QVERIFY(finished.wait(kTimeoutMs));
    QVERIFY(!c.messages()->rows().back().content.isEmpty());

    server.setEnabled(false);
    QTRY_VERIFY_WITH_TIMEOUT(!server.busy(), kTimeoutMs);
    QVERIFY(!server.running());
    QVERIFY(server.url().isEmpty());
    c.runtime()->refresh();
    QCOMPARE(c.runtime()->budgetBytes(), appBudget);  // the experts have the whole of it again
    // And the app still chats on its own.
    QVERIFY(c.send("And of my lady?"));
    QVERIFY(finished.wait(kTimeoutMs));
  }
};

QTEST_MAIN(TestLocalServer)
#include "test_local_server.moc"
