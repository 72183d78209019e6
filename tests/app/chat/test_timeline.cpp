// The schedule chart: TimelineModel keeps lanes sorted under out-of-order appends, finds the visible
// range by binary search (checked against brute force), merges sub-pixel intervals into few,
// disjoint, covering boxes, drops while paused, evicts the oldest tokens, indexes tokens and layers,
// and answers hover queries; TimelineView keeps its window within limits, renders each op in its
// colour into an offscreen window, and pans or zooms within an octave without rebuilding geometry.
// Timings (geometry for 100k intervals, frames after zoom and pan) are a benchmark:
// zipmoe-chat-bench timeline (docs/APP.md).
#include <QtTest>

#include <QOpenGLContext>
#include <QQuickWindow>
#include <QSGGeometryNode>
#include <QSGTransformNode>
#include <QSignalSpy>

#include <algorithm>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "timeline_colors.h"
#include "timeline_model.h"
#include "synthetic_trace.h"
#include "timeline_view.h"

using zipmoe::TraceEvent;
using zipmoe::TraceLanes;
using zipmoe::TraceOp;
using zipmoe::app::TimelineBox;
using zipmoe::app::TimelineModel;
using zipmoe::app::TimelineView;

namespace {

TraceEvent traceEvent(int lane, qint64 start, qint64 end, TraceOp op = TraceOp::ReadE, int token = 0, int layer = -1) {
  TraceEvent e;
  e.lane = static_cast<uint8_t>(lane);
  e.startNs = start;
  e.endNs = end;
  e.op = op;
  e.token = token;
  e.layer = static_cast<int16_t>(layer);
  return e;
}

// `count` intervals per lane, back to back with random lengths and gaps, overlapping their
// predecessor a little now and then (as the runtime's lanes do); nearly in start order per lane.
std::vector<TraceEvent> randomLanes(std::mt19937& rng, int lanes, int count, qint64 maxLength) {
  std::uniform_int_distribution<qint64> length(1, maxLength);
  std::uniform_int_distribution<qint64> gap(-maxLength / 4, maxLength);
  std::uniform_int_distribution<int> op(0, zipmoe::app::kTraceOpCount - 1);
  std::vector<TraceEvent> events;
  for (int lane = 0; lane < lanes; ++lane) {
    qint64 start = 0;
    qint64 end = 0;
    for (int i = 0; i < count; ++i) {
      start = std::max(start, end + gap(rng));
      end = start + length(rng);
      events.push_back(traceEvent(lane, start, end, static_cast<TraceOp>(op(rng)), i / 100, (i / 10) % 10));
    }
  }
  return events;
}

// Checks boxesForLane's contract for one range and scale: sorted, disjoint, within the bound,
// covering every interval that overlaps the range; returns the number of boxes, -1 on a failure.
long checkBoxes(const TimelineModel& model, int lane, qint64 t0, qint64 t1, double nsPerPixel) {
  const std::vector<TimelineBox> boxes = model.boxesForLane(lane, t0, t1, nsPerPixel);
  const double bound = static_cast<double>(t1 - t0) / nsPerPixel + 3;
  if (static_cast<double>(boxes.size()) > bound) {
    qWarning("%zu boxes for %.0f pixels", boxes.size(), bound - 3);
    return -1;
  }
  for (size_t i = 0; i < boxes.size(); ++i) {
    if (boxes[i].startNs >= boxes[i].endNs || (i > 0 && boxes[i - 1].endNs > boxes[i].startNs)) {
      qWarning("box %zu [%lld, %lld) is empty or overlaps its predecessor", i, static_cast<long long>(boxes[i].startNs),
               static_cast<long long>(boxes[i].endNs));
      return -1;
    }
  }
  for (size_t i = 0; i < model.intervalCount(lane); ++i) {
    const TraceEvent e = model.intervalAt(lane, i);
    if (!(e.endNs > t0 && e.startNs < t1)) continue;
    auto it = std::upper_bound(boxes.begin(), boxes.end(), e.startNs,
                               [](qint64 t, const TimelineBox& b) { return t < b.startNs; });
    qint64 reached = it == boxes.begin() ? e.startNs : std::prev(it)->endNs;
    while (reached < e.endNs && it != boxes.end() && it->startNs == reached) reached = (it++)->endNs;
    if (it == boxes.begin() || reached < e.endNs) {
      qWarning("interval %zu [%lld, %lld) is not covered", i, static_cast<long long>(e.startNs), static_cast<long long>(e.endNs));
      return -1;
    }
  }
  return static_cast<long>(boxes.size());
}

// Exposes updatePaintNode, to build the scene graph without a window.
class InspectableView : public TimelineView {
 public:
  using TimelineView::updatePaintNode;
};

bool sameColor(QRgb pixel, const QColor& color) {
  return std::abs(qRed(pixel) - color.red()) <= 2 && std::abs(qGreen(pixel) - color.green()) <= 2 &&
         std::abs(qBlue(pixel) - color.blue()) <= 2;
}

}  // namespace

class TestTimeline : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    // Qt Quick picks its software renderer on the offscreen platform (TimelineView then draws
    // rectangle nodes). Where OpenGL works (offscreen under an X server, e.g. xvfb-run), use it so
    // that the pixel checks see the geometry nodes; the node checks below run either way.
    QOpenGLContext context;
    openGl_ = context.create();
    if (openGl_) {
      QQuickWindow::setGraphicsApi(QSGRendererInterface::OpenGL);
      QQuickWindow::setSceneGraphBackend(QStringLiteral("rhi"));  // "rhi": the default, not software
    }
    qInfo("rendering with %s", openGl_ ? "OpenGL (geometry nodes)" : "the software renderer (rectangle nodes)");
  }

  void keepsLanesSortedUnderOutOfOrderAppends() {
    TimelineModel model;
    model.setLanes(TraceLanes{2});
    std::mt19937 rng(7);
    std::vector<TraceEvent> all = randomLanes(rng, model.laneCount(), 2000, 1000);
    // Shuffle locally (events arrive roughly in order) and hand them over in batches of random size.
    for (size_t i = 0; i + 8 < all.size(); i += 5) std::shuffle(all.begin() + static_cast<long>(i), all.begin() + static_cast<long>(i + 8), rng);
    std::uniform_int_distribution<size_t> batchSize(1, 300);
    for (size_t at = 0; at < all.size();) {
      const size_t n = std::min(batchSize(rng), all.size() - at);
      model.append(std::span(all).subspan(at, n));
      at += n;
    }
    // And a few far in the past, into the middle of the lanes.
    const std::vector<TraceEvent> late{traceEvent(0, 5, 9), traceEvent(1, 17, 30), traceEvent(3, 1, 2)};
    model.append(late);
    QCOMPARE(model.eventCount(), static_cast<int>(all.size() + late.size()));
    size_t total = 0;
    for (int lane = 0; lane < model.laneCount(); ++lane) {
      std::vector<qint64> expected;
      for (const TraceEvent& e : all) if (e.lane == lane) expected.push_back(e.startNs);
      for (const TraceEvent& e : late) if (e.lane == lane) expected.push_back(e.startNs);
      std::sort(expected.begin(), expected.end());
      QCOMPARE(model.intervalCount(lane), expected.size());
      for (size_t i = 0; i < expected.size(); ++i) QCOMPARE(model.intervalAt(lane, i).startNs, expected[i]);
      total += expected.size();
    }
    QCOMPARE(static_cast<int>(total), model.eventCount());
    QCOMPARE(model.startNs(), 0);
  }

  void visibleRangeMatchesBruteForce() {
    TimelineModel model;
    model.setLanes(TraceLanes{1});
    std::mt19937 rng(11);
    model.append(randomLanes(rng, model.laneCount(), 5000, 500));
    std::uniform_int_distribution<qint64> at(-1000, model.endNs() + 1000);
    std::uniform_int_distribution<qint64> span(1, 20000);
    for (int trial = 0; trial < 2000; ++trial) {
      const int lane = trial % model.laneCount();
      const qint64 t0 = at(rng);
      const qint64 t1 = t0 + span(rng);
      const auto [first, last] = model.visibleRange(lane, t0, t1);
      QVERIFY(first <= last);
      for (size_t i = 0; i < model.intervalCount(lane); ++i) {
        const TraceEvent e = model.intervalAt(lane, i);
        const bool visible = e.endNs > t0 && e.startNs < t1;
        if (visible && (i < first || i >= last)) {
          QFAIL(qPrintable(QStringLiteral("interval %1 [%2, %3) overlaps [%4, %5) but is outside [%6, %7)")
                               .arg(i).arg(e.startNs).arg(e.endNs).arg(t0).arg(t1).arg(first).arg(last)));
        }
      }
      // Tight at the end; at the start only the intervals overlapping a predecessor are extra.
      if (last > 0 && last < model.intervalCount(lane)) QVERIFY(model.intervalAt(lane, last - 1).startNs < t1);
    }
  }

  void mergesSubPixelIntervalsIntoFewDisjointCoveringBoxes() {
    TimelineModel model;
    model.setLanes(TraceLanes{1});
    model.append(zipmoe::app::syntheticBurstyTrace(3, 1, 100'000));  // 100k intervals on lane 0
    QCOMPARE(model.intervalCount(0), size_t(100'000));
    const qint64 extent = model.endNs() - model.startNs();
    // The whole lane over 1000 px, then narrower ranges around its middle interval over 1000 px,
    // down to 10 ns per pixel.
    const qint64 middle = model.intervalAt(0, 50'000).startNs;
    for (qint64 span = extent + 2; span >= 10'000; span /= 7) {
      const qint64 t0 = span > extent ? model.startNs() - 1 : middle - span / 2;
      const qint64 t1 = t0 + span;
      const double nsPerPixel = static_cast<double>(span) / 1000;
      const long boxes = checkBoxes(model, 0, t0, t1, nsPerPixel);
      QVERIFY2(boxes >= 0, qPrintable(QStringLiteral("range %1 ns at %2 ns/px").arg(span).arg(nsPerPixel)));
      QVERIFY(boxes <= 2000);
    }
    const std::vector<TimelineBox> all =
        model.boxesForLane(0, model.startNs(), model.endNs(), static_cast<double>(extent) / 1000);
    int members = 0;
    for (const TimelineBox& b : all) members += b.count;
    QCOMPARE(members, 100'000);

    // Combs of equal intervals, `width` px wide every `pitch` px, the worst cases of the rule: the
    // bound holds and the boxes still cover and do not overlap.
    for (const auto& [width, pitch] : std::vector<std::pair<double, double>>{
             {1.0, 1.0}, {1.0, 1.5}, {0.3, 1.31}, {0.5, 0.9}, {2.0, 2.99}, {0.01, 0.02}, {1.0, 2.001}}) {
      TimelineModel comb;
      comb.setLanes(TraceLanes{1});
      const double nsPerPixel = 1000;
      std::vector<TraceEvent> teeth;
      for (int i = 0; i < 100'000; ++i) {
        const auto start = static_cast<qint64>(i * pitch * nsPerPixel);
        teeth.push_back(traceEvent(0, start, start + static_cast<qint64>(width * nsPerPixel)));
      }
      comb.append(teeth);
      const long boxes = checkBoxes(comb, 0, 0, static_cast<qint64>(1000 * nsPerPixel), nsPerPixel);
      QVERIFY2(boxes > 0 && boxes <= 1003, qPrintable(QStringLiteral("%1 px every %2 px: %3 boxes").arg(width).arg(pitch).arg(boxes)));
    }

    // Zoomed in far enough that every interval and gap is wider than a pixel: one box per interval.
    TimelineModel wide;
    wide.setLanes(TraceLanes{1});
    wide.append(std::vector<TraceEvent>{traceEvent(0, 0, 100), traceEvent(0, 150, 300, TraceOp::Stall), traceEvent(0, 300, 400)});
    const std::vector<TimelineBox> separate = wide.boxesForLane(0, 0, 400, 10);
    QCOMPARE(separate.size(), size_t(3));
    QCOMPARE(separate[1].op, TraceOp::Stall);
    // Zoomed out: one box, in the colour of its longest member.
    const std::vector<TimelineBox> merged = wide.boxesForLane(0, 0, 400, 1000);
    QCOMPARE(merged.size(), size_t(1));
    QCOMPARE(merged[0].op, TraceOp::Stall);
    QCOMPARE(merged[0].count, 3);
    QCOMPARE(merged[0].endNs, 400);
  }

  void dropsEventsWhileNotCapturing() {
    TimelineModel model;
    model.setLanes(TraceLanes{1});
    QSignalSpy changed(&model, &TimelineModel::dataChanged);
    QSignalSpy capturing(&model, &TimelineModel::capturingChanged);
    model.append(std::vector<TraceEvent>{traceEvent(0, 0, 10), traceEvent(1, 5, 10)});
    QCOMPARE(changed.count(), 1);  // once per append, not per event
    model.setCapturing(false);
    QCOMPARE(capturing.count(), 1);
    model.append(std::vector<TraceEvent>{traceEvent(0, 20, 30)});
    QCOMPARE(model.eventCount(), 2);
    QCOMPARE(changed.count(), 1);
    model.setCapturing(true);
    model.append(std::vector<TraceEvent>{traceEvent(0, 20, 30)});
    QCOMPARE(model.eventCount(), 3);
    QCOMPARE(changed.count(), 2);
    model.append(std::vector<TraceEvent>{});
    QCOMPARE(changed.count(), 2);
    model.clear();
    QCOMPARE(model.eventCount(), 0);
    QCOMPARE(model.intervalCount(0), size_t(0));
    QCOMPARE(model.laneCount(), 4);
  }

  void evictsTheOldestTokensBeyondMaxEvents() {
    TimelineModel model;
    model.setLanes(TraceLanes{2});
    model.setMaxEvents(500);
    for (int token = 0; token < 10; ++token) {
      std::vector<TraceEvent> step;
      for (int i = 0; i < 100; ++i) {
        const qint64 t = token * 10'000 + i * 100;
        step.push_back(traceEvent(i % 5, t, t + 80, TraceOp::Decompress, token, i / 10));
      }
      model.append(step);
      QVERIFY(model.eventCount() <= 500);
    }
    QCOMPARE(model.lastToken(), 9);
    QVERIFY(model.firstToken() > 0);
    QCOMPARE(model.startOfToken(0), -1);
    QCOMPARE(model.startOfToken(9), 90'000);
    QCOMPARE(model.tokenCount(), model.lastToken() - model.firstToken() + 1);
    int held = 0;
    for (int lane = 0; lane < model.laneCount(); ++lane) {
      for (size_t i = 0; i < model.intervalCount(lane); ++i) {
        QVERIFY(model.intervalAt(lane, i).token >= model.firstToken());
        ++held;
      }
    }
    QCOMPARE(held, model.eventCount());
    QCOMPARE(model.startNs(), model.startOfToken(model.firstToken()));
    QCOMPARE(model.endNs(), 9 * 10'000 + 99 * 100 + 80);
    // The newest token is kept even when it alone is over the limit.
    model.setMaxEvents(10);
    QCOMPARE(model.tokenCount(), 1);
    QCOMPARE(model.eventCount(), 100);
  }

  void indexesTokensAndLayers() {
    TimelineModel model;
    model.setLanes(TraceLanes{1});
    model.append(std::vector<TraceEvent>{traceEvent(0, 500, 600, TraceOp::ReadE, 1, 0), traceEvent(3, 700, 900, TraceOp::ExpertCompute, 1, 1),
                                         traceEvent(0, 100, 200, TraceOp::ReadSM, 0, 0), traceEvent(0, 450, 470, TraceOp::ReadSM, 1, 1),
                                         traceEvent(3, 300, 400, TraceOp::Dense, 0, -1)});
    QCOMPARE(model.tokenCount(), 2);
    QCOMPARE(model.startOfToken(0), 100);
    QCOMPARE(model.startOfToken(1), 450);
    QCOMPARE(model.startOfToken(2), -1);
    QCOMPARE(model.startOfLayer(1, 0), 500);
    QCOMPARE(model.startOfLayer(1, 1), 450);
    QCOMPARE(model.startOfLayer(0, 1), -1);
    QCOMPARE(model.startOfLayer(0, -1), -1);
    QCOMPARE(model.startOfLayer(7, 0), -1);
  }

  void findsTheEventAtATime() {
    TimelineModel model;
    model.setLanes(TraceLanes{1});
    TraceEvent read = traceEvent(0, 1000, 2000, TraceOp::ReadE, 4, 2);
    read.expert = 5;
    read.tensor = 1;
    read.shard = 3;
    read.bytes = 65536;
    model.append(std::vector<TraceEvent>{read, traceEvent(0, 2100, 2105, TraceOp::ReadSM, 4, 2)});
    const QVariantMap inside = model.eventAt(0, 1500, 0);
    QCOMPARE(inside.value("op").toInt(), static_cast<int>(TraceOp::ReadE));
    QCOMPARE(inside.value("opName").toString(), QStringLiteral("read E"));
    QCOMPARE(inside.value("laneName").toString(), QStringLiteral("I/O"));
    QCOMPARE(inside.value("lane").toInt(), 0);
    QCOMPARE(inside.value("token").toInt(), 4);
    QCOMPARE(inside.value("layer").toInt(), 2);
    QCOMPARE(inside.value("expert").toInt(), 5);
    QCOMPARE(inside.value("tensor").toInt(), 1);
    QCOMPARE(inside.value("shard").toInt(), 3);
    QCOMPARE(inside.value("startNs").toLongLong(), 1000);
    QCOMPARE(inside.value("durationNs").toLongLong(), 1000);
    QCOMPARE(inside.value("bytes").toULongLong(), 65536ULL);
    // Near the short one: within the tolerance, the nearest wins.
    QCOMPARE(model.eventAt(0, 2095, 20).value("op").toInt(), static_cast<int>(TraceOp::ReadSM));
    QCOMPARE(model.eventAt(0, 2020, 50).value("startNs").toLongLong(), 1000);
    QVERIFY(model.eventAt(0, 2050, 10).isEmpty());
    QVERIFY(model.eventAt(1, 1500, 100).isEmpty());
    QVERIFY(model.eventAt(9, 1500, 100).isEmpty());
    QCOMPARE(model.legend().size(), zipmoe::app::kTraceOpCount);
    QCOMPARE(model.legend().front().toMap().value("color").value<QColor>(), zipmoe::app::traceOpColor(TraceOp::ReadSM));
  }

  void keepsTheWindowWithinLimits() {
    TimelineModel model;
    model.setLanes(TraceLanes{1});
    TimelineView view;
    view.setWidth(1000);
    view.setModel(&model);
    QCOMPARE(view.nsPerPixel(), 0.0);
    model.append(std::vector<TraceEvent>{traceEvent(0, 1'000'000, 2'000'000), traceEvent(3, 5'000'000, 11'000'000)});
    // The first data is shown whole, with 5 % either side.
    QCOMPARE(view.viewStartNs(), 1'000'000 - 500'000.0);
    QCOMPARE(view.viewEndNs(), 11'000'000 + 500'000.0);
    // Zooming keeps the time under the cursor.
    const double anchor = view.timeAtX(250);
    view.zoomAt(3, 250);
    QVERIFY(std::abs(view.timeAtX(250) - anchor) < 1);
    // Not beyond 1 µs per 100 px ...
    for (int i = 0; i < 50; ++i) view.zoomAt(2, 500);
    QCOMPARE(view.nsPerPixel(), 10.0);
    // ... nor beyond the extent x 1.1.
    for (int i = 0; i < 50; ++i) view.zoomAt(0.5, 500);
    QCOMPARE(view.viewEndNs() - view.viewStartNs(), 11'000'000.0);
    view.showRange(2'000'000, 3'000'000);
    view.panBy(-100);  // drag left: later times
    QCOMPARE(view.viewStartNs(), 2'100'000.0);
    QVERIFY(view.jumpToToken(0));
    QCOMPARE(view.viewStartNs(), 1'000'000 - 50'000.0);
    QVERIFY(!view.jumpToToken(1));
    QVERIFY(!view.jumpToLayer(0, 3));
    // Following: the window slides to the newest data, keeping its width.
    view.setFollowLive(true);
    model.append(std::vector<TraceEvent>{traceEvent(3, 11'000'000, 20'000'000)});
    QCOMPARE(view.viewEndNs() - view.viewStartNs(), 1'000'000.0);
    QCOMPARE(view.viewEndNs(), 20'000'000 + 20'000.0);
    view.panBy(10);
    QVERIFY(!view.followLive());
    QCOMPARE(view.laneAtY(0), 0);
    QCOMPARE(view.laneAtY(view.laneHeight() + view.rowSpacing() + 1), 1);
    QCOMPARE(view.laneAtY(-1), -1);
    QCOMPARE(view.laneAtY(100 * (view.laneHeight() + view.rowSpacing())), -1);
    model.clear();
    QCOMPARE(view.nsPerPixel(), 0.0);
  }

  void rendersEachOpInItsColourAndPansWithoutRebuilding() {
    TimelineModel model;
    model.setLanes(TraceLanes{1});  // I/O, decompress 1, recovery, compute
    // 400 px over 0 .. 4 ms: 10 µs per pixel.
    model.append(std::vector<TraceEvent>{traceEvent(0, 1'000'000, 2'000'000, TraceOp::ReadSM),
                                         traceEvent(2, 2'000'000, 3'000'000, TraceOp::Recover),
                                         traceEvent(3, 0, 10'000'000, TraceOp::ExpertCompute)});
    QQuickWindow window;
    window.setColor(Qt::white);
    window.resize(400, 200);
    TimelineView view(window.contentItem());
    view.setWidth(400);
    view.setHeight(200);
    view.setModel(&model);
    view.showRange(0, 4'000'000);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    const auto rowY = [&](int lane) {
      return static_cast<int>(lane * (view.laneHeight() + view.rowSpacing()) + view.rowSpacing() / 2 + view.laneHeight() / 2);
    };
    QImage image = window.grabWindow();
    QVERIFY(!image.isNull());
    QVERIFY(sameColor(image.pixel(150, rowY(0)), zipmoe::app::traceOpColor(TraceOp::ReadSM)));
    QVERIFY(sameColor(image.pixel(250, rowY(2)), zipmoe::app::traceOpColor(TraceOp::Recover)));
    QVERIFY(sameColor(image.pixel(10, rowY(3)), zipmoe::app::traceOpColor(TraceOp::ExpertCompute)));
    QVERIFY(sameColor(image.pixel(50, rowY(0)), Qt::white));   // before the read
    QVERIFY(sameColor(image.pixel(150, rowY(1)), Qt::white));  // an empty lane
    const int rebuilds = view.geometryRebuilds();
    QCOMPARE(rebuilds, model.laneCount());

    view.panBy(30);  // content moves right: the read now covers 130 .. 230
    image = window.grabWindow();
    QCOMPARE(view.geometryRebuilds(), rebuilds);
    QVERIFY(sameColor(image.pixel(120, rowY(0)), Qt::white));
    QVERIFY(sameColor(image.pixel(140, rowY(0)), zipmoe::app::traceOpColor(TraceOp::ReadSM)));
    QVERIFY(sameColor(image.pixel(225, rowY(0)), zipmoe::app::traceOpColor(TraceOp::ReadSM)));
    QVERIFY(sameColor(image.pixel(236, rowY(0)), Qt::white));

    view.zoomAt(1.2, 0);  // same octave of ns per pixel: still only the matrix
    image = window.grabWindow();
    QCOMPARE(view.geometryRebuilds(), rebuilds);
    const double readCentre = view.xAtTime(1'500'000);
    QVERIFY(sameColor(image.pixel(static_cast<int>(readCentre), rowY(0)), zipmoe::app::traceOpColor(TraceOp::ReadSM)));

    view.zoomAt(4, 0);  // two octaves: merging is redone
    window.grabWindow();
    QCOMPARE(view.geometryRebuilds(), rebuilds + model.laneCount());

    // New data on one lane rebuilds that lane only.
    model.append(std::vector<TraceEvent>{traceEvent(1, 3'000'000, 3'500'000, TraceOp::Decompress)});
    window.grabWindow();
    QCOMPARE(view.geometryRebuilds(), rebuilds + model.laneCount() + 1);
  }

  void buildsGeometryInTimelineCoordinatesAndPansByMatrix() {
    // The scene graph without a window (it runs anywhere, the software renderer included): the
    // boxes, mapped through the transform, land where the view says their times are.
    TimelineModel model;
    model.setLanes(TraceLanes{1});
    model.append(std::vector<TraceEvent>{traceEvent(0, 1'000'000, 2'000'000, TraceOp::ReadSM),
                                         traceEvent(3, 0, 10'000'000, TraceOp::ExpertCompute)});
    InspectableView view;
    view.setWidth(400);
    view.setHeight(200);
    view.setModel(&model);
    view.showRange(0, 4'000'000);
    std::unique_ptr<QSGNode> root(view.updatePaintNode(nullptr, nullptr));
    auto* transform = dynamic_cast<QSGTransformNode*>(root.get());
    QVERIFY(transform);
    QCOMPARE(transform->childCount(), model.laneCount());
    const auto readBox = [&] {
      const auto* node = static_cast<const QSGGeometryNode*>(transform->firstChild());
      const QSGGeometry* geometry = node->geometry();
      if (geometry->vertexCount() != 6) return std::pair<QRectF, QColor>();
      const QSGGeometry::ColoredPoint2D* v = geometry->vertexDataAsColoredPoint2D();
      const QPointF topLeft = transform->matrix().map(QPointF(static_cast<double>(v[0].x), static_cast<double>(v[0].y)));
      const QPointF bottomRight = transform->matrix().map(QPointF(static_cast<double>(v[4].x), static_cast<double>(v[4].y)));
      return std::pair(QRectF(topLeft, bottomRight), QColor(v[0].r, v[0].g, v[0].b));
    };
    auto [box, color] = readBox();
    QCOMPARE(color, zipmoe::app::traceOpColor(TraceOp::ReadSM));
    QVERIFY(std::abs(box.left() - 100) < 0.01 && std::abs(box.right() - 200) < 0.01);
    QVERIFY(box.top() >= 0 && box.bottom() <= view.laneHeight() + view.rowSpacing());
    const int rebuilds = view.geometryRebuilds();
    QCOMPARE(rebuilds, model.laneCount());

    view.panBy(30);
    view.zoomAt(1.2, 50);
    QVERIFY(view.updatePaintNode(root.get(), nullptr) == root.get());
    QCOMPARE(view.geometryRebuilds(), rebuilds);
    std::tie(box, color) = readBox();
    QVERIFY(std::abs(box.left() - view.xAtTime(1'000'000)) < 0.01);
    QVERIFY(std::abs(box.right() - view.xAtTime(2'000'000)) < 0.01);

    view.zoomAt(0.25, 50);  // two octaves out: rebuilt, and still in place
    view.updatePaintNode(root.get(), nullptr);
    QCOMPARE(view.geometryRebuilds(), rebuilds + model.laneCount());
    std::tie(box, color) = readBox();
    QVERIFY(std::abs(box.left() - view.xAtTime(1'000'000)) < 0.01);
    QVERIFY(std::abs(box.right() - view.xAtTime(2'000'000)) < 0.01);
  }

  // The geometry is built per power-of-two zoom level with a margin of one window each side: a zoom
  // within the octave and pans within the margin change only the transform; zooming out of the
  // octave or panning past the margin rebuilds every lane once. (How long frames take is a
  // benchmark: zipmoe-chat-bench timeline.)
  void zoomWithinTheOctaveAndPanWithinTheMarginKeepTheGeometry() {
    TimelineModel model;
    model.setLanes(TraceLanes{2});  // 5 lanes x 20k intervals
    const std::vector<TraceEvent> events = zipmoe::app::syntheticBurstyTrace(5, model.laneCount(), 20'000);
    for (size_t at = 0; at < events.size(); at += 1000) model.append(std::span(events).subspan(at, 1000));
    QCOMPARE(model.eventCount(), 100'000);

    InspectableView offline;  // geometry alone, as updatePaintNode builds it
    offline.setWidth(1000);
    offline.setModel(&model);  // shows everything: the most merging
    std::unique_ptr<QSGNode> root(offline.updatePaintNode(nullptr, nullptr));
    int vertices = 0;
    for (QSGNode* child = root->firstChild(); child; child = child->nextSibling())
      vertices += static_cast<QSGGeometryNode*>(child)->geometry()->vertexCount();
    QVERIFY(vertices > 0);
    QVERIFY(vertices / 6 <= model.laneCount() * (1000 + 3));  // at most a box per pixel and lane

    QQuickWindow window;
    window.setColor(Qt::white);
    window.resize(1000, 200);
    TimelineView view(window.contentItem());
    view.setWidth(1000);
    view.setHeight(200);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    const auto rebuildsForFrame = [&]() -> int {
      const int before = view.geometryRebuilds();
      if (window.grabWindow().isNull()) return -1;  // no frame
      return view.geometryRebuilds() - before;
    };
    const int lanes = model.laneCount();
    view.setModel(&model);
    QCOMPARE(rebuildsForFrame(), lanes);
    // Within the octave of ns per pixel: in by up to 1.3x if there is room below, else out by 1.3x.
    const double inOctave = view.nsPerPixel() / std::exp2(std::floor(std::log2(view.nsPerPixel())));
    view.zoomAt(inOctave > 1.1 ? std::min(1.3, std::sqrt(inOctave)) : 1 / 1.3, 500);
    QCOMPARE(rebuildsForFrame(), 0);
    view.panBy(-200);
    QCOMPARE(rebuildsForFrame(), 0);
    view.zoomAt(64, 500);
    QCOMPARE(rebuildsForFrame(), lanes);
    view.panBy(-100);
    QCOMPARE(rebuildsForFrame(), 0);
    for (int i = 0; i < 10; ++i) view.panBy(-300);
    QCOMPARE(rebuildsForFrame(), lanes);
  }

 private:
  bool openGl_ = false;
};

QTEST_MAIN(TestTimeline)
#include "test_timeline.moc"
