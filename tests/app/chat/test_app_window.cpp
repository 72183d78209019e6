// The whole app window with the real engine on the demo model: screenshots of every page with real
// content at 1280×800 and 900×600 (a finished chat, the budget advisor with measured replies, the
// schedule with a layer predicted next to measured, the settings, a branch, the model manager), and the memory budget moved during a streaming reply on two pages. Pictures go
// to $ZIPMOE_ARTIFACTS_DIR (default: the build's tests/artifacts). The GUI thread's stalls are
// measured by zipmoe-chat-bench, not here.
#include <QQmlApplicationEngine>
#include <QQmlComponent>
#include <QQuickItem>
#include <QQuickTextDocument>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTextBlock>
#include <QTextDocument>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTimer>
#include <QtQml/qqmlextensionplugin.h>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "test_support.h"
#include "budget_advisor_model.h"
#include "chat_controller.h"
#include "chat_database.h"
#include "runtime_monitor.h"
#include "schedule_inspector.h"
#include "timeline_model.h"

Q_IMPORT_QML_PLUGIN(ZipMoE_ChatPlugin)

using namespace zipmoe::app;

namespace {

QString artifactsDir() { return zipmoe::testing::artifactsDir(QStringLiteral(ZIPMOE_DEFAULT_ARTIFACTS_DIR)); }

}  // namespace

class TestAppWindow : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QQuickStyle::setStyle(QStringLiteral("Fusion"));
    QVERIFY(dir_.isValid());
    ControllerOptions o;
    o.databasePath = dir_.filePath(QStringLiteral("chat.sqlite"));
    o.storesDir = dir_.filePath(QStringLiteral("stores"));
    o.demoModelDir = QStringLiteral(ZIPMOE_DEMO_MODEL_DIR);
    controller_ = std::make_unique<ChatController>(o);
    ChatController::setInstance(controller_.get());
    engine_ = std::make_unique<QQmlApplicationEngine>();
    controller_->setQmlEngine(engine_.get());
    engine_->addImportPath(QStringLiteral("qrc:/"));
    engine_->load(QUrl(QStringLiteral("qrc:/ZipMoE/Chat/Main.qml")));
    QVERIFY(!engine_->rootObjects().isEmpty());
    window_ = qobject_cast<QQuickWindow*>(engine_->rootObjects().first());
    QVERIFY(window_);
    window_->resize(1180, 780);
    QVERIFY(QTest::qWaitForWindowExposed(window_));
    controller_->openModel();
    QTRY_VERIFY_WITH_TIMEOUT(controller_->modelState() != QStringLiteral("loading"), 180000);
    QCOMPARE(controller_->modelState(), QStringLiteral("ready"));
  }

  void cleanupTestCase() {
    engine_.reset();
    controller_.reset();
  }

  // Every page with real content, at 1280×800 and at 900×600 (`NAME.png` and `NAME-900x600.png`):
  // the chat with its replies, the budget advisor with replies measured at three budgets, the
  // schedule with the newest layer predicted next to measured, the settings, a branch of the chat,
  // the model manager; and the chat in Simplified Chinese.
  void screenshotsOfEveryPage() {
    controller_->newChat();
    controller_->setSamplingValue("maxTokens", 96);
    controller_->setSamplingValue("seed", 11);
    QSignalSpy finished(controller_.get(), &ChatController::replyFinished);
    RuntimeMonitor* rt = controller_->runtime();
    rt->refresh();
    // Replies at three budgets: the advisor's measured points.
    const char* prompts[] = {"ROMEO:\nBut soft, what light through yonder window breaks?", "Speak again, bright angel.",
                             "What say you?"};
    const double shares[] = {0.8, 0.5, 1.0 / 3};
    for (int i = 0; i < 3; ++i) {
      QSignalSpy replanned(rt, &RuntimeMonitor::replanned);
      QVERIFY(rt->setBudget(rt->minimumBudget() + rt->expertBytes() * shares[i]));
      QTRY_VERIFY_WITH_TIMEOUT(replanned.count() > 0, 60000);
      QVERIFY(controller_->send(QString::fromUtf8(prompts[i])));
      QVERIFY(finished.wait(120000));
    }
    rt->refresh();
    BudgetAdvisorModel* advisor = controller_->advisor();
    QTRY_VERIFY_WITH_TIMEOUT(advisor->measured().size() >= 3 && !advisor->busy() && advisor->curve().size() > 2, 120000);
    QVERIFY(controller_->timeline()->eventCount() > 0);
    QVERIFY(controller_->inspector()->inspectLatest());
    const qint64 chat = controller_->currentChatId();

    for (const QSize size : {QSize(1280, 800), QSize(900, 600)}) {
      const QString suffix = size.width() == 1280 ? QString() : QStringLiteral("-900x600");
      window_->resize(size);
      QTRY_COMPARE_WITH_TIMEOUT(window_->size(), size, 10000);
      controller_->selectChat(chat);
      showPage(0);
      save(QStringLiteral("chat%1.png").arg(suffix));
      showPage(1);
      save(QStringLiteral("budget%1.png").arg(suffix));
      showPage(2);
      QMetaObject::invokeMethod(findPage("schedulePage"), "zoomToFit");
      QTest::qWait(300);
      save(QStringLiteral("schedule%1.png").arg(suffix));
      // Nothing on the schedule's toolbar or the inspector's button row is cut off by the window.
      for (const char* name : {"eventCountLabel", "exportTraceButton", "followSwitch"}) {
        auto* item = window_->findChild<QQuickItem*>(QString::fromLatin1(name));
        QVERIFY2(item && item->isVisible(), name);
        const QPointF corner = item->mapToScene(QPointF(item->width(), 0));
        QVERIFY2(corner.x() <= size.width(), qPrintable(QStringLiteral("%1 ends at x=%2 in a %3 px window")
                                                           .arg(QString::fromLatin1(name)).arg(corner.x()).arg(size.width())));
      }
      showPage(3);
      save(QStringLiteral("settings%1.png").arg(suffix));
      // A branch from the first reply, continued.
      showPage(0);
      QVERIFY(controller_->branchFrom(1));
      controller_->setSamplingValue("maxTokens", 48);
      QVERIFY(controller_->send(QStringLiteral("JULIET:\nO Romeo, Romeo!")));
      QVERIFY(finished.wait(120000));
      showPage(0);
      save(QStringLiteral("branch%1.png").arg(suffix));
      QObject* manager = window_->findChild<QObject*>(QStringLiteral("modelManager"));
      QVERIFY(manager);
      QMetaObject::invokeMethod(manager, "open");
      QTest::qWait(500);
      save(QStringLiteral("models%1.png").arg(suffix));
      QMetaObject::invokeMethod(manager, "close");
      QTest::qWait(300);
    }

    // Dark mode (what main() picks when the system prefers dark): the four pages at both sizes
    // (`NAME-dark.png`, `NAME-dark-900x600.png`).
    controller_->setDarkMode(true);
    QVERIFY(controller_->darkMode());
    controller_->selectChat(chat);
    for (const QSize size : {QSize(1280, 800), QSize(900, 600)}) {
      const QString suffix = size.width() == 1280 ? QString() : QStringLiteral("-900x600");
      window_->resize(size);
      QTRY_COMPARE_WITH_TIMEOUT(window_->size(), size, 10000);
      for (const auto& [page, name] : {std::pair{0, "chat"}, std::pair{1, "budget"}, std::pair{2, "schedule"}, std::pair{3, "settings"}}) {
        showPage(page);
        if (page == 2) {
          QMetaObject::invokeMethod(findPage("schedulePage"), "zoomToFit");
          QTest::qWait(300);
        }
        save(QStringLiteral("%1-dark%2.png").arg(QString::fromLatin1(name), suffix));
      }
    }
    window_->resize(1280, 800);
    controller_->setDarkMode(false);

    // The same chat in Simplified Chinese, switched at run time.
    controller_->selectChat(chat);
    controller_->setLanguage(QStringLiteral("zh_CN"));
    QCOMPARE(controller_->lastError(), QString());
    showPage(0);
    save(QStringLiteral("chat-zh_CN.png"));
    showPage(1);
    save(QStringLiteral("budget-zh_CN.png"));
    controller_->setLanguage(QStringLiteral("en"));
    showPage(0);
  }

  // The budget moved every 25 ms (as dragging the slider does) while a reply streams, on the budget
  // page and on the chat page of the real window: every move is taken, the runtime replans, the
  // reply completes, and the budget ends where the last move put it. How long the GUI thread
  // stalls meanwhile is a measurement: zipmoe-chat-bench budget-moves (docs/APP.md).
  void budgetMovesWhileAReplyStreamsOnTheBudgetAndChatPages() {
    for (int page : {1, 0}) {
      showPage(page);
      RuntimeMonitor* rt = controller_->runtime();
      rt->refresh();
      const double minimum = rt->minimumBudget(), experts = rt->expertBytes();
      controller_->setSamplingValue("maxTokens", 200);
      controller_->setSamplingValue("seed", 5);
      QSignalSpy replanned(rt, &RuntimeMonitor::replanned);
      QTimer mover;
      int step = 0, moves = 0;
      double last = 0;
      connect(&mover, &QTimer::timeout, this, [&] {
        const double fraction = 0.05 + 0.9 * std::abs(std::sin(0.15 * step++));
        if (rt->setBudget(minimum + fraction * experts)) {
          ++moves;
          last = minimum + fraction * experts;
        }
      });
      QSignalSpy finished(controller_.get(), &ChatController::replyFinished);
      // Held after its first token until a few moves are in: the moves land while it streams.
      controller_->setGenerationPaused(true);
      QVERIFY(controller_->send(QStringLiteral("KING RICHARD:\nNow is the winter of our discontent")));
      mover.start(25);
      QTRY_VERIFY_WITH_TIMEOUT(moves >= 3, 60000);
      controller_->setGenerationPaused(false);
      QVERIFY(finished.wait(180000));
      mover.stop();
      QCOMPARE(rt->error(), QString());
      QVERIFY(moves >= 3);
      QCOMPARE(controller_->messages()->rows().back().state, QStringLiteral("complete"));
      QTRY_VERIFY_WITH_TIMEOUT(replanned.count() > 0 && static_cast<quint64>(rt->budgetBytes()) ==
                                                            static_cast<quint64>(last),
                               60000);
    }
  }

  // A reply is untrusted: its image links and HTML must not make the app fetch anything. The reply
  // below points at a local HTTP server that answers 404 and counts connections: shown in the
  // chat, the reply's text has no image in it (the image is a link), and an Image the engine is
  // asked to load from that server fails without ever connecting.
  void modelOutputNeverFetchesARemoteResource() {
    QTcpServer server;
    QVERIFY(server.listen(QHostAddress::LocalHost));
    int connections = 0;
    connect(&server, &QTcpServer::newConnection, this, [&] {
      while (QTcpSocket* socket = server.nextPendingConnection()) {
        ++connections;
        socket->write("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        socket->disconnectFromHost();
      }
    });
    const QString base = QStringLiteral("http://127.0.0.1:%1/").arg(server.serverPort());
    ChatDatabase* db = controller_->database();
    const ChatRecord chat = db->createChat(QStringLiteral("Images"), {}, {}, QStringLiteral("test"));
    db->addMessage(chat.id, QStringLiteral("user"), QStringLiteral("Show me a picture"), MessageState::Complete);
    db->addMessage(chat.id, QStringLiteral("assistant"),
                   QStringLiteral("Here: ![the logo](%1logo.png) and <img src=\"%1raw.png\"> and [a link](%1page)").arg(base),
                   MessageState::Complete);
    controller_->selectChat(chat.id);
    showPage(0);
    QVERIFY(!window_->grabWindow().isNull());
    QQuickItem* text = nullptr;
    std::function<void(QQuickItem*)> visit = [&](QQuickItem* item) {  // the visual tree: delegates too
      if (item->objectName() == QStringLiteral("messageText") && item->isVisible() &&
          item->property("text").toString().contains(QStringLiteral("the logo")))
        text = item;
      for (QQuickItem* child : item->childItems()) visit(child);
    };
    visit(window_->contentItem());
    QVERIFY2(text, "the reply is not on the chat page");
    auto* doc = text->property("textDocument").value<QQuickTextDocument*>();
    QVERIFY(doc && doc->textDocument());
    int images = 0;
    QStringList anchors;
    for (QTextBlock b = doc->textDocument()->begin(); b.isValid(); b = b.next())
      for (auto it = b.begin(); !it.atEnd(); ++it) {
        const QTextCharFormat f = it.fragment().charFormat();
        if (f.isImageFormat()) ++images;
        if (f.isAnchor()) anchors << f.anchorHref();
      }
    QCOMPARE(images, 0);
    QVERIFY2(anchors.contains(base + QStringLiteral("logo.png")), qPrintable(anchors.join(QLatin1Char(' '))));
    QVERIFY(doc->textDocument()->toPlainText().contains(QStringLiteral("<img")));  // shown as text

    // The engine itself: an Image from the server ends in an error without a connection.
    QQmlComponent component(engine_.get());
    component.setData(QStringLiteral("import QtQuick\nImage { source: \"%1direct.png\" }").arg(base).toUtf8(), QUrl());
    std::unique_ptr<QObject> image(component.create());
    QVERIFY2(image, qPrintable(component.errorString()));
    QTRY_VERIFY_WITH_TIMEOUT(image->property("status").toInt() == 3 /* Image.Error */, 60000);
    QCoreApplication::processEvents();
    QCOMPARE(connections, 0);
    QVERIFY(!server.hasPendingConnections());
  }

 private:
  QObject* findPage(const char* name) { return window_->findChild<QObject*>(QString::fromLatin1(name)); }
  void showPage(int index) {
    window_->setProperty("currentPage", index);
    QTest::qWait(400);  // a few frames and one runtime monitor tick
  }
  void save(const QString& name) {
    const QImage image = window_->grabWindow();
    QVERIFY(!image.isNull());
    const QString path = artifactsDir() + QLatin1Char('/') + name;
    QVERIFY2(image.save(path), qPrintable(path));
    qInfo().noquote() << "saved" << path;
  }

  QTemporaryDir dir_;
  std::unique_ptr<ChatController> controller_;
  std::unique_ptr<QQmlApplicationEngine> engine_;
  QQuickWindow* window_ = nullptr;
};

QTEST_MAIN(TestAppWindow)
#include "test_app_window.moc"
