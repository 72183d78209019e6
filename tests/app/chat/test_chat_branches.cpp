// Schema version 3 of the chat database: branches of a conversation, the replies' measured TPOT at
// their budgets (the budget advisor's points) and the model stores' last use — and the upgrade of a
// version-2 file (as the previous app wrote it) that keeps every chat.
#include <QtTest>

#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>

#include "chat_database.h"
#include "schema_migrations.h"

using namespace Qt::StringLiterals;
using namespace zipmoe::app;

namespace {

// A connection of the test's own, to build a file as an older app left it.
class RawSqlite {
 public:
  explicit RawSqlite(const QString& path) : name_(u"raw-branches-%1"_s.arg(++serial_)) {
    QSqlDatabase db = QSqlDatabase::addDatabase(u"QSQLITE"_s, name_);
    db.setDatabaseName(path);
    if (!db.open()) qFatal("cannot open %s", qPrintable(path));
  }
  ~RawSqlite() {
    QSqlDatabase::database(name_, false).close();
    QSqlDatabase::removeDatabase(name_);
  }
  RawSqlite(const RawSqlite&) = delete;
  RawSqlite& operator=(const RawSqlite&) = delete;
  void exec(const QString& sql, const QVariantList& values = {}) {
    QSqlQuery q(QSqlDatabase::database(name_, false));
    if (!q.prepare(sql)) qFatal("prepare %s: %s", qPrintable(sql), qPrintable(q.lastError().text()));
    for (const QVariant& v : values) q.addBindValue(v);
    if (!q.exec()) qFatal("exec %s: %s", qPrintable(sql), qPrintable(q.lastError().text()));
  }
  QVariant scalar(const QString& sql) {
    QSqlQuery q(QSqlDatabase::database(name_, false));
    if (!q.exec(sql) || !q.next()) qFatal("query %s: %s", qPrintable(sql), qPrintable(q.lastError().text()));
    return q.value(0);
  }

 private:
  static inline int serial_ = 0;
  QString name_;
};

// A file at `version`, built by the released steps (never edited once released: exactly what
// that version of the app created).
void createSchemaAt(RawSqlite& raw, int version) {
  for (const SchemaMigration& step : schemaMigrations()) {
    if (step.version > version) break;
    for (const char* sql : step.statements) raw.exec(QString::fromUtf8(sql));
  }
  raw.exec(u"PRAGMA user_version = %1"_s.arg(version));
}

template <typename F>
QString errorOf(F&& f) {
  try {
    f();
  } catch (const DatabaseError& e) {
    return QString::fromStdString(e.what());
  }
  return {};
}

MessageStats measuredReply(const QString& model, quint64 budget, double tpot) {
  MessageStats s;
  s.ttftMs = 300;
  s.tokensPerSecond = 1000 / tpot;
  s.promptTokens = 12;
  s.generatedTokens = 40;
  s.stopReason = u"eos"_s;
  s.modelKey = model;
  s.budgetBytes = budget;
  s.tpotMs = tpot;
  return s;
}

}  // namespace

class TestChatBranches : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
  void init() { QTest::failOnWarning(QRegularExpression(u".*"_s)); }

  void upgradesAVersion2DatabaseKeepingEveryChat() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"v2.sqlite"_s);
    {
      RawSqlite raw(path);
      createSchemaAt(raw, 2);
      raw.exec(u"INSERT INTO chats VALUES (1, 'Kept', 10, 20, 'sys', '{}', 'demo')"_s);
      raw.exec(QStringLiteral("INSERT INTO messages (chat_id, position, role, content, state, created_at, ttft_ms,"
                              " tokens_per_second, prompt_tokens, generated_tokens, expert_hit_rate, stop_reason)"
                              " VALUES (1, 0, 'user', 'Hello', 'complete', 11, -1, -1, 0, 0, -1, ''),"
                              " (1, 1, 'assistant', 'Hi', 'complete', 12, 90, 25, 5, 9, 0.5, 'eos')"));
      raw.exec(u"INSERT INTO settings VALUES ('language', 'zh_CN')"_s);
    }
    ChatDatabase db(path);
    QCOMPARE(db.schemaVersion(), 3);
    QCOMPARE(ChatDatabase::latestSchemaVersion(), 3);
    const ChatRecord kept = db.chat(1).value();
    QCOMPARE(kept.title, u"Kept"_s);
    QCOMPARE(kept.parentChatId, qint64{0});
    QCOMPARE(kept.branchPosition, -1);
    const auto msgs = db.messages(1);
    QCOMPARE(msgs.size(), size_t{2});
    QCOMPARE(msgs[1].content, u"Hi"_s);
    QCOMPARE(msgs[1].ttftMs, 90.0);
    QCOMPARE(msgs[1].tpotMs, -1.0);  // old replies: no measurement the advisor could plot
    QCOMPARE(msgs[1].budgetBytes, quint64{0});
    QCOMPARE(db.setting(u"language"_s).toString(), u"zh_CN"_s);
    QVERIFY(db.replyMeasurements(u"demo"_s).empty());
    // The upgraded file branches like a new one.
    const ChatRecord branch = db.branchChat(1, 0, u"Kept (branch)"_s);
    QCOMPARE(branch.parentChatId, qint64{1});
    QCOMPARE(db.messages(branch.id).size(), size_t{1});
  }

  void aFailedVersion3StepKeepsVersion2AndItsData() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"conflict.sqlite"_s);
    {
      RawSqlite raw(path);
      createSchemaAt(raw, 2);
      raw.exec(u"INSERT INTO chats (title, created_at, updated_at) VALUES ('still here', 1, 1)"_s);
      raw.exec(u"CREATE TABLE model_stores (x)"_s);  // makes step 3's CREATE TABLE fail
    }
    const QString error = errorOf([&] { ChatDatabase db(path); });
    QVERIFY2(error.contains(u"version 3"_s) && error.contains(u"model_stores"_s), qPrintable(error));
    RawSqlite raw(path);
    QCOMPARE(raw.scalar(u"PRAGMA user_version"_s).toInt(), 2);
    QCOMPARE(raw.scalar(u"SELECT COUNT(*) FROM pragma_table_info('chats') WHERE name = 'parent_chat_id'"_s).toInt(), 0);
    QCOMPARE(raw.scalar(u"SELECT title FROM chats"_s).toString(), u"still here"_s);
  }

  void aBranchCopiesTheConversationUpToTheMessage() {
    QTemporaryDir dir;
    ChatDatabase db(dir.filePath(u"b.sqlite"_s));
    const ChatRecord root = db.createChat(u"Root"_s, u"Be brief."_s, u"{\"temperature\":0.2}"_s, u"demo"_s);
    for (int i = 0; i < 4; ++i) db.addMessage(root.id, i % 2 ? u"assistant"_s : u"user"_s, u"m%1"_s.arg(i));
    const ChatRecord branch = db.branchChat(root.id, 1, u"Root, branch"_s);
    QCOMPARE(branch.parentChatId, root.id);
    QCOMPARE(branch.branchPosition, 1);
    QCOMPARE(branch.systemPrompt, u"Be brief."_s);
    QCOMPARE(branch.samplingJson, u"{\"temperature\":0.2}"_s);
    QCOMPARE(branch.modelKey, u"demo"_s);
    const auto copied = db.messages(branch.id);
    QCOMPARE(copied.size(), size_t{2});
    QCOMPARE(copied[0].content, u"m0"_s);
    QCOMPARE(copied[1].content, u"m1"_s);
    // The two go their own ways.
    db.addMessage(branch.id, u"user"_s, u"other question"_s);
    QCOMPARE(db.messages(root.id).size(), size_t{4});
    QCOMPARE(db.messages(branch.id).back().content, u"other question"_s);
    QCOMPARE(db.branchesOf(root.id).size(), size_t{1});
    QCOMPARE(db.branchesOf(root.id)[0].id, branch.id);
    // A branch of a branch, and the parent deleted: the branches stay, as roots.
    const ChatRecord second = db.branchChat(branch.id, 2, u"deeper"_s);
    QCOMPARE(db.messages(second.id).size(), size_t{3});
    db.deleteChat(root.id);
    QCOMPARE(db.chat(branch.id)->parentChatId, qint64{0});
    QCOMPARE(db.chat(second.id)->parentChatId, branch.id);
    QCOMPARE(db.messages(branch.id).size(), size_t{3});
  }

  void branchingFromAMessageThatIsNotThereFailsAndChangesNothing() {
    QTemporaryDir dir;
    ChatDatabase db(dir.filePath(u"b.sqlite"_s));
    const ChatRecord root = db.createChat(u"Root"_s, {}, {}, {});
    db.addMessage(root.id, u"user"_s, u"only"_s);
    const QString error = errorOf([&] { db.branchChat(root.id, 5, u"x"_s); });
    QVERIFY2(error.contains(u"no message at position 5"_s), qPrintable(error));
    QVERIFY(!errorOf([&] { db.branchChat(999, 0, u"x"_s); }).isEmpty());
    QCOMPARE(db.listChats().size(), size_t{1});
  }

  void repliesKeepTheirBudgetAndTpotForTheAdvisor() {
    QTemporaryDir dir;
    ChatDatabase db(dir.filePath(u"m.sqlite"_s));
    const ChatRecord chat = db.createChat(u"c"_s, {}, {}, u"demo"_s);
    db.addMessage(chat.id, u"user"_s, u"q"_s);
    const qint64 a = db.addMessage(chat.id, u"assistant"_s, {}, MessageState::Streaming).id;
    db.finishMessage(a, u"a"_s, MessageState::Complete, measuredReply(u"demo"_s, 1 << 20, 42.5));
    const qint64 b = db.addMessage(chat.id, u"assistant"_s, {}, MessageState::Streaming).id;
    db.finishMessage(b, u"b"_s, MessageState::Complete, measuredReply(u"demo"_s, 0, 40));  // budget moved: not plotted
    const qint64 c = db.addMessage(chat.id, u"assistant"_s, {}, MessageState::Streaming).id;
    db.finishMessage(c, u"c"_s, MessageState::Complete, measuredReply(u"other"_s, 2 << 20, 30));
    const auto points = db.replyMeasurements(u"demo"_s);
    QCOMPARE(points.size(), size_t{1});
    QCOMPARE(points[0].messageId, a);
    QCOMPARE(points[0].budgetBytes, quint64{1 << 20});
    QCOMPARE(points[0].tpotMs, 42.5);
    QCOMPARE(db.message(a)->modelKey, u"demo"_s);
    QCOMPARE(db.replyMeasurements(u"other"_s).size(), size_t{1});
    // A branch's copies are not measurements of their own.
    db.branchChat(chat.id, 1, u"branch"_s);
    QCOMPARE(db.replyMeasurements(u"demo"_s).size(), size_t{1});
  }

  void modelStoresRememberTheirLastUse() {
    QTemporaryDir dir;
    ChatDatabase db(dir.filePath(u"s.sqlite"_s));
    QVERIFY(!db.modelStoreLastUse(u"/stores/a"_s).isValid());
    const QDateTime before = QDateTime::currentDateTimeUtc().addMSecs(-1);
    db.touchModelStore(u"/stores/a"_s, u"demo"_s);
    const QDateTime used = db.modelStoreLastUse(u"/stores/a"_s);
    QVERIFY(used.isValid() && used >= before);
    db.touchModelStore(u"/stores/a"_s, u"demo"_s);  // again: one row, a later time
    QVERIFY(db.modelStoreLastUse(u"/stores/a"_s) >= used);
    db.forgetModelStore(u"/stores/a"_s);
    QVERIFY(!db.modelStoreLastUse(u"/stores/a"_s).isValid());
  }
};

QTEST_GUILESS_MAIN(TestChatBranches)
#include "test_chat_branches.moc"
