// The app features of issue 18 against the real engine on the demo model (offscreen, real SQLite,
// real files): the budget advisor's curve computed off the GUI thread with the measured reply on it,
// the schedule inspector (predicted next to measured for a layer, critical path, idle time, token
// summary) and its Chrome-trace export, branching a conversation, copying code blocks, and the model
// manager's list and its refusals. Every wait is for a condition; no duration is asserted.
#include <QClipboard>
#include <QFile>
#include <QGuiApplication>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "budget_advisor_model.h"
#include "chat_controller.h"
#include "chat_database.h"
#include "code_blocks.h"
#include "message_model.h"
#include "model_stores_model.h"
#include "runtime_monitor.h"
#include "schedule_inspector.h"
#include "timeline_model.h"

using namespace zipmoe::app;

namespace {

constexpr int kTimeoutMs = 180000;

ControllerOptions optionsIn(const QTemporaryDir& dir) {
  ControllerOptions o;
  o.databasePath = dir.filePath(QStringLiteral("chat.sqlite"));
  o.storesDir = dir.filePath(QStringLiteral("stores"));
  o.demoModelDir = QStringLiteral(ZIPMOE_DEMO_MODEL_DIR);
  return o;
}

bool waitFor(const std::function<bool()>& condition) {
  QElapsedTimer t;
  t.start();
  while (!condition()) {
    if (t.elapsed() > kTimeoutMs) return false;
    QTest::qWait(20);
  }
  return true;
}

bool sendAndWait(ChatController& c, const QString& text) {
  QSignalSpy finished(&c, &ChatController::replyFinished);
  return c.send(text) && finished.wait(kTimeoutMs);
}

}  // namespace

class TestAppFeatures : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::unique_ptr<ChatController> c_;

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    c_ = std::make_unique<ChatController>(optionsIn(dir_));
    c_->openModel();
    QVERIFY(waitFor([&] { return c_->modelState() != QStringLiteral("loading"); }));
    QCOMPARE(c_->modelState(), QStringLiteral("ready"));
    c_->setSamplingValue(QStringLiteral("maxTokens"), 24);
    c_->setSamplingValue(QStringLiteral("seed"), 7);
  }
  void cleanupTestCase() { c_.reset(); }

  void theAdvisorPredictsEveryBudgetAndPlotsTheMeasuredReply() {
    BudgetAdvisorModel* a = c_->advisor();
    QVERIFY(waitFor([&] { return a->revision() > 0 && !a->busy(); }));
    QVERIFY2(a->error().isEmpty(), qPrintable(a->error()));
    QCOMPARE(a->curve().size(), qsizetype{BudgetAdvisorModel::kPoints});
    c_->runtime()->refresh();
    QCOMPARE(a->minBudget(), c_->runtime()->minimumBudget());
    QCOMPARE(a->maxBudget(), c_->runtime()->minimumBudget() + c_->runtime()->expertBytes());
    QVERIFY(a->kneeBytes() >= a->minBudget() && a->kneeBytes() <= a->maxBudget());
    QVERIFY(a->freeMemoryBytes() > 0 && a->totalMemoryBytes() >= a->freeMemoryBytes());
    QVERIFY(a->predictedTpotAt(c_->runtime()->budgetBytes()) > 0);
    QVERIFY(a->measured().isEmpty());
    QCOMPARE(a->denseMs(), -1.0);  // nothing measured yet: the curve is the expert path

    const int before = a->revision();
    QVERIFY(sendAndWait(*c_, QStringLiteral("ROMEO:")));
    // The reply is measured (TPOT at its budget) and stored; the advisor recomputes with the dense
    // time it measured.
    QVERIFY(waitFor([&] { return a->revision() > before && !a->busy(); }));
    QCOMPARE(a->measured().size(), qsizetype{1});
    const QVariantMap point = a->measured().front().toMap();
    QCOMPARE(point.value("budget").toDouble(), c_->runtime()->budgetBytes());
    QVERIFY(point.value("tpotMs").toDouble() > 0);
    QVERIFY(a->denseMs() > 0);
    const auto stored = c_->database()->replyMeasurements(c_->modelInfo().value("modelKey").toString());
    QCOMPARE(stored.size(), size_t{1});
    QCOMPARE(stored[0].tpotMs, point.value("tpotMs").toDouble());
  }

  void theInspectorShowsOneLayerPredictedAndMeasured() {
    if (c_->timeline()->eventCount() == 0) QVERIFY(sendAndWait(*c_, QStringLiteral("JULIET:")));
    c_->runtime()->refresh();  // drains the trace into the timeline
    ScheduleInspector* s = c_->inspector();
    QVERIFY2(s->inspectLatest(), qPrintable(s->error()));
    QVERIFY(s->valid());
    QVERIFY2(s->error().isEmpty(), qPrintable(s->error()));
    QVERIFY(!s->measuredOps().isEmpty());
    QVERIFY(!s->predictedOps().isEmpty());
    QVERIFY(s->predictedMakespanNs() > 0 && s->measuredMakespanNs() > 0);
    const auto critical = [](const QVariantList& ops) {
      int n = 0;
      for (const QVariant& v : ops) n += v.toMap().value("critical").toBool();
      return n;
    };
    QVERIFY(critical(s->measuredOps()) >= 1);
    QVERIFY(critical(s->predictedOps()) >= 1);
    QCOMPARE(s->laneIdle().size(), s->laneNames().size());
    for (const QVariant& v : s->laneIdle()) {
      const QVariantMap m = v.toMap();
      QVERIFY(m.value("measuredIdleNs").toDouble() >= 0);
      QVERIFY(m.value("measuredIdleNs").toDouble() <= s->measuredMakespanNs());
    }
    const QVariantMap summary = s->tokenSummary();
    QCOMPARE(summary.value("token").toInt(), s->token());
    QVERIFY(summary.value("layers").toInt() >= 1);
    QVERIFY(summary.value("measuredExpertNs").toDouble() > 0);
    QVERIFY(summary.value("predictedExpertNs").toDouble() > 0);
    // A layer that is not there is refused with a reason.
    QVERIFY(!s->inspect(s->token(), 999));
    QVERIFY(s->error().contains(QStringLiteral("999")));
  }

  void theVisibleRangeExportsAsChromeTrace() {
    TimelineModel* t = c_->timeline();
    QVERIFY(t->eventCount() > 0);
    const double t0 = static_cast<double>(t->startNs()), t1 = static_cast<double>(t->endNs());
    const double mid = (t0 + t1) / 2;
    const QString path = dir_.filePath(QStringLiteral("range.json"));
    const int n = c_->inspector()->exportChromeTrace(path, mid, t1 + 1);
    QVERIFY(n > 0);
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll());
    QVERIFY(doc.isObject());
    int complete = 0;
    for (const QJsonValue v : doc.object().value("traceEvents").toArray()) {
      const QJsonObject e = v.toObject();
      if (e.value("ph").toString() != QStringLiteral("X")) continue;
      ++complete;
      QVERIFY(e.value("dur").toDouble() >= 0);
    }
    QCOMPARE(complete, n);
    QVERIFY(n < t->eventCount() || t->eventCount() == n);
    // A range with nothing to export, and a path that cannot be written, are refused.
    QCOMPARE(c_->inspector()->exportChromeTrace(path, t1, t0), -1);
    QCOMPARE(c_->inspector()->exportChromeTrace(dir_.filePath(QStringLiteral("no/such/dir/x.json")), t0, t1 + 1), -1);
    QVERIFY(c_->inspector()->error().contains(QStringLiteral("no/such/dir")));
  }

  void aBranchContinuesFromAMessageAndLeadsBack() {
    if (c_->messages()->rows().size() < 2) QVERIFY(sendAndWait(*c_, QStringLiteral("ROMEO:")));
    const qint64 original = c_->currentChatId();
    const size_t messages = c_->messages()->rows().size();
    QVERIFY(c_->branchFrom(0));
    const qint64 branch = c_->currentChatId();
    QVERIFY(branch != original);
    QCOMPARE(c_->messages()->rows().size(), size_t{1});
    QCOMPARE(c_->branchParent().value("id").toLongLong(), original);
    QCOMPARE(c_->branchParent().value("position").toInt(), 0);
    QVERIFY(sendAndWait(*c_, QStringLiteral("A different question")));
    QCOMPARE(c_->messages()->rows().size(), size_t{3});
    c_->selectChat(original);
    QCOMPARE(c_->messages()->rows().size(), messages);  // the original is untouched
    QCOMPARE(c_->branches().size(), qsizetype{1});
    QCOMPARE(c_->branches().front().toMap().value("id").toLongLong(), branch);
    // Branching from a message that is not there changes nothing.
    QVERIFY(!c_->branchFrom(999));
    QCOMPARE(c_->currentChatId(), original);
    QVERIFY(!c_->lastError().isEmpty());
    c_->clearError();
  }

  void codeBlocksAreFoundAndCopiedVerbatim() {
    const QString text = QStringLiteral("Try:\n```python\ndef f(x):\n    return x  # `tick`\n```\nand\n~~~\nls -l\n~~~\n```sh\nunclosed");
    const auto blocks = fencedCodeBlocks(text);
    QCOMPARE(blocks.size(), size_t{3});
    QCOMPARE(blocks[0].language, QStringLiteral("python"));
    QCOMPARE(blocks[0].code, QStringLiteral("def f(x):\n    return x  # `tick`"));
    QCOMPARE(blocks[1].language, QString());
    QCOMPARE(blocks[1].code, QStringLiteral("ls -l"));
    QCOMPARE(blocks[2].code, QStringLiteral("unclosed"));
    QVERIFY(fencedCodeBlocks(QStringLiteral("inline ```code``` only")).empty());
    QCOMPARE(c_->codeBlocks(text).size(), qsizetype{3});
    QVERIFY(c_->copyText(blocks[0].code));
    QCOMPARE(QGuiApplication::clipboard()->text(), blocks[0].code);
  }

  void theModelManagerListsTheStoreAndRefusesToDeleteTheOpenOne() {
    ModelStoresModel* m = c_->stores();
    m->refresh();
    const QString open = c_->modelInfo().value("storePath").toString();
    const int i = m->indexOf(open);
    QVERIFY(i >= 0);
    const QModelIndex row = m->index(i);
    QCOMPARE(m->data(row, ModelStoresModel::FamilyRole).toString(), QStringLiteral("mixtral"));
    // The app's conversion measures the codec for this machine (codec_choice.h): one of the candidates.
    const QString codec = m->data(row, ModelStoresModel::CodecRole).toString();
    QVERIFY2(QStringList({"huffman8", "nibble", "zstd"}).contains(codec), qPrintable(codec));
    QCOMPARE(m->data(row, ModelStoresModel::LayersRole).toInt(), 4);
    QVERIFY(m->data(row, ModelStoresModel::SizeRole).toDouble() > 1e6);
    QVERIFY(m->data(row, ModelStoresModel::LastUsedRole).toDateTime().isValid());
    QVERIFY(m->data(row, ModelStoresModel::IsOpenRole).toBool());
    QVERIFY(m->data(row, ModelStoresModel::ManagedRole).toBool());
    QVERIFY(!m->remove(open));
    QVERIFY(m->error().contains(QStringLiteral("open")));
    QVERIFY(QFileInfo::exists(open + QStringLiteral("/manifest.json")));
    QVERIFY(!m->remove(dir_.filePath(QStringLiteral("nothing-here"))));
    // A copy of the store in the stores folder is listed, and deleted on request.
    const QString copy = dir_.filePath(QStringLiteral("stores/copy-of-demo"));
    QVERIFY(QDir().mkpath(copy));
    for (const QString& name : QDir(open).entryList(QDir::Files)) QVERIFY(QFile::copy(open + "/" + name, copy + "/" + name));
    m->refresh();
    QVERIFY(m->indexOf(copy) >= 0);
    QVERIFY(!m->data(m->index(m->indexOf(copy)), ModelStoresModel::LastUsedRole).toDateTime().isValid());
    QVERIFY2(m->remove(copy), qPrintable(m->error()));
    QVERIFY(!QFileInfo::exists(copy));
    QCOMPARE(m->indexOf(copy), -1);
  }
};

QTEST_MAIN(TestAppFeatures)
#include "test_app_features.moc"
