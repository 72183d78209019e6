// TimelineModel: sorted per-lane interval arrays, the token/layer index and the box merging.
#include "timeline_model.h"

#include <QColor>
#include <QtDebug>

#include <algorithm>
#include <limits>

#include "timeline_colors.h"

namespace zipmoe::app {

namespace {

bool startsBefore(qint64 a, qint64 b) { return a < b; }

}  // namespace

TimelineModel::TimelineModel(QObject* parent) : QObject(parent) {}

TimelineModel::~TimelineModel() = default;

void TimelineModel::setLanes(const TraceLanes& lanes) {
  traceLanes_ = lanes;
  lanes_.clear();
  lanes_.resize(static_cast<size_t>(std::max(lanes.count(), 0)));
  laneNames_.clear();
  for (int lane = 0; lane < lanes.count(); ++lane) {
    if (lane == lanes.io()) {
      laneNames_.append(tr("I/O"));
    } else if (lane == lanes.recovery()) {
      laneNames_.append(tr("recovery"));
    } else if (lane == lanes.compute()) {
      laneNames_.append(tr("compute"));
    } else {
      laneNames_.append(tr("decompress %1").arg(lane));
    }
  }
  tokens_.clear();
  eventCount_ = 0;
  startNs_ = endNs_ = 0;
  Q_EMIT lanesChanged();
  Q_EMIT dataChanged();
}

void TimelineModel::append(std::span<const TraceEvent> events) {
  if (!capturing_ || events.empty()) return;
  std::vector<std::vector<Interval>> batches(lanes_.size());
  int unknownLane = -1;
  size_t added = 0;
  for (const TraceEvent& e : events) {
    if (e.lane >= lanes_.size()) {
      unknownLane = e.lane;
      continue;
    }
    Interval interval;
    interval.startNs = e.startNs;
    interval.endNs = std::max(e.endNs, e.startNs + 1);
    interval.details = Details{e.bytes, e.token, e.layer, e.expert, e.tensor, e.shard, e.op};
    batches[e.lane].push_back(interval);
    ++added;
  }
  if (unknownLane >= 0) {
    qWarning("TimelineModel::append: dropped events on lane %d; the model has %d lanes (setLanes)",
             unknownLane, laneCount());
  }
  if (added == 0) return;

  bool haveExtent = eventCount_ > 0;
  for (size_t lane = 0; lane < lanes_.size(); ++lane) {
    std::vector<Interval>& batch = batches[lane];
    if (batch.empty()) continue;
    const auto byStart = [](const Interval& a, const Interval& b) { return a.startNs < b.startNs; };
    // Stable: events with equal starts keep the order in which the runtime recorded them.
    if (!std::is_sorted(batch.begin(), batch.end(), byStart)) std::stable_sort(batch.begin(), batch.end(), byStart);
    for (const Interval& interval : batch) {
      index(interval);
      startNs_ = haveExtent ? std::min(startNs_, interval.startNs) : interval.startNs;
      endNs_ = haveExtent ? std::max(endNs_, interval.endNs) : interval.endNs;
      haveExtent = true;
    }
    eventCount_ += static_cast<int>(batch.size());
    lanes_[lane].insertSorted(batch);
  }
  if (eventCount_ > maxEvents_) evictOldTokens();
  Q_EMIT dataChanged();
}

void TimelineModel::clear() {
  for (Lane& lane : lanes_) {
    const quint64 revision = lane.revision;
    lane = Lane{};
    lane.revision = revision + 1;
  }
  tokens_.clear();
  eventCount_ = 0;
  startNs_ = endNs_ = 0;
  Q_EMIT dataChanged();
}

int TimelineModel::firstToken() const { return tokens_.empty() ? -1 : tokens_.begin()->first; }

int TimelineModel::lastToken() const { return tokens_.empty() ? -1 : tokens_.rbegin()->first; }

void TimelineModel::setCapturing(bool capturing) {
  if (capturing_ == capturing) return;
  capturing_ = capturing;
  Q_EMIT capturingChanged();
}

void TimelineModel::setMaxEvents(int maxEvents) {
  maxEvents = std::max(maxEvents, 1);
  if (maxEvents_ == maxEvents) return;
  maxEvents_ = maxEvents;
  Q_EMIT maxEventsChanged();
  if (eventCount_ > maxEvents_) {
    evictOldTokens();
    Q_EMIT dataChanged();
  }
}

qint64 TimelineModel::startOfToken(int token) const {
  const auto it = tokens_.find(token);
  return it == tokens_.end() ? -1 : it->second.startNs;
}

qint64 TimelineModel::startOfLayer(int token, int layer) const {
  const auto it = tokens_.find(token);
  if (it == tokens_.end() || layer < 0) return -1;
  const std::vector<qint64>& layers = it->second.layerStarts;
  return static_cast<size_t>(layer) < layers.size() ? layers[static_cast<size_t>(layer)] : -1;
}

QVariantMap TimelineModel::eventAt(int lane, qint64 timeNs, qint64 toleranceNs) const {
  toleranceNs = std::max<qint64>(toleranceNs, 0);
  const auto [first, last] = visibleRange(lane, timeNs - toleranceNs, timeNs + toleranceNs + 1);
  if (first >= last) return {};
  const Lane& l = lanes_[static_cast<size_t>(lane)];
  size_t best = last;
  qint64 bestDistance = std::numeric_limits<qint64>::max();
  qint64 bestDuration = std::numeric_limits<qint64>::max();
  for (size_t i = first; i < last; ++i) {
    const qint64 s = l.starts[i];
    const qint64 e = l.ends[i];
    const qint64 distance = timeNs < s ? s - timeNs : (timeNs >= e ? timeNs - e + 1 : 0);
    if (distance > toleranceNs) continue;
    const qint64 duration = e - s;
    if (distance < bestDistance || (distance == bestDistance && duration < bestDuration)) {
      best = i;
      bestDistance = distance;
      bestDuration = duration;
    }
  }
  if (best == last) return {};
  const Details& d = l.details[best];
  return QVariantMap{
      {QStringLiteral("op"), static_cast<int>(d.op)},
      {QStringLiteral("opName"), traceOpDisplayName(d.op)},
      {QStringLiteral("lane"), lane},
      {QStringLiteral("laneName"), laneNames_.value(lane)},
      {QStringLiteral("token"), d.token},
      {QStringLiteral("layer"), d.layer},
      {QStringLiteral("expert"), d.expert},
      {QStringLiteral("tensor"), d.tensor},
      {QStringLiteral("shard"), d.shard},
      {QStringLiteral("startNs"), l.starts[best]},
      {QStringLiteral("durationNs"), l.ends[best] - l.starts[best]},
      {QStringLiteral("bytes"), static_cast<qulonglong>(d.bytes)},
  };
}

QVariantList TimelineModel::legend() const {
  QVariantList entries;
  for (int op = 0; op < kTraceOpCount; ++op) {
    const auto traceOp = static_cast<TraceOp>(op);
    entries.append(QVariantMap{{QStringLiteral("name"), traceOpDisplayName(traceOp)},
                               {QStringLiteral("color"), traceOpColor(traceOp)},
                               {QStringLiteral("op"), op}});
  }
  return entries;
}

std::pair<size_t, size_t> TimelineModel::visibleRange(int lane, qint64 t0, qint64 t1) const {
  if (lane < 0 || static_cast<size_t>(lane) >= lanes_.size() || t1 <= t0) return {0, 0};
  const Lane& l = lanes_[static_cast<size_t>(lane)];
  // The first interval whose running max-end passes t0 is the first one that ends after t0: every
  // interval before it ends at or before t0. Those after it may too, but they are few (overlap is small).
  const auto first = std::partition_point(l.maxEnds.begin(), l.maxEnds.end(), [t0](qint64 end) { return end <= t0; });
  const auto last = std::lower_bound(l.starts.begin(), l.starts.end(), t1, startsBefore);
  const auto firstIndex = static_cast<size_t>(first - l.maxEnds.begin());
  const auto lastIndex = static_cast<size_t>(last - l.starts.begin());
  return {firstIndex, std::max(firstIndex, lastIndex)};
}

std::vector<TimelineBox> TimelineModel::boxesForLane(int lane, qint64 t0, qint64 t1, double nsPerPixel) const {
  std::vector<TimelineBox> boxes;
  if (!(nsPerPixel > 0)) return boxes;
  const auto [first, last] = visibleRange(lane, t0, t1);
  if (first >= last) return boxes;
  const Lane& l = lanes_[static_cast<size_t>(lane)];
  TimelineBox box;
  qint64 longest = -1;
  bool open = false;
  for (size_t i = first; i < last; ++i) {
    const qint64 s = l.starts[i];
    const qint64 e = l.ends[i];
    const qint64 length = e - s;
    if (open) {
      const bool inside = e <= box.endNs;
      const bool near = static_cast<double>(s - box.endNs) < nsPerPixel;
      const bool narrow = static_cast<double>(box.endNs - box.startNs) < nsPerPixel ||
                          static_cast<double>(length) < nsPerPixel;
      if (inside || (near && narrow)) {
        box.endNs = std::max(box.endNs, e);
        ++box.count;
        if (length > longest) {
          longest = length;
          box.op = l.details[i].op;
        }
        continue;
      }
      boxes.push_back(box);
    }
    // Not joined: either a pixel away, or both it and the box are wide. Overlap is clipped so that
    // boxes never overlap (the earlier box keeps the shared stretch).
    const qint64 start = open ? std::max(s, box.endNs) : s;
    box = TimelineBox{start, e, l.details[i].op, 1};
    longest = length;
    open = true;
  }
  if (open) boxes.push_back(box);
  return boxes;
}

quint64 TimelineModel::laneRevision(int lane) const {
  if (lane < 0 || static_cast<size_t>(lane) >= lanes_.size()) return 0;
  return lanes_[static_cast<size_t>(lane)].revision;
}

size_t TimelineModel::intervalCount(int lane) const {
  if (lane < 0 || static_cast<size_t>(lane) >= lanes_.size()) return 0;
  return lanes_[static_cast<size_t>(lane)].starts.size();
}

TraceEvent TimelineModel::intervalAt(int lane, size_t index) const {
  const Lane& l = lanes_.at(static_cast<size_t>(lane));
  const Details& d = l.details.at(index);
  TraceEvent e;
  e.startNs = l.starts[index];
  e.endNs = l.ends[index];
  e.bytes = d.bytes;
  e.token = d.token;
  e.layer = d.layer;
  e.expert = d.expert;
  e.tensor = d.tensor;
  e.shard = d.shard;
  e.op = d.op;
  e.lane = static_cast<uint8_t>(lane);
  return e;
}

void TimelineModel::Lane::insertSorted(std::vector<Interval>& batch) {
  const size_t n = starts.size();
  size_t from = n;
  if (n == 0 || batch.front().startNs >= starts.back()) {
    for (const Interval& interval : batch) {
      starts.push_back(interval.startNs);
      ends.push_back(interval.endNs);
      details.push_back(interval.details);
    }
  } else {
    // Out of order: merge the batch with the lane's tail from where its first event belongs. Events
    // arrive nearly in order, so the tail is short. Existing events go first among equal starts.
    from = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), batch.front().startNs, startsBefore) -
                               starts.begin());
    std::vector<Interval> tail;
    tail.reserve(n - from);
    for (size_t i = from; i < n; ++i) tail.push_back(Interval{starts[i], ends[i], details[i]});
    std::vector<Interval> merged(tail.size() + batch.size());
    std::merge(tail.begin(), tail.end(), batch.begin(), batch.end(), merged.begin(),
               [](const Interval& a, const Interval& b) { return a.startNs < b.startNs; });
    starts.resize(from);
    ends.resize(from);
    details.resize(from);
    for (const Interval& interval : merged) {
      starts.push_back(interval.startNs);
      ends.push_back(interval.endNs);
      details.push_back(interval.details);
    }
  }
  recomputeMaxEnds(from);
  ++revision;
}

void TimelineModel::Lane::recomputeMaxEnds(size_t from) {
  maxEnds.resize(ends.size());
  qint64 running = from == 0 ? std::numeric_limits<qint64>::min() : maxEnds[from - 1];
  for (size_t i = from; i < ends.size(); ++i) {
    running = std::max(running, ends[i]);
    maxEnds[i] = running;
  }
}

void TimelineModel::index(const Interval& interval) {
  const Details& d = interval.details;
  auto [it, inserted] = tokens_.try_emplace(d.token);
  TokenEntry& token = it->second;
  if (inserted || interval.startNs < token.startNs) token.startNs = interval.startNs;
  ++token.events;
  if (d.layer >= 0) {
    const auto layer = static_cast<size_t>(d.layer);
    if (layer >= token.layerStarts.size()) token.layerStarts.resize(layer + 1, -1);
    qint64& start = token.layerStarts[layer];
    if (start < 0 || interval.startNs < start) start = interval.startNs;
  }
}

void TimelineModel::evictOldTokens() {
  // Down to 90 % of the limit so that a full model does not evict (an O(n) pass) on every append.
  const int target = maxEvents_ - maxEvents_ / 10;
  int remaining = eventCount_;
  auto keepFrom = tokens_.begin();
  while (remaining > target && std::next(keepFrom) != tokens_.end()) {
    remaining -= keepFrom->second.events;
    ++keepFrom;
  }
  if (keepFrom == tokens_.begin()) return;
  const int firstKept = keepFrom->first;
  tokens_.erase(tokens_.begin(), keepFrom);
  for (Lane& lane : lanes_) {
    size_t kept = 0;
    for (size_t i = 0; i < lane.starts.size(); ++i) {
      if (lane.details[i].token < firstKept) continue;
      lane.starts[kept] = lane.starts[i];
      lane.ends[kept] = lane.ends[i];
      lane.details[kept] = lane.details[i];
      ++kept;
    }
    if (kept == lane.starts.size()) continue;
    lane.starts.resize(kept);
    lane.ends.resize(kept);
    lane.details.resize(kept);
    lane.recomputeMaxEnds(0);
    ++lane.revision;
  }
  eventCount_ = remaining;
  recomputeExtent();
}

void TimelineModel::recomputeExtent() {
  bool any = false;
  startNs_ = endNs_ = 0;
  for (const Lane& lane : lanes_) {
    if (lane.starts.empty()) continue;
    const qint64 start = lane.starts.front();
    const qint64 end = lane.maxEnds.back();
    startNs_ = any ? std::min(startNs_, start) : start;
    endNs_ = any ? std::max(endNs_, end) : end;
    any = true;
  }
}

}  // namespace zipmoe::app
