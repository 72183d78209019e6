// ScheduleInspector — one MoE layer of one token under the magnifying glass, for the schedule page:
// the schedule the scheduler predicted for it (zipmoe::predictLayerSchedule: Algorithm 1 and the
// simulation, from the layer's measured operations and the store's cost profile) next to the one
// the runtime measured, each with its critical path (the chain of operations, each waiting for the
// one before it on its lane or in its tensor's DAG, that ends last) and each lane's idle time; and a
// summary of the whole token (stall, I/O busy, decompression busy, recovery, compute, dense, the
// predicted and measured expert time). Also writes any time range of the timeline as Chrome-trace
// JSON (chrome://tracing, ui.perfetto.dev).
// Reads the TimelineModel's intervals (the events the app drained from the runtime).
// Thread-safety: GUI thread only. Cost: inspect() is O(log n + the layer's events) plus one
// Algorithm 1 run on the layer's tasks; the token summary scans the token's events.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <QVariantList>
#include <QVariantMap>
#include <QtQml/qqmlregistration.h>

#include <optional>
#include <vector>

#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/trace/trace_events.h"

namespace zipmoe::app {

class TimelineModel;

class ScheduleInspector : public QObject {
  Q_OBJECT
  QML_ELEMENT
  QML_UNCREATABLE("the app's controller owns it")
  Q_PROPERTY(bool valid READ valid NOTIFY inspected FINAL)
  Q_PROPERTY(int token READ token NOTIFY inspected FINAL)
  Q_PROPERTY(int layer READ layer NOTIFY inspected FINAL)
  Q_PROPERTY(QStringList laneNames READ laneNames NOTIFY inspected FINAL)
  // [{lane, startNs, endNs, op, opName, color, critical, expert, tensor, shard}], times relative to
  // the layer's first operation.
  Q_PROPERTY(QVariantList predictedOps READ predictedOps NOTIFY inspected FINAL)
  Q_PROPERTY(QVariantList measuredOps READ measuredOps NOTIFY inspected FINAL)
  Q_PROPERTY(double predictedMakespanNs READ predictedMakespanNs NOTIFY inspected FINAL)
  Q_PROPERTY(double measuredMakespanNs READ measuredMakespanNs NOTIFY inspected FINAL)
  // [{lane, name, predictedIdleNs, measuredIdleNs}]: each lane's time without work within its makespan.
  Q_PROPERTY(QVariantList laneIdle READ laneIdle NOTIFY inspected FINAL)
  // {layers, stallNs, ioBusyNs, decompressBusyNs, recoveryBusyNs, computeNs, denseNs, prefetchNs,
  //  predictedExpertNs, measuredExpertNs, wallNs}
  Q_PROPERTY(QVariantMap tokenSummary READ tokenSummary NOTIFY inspected FINAL)
  Q_PROPERTY(QString error READ error NOTIFY inspected FINAL)

 public:
  explicit ScheduleInspector(TimelineModel* timeline, QObject* parent = nullptr);

  // The profile the predictions are priced with (the open store's), and whether the runtime orders
  // with Algorithm 1 (false: request order).
  void setProfile(std::optional<CostProfile> profile);
  // The expert FFN as the trace measures it (ms, for one token; 0 = the profile's a + b).
  void setObservedExpertMs(double ms) { observedExpertMs_ = ms; }

  bool valid() const { return valid_; }
  int token() const { return token_; }
  int layer() const { return layer_; }
  QStringList laneNames() const { return laneNames_; }
  QVariantList predictedOps() const { return predictedOps_; }
  QVariantList measuredOps() const { return measuredOps_; }
  double predictedMakespanNs() const { return predictedMakespanNs_; }
  double measuredMakespanNs() const { return measuredMakespanNs_; }
  QVariantList laneIdle() const { return laneIdle_; }
  QVariantMap tokenSummary() const { return tokenSummary_; }
  QString error() const { return error_; }

  // Inspects that layer of that token; false (with `error`) when the capture does not hold it.
  Q_INVOKABLE bool inspect(int token, int layer);
  // The newest token's last layer with expert operations.
  Q_INVOKABLE bool inspectLatest();
  // Writes every event of the timeline overlapping [t0, t1) (ns, the timeline's clock) as Chrome-trace
  // JSON to a path or file:// URL. Returns the number of events written, or -1 with `error` set.
  Q_INVOKABLE int exportChromeTrace(const QString& fileOrUrl, double t0, double t1);

 Q_SIGNALS:
  void inspected();

 private:
  std::vector<TraceEvent> eventsOfLayer(int token, int layer) const;
  std::vector<TraceEvent> eventsBetween(qint64 t0, qint64 t1, int token = -1) const;
  void summariseToken(int token);
  void fail(const QString& message);

  TimelineModel* timeline_;
  std::optional<CostProfile> profile_;
  double observedExpertMs_ = 0;
  CostProfile pricing() const;  // profile_ with the observed FFN, when there is one
  bool valid_ = false;
  int token_ = -1, layer_ = -1;
  QStringList laneNames_;
  QVariantList predictedOps_, measuredOps_, laneIdle_;
  double predictedMakespanNs_ = 0, measuredMakespanNs_ = 0;
  QVariantMap tokenSummary_;
  QString error_;
};

}  // namespace zipmoe::app
