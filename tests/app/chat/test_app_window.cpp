// The whole app window with the real engine on the demo model: screenshots of every page with real
// content (a finished chat, the budget page after a replan, the schedule of a real generation,
// the settings), and the GUI thread's longest stall while the memory budget moves during a
// streaming reply. Pictures and figures go to $ZIPMOE_ARTIFACTS_DIR (default: the build's
// tests/artifacts); a timing is printed and saved, never asserted.
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QQmlApplicationEngine>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTimer>
#include <QtQml/qqmlextensionplugin.h>
#include <QtTest>

#include <algorithm>
#include <memory>
#include <vector>

#include "test_support.h"
#include "chat_controller.h"
#include "runtime_monitor.h"
#include "timeline_model.h"

Q_IMPORT_QML_PLUGIN(ZipMoE_ChatPlugin)

using namespace zipmoe::app;

namespace {

QString artifactsDir() { return zipmoe::testing::artifactsDir(QStringLiteral(ZIPMOE_DEFAULT_ARTIFACTS_DIR)); }

// Records the GUI thread's stalls: a 4 ms timer notes how late each of its ticks comes (the time
// the thread spent on something else: event handling, polish, sync and render of a frame), and the
// window's frames are timed from beforeFrameBegin to afterFrameEnd.
class GuiStallProbe : public QObject {
 public:
  explicit GuiStallProbe(QQuickWindow* window) {
    timer_.setTimerType(Qt::PreciseTimer);
    timer_.setInterval(4);
    connect(&timer_, &QTimer::timeout, this, [this] {
      const qint64 now = clock_.nsecsElapsed();
      if (last_ > 0) stalls_.push_back(static_cast<double>(now - last_) / 1e6 - 4.0);
      last_ = now;
    });
    connect(window, &QQuickWindow::beforeFrameBegin, this, [this] { frameStart_ = clock_.nsecsElapsed(); }, Qt::DirectConnection);
    connect(window, &QQuickWindow::afterFrameEnd, this, [this] {
      if (frameStart_ >= 0) frames_.push_back(static_cast<double>(clock_.nsecsElapsed() - frameStart_) / 1e6);
      frameStart_ = -1;
    }, Qt::DirectConnection);
  }
  void start() {
    clock_.start();
    last_ = 0;
    stalls_.clear();
    frames_.clear();
    timer_.start();
  }
  void stop() { timer_.stop(); }
  static double maxOf(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
  static double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
  }
  QJsonObject summary() const {
    QJsonObject o;
    o["ticks"] = static_cast<int>(stalls_.size());
    o["longestStallMs"] = maxOf(stalls_);
    o["p99StallMs"] = percentile(stalls_, 0.99);
    o["frames"] = static_cast<int>(frames_.size());
    o["longestFrameMs"] = maxOf(frames_);
    o["p99FrameMs"] = percentile(frames_, 0.99);
    o["medianFrameMs"] = percentile(frames_, 0.5);
    return o;
  }

 private:
  QTimer timer_;
  QElapsedTimer clock_;
  qint64 last_ = 0, frameStart_ = -1;
  std::vector<double> stalls_, frames_;
};

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

  void screenshotsOfEveryPage() {
    controller_->newChat();
    controller_->setSamplingValue("maxTokens", 96);
    controller_->setSamplingValue("seed", 11);
    QSignalSpy finished(controller_.get(), &ChatController::replyFinished);
    QVERIFY(controller_->send(QStringLiteral("ROMEO:\nBut soft, what light through yonder window breaks?")));
    QVERIFY(finished.wait(120000));
    QVERIFY(controller_->send(QStringLiteral("Speak again, bright angel.")));
    QVERIFY(finished.wait(120000));
    showPage(0);
    save(QStringLiteral("chat.png"));

    // The budget page after a replan to a third of the experts.
    RuntimeMonitor* rt = controller_->runtime();
    rt->refresh();
    QSignalSpy replanned(rt, &RuntimeMonitor::replanned);
    QVERIFY(rt->setBudget(rt->minimumBudget() + rt->expertBytes() / 3));
    QTRY_VERIFY_WITH_TIMEOUT(replanned.count() > 0, 10000);
    QVERIFY(controller_->send(QStringLiteral("What say you?")));  // live figures under the new plan
    QVERIFY(finished.wait(120000));
    rt->refresh();
    showPage(1);
    save(QStringLiteral("budget.png"));

    QVERIFY(controller_->timeline()->eventCount() > 0);
    showPage(2);
    QMetaObject::invokeMethod(findPage("schedulePage"), "zoomToFit");
    QTest::qWait(300);
    save(QStringLiteral("schedule.png"));

    showPage(3);
    save(QStringLiteral("settings.png"));

    // The same chat in Simplified Chinese, switched at run time.
    controller_->setLanguage(QStringLiteral("zh_CN"));
    QCOMPARE(controller_->lastError(), QString());
    showPage(0);
    save(QStringLiteral("chat-zh_CN.png"));
    controller_->setLanguage(QStringLiteral("en"));
    showPage(0);
  }

  // Moves the budget every 25 ms (as dragging the slider does) while a reply streams, on the budget
  // page and on the chat page, and records the GUI thread's longest stall and frame.
  void guiThreadStaysResponsiveWhileTheBudgetMoves() {
    QJsonObject report;
    for (int page : {1, 0}) {
      showPage(page);
      RuntimeMonitor* rt = controller_->runtime();
      const double minimum = rt->minimumBudget(), experts = rt->expertBytes();
      controller_->setSamplingValue("maxTokens", 200);
      GuiStallProbe probe(window_);
      QTimer mover;
      int step = 0, moves = 0;
      connect(&mover, &QTimer::timeout, this, [&] {
        const double fraction = 0.05 + 0.9 * std::abs(std::sin(0.15 * step++));
        if (rt->setBudget(minimum + fraction * experts)) ++moves;
      });
      QSignalSpy finished(controller_.get(), &ChatController::replyFinished);
      probe.start();
      QVERIFY(controller_->send(QStringLiteral("KING RICHARD:\nNow is the winter of our discontent")));
      mover.start(25);
      QVERIFY(finished.wait(180000));
      mover.stop();
      probe.stop();
      QJsonObject s = probe.summary();
      s["budgetMoves"] = moves;
      s["generatedTokens"] = controller_->messages()->rows().back().generatedTokens;
      s["tokensPerSecond"] = controller_->messages()->rows().back().tokensPerSecond;
      const QString name = page == 1 ? QStringLiteral("budgetPage") : QStringLiteral("chatPage");
      report[name] = s;
      qInfo().noquote() << name << QJsonDocument(s).toJson(QJsonDocument::Compact);
      QVERIFY(moves > 0);
    }
    report["platform"] = QGuiApplication::platformName();
    QFile f(artifactsDir() + QStringLiteral("/gui_frame_times.json"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QJsonDocument(report).toJson());
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
