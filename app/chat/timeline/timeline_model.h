// TimelineModel — the expert runtime's schedule as intervals per lane, for the Gantt chart.
//
// The app's controller drains zipmoe::TraceEvents from the runtime (about every 100 ms) and hands
// them to append(). Each lane (zipmoe::TraceLanes: I/O, decompression workers, recovery, compute)
// keeps its intervals in parallel arrays sorted by start, with a running maximum of the ends, so the
// intervals visible in [t0, t1) are found by two binary searches although neighbours may overlap a
// little. boxesForLane() merges what lies closer than a pixel, which bounds what TimelineView draws by
// the width in pixels rather than by the number of events. An index by token (forward step) and
// layer serves "jump to token/layer"; eventAt() serves the hover details.
// While `capturing` is false, append() drops what it is given (the page's pause button); at most
// `maxEvents` events are kept, the oldest tokens going first.
// Thread-safety: GUI thread only. TimelineView reads it from updatePaintNode, which runs while the
// GUI thread is blocked.
// Cost: append() is O(b log b) for a batch of b events plus, per lane whose batch starts before the
// lane's last interval, a merge with the lane's tail from that point. Queries are O(log n) plus the
// intervals from the first one still running at t0 to t1: the visible ones when a lane's intervals
// overlap only a little, as the runtime's do. Memory: about 48 bytes per event.
#pragma once

#include <QObject>
#include <QStringList>
#include <QVariantList>
#include <QVariantMap>
#include <QtQml/qqmlregistration.h>

#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "zipmoe/trace/trace_events.h"

namespace zipmoe::app {

// One box of the chart: one interval, or neighbours merged because they lie closer than a pixel.
struct TimelineBox {
  qint64 startNs = 0;
  qint64 endNs = 0;
  TraceOp op = TraceOp::ReadSM;  // the op of the longest member
  int count = 0;                 // how many intervals it stands for
};

class TimelineModel : public QObject {
  Q_OBJECT
  QML_ELEMENT
  QML_UNCREATABLE("provided by the app")
  Q_PROPERTY(int laneCount READ laneCount NOTIFY lanesChanged)
  Q_PROPERTY(QStringList laneNames READ laneNames NOTIFY lanesChanged)
  Q_PROPERTY(int eventCount READ eventCount NOTIFY dataChanged)
  Q_PROPERTY(qint64 startNs READ startNs NOTIFY dataChanged)
  Q_PROPERTY(qint64 endNs READ endNs NOTIFY dataChanged)
  Q_PROPERTY(int tokenCount READ tokenCount NOTIFY dataChanged)
  Q_PROPERTY(int firstToken READ firstToken NOTIFY dataChanged)
  Q_PROPERTY(int lastToken READ lastToken NOTIFY dataChanged)
  Q_PROPERTY(bool capturing READ capturing WRITE setCapturing NOTIFY capturingChanged)
  Q_PROPERTY(int maxEvents READ maxEvents WRITE setMaxEvents NOTIFY maxEventsChanged)

 public:
  explicit TimelineModel(QObject* parent = nullptr);
  ~TimelineModel() override;
  TimelineModel(const TimelineModel&) = delete;
  TimelineModel& operator=(const TimelineModel&) = delete;

  // Drops every event and takes the runtime's lane layout (emits lanesChanged and dataChanged).
  void setLanes(const TraceLanes& lanes);
  // Adds events in any order (each lane is kept sorted by start; appending after a lane's last start
  // is the cheap path). Dropped: everything while !capturing(), and events whose lane is not one of
  // setLanes' (with a warning). Emits dataChanged once if anything was added. An event with
  // endNs <= startNs is kept as 1 ns long, so that it can still be found and drawn.
  void append(std::span<const TraceEvent> events);
  // Drops every event; keeps the lanes. Emits dataChanged.
  Q_INVOKABLE void clear();

  int laneCount() const { return static_cast<int>(lanes_.size()); }
  QStringList laneNames() const { return laneNames_; }
  int eventCount() const { return eventCount_; }
  qint64 startNs() const { return startNs_; }  // data extent; 0 when empty
  qint64 endNs() const { return endNs_; }
  int tokenCount() const { return static_cast<int>(tokens_.size()); }  // distinct tokens held
  int firstToken() const;  // -1 when empty
  int lastToken() const;   // -1 when empty
  bool capturing() const { return capturing_; }
  void setCapturing(bool capturing);
  int maxEvents() const { return maxEvents_; }
  // At least 1. Over the limit, whole tokens are dropped oldest first until at most 90 % of it is
  // held (so that a full model does not evict on every append), except the newest token, which is
  // always kept.
  void setMaxEvents(int maxEvents);

  // Earliest start of any event of that token (of that token and layer); -1 if none is held.
  Q_INVOKABLE qint64 startOfToken(int token) const;
  Q_INVOKABLE qint64 startOfLayer(int token, int layer) const;
  // The event of `lane` containing timeNs, else the nearest within toleranceNs (ties: the shortest):
  // {op, opName, lane, laneName, token, layer, expert, tensor, shard, startNs, durationNs, bytes};
  // an empty map if there is none.
  Q_INVOKABLE QVariantMap eventAt(int lane, qint64 timeNs, qint64 toleranceNs) const;
  // [{name, color, op}] for each TraceOp, in enum order.
  Q_INVOKABLE QVariantList legend() const;

  // Intervals [first, last) of `lane` in start order that include every interval overlapping
  // [t0, t1) (and possibly a few before t0 that end earlier). Empty for an unknown lane.
  std::pair<size_t, size_t> visibleRange(int lane, qint64 t0, qint64 t1) const;
  // The boxes to draw for [t0, t1) at nsPerPixel, sorted and not overlapping: an interval joins the
  // box before it when it starts less than a pixel after the box's end and either is narrower than a
  // pixel; an interval inside the box always joins it. A box takes the op of its longest member, so
  // a pixel full of tiny reads between two long computes stays a read's colour. Each box but the
  // last owns a pixel (its width or the gap after it), so there are at most (t1 - t0) / nsPerPixel + 3.
  // A box starts where the previous one ends when its first interval overlapped it.
  std::vector<TimelineBox> boxesForLane(int lane, qint64 t0, qint64 t1, double nsPerPixel) const;
  // Bumped whenever the lane's intervals change (TimelineView rebuilds only those lanes).
  quint64 laneRevision(int lane) const;
  // The lane's intervals in start order (for tests and tools).
  size_t intervalCount(int lane) const;
  TraceEvent intervalAt(int lane, size_t index) const;

 Q_SIGNALS:
  void lanesChanged();
  // Emitted once per append() that added something, and on clear(), setLanes() and eviction.
  void dataChanged();
  void capturingChanged();
  void maxEventsChanged();

 private:
  // What an event says beyond its interval and lane.
  struct Details {
    uint64_t bytes = 0;
    int32_t token = 0;
    int16_t layer = -1;
    int16_t expert = -1;
    int8_t tensor = -1;
    int8_t shard = -1;
    TraceOp op = TraceOp::ReadSM;
  };
  struct Interval {
    qint64 startNs = 0;
    qint64 endNs = 0;
    Details details;
  };
  // One row of the chart; the four arrays run in parallel, sorted by start.
  struct Lane {
    std::vector<qint64> starts;
    std::vector<qint64> ends;
    std::vector<qint64> maxEnds;  // maxEnds[i] = max(ends[0..i]): non-decreasing, binary-searchable
    std::vector<Details> details;
    quint64 revision = 0;

    void insertSorted(std::vector<Interval>& batch);  // batch sorted by start
    void recomputeMaxEnds(size_t from);
  };
  struct TokenEntry {
    qint64 startNs = 0;
    int events = 0;
    std::vector<qint64> layerStarts;  // by layer; -1 where none
  };

  void index(const Interval& interval);
  void evictOldTokens();
  void recomputeExtent();

  TraceLanes traceLanes_;
  std::vector<Lane> lanes_;
  QStringList laneNames_;
  std::map<int, TokenEntry> tokens_;
  int eventCount_ = 0;
  qint64 startNs_ = 0;
  qint64 endNs_ = 0;
  bool capturing_ = true;
  int maxEvents_ = 1'000'000;
};

}  // namespace zipmoe::app
