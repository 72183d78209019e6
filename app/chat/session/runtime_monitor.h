// RuntimeMonitor — the live view of the expert runtime for the memory-budget page and the schedule.
//
// Every `interval` ms (GUI thread) it reads the runtime's statistics through the RuntimeHandle and
// exposes them as properties: the budget, the pool split the planner chose (F/C/S/E share,
// capacity, occupancy, resident experts, hit rate), the miss rate, and the predicted vs measured
// makespan of a layer over the last interval (with a short history for a chart). It also drains
// the runtime's trace events into the TimelineModel. setBudget / setPools move the runtime at once:
// the runtime replans on its own thread, so the GUI thread never waits for the planner.
// "Follow free memory" (`following`) hands the budget to the engine's BudgetFollower, which moves it
// as other programs take and give back memory; each tick reads what it saw and did (available
// memory, the margin, its last move) through the handle. A budget the user sets (setBudget) turns
// following off: the user's choice wins, and the status says so.
// Thread-safety: GUI thread only. Cost: one stats() call and one trace drain per tick.
#pragma once

#include <QObject>
#include <QTimer>
#include <QVariantList>
#include <QVariantMap>
#include <QtQml/qqmlregistration.h>

#include <memory>
#include <vector>

#include "runtime_handle.h"
#include "zipmoe/trace/trace_events.h"

namespace zipmoe::app {

class TimelineModel;

class RuntimeMonitor : public QObject {
  Q_OBJECT
  QML_ELEMENT
  QML_UNCREATABLE("the app's controller owns it")
  Q_PROPERTY(bool active READ active NOTIFY updated FINAL)
  Q_PROPERTY(double budgetBytes READ budgetBytes NOTIFY updated FINAL)
  Q_PROPERTY(double minimumBudget READ minimumBudget NOTIFY updated FINAL)
  Q_PROPERTY(double expertBytes READ expertBytes NOTIFY updated FINAL)
  Q_PROPERTY(double heldBytes READ heldBytes NOTIFY updated FINAL)
  Q_PROPERTY(double workingSetBytes READ workingSetBytes NOTIFY updated FINAL)
  Q_PROPERTY(QVariantList pools READ pools NOTIFY updated FINAL)
  Q_PROPERTY(double missRate READ missRate NOTIFY updated FINAL)
  Q_PROPERTY(double activations READ activations NOTIFY updated FINAL)
  Q_PROPERTY(double bytesRead READ bytesRead NOTIFY updated FINAL)
  Q_PROPERTY(double predictedLayerMs READ predictedLayerMs NOTIFY updated FINAL)
  Q_PROPERTY(double measuredLayerMs READ measuredLayerMs NOTIFY updated FINAL)
  Q_PROPERTY(double lowerBoundLayerMs READ lowerBoundLayerMs NOTIFY updated FINAL)
  Q_PROPERTY(QVariantList makespanHistory READ makespanHistory NOTIFY updated FINAL)
  Q_PROPERTY(int replans READ replans NOTIFY updated FINAL)
  Q_PROPERTY(double lastReplanMs READ lastReplanMs NOTIFY updated FINAL)
  Q_PROPERTY(int poolMask READ poolMask NOTIFY updated FINAL)
  Q_PROPERTY(int workers READ workers NOTIFY updated FINAL)
  Q_PROPERTY(QString error READ error NOTIFY errorChanged FINAL)
  // The median time of one expert's FFN over the last 512 the trace recorded (ms; 0: none yet): the
  // FFN as this machine runs it now, which the budget advisor and the schedule inspector price
  // with instead of the profile's a + b fit once they have it.
  Q_PROPERTY(double expertFfnMs READ expertFfnMs NOTIFY updated FINAL)
  // The "Follow free memory" switch: on, the engine's follower moves the budget (or will, once a
  // model opens: the controller applies it then and remembers it across restarts).
  Q_PROPERTY(bool following READ following WRITE setFollowing NOTIFY followingChanged FINAL)
  // True when following was turned off because the user set a budget (until it is switched on).
  Q_PROPERTY(bool followStoppedByUser READ followStoppedByUser NOTIFY followingChanged FINAL)
  // The engine's follower, as read at the last tick: it exists and moves the budget; the memory
  // available (MemAvailable, 0 before its first reading) and the margin it leaves to other programs;
  // its last move {fromBytes, toBytes, reason, time ("HH:mm:ss", when this monitor saw it)}, empty
  // before the first; and its last failed reading or move ("" when none).
  Q_PROPERTY(bool followerActive READ followerActive NOTIFY updated FINAL)
  Q_PROPERTY(double availableMemoryBytes READ availableMemoryBytes NOTIFY updated FINAL)
  Q_PROPERTY(double followMarginBytes READ followMarginBytes NOTIFY updated FINAL)
  Q_PROPERTY(QVariantMap lastFollowMove READ lastFollowMove NOTIFY updated FINAL)
  Q_PROPERTY(QString followError READ followError NOTIFY updated FINAL)

 public:
  RuntimeMonitor(std::shared_ptr<RuntimeHandle> handle, TimelineModel* timeline, QObject* parent = nullptr);

  bool active() const { return active_; }
  double budgetBytes() const { return static_cast<double>(stats_.budgetBytes); }
  double minimumBudget() const { return minimumBudget_; }
  double expertBytes() const { return expertBytes_; }
  double heldBytes() const { return static_cast<double>(stats_.heldBytes); }
  double workingSetBytes() const { return static_cast<double>(stats_.workingSetBytes); }
  QVariantList pools() const;
  double missRate() const;
  double activations() const { return static_cast<double>(stats_.activations); }
  double bytesRead() const { return static_cast<double>(stats_.bytesRead); }
  double predictedLayerMs() const { return predictedLayerMs_; }
  double measuredLayerMs() const { return measuredLayerMs_; }
  double lowerBoundLayerMs() const { return lowerBoundLayerMs_; }
  QVariantList makespanHistory() const { return history_; }
  int replans() const { return static_cast<int>(stats_.replans); }
  double lastReplanMs() const { return stats_.lastReplanSeconds * 1e3; }
  int poolMask() const { return static_cast<int>(poolMask_); }
  int workers() const { return workers_; }
  QString error() const { return error_; }
  double expertFfnMs() const;
  bool following() const { return following_; }
  bool followStoppedByUser() const { return followStoppedByUser_; }
  bool followerActive() const { return followerActive_; }
  double availableMemoryBytes() const { return availableMemoryBytes_; }
  double followMarginBytes() const { return followMarginBytes_; }
  QVariantMap lastFollowMove() const { return lastFollowMove_; }
  QString followError() const { return followError_; }

  // Moves the budget (bytes); the runtime replans off the GUI thread. Turns following off first.
  // Returns false and sets `error` (the engine's message, naming the minimum) for a budget the
  // runtime refuses.
  Q_INVOKABLE bool setBudget(double bytes);
  // Turns following on or off, on the open model's engine when there is one. Returns false and sets
  // `error` when the engine cannot follow (the machine's memory cannot be read); following is off
  // then.
  Q_INVOKABLE bool setFollowing(bool on);
  // A model opened: with following on when `on`, or with it off for `failure` (the engine's
  // message) although it was asked for.
  void modelOpened(bool on, const QString& failure);
  Q_INVOKABLE bool setPools(int mask);  // bit 0 = F, 1 = C, 2 = S, 3 = E
  Q_INVOKABLE void refresh();            // read the runtime now (tests; the timer does it otherwise)
  void setInterval(int ms) { timer_.setInterval(ms); }

 Q_SIGNALS:
  void updated();
  void errorChanged();
  void replanned();  // the runtime applied a new plan (its replan count moved)
  void followingChanged();

 private:
  void setError(const QString& e);
  void setFollowingState(bool on, bool stoppedByUser);
  void readFollower();

  std::shared_ptr<RuntimeHandle> handle_;
  TimelineModel* timeline_;
  QTimer timer_;
  unsigned long generation_ = 0;
  bool active_ = false;
  RuntimeStats stats_{};
  RuntimeStats previous_{};
  double minimumBudget_ = 0, expertBytes_ = 0;
  double predictedLayerMs_ = 0, measuredLayerMs_ = 0, lowerBoundLayerMs_ = 0;
  QVariantList history_;
  unsigned poolMask_ = 0xF;
  int workers_ = 0;
  QString error_;
  std::vector<TraceEvent> drained_;
  std::vector<double> ffnMs_;  // ring of the last kFfnWindow expert FFN times
  size_t ffnNext_ = 0;
  bool following_ = false, followStoppedByUser_ = false;
  bool followerActive_ = false;
  double availableMemoryBytes_ = 0, followMarginBytes_ = 0;
  double lastMoveSeconds_ = -1;  // the follower's clock at its last move seen (a new move: a new time)
  QVariantMap lastFollowMove_;
  QString followError_;
};

}  // namespace zipmoe::app
