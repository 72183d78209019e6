// The chat app's controller and engine worker against the real engine on the demo model: opening
// (conversion to a store, profile), streaming replies into the message model and the database,
// stop, regenerate, edit-and-resend, the live memory budget moved while a reply streams, the budget
// following free memory, expert statistics kept by the engine and loaded at the next start, export,
// search, translations, and the database surviving the real app being killed mid-reply.
#include <QGuiApplication>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSignalSpy>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QtTest>

#include <functional>

#include <cmath>
#include <csignal>
#include <memory>
#include <sys/types.h>

#include "chat_controller.h"
#include "chat_database.h"
#include "chat_list_model.h"
#include "engine_worker.h"
#include "message_model.h"
#include "runtime_monitor.h"
#include "timeline_model.h"
#include "zipmoe/chat_session.h"
#include "zipmoe/engine.h"

using namespace zipmoe::app;

namespace {

constexpr int kOpenTimeoutMs = 180000;
constexpr int kReplyTimeoutMs = 180000;

ControllerOptions optionsIn(const QTemporaryDir& dir) {
  ControllerOptions o;
  o.databasePath = dir.filePath(QStringLiteral("chat.sqlite"));
  o.storesDir = dir.filePath(QStringLiteral("stores"));
  o.demoModelDir = QStringLiteral(ZIPMOE_DEMO_MODEL_DIR);
  return o;
}

bool waitReady(ChatController& c) {
  QElapsedTimer t;
  t.start();
  while (c.modelState() == QStringLiteral("loading") && t.elapsed() < kOpenTimeoutMs) QTest::qWait(20);
  if (c.modelState() != QStringLiteral("ready")) qWarning() << "model error:" << c.modelError();
  return c.modelState() == QStringLiteral("ready");
}

// The engine's activation history file (engine/src/experts/activation_history.h), read as the app's
// user would find it.
struct ActivationFile {
  bool valid = false;
  QString error;
  int layers = 0, experts = 0;
  QList<quint64> steps, counts;
};

ActivationFile readActivationFile(const QString& path) {
  ActivationFile a;
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    a.error = path + QStringLiteral(": ") + file.errorString();
    return a;
  }
  const QJsonObject o = QJsonDocument::fromJson(file.readAll()).object();
  a.layers = o.value("layers").toInt();
  a.experts = o.value("experts").toInt();
  for (const QJsonValue v : o.value("steps").toArray()) a.steps.append(static_cast<quint64>(v.toDouble()));
  for (const QJsonValue v : o.value("counts").toArray()) a.counts.append(static_cast<quint64>(v.toDouble()));
  if (o.value("format").toString() != QStringLiteral("zipmoe-activation-history") || o.value("version").toInt() != 1 ||
      !o.value("store").isString())
    a.error = path + QStringLiteral(": not a version-1 activation history");
  else if (a.layers <= 0 || a.experts <= 0 || a.steps.size() != a.layers || a.counts.size() != a.layers * a.experts)
    a.error = path + QStringLiteral(": %1 steps and %2 counts for %3 layers x %4 experts")
                         .arg(a.steps.size()).arg(a.counts.size()).arg(a.layers).arg(a.experts);
  a.valid = a.error.isEmpty();
  return a;
}

// Sends and waits for the reply; returns the reply's row.
MessageRow sendAndWait(ChatController& c, const QString& text) {
  QSignalSpy finished(&c, &ChatController::replyFinished);
  if (!c.send(text)) return {};
  if (!finished.wait(kReplyTimeoutMs)) return {};
  return c.messages()->rows().back();
}

}  // namespace

class TestChatController : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void opensTheDemoModelConvertingItFirst() {
    ChatController c(optionsIn(dir_));
    QSignalSpy progress(&c, &ChatController::loadProgressChanged);
    c.openModel();
    QVERIFY(waitReady(c));
    QVERIFY(progress.count() > 1);  // conversion and opening stages were reported
    const QVariantMap info = c.modelInfo();
    QCOMPARE(info.value("family").toString(), QStringLiteral("mixtral"));
    QCOMPARE(info.value("layers").toInt(), 4);
    QCOMPARE(info.value("experts").toInt(), 8);
    QVERIFY(QFileInfo::exists(info.value("storePath").toString() + "/manifest.json"));
    c.runtime()->refresh();
    QVERIFY(c.runtime()->active());
    QVERIFY(c.runtime()->budgetBytes() >= c.runtime()->minimumBudget());
    // The profile measured at the first open is kept in the database as well.
    const QString key = info.value("modelKey").toString();
    QVERIFY(key.startsWith(QStringLiteral("mixtral:")));
    QVERIFY(c.database()->loadProfile(key).has_value());
  }

  // A cancel given before the worker even starts the open counts; nothing is left half-converted,
  // and the next open works.
  void cancellingAnOpenLeavesNothingBehind() {
    QTemporaryDir dir;
    ChatController c(optionsIn(dir));
    c.openModel();
    c.cancelLoading();
    QVERIFY(!waitReady(c));
    QCOMPARE(c.modelState(), QStringLiteral("failed"));
    QCOMPARE(c.modelError(), QStringLiteral("Cancelled."));
    const QString store = EngineWorker::storePathFor(QStringLiteral(ZIPMOE_DEMO_MODEL_DIR), dir.filePath(QStringLiteral("stores")));
    QVERIFY(!QFileInfo::exists(store + QStringLiteral("/manifest.json")));
    c.openModel();
    QVERIFY(waitReady(c));
  }

  void openingSomethingThatIsNotAModelSaysWhat() {
    QTemporaryDir dir;
    ChatController c(optionsIn(dir));
    c.openModel(dir.path());
    QVERIFY(!waitReady(c));
    QVERIFY2(c.modelError().contains(dir.path()) && c.modelError().contains(QStringLiteral("config.json")),
             qPrintable(c.modelError()));
  }

  void streamsARepliesIntoTheModelAndTheDatabase() {
    ChatController c(optionsIn(dir_));
    c.openModel();
    QVERIFY(waitReady(c));
    c.newChat();
    c.setSamplingValue("maxTokens", 48);
    c.setSamplingValue("seed", 7);
    QSignalSpy streamed(&c, &ChatController::streamingText);
    const MessageRow reply = sendAndWait(c, QStringLiteral("ROMEO:\nBut soft, what light"));
    QCOMPARE(reply.role, QStringLiteral("assistant"));
    QCOMPARE(reply.state, QStringLiteral("complete"));
    QVERIFY(!reply.content.isEmpty());
    QVERIFY(streamed.count() >= 1);
    QVERIFY(reply.ttftMs > 0);
    QVERIFY(reply.generatedTokens > 0 && reply.generatedTokens <= 48);
    QVERIFY(reply.expertHitRate >= 0 && reply.expertHitRate <= 1);

    const auto stored = c.database()->messages(c.currentChatId());
    QCOMPARE(stored.size(), size_t{2});
    QCOMPARE(stored[0].content, QStringLiteral("ROMEO:\nBut soft, what light"));
    QCOMPARE(stored[1].content, reply.content);
    QCOMPARE(stored[1].state, MessageState::Complete);
    QCOMPARE(stored[1].generatedTokens, reply.generatedTokens);
    // The chat is titled after its first message and found by a word of the reply.
    QVERIFY(c.currentChatTitle().startsWith(QStringLiteral("ROMEO:")));
    const QString word = reply.content.simplified().section(QLatin1Char(' '), 0, 0);
    if (!word.isEmpty()) {
      c.setSearchText(word);
      QVERIFY(c.chats()->indexOf(c.currentChatId()) >= 0);
      c.setSearchText(QString());
    }
    // The schedule captured the runtime's operations for this reply.
    c.runtime()->refresh();
    QVERIFY(c.timeline()->eventCount() > 0);
  }

  void stopEndsTheReplyAndKeepsItsText() {
    ChatController c(optionsIn(dir_));
    c.openModel();
    QVERIFY(waitReady(c));
    c.newChat();
    c.setSamplingValue("maxTokens", 200);
    QSignalSpy finished(&c, &ChatController::replyFinished);
    QSignalSpy streamed(&c, &ChatController::streamingText);
    c.setGenerationPaused(true);  // held after its first token: the stop lands mid-reply, always
    QVERIFY(c.send(QStringLiteral("JULIET:")));
    QVERIFY(c.generating());
    QVERIFY(streamed.wait(kReplyTimeoutMs));
    c.stop();
    QVERIFY(finished.wait(kReplyTimeoutMs));
    QVERIFY(!c.generating());
    const MessageRow reply = c.messages()->rows().back();
    QCOMPARE(reply.stopReason, QStringLiteral("stopped"));
    QVERIFY(reply.generatedTokens < 200);
    QCOMPARE(c.database()->messages(c.currentChatId()).back().content, reply.content);
  }

  // A conversation that outgrows the demo's 256-token context: the app leaves out the oldest turns
  // (the notice says so) and replies as a ChatSession given the same conversation does — the same
  // engine core and the same context policy as `zipmoe chat` and `zipmoe serve`.
  void aConversationLongerThanTheContextLeavesOutItsOldestTurns() {
    ChatController c(optionsIn(dir_));
    c.openModel();
    QVERIFY(waitReady(c));
    c.newChat();
    c.setSystemPrompt(QStringLiteral("You are a herald of Verona."));
    c.setSamplingValue("maxTokens", 24);
    c.setSamplingValue("temperature", 0);
    for (int turn = 0; turn < 8 && c.lastReplyPrompt().value("droppedTurns").toInt() == 0; ++turn) {
      const MessageRow reply = sendAndWait(
          c, QStringLiteral("Turn %1: what news from Mantua, of Juliet, of the tomb and of the friar's letter?").arg(turn));
      QCOMPARE(reply.state, QStringLiteral("complete"));
    }
    const int dropped = c.lastReplyPrompt().value("droppedTurns").toInt();
    QVERIFY2(dropped > 0, "eight turns did not outgrow the context");
    QVERIFY2(c.notice().contains(QStringLiteral("left out")), qPrintable(c.notice()));

    // The same conversation through a ChatSession on this process's own engine.
    auto engine = zipmoe::Engine::open(ZIPMOE_DEMO_MODEL_DIR, zipmoe::EngineOptions{});
    zipmoe::ChatSession session(*engine);
    session.setSystemPrompt("You are a herald of Verona.");
    std::vector<zipmoe::ChatMessage> turns;
    const auto rows = c.messages()->rows();
    for (size_t i = 0; i + 1 < rows.size(); ++i)
      if (rows[i].role != QStringLiteral("system")) turns.push_back({rows[i].role.toStdString(), rows[i].content.toStdString()});
    session.setMessages(turns);
    zipmoe::SamplingParams p;
    p.temperature = 0;
    p.maxTokens = 24;
    const zipmoe::GenerationStats expected = session.reply(p, {});
    QCOMPARE(expected.droppedMessages, dropped);
    QCOMPARE(rows.back().content.toStdString(), expected.text);

    // With --context-overflow error the same conversation's next turn is refused, naming the limit.
    ControllerOptions strictOptions = optionsIn(dir_);
    strictOptions.contextOverflow = zipmoe::ContextOverflow::Error;
    ChatController strict(strictOptions);
    strict.openModel();
    QVERIFY(waitReady(strict));
    strict.selectChat(c.currentChatId());
    const MessageRow refused = sendAndWait(strict, QStringLiteral("And what of Romeo?"));
    QCOMPARE(refused.state, QStringLiteral("error"));
    QVERIFY2(refused.stopReason.contains(QStringLiteral("too long for this model")) &&
                 refused.stopReason.contains(QStringLiteral("context holds 256 tokens")),
             qPrintable(refused.stopReason));
  }

  void regenerateAndEditReplaceTheTail() {
    ChatController c(optionsIn(dir_));
    c.openModel();
    QVERIFY(waitReady(c));
    c.newChat();
    c.setSamplingValue("maxTokens", 16);
    QVERIFY(!sendAndWait(c, QStringLiteral("First question")).content.isNull());
    QVERIFY(!sendAndWait(c, QStringLiteral("Second question")).content.isNull());
    QCOMPARE(c.messages()->count(), 4);
    const qint64 oldReply = c.messages()->rows().back().id;

    const auto prompt = [&](const char* key) { return c.lastReplyPrompt().value(QString::fromLatin1(key)).toInt(); };
    // The second question reused the first exchange from the engine's cache.
    QVERIFY(prompt("reusedTokens") > 0);
    QCOMPARE(prompt("promptTokens"), prompt("reusedTokens") + prompt("prefilledTokens"));

    QSignalSpy finished(&c, &ChatController::replyFinished);
    QVERIFY(c.regenerate());
    QVERIFY(finished.wait(kReplyTimeoutMs));
    QCOMPARE(c.messages()->count(), 4);
    QVERIFY(c.messages()->rows().back().id != oldReply);
    QCOMPARE(c.database()->messages(c.currentChatId()).size(), size_t{4});
    // Regenerating rolls the cache back to the end of the question: the whole prompt but its last
    // token is reused.
    QCOMPARE(prompt("reusedTokens"), prompt("promptTokens") - 1);

    // Editing the second question drops everything after it and asks again: the cache is rolled
    // back to where the conversation changed (the first exchange stays).
    const int firstExchange = c.messages()->rows()[2].position;
    QVERIFY(c.editAndResend(firstExchange, QStringLiteral("An edited second question")));
    QVERIFY(finished.wait(kReplyTimeoutMs));
    QVERIFY(prompt("reusedTokens") > 0);
    QVERIFY(prompt("prefilledTokens") < prompt("promptTokens"));
    QCOMPARE(c.messages()->count(), 4);

    // Editing the first question drops everything after it and asks again.
    QVERIFY(c.editAndResend(0, QStringLiteral("An edited question")));
    QVERIFY(finished.wait(kReplyTimeoutMs));
    const auto stored = c.database()->messages(c.currentChatId());
    QCOMPARE(stored.size(), size_t{2});
    QCOMPARE(stored[0].content, QStringLiteral("An edited question"));
    QCOMPARE(stored[1].role, QStringLiteral("assistant"));
    QCOMPARE(c.messages()->count(), 2);
  }

  // The database fails after it was opened — made read-only, then full — while the app runs: every
  // call that writes gives the error banner (lastError), nothing ends the app, a reply that cannot
  // be saved still shows as ended, and what was saved before stays intact.
  void databaseFailuresAfterOpenBecomeTheBanner() {
    QTemporaryDir dir;
    const ControllerOptions options = optionsIn(dir);
    qint64 chat = 0;
    QString firstReply;
    {
      ChatController c(options);
      c.openModel();
      QVERIFY(waitReady(c));
      c.newChat();
      c.setSamplingValue("maxTokens", 8);
      c.setSamplingValue("seed", 3);
      const MessageRow first = sendAndWait(c, QStringLiteral("First question"));
      QCOMPARE(first.state, QStringLiteral("complete"));
      chat = c.currentChatId();
      firstReply = first.content;

      // Read-only: SQLite refuses every write on the app's connection from now on. (Each pragma's
      // statement is finished at once: an open one would pin the connection's read snapshot.)
      QSqlQuery pragma(c.database()->connection());
      const auto setPragma = [&](const QString& sql) {
        const bool ok = pragma.exec(sql);
        pragma.finish();
        return ok;
      };
      QVERIFY(setPragma(QStringLiteral("PRAGMA query_only = 1")));
      const auto refused = [&](const char* what, const std::function<void()>& action) {
        c.clearError();
        action();
        QVERIFY2(c.lastError().contains(QStringLiteral("readonly")), qPrintable(QStringLiteral("%1: '%2'").arg(
                                                                         QString::fromLatin1(what), c.lastError())));
      };
      refused("send", [&] { QVERIFY(!c.send(QStringLiteral("Second question"))); });
      refused("new chat", [&] { c.newChat(); });
      refused("rename", [&] { c.renameChat(chat, QStringLiteral("Renamed")); });
      refused("sampling", [&] { c.setSamplingValue("temperature", 0.5); });
      refused("system prompt", [&] { c.setSystemPrompt(QStringLiteral("Be brief.")); });
      refused("select", [&] { c.selectChat(chat); });
      refused("language", [&] { c.setLanguage(QStringLiteral("zh_CN")); });
      c.setLanguage(QStringLiteral("en"));
      refused("regenerate", [&] { QVERIFY(!c.regenerate()); });
      refused("edit", [&] { QVERIFY(!c.editAndResend(0, QStringLiteral("Edited"))); });
      refused("delete", [&] { c.deleteChat(chat); });
      QCOMPARE(c.currentChatId(), chat);  // the chat the database could not delete is still shown
      QCOMPARE(c.messages()->count(), 2);

      // The database turns read-only while a reply streams: the reply ends in the view, the banner
      // says it was not saved.
      QVERIFY(setPragma(QStringLiteral("PRAGMA query_only = 0")));
      c.clearError();
      c.setGenerationPaused(true);
      QSignalSpy streamed(&c, &ChatController::streamingText);
      QSignalSpy finished(&c, &ChatController::replyFinished);
      QVERIFY(c.send(QStringLiteral("Third question")));
      QVERIFY(streamed.wait(kReplyTimeoutMs));
      QVERIFY(setPragma(QStringLiteral("PRAGMA query_only = 1")));
      c.setGenerationPaused(false);
      QVERIFY(finished.wait(kReplyTimeoutMs));
      QVERIFY2(c.lastError().contains(QStringLiteral("readonly")), qPrintable(c.lastError()));
      QCOMPARE(c.messages()->rows().back().state, QStringLiteral("complete"));
      QVERIFY(!c.generating());

      // Full: the file may not grow by a page.
      QVERIFY(setPragma(QStringLiteral("PRAGMA query_only = 0")));
      QVERIFY(pragma.exec(QStringLiteral("PRAGMA page_count")) && pragma.next());
      const qint64 pages = pragma.value(0).toLongLong();
      pragma.finish();
      QVERIFY(setPragma(QStringLiteral("PRAGMA max_page_count = %1").arg(pages)));
      c.clearError();
      QVERIFY(!c.send(QString(200000, QLatin1Char('x'))));
      QVERIFY2(c.lastError().contains(QStringLiteral("full")), qPrintable(c.lastError()));
      // Room again: the app goes on as before.
      QVERIFY(setPragma(QStringLiteral("PRAGMA max_page_count = 1073741823")));
      c.clearError();
      QCOMPARE(sendAndWait(c, QStringLiteral("Fourth question")).state, QStringLiteral("complete"));
      QCOMPARE(c.lastError(), QString());
    }
    // What was saved before the failures is intact; the reply the database refused to finish comes
    // back as incomplete with its committed text.
    ChatDatabase after(options.databasePath);
    QCOMPARE(after.recoverInterruptedReplies(), 1);
    const auto messages = after.messages(chat);
    QVERIFY(messages.size() >= 4);
    QCOMPARE(messages[0].content, QStringLiteral("First question"));
    QCOMPARE(messages[1].content, firstReply);
    QCOMPARE(messages[1].state, MessageState::Complete);
    QCOMPARE(messages[2].content, QStringLiteral("Third question"));
    QCOMPARE(messages[3].state, MessageState::Incomplete);
    QSqlQuery q(after.connection());
    QVERIFY(q.exec(QStringLiteral("PRAGMA integrity_check")) && q.next());
    QCOMPARE(q.value(0).toString(), QStringLiteral("ok"));
  }

  void budgetMovesWhileAReplyStreams() {
    ChatController c(optionsIn(dir_));
    c.openModel();
    QVERIFY(waitReady(c));
    c.newChat();
    c.setSamplingValue("maxTokens", 200);
    c.runtime()->refresh();
    const double minimum = c.runtime()->minimumBudget(), experts = c.runtime()->expertBytes();
    QSignalSpy finished(&c, &ChatController::replyFinished);
    QSignalSpy streamed(&c, &ChatController::streamingText);
    c.setGenerationPaused(true);  // the moves land while the reply streams, on any machine
    QVERIFY(c.send(QStringLiteral("KING RICHARD:")));
    QVERIFY(streamed.wait(kReplyTimeoutMs));
    const double budgets[] = {minimum, minimum + 0.5 * experts, minimum + 0.1 * experts, minimum + experts};
    for (double b : budgets) QVERIFY2(c.runtime()->setBudget(b), qPrintable(c.runtime()->error()));
    QVERIFY(!c.runtime()->setBudget(minimum / 2));  // refused, named
    QVERIFY(c.runtime()->error().contains(QStringLiteral("minimum")));
    QVERIFY(c.generating());
    c.setGenerationPaused(false);
    QVERIFY(finished.wait(kReplyTimeoutMs));
    // The last move's plan is applied (replans run on the runtime's thread; the monitor reads them).
    QTRY_VERIFY_WITH_TIMEOUT((c.runtime()->refresh(), c.runtime()->budgetBytes() == minimum + experts), 60000);
    QCOMPARE(c.messages()->rows().back().state, QStringLiteral("complete"));
    // Pools: a subset is applied; all off is refused.
    // The plan for the user's last budget is in the database, with the pool split it chose.
    QTRY_VERIFY_WITH_TIMEOUT(c.database()->latestPlan(c.modelInfo().value("modelKey").toString()).has_value() &&
                                 c.database()->latestPlan(c.modelInfo().value("modelKey").toString())->budgetBytes ==
                                     static_cast<quint64>(minimum + experts),
                             60000);
    QVERIFY(c.database()->latestPlan(c.modelInfo().value("modelKey").toString())->planJson.contains(QStringLiteral("\"ratio\"")));
    QVERIFY(c.runtime()->setPools(0x1 | 0x4));
    QCOMPARE(c.runtime()->poolMask(), 0x5);
    QVERIFY(!c.runtime()->setPools(0));
  }

  // The engine keeps the activation statistics per user (one file per store under XDG_STATE_HOME,
  // which CTest sets for this suite), adds each reply's counts to it, and the next run plans from
  // them. The file is removed after the second run opened: what that run saves is then what its
  // runtime holds — the first run's counts and its own — so its steps exceed the first run's only
  // if the second run started from them.
  void expertStatisticsSurviveARestart() {
    QTemporaryDir dir;
    qint64 chatId = 0;
    QString key, historyPath;
    ActivationFile first;
    {
      ChatController c(optionsIn(dir));
      c.openModel();
      QVERIFY(waitReady(c));
      key = c.modelInfo().value("modelKey").toString();
      historyPath = c.modelInfo().value("historyPath").toString();
      QVERIFY2(!historyPath.isEmpty(), "the app's engine keeps no activation history");
      const QString stateHome = qEnvironmentVariable("XDG_STATE_HOME");
      if (!stateHome.isEmpty()) QVERIFY2(historyPath.startsWith(stateHome), qPrintable(historyPath));
      c.newChat();
      c.setSamplingValue("maxTokens", 24);
      QVERIFY(!sendAndWait(c, QStringLiteral("ROMEO:")).content.isNull());
      chatId = c.currentChatId();
      // Saved after the reply, by the engine: the database keeps none any more.
      first = readActivationFile(historyPath);
      QVERIFY2(first.valid, qPrintable(first.error));
      QCOMPARE(first.layers, 4);
      QCOMPARE(first.experts, 8);
      QVERIFY(first.steps[0] > 0);
      quint64 activations = 0;
      for (quint64 n : first.counts) activations += n;
      QVERIFY(activations > 0);  // top-2 of 8 per token and layer (prefill tokens count each)
      QVERIFY(!c.database()->loadActivationCounts(key).has_value());
    }
    // The first run's close added nothing after its last reply.
    const ActivationFile closed = readActivationFile(historyPath);
    QVERIFY2(closed.valid, qPrintable(closed.error));
    QCOMPARE(closed.steps, first.steps);

    ChatController c(optionsIn(dir));
    QCOMPARE(c.currentChatId(), chatId);  // the last chat is open again, with its messages
    QCOMPARE(c.messages()->count(), 2);
    c.openModel();
    QVERIFY(waitReady(c));
    QCOMPARE(c.modelInfo().value("modelKey").toString(), key);
    QCOMPARE(c.modelInfo().value("historyPath").toString(), historyPath);
    QVERIFY(QFile::remove(historyPath));
    c.setSamplingValue("maxTokens", 8);
    QVERIFY(!sendAndWait(c, QStringLiteral("JULIET:")).content.isNull());
    const ActivationFile second = readActivationFile(historyPath);
    QVERIFY2(second.valid, qPrintable(second.error));
    qInfo() << "steps after the first run" << first.steps[0] << "after the second" << second.steps[0];
    for (int l = 0; l < 4; ++l)
      QVERIFY2(second.steps[l] > first.steps[l], "the second run did not start from the first run's counts");
    for (int i = 0; i < 4 * 8; ++i) QVERIFY(second.counts[i] >= first.counts[i]);
  }

  // "Follow free memory" on the machine's real memory: the switch hands the budget to the engine's
  // follower, a budget the user sets takes it back (and the status says so), and the switch is
  // remembered and applied when the model opens at the next start.
  void followingFreeMemoryIsTheUsersSwitch() {
    QTemporaryDir dir;
    {
      ChatController c(optionsIn(dir));
      RuntimeMonitor& r = *c.runtime();
      QVERIFY(!r.following());  // off until the user switches it on
      c.openModel();
      QVERIFY(waitReady(c));
      QVERIFY(!c.modelInfo().value("openedFollowing").toBool());
      r.refresh();
      QVERIFY(!r.followerActive());
      const double minimum = r.minimumBudget(), experts = r.expertBytes();

      QVERIFY2(r.setFollowing(true), qPrintable(r.error()));
      QVERIFY(r.following());
      QVERIFY(r.followerActive());  // setFollowing read the engine's follower: it exists and is enabled
      QVERIFY(r.budgetBytes() >= minimum && r.budgetBytes() <= minimum + experts);
      QCOMPARE(c.database()->setting(QStringLiteral("followFreeMemory")).toBool(), true);
      // The follower's thread takes its first reading: the status has the memory and the margin.
      QTRY_VERIFY_WITH_TIMEOUT((r.refresh(), r.availableMemoryBytes() > 0), 60000);
      QVERIFY(r.followMarginBytes() > 0);
      QCOMPARE(r.followError(), QString());

      // The user's budget wins: following goes off, the budget stays where the user put it.
      const double chosen = std::round(minimum + 0.25 * experts);
      QVERIFY2(r.setBudget(chosen), qPrintable(r.error()));
      QVERIFY(!r.following());
      QVERIFY(r.followStoppedByUser());
      QVERIFY(!r.followerActive());
      QCOMPARE(c.database()->setting(QStringLiteral("followFreeMemory")).toBool(), false);
      QTRY_VERIFY_WITH_TIMEOUT((r.refresh(), r.budgetBytes() == chosen), 60000);

      QVERIFY(r.setFollowing(true));
      QVERIFY(!r.followStoppedByUser());
      QVERIFY(r.followerActive());
    }
    ChatController c(optionsIn(dir));
    RuntimeMonitor& r = *c.runtime();
    QVERIFY(r.following());  // remembered
    c.openModel();
    QVERIFY(waitReady(c));
    QVERIFY(r.following());
    QVERIFY(c.modelInfo().value("openedFollowing").toBool());  // the engine opened following (EngineOptions)
    r.refresh();
    QVERIFY(r.followerActive());
    QVERIFY(r.budgetBytes() >= r.minimumBudget() && r.budgetBytes() <= r.minimumBudget() + r.expertBytes());
    // Off by the switch: the follower stops, the budget stays, nothing to report as the user's.
    QVERIFY(r.setFollowing(false));
    QVERIFY(!r.followerActive());
    QVERIFY(!r.followStoppedByUser());
    QCOMPARE(c.database()->setting(QStringLiteral("followFreeMemory")).toBool(), false);
  }

  void exportsMarkdownAndJson() {
    ChatController c(optionsIn(dir_));
    c.openModel();
    QVERIFY(waitReady(c));
    c.newChat();
    c.setSamplingValue("maxTokens", 12);
    const MessageRow reply = sendAndWait(c, QStringLiteral("Export me"));
    QVERIFY(!reply.content.isNull());
    const QString md = dir_.filePath(QStringLiteral("chat.md")), json = dir_.filePath(QStringLiteral("chat.json"));
    QVERIFY(c.exportChat(c.currentChatId(), QUrl::fromLocalFile(md).toString()));
    QVERIFY(c.exportChat(c.currentChatId(), json));
    QFile mdFile(md);
    QVERIFY(mdFile.open(QIODevice::ReadOnly));
    QVERIFY(QString::fromUtf8(mdFile.readAll()).contains(QStringLiteral("Export me")));
    QFile jsonFile(json);
    QVERIFY(jsonFile.open(QIODevice::ReadOnly));
    const QJsonDocument doc = QJsonDocument::fromJson(jsonFile.readAll());
    QVERIFY(doc.isObject());
    QVERIFY(!c.exportChat(c.currentChatId(), QStringLiteral("/nonexistent-dir/x.md")));
    QVERIFY(c.lastError().contains(QStringLiteral("/nonexistent-dir/x.md")));
  }

  void languageSwitchesAtRunTime() {
    ChatController c(optionsIn(dir_));
    QCOMPARE(c.language(), QStringLiteral("en"));
    c.setLanguage(QStringLiteral("zh_CN"));
    QCOMPARE(c.lastError(), QString());  // the translation loaded from the resources
    QCOMPARE(QCoreApplication::translate("zipmoe::app::ChatController", "New chat"), QStringLiteral("新对话"));
    c.setLanguage(QStringLiteral("en"));
    QCOMPARE(QCoreApplication::translate("zipmoe::app::ChatController", "New chat"), QStringLiteral("New chat"));
  }

  // The real app, killed with SIGKILL while a reply streams: what was committed is intact and the
  // partial reply is kept, marked incomplete, at the next start.
  void databaseSurvivesTheAppKilledMidReply() {
    QTemporaryDir dir;
    const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
    QProcess app;
    app.setProcessChannelMode(QProcess::ForwardedErrorChannel);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    app.setProcessEnvironment(env);
    app.start(QStringLiteral(ZIPMOE_CHAT_APP_PATH),
              {QStringLiteral("--database"), db, QStringLiteral("--data-dir"), dir.path(),
               QStringLiteral("--send"), QStringLiteral("ROMEO:\nSpeak again, bright angel"),
               QStringLiteral("--hold-after-first-commit")});
    QVERIFY(app.waitForStarted());
    // The app holds its reply once part of it is committed and says so: no race with the model.
    bool held = false;
    while (!held && app.state() == QProcess::Running) {
      if (!app.canReadLine()) app.waitForReadyRead(-1);
      while (app.canReadLine()) held = held || app.readLine().startsWith("committed ");
    }
    QVERIFY2(held, "the app ended before it committed part of a streaming reply");
    QString committed;
    {
      ChatDatabase reader(db);
      for (const auto& chat : reader.listChats())
        for (const auto& m : reader.messages(chat.id))
          if (m.state == MessageState::Streaming) committed = m.content;
    }
    QVERIFY2(!committed.isEmpty(), "no streaming reply with committed text in the database");
    ::kill(static_cast<pid_t>(app.processId()), SIGKILL);
    QVERIFY(app.waitForFinished());

    ChatDatabase after(db);
    QCOMPARE(after.recoverInterruptedReplies(), 1);
    const auto chats = after.listChats();
    QCOMPARE(chats.size(), size_t{1});
    const auto messages = after.messages(chats[0].id);
    QCOMPARE(messages.size(), size_t{2});
    QCOMPARE(messages[0].content, QStringLiteral("ROMEO:\nSpeak again, bright angel"));
    QCOMPARE(messages[0].state, MessageState::Complete);
    QCOMPARE(messages[1].state, MessageState::Incomplete);
    QVERIFY(messages[1].content.startsWith(committed));
    QSqlQuery q(after.connection());
    QVERIFY(q.exec(QStringLiteral("PRAGMA integrity_check")) && q.next());
    QCOMPARE(q.value(0).toString(), QStringLiteral("ok"));
  }

 private:
  QTemporaryDir dir_;
};

QTEST_MAIN(TestChatController)
#include "test_chat_controller.moc"
