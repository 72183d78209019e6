#include "budget_advisor_model.h"

#include <QFile>
#include <QMetaObject>
#include <QVariantMap>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "chat_database.h"
#include "zipmoe/plan/budget_advisor.h"
#include "zipmoe/format/store.h"

namespace zipmoe::app {

namespace {

QString settingKey(const QString& modelKey, const char* name) {
  return QStringLiteral("advisor/%1/%2").arg(modelKey, QLatin1String(name));
}

// A running mean over about the last eight replies: recent enough to follow the machine's load,
// steady enough that one odd reply does not move the curve much.
double blend(double old, double sample) { return old > 0 ? old + (sample - old) / 8.0 : sample; }

}  // namespace

// What the worker thread gets: values only.
struct BudgetAdvisorModel::Job {
  std::string storePath;
  BudgetAdvisorInputs inputs;
  int points = kPoints;
};

struct BudgetAdvisorModel::Result {
  std::vector<BudgetPrediction> curve;
  int knee = -1;
  uint64_t minimum = 0, expertBytes = 0;
  QString error;
};

BudgetAdvisorModel::BudgetAdvisorModel(std::shared_ptr<RuntimeHandle> handle, QObject* parent)
    : QObject(parent), handle_(std::move(handle)) {
  readMemory();
}

BudgetAdvisorModel::~BudgetAdvisorModel() {
  if (thread_.joinable()) thread_.join();
}

void BudgetAdvisorModel::setModel(const QString& storePath, const QString& modelKey,
                                  std::shared_ptr<ChatDatabase> database) {
  storePath_ = storePath;
  modelKey_ = modelKey;
  database_ = std::move(database);
  denseMs_ = densePrefillMs_ = -1;
  promptTokens_ = 64;
  observedExpertMs_ = 0;
  if (database_ && !modelKey_.isEmpty()) {
    try {
      denseMs_ = database_->setting(settingKey(modelKey_, "denseMs"), -1.0).toDouble();
      densePrefillMs_ = database_->setting(settingKey(modelKey_, "densePrefillMs"), -1.0).toDouble();
      promptTokens_ = std::max(1, static_cast<int>(database_->setting(settingKey(modelKey_, "promptTokens"), 64).toLongLong()));
    } catch (const std::exception&) {
      // Unreadable settings: the curve shows the expert path alone until a reply measures them again.
    }
  }
  curve_.clear();
  kneeBytes_ = kneeTpotMs_ = minBudget_ = maxBudget_ = 0;
  Q_EMIT curveChanged();
  refreshMeasured();
}

void BudgetAdvisorModel::recordDense(double msPerToken, double prefillMsPerToken, int promptTokens) {
  if (msPerToken > 0) denseMs_ = blend(denseMs_, msPerToken);
  if (prefillMsPerToken > 0) densePrefillMs_ = blend(densePrefillMs_, prefillMsPerToken);
  if (promptTokens > 0) promptTokens_ = static_cast<int>(std::lround(blend(promptTokens_, promptTokens)));
  if (database_ && !modelKey_.isEmpty()) {
    try {
      database_->setSetting(settingKey(modelKey_, "denseMs"), denseMs_);
      database_->setSetting(settingKey(modelKey_, "densePrefillMs"), densePrefillMs_);
      database_->setSetting(settingKey(modelKey_, "promptTokens"), promptTokens_);
    } catch (const std::exception&) {
      // The controller reports database failures of its own writes; these figures are a cache.
    }
  }
  refreshMeasured();
  recompute();
}

void BudgetAdvisorModel::readMemory() {
  QFile f(QStringLiteral("/proc/meminfo"));
  double available = -1, total = -1;
  if (f.open(QIODevice::ReadOnly)) {
    for (const QByteArray& line : f.readAll().split('\n')) {
      const QList<QByteArray> parts = line.simplified().split(' ');
      if (parts.size() < 2) continue;
      if (parts[0] == "MemAvailable:") available = parts[1].toDouble() * 1024.0;
      if (parts[0] == "MemTotal:") total = parts[1].toDouble() * 1024.0;
    }
  }
  if (available != freeMemory_ || total != totalMemory_) {
    freeMemory_ = available;
    totalMemory_ = total;
    Q_EMIT memoryChanged();
  }
}

void BudgetAdvisorModel::refreshMeasured() {
  readMemory();
  QVariantList points;
  if (database_ && !modelKey_.isEmpty()) {
    try {
      for (const ReplyMeasurement& m : database_->replyMeasurements(modelKey_, 200)) {
        QVariantMap p;
        p[QStringLiteral("budget")] = static_cast<double>(m.budgetBytes);
        p[QStringLiteral("tpotMs")] = m.tpotMs;
        p[QStringLiteral("ttftMs")] = m.ttftMs;
        p[QStringLiteral("id")] = m.messageId;
        points.push_back(p);
      }
    } catch (const std::exception&) {
      // No points rather than a failing page; the controller's own reads report the database.
    }
  }
  measured_ = points;
  Q_EMIT measuredChanged();
}

void BudgetAdvisorModel::recompute() {
  if (storePath_.isEmpty()) return;
  if (busy_) {
    pending_ = true;
    return;
  }
  start();
}

void BudgetAdvisorModel::start() {
  auto job = std::make_shared<Job>();
  job->storePath = storePath_.toStdString();
  BudgetAdvisorInputs& in = job->inputs;
  in.denseSecondsPerToken = std::max(0.0, denseMs_) * 1e-3;
  in.densePrefillSecondsPerToken = std::max(0.0, densePrefillMs_) * 1e-3;
  in.promptTokens = promptTokens_;
  in.observedExpertSeconds = std::max(0.0, observedExpertMs_) * 1e-3;
  if (const auto rt = handle_->get()) {  // the live runtime: what its next plan would see
    const RuntimeOptions& o = rt->options();
    in.decompressWorkers = rt->lanes().workers;
    in.pools = rt->stats().poolMask;
    in.coalesceReads = o.coalesceReads;
    in.stagingSlots = o.stagingSlots;
    in.outputSlots = o.outputSlots;
    in.prefetchSlots = std::max(0, o.prefetchSlots);
    in.gridStep = o.gridStep;
    in.observed = rt->stats().observed;
    in.counts = rt->activationCounts();
  }
  if (thread_.joinable()) thread_.join();  // the previous one has posted its result already
  busy_ = true;
  Q_EMIT busyChanged();
  thread_ = std::thread([this, job] {
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 5);  // yields to the GUI thread
    auto result = std::make_shared<Result>();
    try {
      const auto store = Store::open(job->storePath);
      job->inputs.profile = loadCostProfile(std::filesystem::path(job->storePath) / "profile.json");
      const BudgetAdvisor advisor(*store, job->inputs);
      result->minimum = advisor.minimumBudget();
      result->expertBytes = advisor.expertBytes();
      result->curve = advisor.curve(job->points);
      result->knee = BudgetAdvisor::knee(result->curve);
    } catch (const std::exception& e) {
      result->error = QString::fromUtf8(e.what());
    }
    // Queued to the GUI thread; the destructor joins this thread, so `this` is alive while it posts.
    QMetaObject::invokeMethod(this, [this, result] { finished(result); }, Qt::QueuedConnection);
  });
}

void BudgetAdvisorModel::finished(const std::shared_ptr<Result>& result) {
  busy_ = false;
  error_ = result->error.isEmpty() ? QString() : tr("The budget advisor could not predict: %1").arg(result->error);
  QVariantList points;
  for (const BudgetPrediction& p : result->curve) {
    if (!p.feasible) continue;
    QVariantMap m;
    m[QStringLiteral("budget")] = static_cast<double>(p.budgetBytes);
    m[QStringLiteral("share")] = p.shareOfExperts;
    m[QStringLiteral("tpotMs")] = p.tpotSeconds * 1e3;
    m[QStringLiteral("ttftMs")] = p.ttftSeconds * 1e3;
    m[QStringLiteral("expertMs")] = p.expertSecondsPerToken * 1e3;
    m[QStringLiteral("hitRate")] = p.expectedHitRate;
    points.push_back(m);
  }
  curve_ = points;
  if (result->knee >= 0) {
    kneeBytes_ = static_cast<double>(result->curve[static_cast<size_t>(result->knee)].budgetBytes);
    kneeTpotMs_ = result->curve[static_cast<size_t>(result->knee)].tpotSeconds * 1e3;
  } else {
    kneeBytes_ = kneeTpotMs_ = 0;
  }
  minBudget_ = static_cast<double>(result->minimum);
  maxBudget_ = static_cast<double>(result->minimum + result->expertBytes);
  ++revision_;
  readMemory();
  Q_EMIT curveChanged();
  Q_EMIT busyChanged();
  if (pending_) {
    pending_ = false;
    start();
  }
}

double BudgetAdvisorModel::predictedTpotAt(double bytes) const {
  for (qsizetype i = 1; i < curve_.size(); ++i) {
    const QVariantMap a = curve_[i - 1].toMap(), b = curve_[i].toMap();
    const double x0 = a.value(QStringLiteral("budget")).toDouble(), x1 = b.value(QStringLiteral("budget")).toDouble();
    if (bytes < x0 || bytes > x1) continue;
    const double y0 = a.value(QStringLiteral("tpotMs")).toDouble(), y1 = b.value(QStringLiteral("tpotMs")).toDouble();
    return x1 > x0 ? y0 + (y1 - y0) * (bytes - x0) / (x1 - x0) : y0;
  }
  return -1;
}

}  // namespace zipmoe::app
