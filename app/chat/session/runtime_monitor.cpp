#include "runtime_monitor.h"

#include <QTime>
#include <QVariantMap>

#include <algorithm>

#include "timeline_model.h"
#include "zipmoe/base/error.h"

namespace zipmoe::app {

namespace {
constexpr int kHistoryLength = 120;  // samples kept for the makespan chart
constexpr size_t kFfnWindow = 512;   // expert FFN times kept for their median
}  // namespace

RuntimeMonitor::RuntimeMonitor(std::shared_ptr<RuntimeHandle> handle, TimelineModel* timeline, QObject* parent)
    : QObject(parent), handle_(std::move(handle)), timeline_(timeline) {
  timer_.setInterval(250);
  connect(&timer_, &QTimer::timeout, this, &RuntimeMonitor::refresh);
  timer_.start();
}

double RuntimeMonitor::expertFfnMs() const {
  if (ffnMs_.empty()) return 0;
  std::vector<double> v = ffnMs_;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

void RuntimeMonitor::refresh() {
  const auto rt = handle_->get();
  const unsigned long generation = handle_->generation();
  if (!rt) {
    if (active_) {
      active_ = false;
      readFollower();
      Q_EMIT updated();
    }
    generation_ = generation;
    return;
  }
  if (generation != generation_ || !active_) {
    // A new runtime: its counters and trace clock start again.
    generation_ = generation;
    active_ = true;
    previous_ = RuntimeStats{};
    history_.clear();
    ffnMs_.clear();
    ffnNext_ = 0;
    predictedLayerMs_ = measuredLayerMs_ = lowerBoundLayerMs_ = 0;
    lastMoveSeconds_ = -1;  // another engine's follower, another clock
    lastFollowMove_.clear();
    minimumBudget_ = static_cast<double>(rt->minimumBudget());
    expertBytes_ = static_cast<double>(rt->expertBytes());
    if (timeline_) timeline_->setLanes(rt->lanes());
    workers_ = rt->lanes().workers;
    poolMask_ = rt->options().pools;  // the runtime's options keep the mask it opened with
  }
  const uint64_t replansBefore = stats_.replans, failuresBefore = stats_.planFailures;
  stats_ = rt->stats();
  // The page shows the user's budget: while the local server serves within it, the whole of it
  // (the runtime's is then the experts' part).
  if (const auto budget = handle_->budget()) stats_.budgetBytes = *budget;
  if (stats_.planFailures > failuresBefore)  // the runtime keeps its previous plan
    setError(tr("Replanning failed; the previous pool split stays in force: %1")
                 .arg(QString::fromStdString(stats_.lastPlanError)));
  if (stats_.layers > previous_.layers) {
    // Means over the layers that ran since the last tick: the live figures, not lifetime averages.
    const double n = static_cast<double>(stats_.layers - previous_.layers);
    predictedLayerMs_ = (stats_.predictedMakespan - previous_.predictedMakespan) / n * 1e3;
    measuredLayerMs_ = (stats_.measuredMakespan - previous_.measuredMakespan) / n * 1e3;
    lowerBoundLayerMs_ = (stats_.lowerBound - previous_.lowerBound) / n * 1e3;
    QVariantMap point;
    point[QStringLiteral("predicted")] = predictedLayerMs_;
    point[QStringLiteral("measured")] = measuredLayerMs_;
    point[QStringLiteral("lowerBound")] = lowerBoundLayerMs_;
    point[QStringLiteral("budget")] = static_cast<double>(stats_.budgetBytes);
    history_.append(point);
    while (history_.size() > kHistoryLength) history_.removeFirst();
    previous_ = stats_;
  }
  readFollower();
  drained_.clear();
  rt->drainTrace(drained_);
  if (timeline_ && !drained_.empty()) timeline_->append(drained_);
  for (const TraceEvent& e : drained_) {
    if (e.op != TraceOp::ExpertCompute || e.endNs <= e.startNs) continue;
    const double ms = static_cast<double>(e.endNs - e.startNs) / 1e6;
    if (ffnMs_.size() < kFfnWindow) ffnMs_.push_back(ms);
    else ffnMs_[ffnNext_] = ms;
    ffnNext_ = (ffnNext_ + 1) % kFfnWindow;
  }
  Q_EMIT updated();
  if (stats_.replans != replansBefore) Q_EMIT replanned();
}

QVariantList RuntimeMonitor::pools() const {
  QVariantList list;
  for (int p = 0; p < 4; ++p) {
    const PoolState& s = stats_.pools[static_cast<size_t>(p)];
    QVariantMap m;
    m[QStringLiteral("key")] = QString(QLatin1Char(poolLetter(static_cast<Pool>(p))));
    m[QStringLiteral("enabled")] = ((poolMask_ >> p) & 1u) != 0;
    m[QStringLiteral("ratio")] = s.ratio;
    m[QStringLiteral("capacityBytes")] = static_cast<double>(s.capacityBytes);
    m[QStringLiteral("usedBytes")] = static_cast<double>(s.usedBytes);
    m[QStringLiteral("residentExperts")] = s.residentExperts;
    m[QStringLiteral("hitRate")] =
        stats_.activations ? static_cast<double>(stats_.hits[static_cast<size_t>(p)]) / static_cast<double>(stats_.activations)
                           : 0.0;
    list.append(m);
  }
  return list;
}

double RuntimeMonitor::missRate() const {
  return stats_.activations ? static_cast<double>(stats_.misses) / static_cast<double>(stats_.activations) : 0.0;
}

bool RuntimeMonitor::setBudget(double bytes) {
  const auto rt = handle_->get();
  if (!rt) {
    setError(tr("No model with an expert runtime is open."));
    return false;
  }
  const bool wasFollowing = following_;
  if (wasFollowing) {
    // The user's choice wins over the follower's: off before the move, so that none of its moves
    // lands after this one.
    try {
      handle_->follow(false);
    } catch (const std::exception& e) {
      setError(QString::fromUtf8(e.what()));
      return false;
    }
    setFollowingState(false, true);
  }
  try {
    // Through the engine: while the local server serves within the budget, the slider moves the
    // whole of it (experts, KV caches, activations).
    const MemoryBudget budget = MemoryBudget::bytes(static_cast<uint64_t>(bytes));
    if (!handle_->setBudget(budget)) rt->setBudget(budget);
  } catch (const Error& e) {
    setError(QString::fromUtf8(e.what()));
    if (wasFollowing) refresh();
    return false;
  }
  setError({});
  if (wasFollowing) refresh();  // the follower's state, at once
  return true;
}

bool RuntimeMonitor::setFollowing(bool on) {
  try {
    handle_->follow(on);  // false: no model is open; the controller applies the switch when one opens
  } catch (const std::exception& e) {
    setFollowingState(false, false);
    setError(tr("Could not follow free memory: %1").arg(QString::fromUtf8(e.what())));
    return false;
  }
  setFollowingState(on, false);
  setError({});
  refresh();
  return true;
}

void RuntimeMonitor::modelOpened(bool on, const QString& failure) {
  refresh();
  if (!failure.isEmpty()) {
    setFollowingState(false, false);
    setError(tr("Could not follow free memory: %1").arg(failure));
    return;
  }
  if (on != following_) setFollowing(following_);  // the switch moved while the model was opening
}

void RuntimeMonitor::setFollowingState(bool on, bool stoppedByUser) {
  if (on == following_ && stoppedByUser == followStoppedByUser_) return;
  following_ = on;
  followStoppedByUser_ = stoppedByUser;
  Q_EMIT followingChanged();
}

void RuntimeMonitor::readFollower() {
  const std::optional<FollowStatus> s = handle_->followStatus();
  followerActive_ = s && s->enabled;
  availableMemoryBytes_ = s && s->reading ? static_cast<double>(s->reading->availableBytes) : 0.0;
  followMarginBytes_ = s && s->reading ? static_cast<double>(s->marginBytes) : 0.0;
  followError_ = s ? QString::fromStdString(s->error) : QString();
  if (!s || !s->lastMove || s->lastMove->seconds == lastMoveSeconds_) return;
  // A move not seen before: stamped with the wall clock now (within one tick of when it was made).
  const BudgetMove& move = *s->lastMove;
  lastMoveSeconds_ = move.seconds;
  lastFollowMove_.clear();
  lastFollowMove_[QStringLiteral("fromBytes")] = static_cast<double>(move.fromBytes);
  lastFollowMove_[QStringLiteral("toBytes")] = static_cast<double>(move.toBytes);
  lastFollowMove_[QStringLiteral("reason")] = QString::fromStdString(move.reason);
  lastFollowMove_[QStringLiteral("time")] = QTime::currentTime().toString(QStringLiteral("HH:mm:ss"));
}

bool RuntimeMonitor::setPools(int mask) {
  const auto rt = handle_->get();
  if (!rt) {
    setError(tr("No model with an expert runtime is open."));
    return false;
  }
  try {
    rt->setPools(static_cast<unsigned>(mask));
  } catch (const Error& e) {
    setError(QString::fromUtf8(e.what()));
    return false;
  }
  poolMask_ = static_cast<unsigned>(mask);
  setError({});
  refresh();
  return true;
}

void RuntimeMonitor::setError(const QString& e) {
  if (e == error_) return;
  error_ = e;
  Q_EMIT errorChanged();
}

}  // namespace zipmoe::app
