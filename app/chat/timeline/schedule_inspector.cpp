#include "schedule_inspector.h"

#include <QFile>
#include <QUrl>

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>

#include "timeline_colors.h"
#include "timeline_model.h"
#include "zipmoe/plan/schedule_prediction.h"

namespace zipmoe::app {

namespace {

bool isExpertBatchOp(TraceOp op) {
  return op != TraceOp::Dense && op != TraceOp::Prefetch;
}

// Marks the critical path: from the operation that ends last, step to the operation it waited for —
// the latest-ending one that finished by its start (within `slack`) on the same lane or in the same
// expert tensor's DAG (any tensor of the expert, for its compute) — until none is left.
std::vector<char> criticalPath(const std::vector<TraceEvent>& ops, int64_t slack) {
  std::vector<char> critical(ops.size(), 0);
  if (ops.empty()) return critical;
  size_t current = 0;
  for (size_t i = 1; i < ops.size(); ++i)
    if (ops[i].endNs > ops[current].endNs ||
        (ops[i].endNs == ops[current].endNs && ops[i].op == TraceOp::ExpertCompute))
      current = i;
  for (size_t steps = 0; steps < ops.size(); ++steps) {
    critical[current] = 1;
    const TraceEvent& c = ops[current];
    size_t best = ops.size();
    for (size_t i = 0; i < ops.size(); ++i) {
      const TraceEvent& o = ops[i];
      if (critical[i] || o.endNs > c.startNs + slack || o.startNs >= c.startNs) continue;
      const bool sameLane = o.lane == c.lane;
      const bool sameTensor = o.expert >= 0 && o.expert == c.expert &&
                              (c.op == TraceOp::ExpertCompute || (o.tensor == c.tensor && o.tensor >= 0));
      if (!sameLane && !sameTensor) continue;
      if (best == ops.size() || o.endNs > ops[best].endNs) best = i;
    }
    if (best == ops.size() || ops[best].endNs + slack < c.startNs - slack * 4) break;  // a gap: nothing waited
    current = best;
  }
  return critical;
}

// Σ over the lane's busy time (the union of its intervals) within [from, to).
int64_t busyTime(std::vector<std::pair<int64_t, int64_t>> intervals, int64_t from, int64_t to) {
  std::sort(intervals.begin(), intervals.end());
  int64_t busy = 0, reach = from;
  for (auto [s, e] : intervals) {
    s = std::max(s, reach);
    e = std::min(e, to);
    if (e > s) {
      busy += e - s;
      reach = e;
    }
  }
  return busy;
}

QVariantList opRows(const std::vector<TraceEvent>& ops, const std::vector<char>& critical, int64_t origin) {
  QVariantList rows;
  for (size_t i = 0; i < ops.size(); ++i) {
    const TraceEvent& e = ops[i];
    QVariantMap m;
    m[QStringLiteral("lane")] = static_cast<int>(e.lane);
    m[QStringLiteral("startNs")] = static_cast<double>(e.startNs - origin);
    m[QStringLiteral("endNs")] = static_cast<double>(std::max(e.endNs, e.startNs + 1) - origin);
    m[QStringLiteral("op")] = static_cast<int>(e.op);
    m[QStringLiteral("opName")] = traceOpDisplayName(e.op);
    m[QStringLiteral("color")] = traceOpColor(e.op);
    m[QStringLiteral("critical")] = critical[i] != 0;
    m[QStringLiteral("expert")] = static_cast<int>(e.expert);
    m[QStringLiteral("tensor")] = static_cast<int>(e.tensor);
    m[QStringLiteral("shard")] = static_cast<int>(e.shard);
    rows.push_back(m);
  }
  return rows;
}

}  // namespace

ScheduleInspector::ScheduleInspector(TimelineModel* timeline, QObject* parent) : QObject(parent), timeline_(timeline) {}

void ScheduleInspector::setProfile(std::optional<CostProfile> profile) { profile_ = std::move(profile); }

CostProfile ScheduleInspector::pricing() const {
  CostProfile p = *profile_;
  if (observedExpertMs_ > 0) {
    p.computeBase = std::max(0.0, observedExpertMs_ * 1e-3 - p.computePerToken);
  }
  return p;
}

void ScheduleInspector::fail(const QString& message) {
  valid_ = false;
  error_ = message;
  predictedOps_.clear();
  measuredOps_.clear();
  laneIdle_.clear();
  Q_EMIT inspected();
}

std::vector<TraceEvent> ScheduleInspector::eventsBetween(qint64 t0, qint64 t1, int token) const {
  std::vector<TraceEvent> out;
  for (int lane = 0; lane < timeline_->laneCount(); ++lane) {
    const auto [first, last] = timeline_->visibleRange(lane, t0, t1);
    for (size_t i = first; i < last; ++i) {
      TraceEvent e = timeline_->intervalAt(lane, i);
      if (e.endNs <= t0 || e.startNs >= t1) continue;
      if (token >= 0 && e.token != token) continue;
      out.push_back(e);
    }
  }
  return out;
}

std::vector<TraceEvent> ScheduleInspector::eventsOfLayer(int token, int layer) const {
  const qint64 t0 = timeline_->startOfLayer(token, layer);
  if (t0 < 0) return {};
  qint64 t1 = -1;  // the next layer's start, else the next token's, else the end of the data
  for (int next = layer + 1; next <= layer + 256 && t1 < 0; ++next) t1 = timeline_->startOfLayer(token, next);
  if (t1 < 0) t1 = timeline_->startOfToken(token + 1);
  if (t1 < 0 || t1 <= t0) t1 = timeline_->endNs() + 1;
  std::vector<TraceEvent> out;
  for (const TraceEvent& e : eventsBetween(t0, t1, token))
    if (e.layer == layer && isExpertBatchOp(e.op)) out.push_back(e);
  return out;
}

bool ScheduleInspector::inspectLatest() {
  const int token = timeline_->lastToken();
  if (token < 0) {
    fail(tr("The capture holds no token yet: send a message."));
    return false;
  }
  for (int t = token; t >= std::max(0, token - 4); --t)
    for (int layer = 255; layer >= 0; --layer)
      if (timeline_->startOfLayer(t, layer) >= 0 && !eventsOfLayer(t, layer).empty()) return inspect(t, layer);
  fail(tr("The capture holds no expert layer yet: send a message."));
  return false;
}

bool ScheduleInspector::inspect(int token, int layer) {
  const std::vector<TraceEvent> measured = eventsOfLayer(token, layer);
  if (measured.empty()) {
    fail(tr("Layer %1 of token %2 is not in the capture.").arg(layer).arg(token));
    return false;
  }
  const int lanes = timeline_->laneCount();
  const int workers = std::max(1, lanes - 3);
  token_ = token;
  layer_ = layer;
  laneNames_ = timeline_->laneNames();
  error_.clear();

  int64_t origin = std::numeric_limits<int64_t>::max(), measuredEnd = 0;
  for (const TraceEvent& e : measured) {
    origin = std::min(origin, e.startNs);
    measuredEnd = std::max(measuredEnd, e.endNs);
  }
  std::vector<TraceEvent> predicted;
  if (profile_) {
    try {
      predicted = predictLayerSchedule(measured, pricing(), workers).events;
    } catch (const std::exception& e) {
      error_ = tr("No prediction for this layer: %1").arg(QString::fromUtf8(e.what()));
    }
  } else {
    error_ = tr("No cost profile: the prediction needs the open store's profile.");
  }
  int64_t predictedEnd = origin;
  for (const TraceEvent& e : predicted) predictedEnd = std::max(predictedEnd, e.endNs);
  measuredMakespanNs_ = static_cast<double>(measuredEnd - origin);
  predictedMakespanNs_ = predicted.empty() ? 0.0 : static_cast<double>(predictedEnd - origin);
  const int64_t slackMeasured = std::max<int64_t>(20'000, (measuredEnd - origin) / 50);
  const int64_t slackPredicted = std::max<int64_t>(1'000, (predictedEnd - origin) / 1000);
  measuredOps_ = opRows(measured, criticalPath(measured, slackMeasured), origin);
  predictedOps_ = opRows(predicted, criticalPath(predicted, slackPredicted), origin);

  laneIdle_.clear();
  for (int lane = 0; lane < lanes; ++lane) {
    std::vector<std::pair<int64_t, int64_t>> m, p;
    for (const TraceEvent& e : measured)
      if (e.lane == lane && e.op != TraceOp::Stall) m.emplace_back(e.startNs, e.endNs);
    for (const TraceEvent& e : predicted)
      if (e.lane == lane) p.emplace_back(e.startNs, e.endNs);
    QVariantMap row;
    row[QStringLiteral("lane")] = lane;
    row[QStringLiteral("name")] = lane < laneNames_.size() ? laneNames_[lane] : QString::number(lane);
    row[QStringLiteral("measuredIdleNs")] =
        static_cast<double>((measuredEnd - origin) - busyTime(m, origin, measuredEnd));
    row[QStringLiteral("predictedIdleNs")] =
        predicted.empty() ? -1.0 : static_cast<double>((predictedEnd - origin) - busyTime(p, origin, predictedEnd));
    laneIdle_.push_back(row);
  }
  summariseToken(token);
  valid_ = true;
  Q_EMIT inspected();
  return true;
}

void ScheduleInspector::summariseToken(int token) {
  const qint64 t0 = timeline_->startOfToken(token);
  qint64 t1 = timeline_->startOfToken(token + 1);
  if (t1 < 0) t1 = timeline_->endNs() + 1;
  const std::vector<TraceEvent> events = eventsBetween(t0, t1, token);
  const int lanes = timeline_->laneCount();
  const int workers = std::max(1, lanes - 3);
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> byLane;
  std::map<int, std::vector<TraceEvent>> byLayer;
  int64_t stall = 0, compute = 0, dense = 0, prefetch = 0, first = std::numeric_limits<int64_t>::max(), last = 0;
  for (const TraceEvent& e : events) {
    first = std::min(first, e.startNs);
    last = std::max(last, e.endNs);
    const int64_t d = std::max<int64_t>(0, e.endNs - e.startNs);
    switch (e.op) {
      case TraceOp::Stall: stall += d; continue;
      case TraceOp::ExpertCompute: compute += d; break;
      case TraceOp::Dense: dense += d; continue;
      case TraceOp::Prefetch: prefetch += d; break;
      default: break;
    }
    byLane[e.lane].emplace_back(e.startNs, e.endNs);
    if (e.layer >= 0 && e.op != TraceOp::Prefetch) byLayer[e.layer].push_back(e);
  }
  const auto laneBusy = [&](int lane) {
    const auto it = byLane.find(lane);
    return it == byLane.end() ? int64_t{0} : busyTime(it->second, first, last);
  };
  int64_t decompress = 0;
  for (int w = 0; w < workers; ++w) decompress += laneBusy(1 + w);
  double predictedExpert = 0, measuredExpert = 0;
  for (const auto& [layer, ops] : byLayer) {
    int64_t s = std::numeric_limits<int64_t>::max(), e = 0;
    for (const TraceEvent& o : ops) {
      s = std::min(s, o.startNs);
      e = std::max(e, o.endNs);
    }
    measuredExpert += static_cast<double>(e - s);
    if (profile_) {
      try {
        predictedExpert += predictLayerSchedule(ops, pricing(), workers).makespanSeconds * 1e9;
      } catch (const std::exception&) {
        // Counted as unpredicted: the layer's row shows why when it is inspected.
      }
    }
  }
  QVariantMap s;
  s[QStringLiteral("token")] = token;
  s[QStringLiteral("layers")] = static_cast<int>(byLayer.size());
  s[QStringLiteral("stallNs")] = static_cast<double>(stall);
  s[QStringLiteral("ioBusyNs")] = static_cast<double>(laneBusy(0));
  s[QStringLiteral("decompressBusyNs")] = static_cast<double>(decompress);
  s[QStringLiteral("recoveryBusyNs")] = static_cast<double>(laneBusy(workers + 1));
  s[QStringLiteral("computeNs")] = static_cast<double>(compute);
  s[QStringLiteral("denseNs")] = static_cast<double>(dense);
  s[QStringLiteral("prefetchNs")] = static_cast<double>(prefetch);
  s[QStringLiteral("predictedExpertNs")] = profile_ ? predictedExpert : -1.0;
  s[QStringLiteral("measuredExpertNs")] = measuredExpert;
  s[QStringLiteral("wallNs")] = events.empty() ? 0.0 : static_cast<double>(last - first);
  tokenSummary_ = s;
}

int ScheduleInspector::exportChromeTrace(const QString& fileOrUrl, double t0, double t1) {
  const QUrl url(fileOrUrl);
  const QString path = url.isLocalFile() ? url.toLocalFile() : fileOrUrl;
  if (!(t1 > t0)) {
    error_ = tr("Nothing to export: the visible range is empty.");
    Q_EMIT inspected();
    return -1;
  }
  std::vector<TraceEvent> events = eventsBetween(static_cast<qint64>(t0), static_cast<qint64>(t1));
  std::sort(events.begin(), events.end(), [](const TraceEvent& a, const TraceEvent& b) { return a.startNs < b.startNs; });
  std::ostringstream json;
  writeChromeTrace(json, events, TraceLanes{std::max(1, timeline_->laneCount() - 3)});
  QFile f(path);
  const std::string text = json.str();
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
      f.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size()) || !f.flush()) {
    error_ = tr("Could not write %1: %2").arg(path, f.errorString());
    Q_EMIT inspected();
    return -1;
  }
  return static_cast<int>(events.size());
}

}  // namespace zipmoe::app
