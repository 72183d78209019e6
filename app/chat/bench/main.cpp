// zipmoe-chat-bench — measurements of the chat app's GUI thread, kept out of the tests (a test
// checks; a benchmark measures). Each prints its figures and, with --json FILE, writes them.
//
//   zipmoe-chat-bench timeline [--json FILE] [--repeat R]
//       The schedule chart with 100k intervals (5 lanes x 20k, a synthetic trace clustered like the
//       runtime's): appending them in batches of 1000, building every lane's geometry at fit and
//       after a 50x zoom, and whole frames (grabWindow) after zooms and pans within and past the
//       built octave and margin. Best of R runs.
//   zipmoe-chat-bench budget-moves [--json FILE] [--runs N] [--tokens N]
//       The whole app window on the real engine with the built-in demo model: a reply of N tokens
//       streams while a timer moves the memory budget every 25 ms between 5 % and 95 % of the
//       expert bytes (each move a replan), on the memory-budget page and on the chat page. A 4 ms
//       timer on the GUI thread notes how late each tick comes (the longest time the thread was busy
//       or not scheduled) and every frame is timed from beforeFrameBegin to afterFrameEnd.
//   zipmoe-chat-bench advisor [--json FILE] [--runs N] [--tokens N]
//       The same window on the memory-budget page: a reply of N tokens streams while the budget
//       advisor recomputes its curve without pause (each finished curve starts the next, off the GUI
//       thread); the same stall and frame figures.
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QFile>
#include <QGuiApplication>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QQmlApplicationEngine>
#include <QQuickStyle>
#include <QQuickWindow>
#include <QSGGeometryNode>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QThread>
#include <QTimer>
#include <QtQml/qqmlextensionplugin.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <vector>

#include "budget_advisor_model.h"
#include "chat_controller.h"
#include "message_model.h"
#include "runtime_monitor.h"
#include "synthetic_trace.h"
#include "timeline_model.h"
#include "timeline_view.h"

Q_IMPORT_QML_PLUGIN(ZipMoE_ChatPlugin)

using namespace zipmoe::app;

namespace {

double msSince(const QElapsedTimer& t) { return static_cast<double>(t.nsecsElapsed()) / 1e6; }

// Exposes updatePaintNode, to time the geometry build without a window.
class OfflineView : public TimelineView {
 public:
  using TimelineView::updatePaintNode;
};

// Waits for a condition by running the event loop (never a fixed sleep).
template <class F>
bool waitFor(F&& condition, int limitMs) {
  QElapsedTimer t;
  t.start();
  while (!condition()) {
    if (t.elapsed() > limitMs) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(1);
  }
  return true;
}

QJsonObject machine() {
  QJsonObject o;
  o["platform"] = QGuiApplication::platformName();
  o["cpu"] = QSysInfo::currentCpuArchitecture();
  o["cores"] = QThread::idealThreadCount();
  o["os"] = QSysInfo::prettyProductName();
  o["qt"] = QString::fromLatin1(qVersion());
  return o;
}

QJsonObject benchTimeline(int repeats) {
  std::vector<double> append, geometryFit, geometryZoomed, frames[6];
  static const char* kFrames[] = {"frame at fit (geometry built)",
                                  "frame after a zoom within the octave",
                                  "frame after a pan",
                                  "frame after zooming in 64x (geometry rebuilt)",
                                  "frame after a pan",
                                  "frame after panning 3000 px (past the margin: rebuilt)"};
  int boxes = 0;
  for (int r = 0; r < repeats; ++r) {
    TimelineModel model;
    model.setLanes(zipmoe::TraceLanes{2});  // 5 lanes
    const std::vector<zipmoe::TraceEvent> events = syntheticBurstyTrace(5, model.laneCount(), 20'000);
    QElapsedTimer t;
    t.start();
    for (size_t at = 0; at < events.size(); at += 1000)
      model.append(std::span(events).subspan(at, std::min<size_t>(1000, events.size() - at)));
    append.push_back(msSince(t));

    OfflineView offline;
    offline.setWidth(1000);
    offline.setModel(&model);
    t.restart();
    std::unique_ptr<QSGNode> root(offline.updatePaintNode(nullptr, nullptr));
    geometryFit.push_back(msSince(t));
    int vertices = 0;
    for (QSGNode* child = root->firstChild(); child; child = child->nextSibling())
      vertices += static_cast<QSGGeometryNode*>(child)->geometry()->vertexCount();
    boxes = vertices / 6;
    offline.zoomAt(50, 500);
    t.restart();
    offline.updatePaintNode(root.get(), nullptr);
    geometryZoomed.push_back(msSince(t));

    QQuickWindow window;
    window.setColor(Qt::white);
    window.resize(1000, 200);
    TimelineView view(window.contentItem());
    view.setWidth(1000);
    view.setHeight(200);
    window.show();
    if (!waitFor([&] { return window.isExposed(); }, 10000)) throw std::runtime_error("the window was never exposed");
    int step = 0;
    const auto frame = [&] {
      QElapsedTimer f;
      f.start();
      (void)window.grabWindow();
      frames[step++].push_back(msSince(f));
    };
    view.setModel(&model);
    frame();
    const double inOctave = view.nsPerPixel() / std::exp2(std::floor(std::log2(view.nsPerPixel())));
    view.zoomAt(inOctave > 1.1 ? std::min(1.3, std::sqrt(inOctave)) : 1 / 1.3, 500);
    frame();
    view.panBy(-200);
    frame();
    view.zoomAt(64, 500);
    frame();
    view.panBy(-100);
    frame();
    for (int i = 0; i < 10; ++i) view.panBy(-300);
    frame();
  }
  const auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  QJsonObject o;
  o["intervals"] = 100000;
  o["lanes"] = 5;
  o["repeat"] = repeats;
  o["boxesAtFit"] = boxes;
  o["appendMs"] = best(append);
  o["geometryAtFitMs"] = best(geometryFit);
  o["geometryAfterZoom50xMs"] = best(geometryZoomed);
  QJsonArray f;
  for (int i = 0; i < 6; ++i) f.append(QJsonObject{{"what", QString::fromLatin1(kFrames[i])}, {"ms", best(frames[i])}});
  o["frames"] = f;
  std::printf("timeline, 100k intervals on 5 lanes, 1000 px, best of %d runs:\n", repeats);
  std::printf("  append in batches of 1000     %8.2f ms\n", best(append));
  std::printf("  geometry at fit (%d boxes)  %8.2f ms\n", boxes, best(geometryFit));
  std::printf("  geometry after a 50x zoom     %8.2f ms\n", best(geometryZoomed));
  for (int i = 0; i < 6; ++i) std::printf("  %-52s %8.2f ms\n", kFrames[i], best(frames[i]));
  return o;
}

// GUI-thread stalls and frame times while it runs.
class GuiStallProbe {
 public:
  explicit GuiStallProbe(QQuickWindow* window) {
    timer_.setTimerType(Qt::PreciseTimer);
    timer_.setInterval(4);
    QObject::connect(&timer_, &QTimer::timeout, [this] {
      const qint64 now = clock_.nsecsElapsed();
      if (last_ > 0) stalls_.push_back(static_cast<double>(now - last_) / 1e6 - 4.0);
      last_ = now;
    });
    QObject::connect(window, &QQuickWindow::beforeFrameBegin, &timer_, [this] { frameStart_ = clock_.nsecsElapsed(); },
                     Qt::DirectConnection);
    QObject::connect(window, &QQuickWindow::afterFrameEnd, &timer_, [this] {
      if (frameStart_ >= 0) frames_.push_back(static_cast<double>(clock_.nsecsElapsed() - frameStart_) / 1e6);
      frameStart_ = -1;
    }, Qt::DirectConnection);
    clock_.start();
    timer_.start();
  }
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

ControllerOptions demoOptions(const QTemporaryDir& dir) {
  ControllerOptions o;
  o.databasePath = dir.filePath(QStringLiteral("chat.sqlite"));
  o.storesDir = dir.filePath(QStringLiteral("stores"));
  o.demoModelDir = QStringLiteral(ZIPMOE_DEMO_MODEL_DIR);
  return o;
}

// /proc/loadavg's 1-, 5- and 15-minute figures.
QString loadAverage() {
  QFile f(QStringLiteral("/proc/loadavg"));
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromLatin1(f.readAll()).section(QLatin1Char(' '), 0, 2);
}

// The whole window (Main.qml) on the controller, with the demo model open and ready.
QQuickWindow* openDemoWindow(ChatController& controller, QQmlApplicationEngine& engine) {
  ChatController::setInstance(&controller);
  controller.setQmlEngine(&engine);
  engine.addImportPath(QStringLiteral("qrc:/"));
  engine.load(QUrl(QStringLiteral("qrc:/ZipMoE/Chat/Main.qml")));
  if (engine.rootObjects().isEmpty()) throw std::runtime_error("the user interface failed to load");
  auto* window = qobject_cast<QQuickWindow*>(engine.rootObjects().first());
  window->resize(1180, 780);
  if (!waitFor([&] { return window->isExposed(); }, 10000)) throw std::runtime_error("the window was never exposed");
  controller.openModel();
  if (!waitFor([&] { return controller.modelState() != QStringLiteral("loading"); }, 600000) ||
      controller.modelState() != QStringLiteral("ready"))
    throw std::runtime_error(("the demo model did not open: " + controller.modelError()).toStdString());
  return window;
}

QJsonObject benchBudgetMoves(int runs, int tokens) {
  QTemporaryDir dir;
  ChatController controller(demoOptions(dir));
  QQmlApplicationEngine engine;
  QQuickWindow* window = openDemoWindow(controller, engine);
  controller.newChat();
  controller.setSamplingValue("maxTokens", tokens);
  const auto showPage = [&](int page) {
    window->setProperty("currentPage", page);
    QElapsedTimer t;
    t.start();
    waitFor([&] { return t.elapsed() > 400; }, 1000);  // a few frames and one runtime monitor tick
  };
  QJsonArray results;
  std::printf("budget moves every 25 ms while a %d-token reply streams (demo model, %s):\n", tokens,
              qPrintable(QGuiApplication::platformName()));
  std::printf("  %-4s %-7s %12s %10s %13s %10s %12s %7s %6s %8s\n", "run", "page", "longest stall", "p99 stall",
              "longest frame", "p99 frame", "median frame", "frames", "moves", "tok/s");
  for (int run = 1; run <= runs; ++run) {
    for (int page : {1, 0}) {
      showPage(page);  // the page's first showing (creating its items) is not measured
      RuntimeMonitor* rt = controller.runtime();
      const double minimum = rt->minimumBudget(), experts = rt->expertBytes();
      GuiStallProbe probe(window);
      QTimer mover;
      int step = 0, moves = 0;
      QObject::connect(&mover, &QTimer::timeout, [&] {
        const double fraction = 0.05 + 0.9 * std::abs(std::sin(0.15 * step++));
        if (rt->setBudget(minimum + fraction * experts)) ++moves;
      });
      bool finished = false;
      const auto connection = QObject::connect(&controller, &ChatController::replyFinished, [&] { finished = true; });
      if (!controller.send(QStringLiteral("KING RICHARD:\nNow is the winter of our discontent")))
        throw std::runtime_error(("send failed: " + controller.lastError()).toStdString());
      mover.start(25);
      waitFor([&] { return finished; }, 600000);
      mover.stop();
      QObject::disconnect(connection);
      QJsonObject s = probe.summary();
      s["run"] = run;
      s["page"] = page == 1 ? QStringLiteral("budget") : QStringLiteral("chat");
      s["budgetMoves"] = moves;
      s["generatedTokens"] = controller.messages()->rows().back().generatedTokens;
      s["tokensPerSecond"] = controller.messages()->rows().back().tokensPerSecond;
      results.append(s);
      std::printf("  %-4d %-7s %10.1f ms %7.1f ms %10.1f ms %7.1f ms %9.2f ms %7d %6d %8.0f\n", run,
                  page == 1 ? "budget" : "chat", s["longestStallMs"].toDouble(), s["p99StallMs"].toDouble(),
                  s["longestFrameMs"].toDouble(), s["p99FrameMs"].toDouble(), s["medianFrameMs"].toDouble(),
                  s["frames"].toInt(), moves, s["tokensPerSecond"].toDouble());
    }
  }
  QJsonObject o2;
  o2["tokens"] = tokens;
  o2["moveIntervalMs"] = 25;
  o2["results"] = results;
  return o2;
}

// The budget advisor recomputing without pause (each finished curve starts the next) on the
// memory-budget page while a reply streams: the GUI thread's stalls and frames meanwhile.
QJsonObject benchAdvisor(int runs, int tokens) {
  QTemporaryDir dir;
  ChatController controller(demoOptions(dir));
  QQmlApplicationEngine engine;
  QQuickWindow* window = openDemoWindow(controller, engine);
  controller.newChat();
  controller.setSamplingValue("maxTokens", tokens);
  window->setProperty("currentPage", 1);
  BudgetAdvisorModel* advisor = controller.advisor();
  if (!waitFor([&] { return advisor->revision() > 0 && !advisor->busy(); }, 600000))
    throw std::runtime_error("the advisor never finished its first curve");
  QJsonArray results;
  std::printf("budget advisor recomputing continuously while a %d-token reply streams (demo model, %s, budget page):\n",
              tokens, qPrintable(QGuiApplication::platformName()));
  std::printf("  %-4s %12s %10s %13s %10s %12s %7s %10s %8s\n", "run", "longest stall", "p99 stall", "longest frame",
              "p99 frame", "median frame", "frames", "curves", "tok/s");
  for (int run = 1; run <= runs; ++run) {
    const QString loadBefore = loadAverage();
    GuiStallProbe probe(window);
    const int first = advisor->revision();
    bool finished = false;
    const auto again = QObject::connect(advisor, &BudgetAdvisorModel::curveChanged, [&] {
      if (!finished) advisor->recompute();
    });
    const auto done = QObject::connect(&controller, &ChatController::replyFinished, [&] { finished = true; });
    if (!controller.send(QStringLiteral("KING RICHARD:\nNow is the winter of our discontent")))
      throw std::runtime_error(("send failed: " + controller.lastError()).toStdString());
    advisor->recompute();
    waitFor([&] { return finished; }, 600000);
    QObject::disconnect(again);
    QObject::disconnect(done);
    const int curves = advisor->revision() - first;
    waitFor([&] { return !advisor->busy(); }, 600000);
    QJsonObject s = probe.summary();
    s["run"] = run;
    s["page"] = QStringLiteral("budget");
    s["curvesComputed"] = curves;
    s["loadAverageBefore"] = loadBefore;  // the machine is shared: how busy it was
    s["loadAverageAfter"] = loadAverage();
    s["pointsPerCurve"] = BudgetAdvisorModel::kPoints;
    s["generatedTokens"] = controller.messages()->rows().back().generatedTokens;
    s["tokensPerSecond"] = controller.messages()->rows().back().tokensPerSecond;
    results.append(s);
    std::printf("  %-4d %10.1f ms %7.1f ms %10.1f ms %7.1f ms %9.2f ms %7d %10d %8.0f\n", run,
                s["longestStallMs"].toDouble(), s["p99StallMs"].toDouble(), s["longestFrameMs"].toDouble(),
                s["p99FrameMs"].toDouble(), s["medianFrameMs"].toDouble(), s["frames"].toInt(), curves,
                s["tokensPerSecond"].toDouble());
  }
  QJsonObject o;
  o["tokens"] = tokens;
  o["results"] = results;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  QGuiApplication app(argc, argv);
  QQuickStyle::setStyle(QStringLiteral("Fusion"));
  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Measurements of the chat app's GUI thread: timeline | budget-moves | advisor"));
  parser.addHelpOption();
  parser.addPositionalArgument(QStringLiteral("benchmark"), QStringLiteral("timeline, budget-moves or advisor"));
  const QCommandLineOption json(QStringLiteral("json"), QStringLiteral("Also write the figures to this file."), QStringLiteral("file"));
  const QCommandLineOption repeat(QStringLiteral("repeat"), QStringLiteral("timeline: runs, the best is kept (1-100, default 5)."), QStringLiteral("n"), QStringLiteral("5"));
  const QCommandLineOption runs(QStringLiteral("runs"), QStringLiteral("budget-moves, advisor: runs (on each page) (1-20, default 3)."), QStringLiteral("n"), QStringLiteral("3"));
  const QCommandLineOption tokens(QStringLiteral("tokens"), QStringLiteral("budget-moves, advisor: tokens per reply (1-250, default 200)."), QStringLiteral("n"), QStringLiteral("200"));
  parser.addOptions({json, repeat, runs, tokens});
  parser.process(app);
  const QStringList args = parser.positionalArguments();
  const auto number = [&](const QCommandLineOption& option, int lo, int hi) {
    bool ok = false;
    const int v = parser.value(option).toInt(&ok);
    if (!ok || v < lo || v > hi) {
      std::fprintf(stderr, "zipmoe-chat-bench: --%s '%s': expected an integer in %d-%d\n", qPrintable(option.names().first()),
                   qPrintable(parser.value(option)), lo, hi);
      std::exit(2);
    }
    return v;
  };
  if (args.size() != 1 || (args[0] != QStringLiteral("timeline") && args[0] != QStringLiteral("budget-moves") &&
                           args[0] != QStringLiteral("advisor"))) {
    std::fprintf(stderr, "zipmoe-chat-bench: expected one benchmark, timeline, budget-moves or advisor (--help)\n");
    return 2;
  }
  const int repeats = number(repeat, 1, 100), runCount = number(runs, 1, 20), tokenCount = number(tokens, 1, 250);
  QJsonObject result;
  try {
    result = args[0] == QStringLiteral("timeline")       ? benchTimeline(repeats)
             : args[0] == QStringLiteral("budget-moves") ? benchBudgetMoves(runCount, tokenCount)
                                                         : benchAdvisor(runCount, tokenCount);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zipmoe-chat-bench: error: %s\n", e.what());
    return 1;
  }
  result["benchmark"] = args[0];
  result["machine"] = machine();
  if (parser.isSet(json)) {
    QFile f(parser.value(json));
    if (!f.open(QIODevice::WriteOnly) || f.write(QJsonDocument(result).toJson()) < 0) {
      std::fprintf(stderr, "zipmoe-chat-bench: error: cannot write %s\n", qPrintable(parser.value(json)));
      return 1;
    }
  }
  return 0;
}
