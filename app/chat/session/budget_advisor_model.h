// BudgetAdvisorModel — the memory-budget page's advisor: the planner's predicted time per output
// token (and to the first token of a typical prompt) over the whole budget range, the measured TPOT
// of past replies at their budgets, the knee of the curve, and the machine's free memory.
//
// recompute() gathers what the prediction needs on the GUI thread — the open store, its cost
// profile, the live runtime's activation counts, observed costs, pools and workers, the dense time
// per token measured by the last replies — and hands it to one worker thread (owned, niced, joined),
// which runs zipmoe::BudgetAdvisor (the runtime's own planning path) at `points` budgets and posts
// the curve back; the GUI thread never plans. A recompute() asked for while one runs is done once
// that one ends. The controller calls it when a model opens and after every reply (new statistics);
// the page may call it whenever it is shown.
// Measured points come from the database (messages with a model, a budget that did not move while
// they streamed, and a TPOT). Free memory is /proc/meminfo's MemAvailable, read on each refresh.
// Thread-safety: GUI thread only (the worker thread touches only the values handed to it). Cost: a
// prediction per point off the GUI thread (tens of ms each for a Qwen-sized model).
#pragma once

#include <QObject>
#include <QString>
#include <QVariantList>
#include <QtQml/qqmlregistration.h>

#include <memory>
#include <mutex>
#include <thread>

#include "runtime_handle.h"

namespace zipmoe::app {

class ChatDatabase;

class BudgetAdvisorModel : public QObject {
  Q_OBJECT
  QML_ELEMENT
  QML_UNCREATABLE("the app's controller owns it")
  Q_PROPERTY(bool busy READ busy NOTIFY busyChanged FINAL)
  Q_PROPERTY(int revision READ revision NOTIFY curveChanged FINAL)  // bumped per finished computation
  // [{budget, share, tpotMs, ttftMs, hitRate, expertMs}] by budget, feasible points only.
  Q_PROPERTY(QVariantList curve READ curve NOTIFY curveChanged FINAL)
  Q_PROPERTY(QVariantList measured READ measured NOTIFY measuredChanged FINAL)  // [{budget, tpotMs, ttftMs, id}]
  Q_PROPERTY(double kneeBytes READ kneeBytes NOTIFY curveChanged FINAL)      // 0: no knee
  Q_PROPERTY(double kneeTpotMs READ kneeTpotMs NOTIFY curveChanged FINAL)
  Q_PROPERTY(double kneeGain READ kneeGain CONSTANT FINAL)                     // the knee's threshold, 0.05
  Q_PROPERTY(double minBudget READ minBudget NOTIFY curveChanged FINAL)
  Q_PROPERTY(double maxBudget READ maxBudget NOTIFY curveChanged FINAL)
  Q_PROPERTY(double denseMs READ denseMs NOTIFY curveChanged FINAL)          // used for the curve; -1 unknown
  Q_PROPERTY(int promptTokens READ promptTokens NOTIFY curveChanged FINAL)
  Q_PROPERTY(double freeMemoryBytes READ freeMemoryBytes NOTIFY memoryChanged FINAL)   // -1: unknown
  Q_PROPERTY(double totalMemoryBytes READ totalMemoryBytes NOTIFY memoryChanged FINAL)
  Q_PROPERTY(QString error READ error NOTIFY curveChanged FINAL)

 public:
  BudgetAdvisorModel(std::shared_ptr<RuntimeHandle> handle, QObject* parent = nullptr);
  ~BudgetAdvisorModel() override;  // joins the worker thread

  // What the prediction is for; set by the controller when a model opens (empty store: none).
  void setModel(const QString& storePath, const QString& modelKey, std::shared_ptr<ChatDatabase> database);
  // A reply's dense time (ms per decode step, per prompt token; < 0 = not measured) and prompt size:
  // kept per model in the database (running mean), then recompute().
  void recordDense(double msPerToken, double prefillMsPerToken, int promptTokens);
  // The expert FFN as the trace measures it now (RuntimeMonitor::expertFfnMs; 0 = the profile's).
  void setObservedExpertMs(double ms) { observedExpertMs_ = ms; }

  bool busy() const { return busy_; }
  int revision() const { return revision_; }
  QVariantList curve() const { return curve_; }
  QVariantList measured() const { return measured_; }
  double kneeBytes() const { return kneeBytes_; }
  double kneeTpotMs() const { return kneeTpotMs_; }
  double kneeGain() const { return 0.05; }
  double minBudget() const { return minBudget_; }
  double maxBudget() const { return maxBudget_; }
  double denseMs() const { return denseMs_; }
  int promptTokens() const { return promptTokens_; }
  double freeMemoryBytes() const { return freeMemory_; }
  double totalMemoryBytes() const { return totalMemory_; }
  QString error() const { return error_; }

  Q_INVOKABLE void recompute();
  Q_INVOKABLE void refreshMeasured();  // re-reads the measured replies and the free memory
  // The curve's TPOT at `bytes`, interpolated linearly between its points; -1 outside it.
  Q_INVOKABLE double predictedTpotAt(double bytes) const;

  // For the budget page's points and tests: how many points a curve has.
  static constexpr int kPoints = 33;

 Q_SIGNALS:
  void busyChanged();
  void curveChanged();
  void measuredChanged();
  void memoryChanged();

 private:
  struct Job;
  struct Result;
  void start();
  void finished(const std::shared_ptr<Result>& result);
  void readMemory();

  std::shared_ptr<RuntimeHandle> handle_;
  std::shared_ptr<ChatDatabase> database_;
  QString storePath_, modelKey_;
  std::thread thread_;
  bool busy_ = false, pending_ = false;
  int revision_ = 0;
  QVariantList curve_, measured_;
  double kneeBytes_ = 0, kneeTpotMs_ = 0, minBudget_ = 0, maxBudget_ = 0;
  double denseMs_ = -1, densePrefillMs_ = -1;
  int promptTokens_ = 64;
  double observedExpertMs_ = 0;
  double freeMemory_ = -1, totalMemory_ = -1;
  QString error_;
};

}  // namespace zipmoe::app
