// The chat database on real SQLite files: chats and messages, search with LIKE escaping, cascade
// delete, per-thread connections under concurrent writers, the schema upgrade from a version-1 file
// built with the version-1 SQL, refusal of newer and of non-SQLite files (left byte-for-byte
// unchanged), activation counts, plans, profiles, settings, the exports, and a process SIGKILLed
// while it streams a reply (its own executable, re-launched as a child).
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QThread>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <random>

#include "chat_database.h"
#include "chat_export.h"

using namespace zipmoe::app;
using namespace Qt::StringLiterals;

namespace {

// Set to a database path, it makes this executable run streamingChild() instead of the tests.
constexpr char kChildEnv[] = "ZIPMOE_TEST_CHAT_DB_STREAMING_CHILD";

QString chunk(int i) { return u"chunk %1 "_s.arg(i); }

QString streamedText(int lastChunk) {
  QString s;
  for (int i = 0; i <= lastChunk; ++i) s += chunk(i);
  return s;
}

// The child of killMidReplyKeepsTheCommittedPrefix: streams a reply as the app does, printing
// "flushed N" once flush N is committed, without pause and without end: its parent kills it (and
// if the parent dies first, so does the child).
int streamingChild(const QString& path) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ChatDatabase db(path);
  const ChatRecord chat = db.createChat(u"Killed mid reply"_s, {}, {}, u"test-model"_s);
  db.addMessage(chat.id, u"user"_s, u"What is ZipMoE?"_s, MessageState::Complete);
  const MessageRecord reply = db.addMessage(chat.id, u"assistant"_s, {}, MessageState::Streaming);
  QString text;
  for (int i = 0;; ++i) {
    text += chunk(i);
    db.setMessageContent(reply.id, text);
    std::printf("flushed %d\n", i);
    std::fflush(stdout);
  }
}

QByteArray fileBytes(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.readAll();
}

// A connection of the test's own to a file, for building old databases and corrupting rows.
class RawSqlite {
 public:
  explicit RawSqlite(const QString& path) : name_(u"raw-%1"_s.arg(++serial_)) {
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

// The version-1 schema exactly as version 1 of the app created it.
void createVersion1Schema(RawSqlite& raw) {
  raw.exec(QStringLiteral(
      "CREATE TABLE chats (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, created_at INTEGER NOT NULL,"
      " updated_at INTEGER NOT NULL, system_prompt TEXT NOT NULL DEFAULT '', sampling_json TEXT NOT NULL DEFAULT '',"
      " model_key TEXT NOT NULL DEFAULT '')"));
  raw.exec(u"CREATE INDEX chats_by_update ON chats(updated_at)"_s);
  raw.exec(QStringLiteral(
      "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,"
      " chat_id INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE, position INTEGER NOT NULL,"
      " role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')), content TEXT NOT NULL,"
      " state TEXT NOT NULL CHECK (state IN ('complete', 'streaming', 'incomplete', 'error')),"
      " created_at INTEGER NOT NULL, UNIQUE (chat_id, position))"));
  raw.exec(u"CREATE TABLE settings (key TEXT PRIMARY KEY NOT NULL, value)"_s);
}

// The DatabaseError's message, or "" when `f` did not throw one.
template <typename F>
QString errorOf(F&& f) {
  try {
    f();
  } catch (const DatabaseError& e) {
    return QString::fromStdString(e.what());
  }
  return {};
}

MessageStats replyStats() {
  MessageStats s;
  s.ttftMs = 120;
  s.tokensPerSecond = 14.2;
  s.promptTokens = 31;
  s.generatedTokens = 57;
  s.expertHitRate = 0.83;
  s.stopReason = u"eos"_s;
  return s;
}

MessageRecord makeMessage(int position, const QString& role, const QString& content,
                          MessageState state = MessageState::Complete) {
  MessageRecord m;
  m.id = position + 1;
  m.chatId = 1;
  m.position = position;
  m.role = role;
  m.content = content;
  m.state = state;
  return m;
}

QStringList titles(const std::vector<ChatRecord>& chats) {
  QStringList out;
  for (const ChatRecord& c : chats) out << c.title;
  return out;
}

}  // namespace

class TestChatDatabase : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
  // A Qt warning ("connection still in use", "database does not belong to the calling thread") is a bug.
  void init() { QTest::failOnWarning(QRegularExpression(u".*"_s)); }

  void defaultPathIsInTheAppDataFolder() {
    const QString path = ChatDatabase::defaultPath();
    QVERIFY(path.endsWith(u"/zipmoe.sqlite"_s));
    QVERIFY(QFileInfo(QFileInfo(path).path()).isDir());
  }

  void chatsAreCreatedUpdatedAndListedNewestFirst() {
    QTemporaryDir dir;
    ChatDatabase db(dir.filePath(u"chats.sqlite"_s));
    QCOMPARE(db.schemaVersion(), ChatDatabase::latestSchemaVersion());
    const ChatRecord a = db.createChat(u"A"_s, u"Be brief."_s, u"{\"t\":0.7}"_s,
                                       u"qwen"_s);
    const ChatRecord b = db.createChat(u"B"_s, {}, {}, {});
    const ChatRecord c = db.createChat(u"C"_s, {}, {}, {});
    QCOMPARE(a.title, u"A"_s);
    QCOMPARE(a.systemPrompt, u"Be brief."_s);
    QCOMPARE(a.samplingJson, u"{\"t\":0.7}"_s);
    QCOMPARE(a.modelKey, u"qwen"_s);
    QCOMPARE(a.createdAt.timeSpec(), Qt::UTC);
    QVERIFY(qAbs(a.createdAt.secsTo(QDateTime::currentDateTimeUtc())) < 60);
    QCOMPARE(titles(db.listChats()), QStringList({"C", "B", "A"}));

    // Touches within one millisecond still reorder the list.
    db.addMessage(a.id, u"user"_s, u"hi"_s);
    QCOMPARE(titles(db.listChats()), QStringList({"A", "C", "B"}));
    db.renameChat(b.id, u"B2"_s);
    QCOMPARE(titles(db.listChats()), QStringList({"B2", "A", "C"}));
    db.updateChatSettings(c.id, u"You are a pirate."_s, u"{}"_s);
    const ChatRecord c2 = db.chat(c.id).value();
    QCOMPARE(c2.systemPrompt, u"You are a pirate."_s);
    QCOMPARE(c2.samplingJson, u"{}"_s);
    QVERIFY(c2.updatedAt >= c.updatedAt);
    QCOMPARE(titles(db.listChats()), QStringList({"C", "B2", "A"}));

    QVERIFY(!db.chat(9999).has_value());
    const QString error = errorOf([&] { db.renameChat(9999, u"x"_s); });
    QVERIFY2(error.contains(db.path()) && error.contains(u"9999"_s) && error.contains(u"chats"_s),
             qPrintable(error));
  }

  void messagesKeepTheirOrderStateAndStats() {
    QTemporaryDir dir;
    ChatDatabase db(dir.filePath(u"messages.sqlite"_s));
    const ChatRecord chat = db.createChat(u"Chat"_s, {}, {}, {});
    db.addMessage(chat.id, u"system"_s, u"sys"_s);
    db.addMessage(chat.id, u"user"_s, u"question"_s);
    MessageRecord reply = db.addMessage(chat.id, u"assistant"_s, {}, MessageState::Streaming);
    QCOMPARE(reply.position, 2);
    QCOMPARE(reply.state, MessageState::Streaming);
    QCOMPARE(reply.content, QString());
    QCOMPARE(reply.ttftMs, -1.0);
    QCOMPARE(reply.expertHitRate, -1.0);

    db.setMessageContent(reply.id, u"Hel"_s);
    db.appendToStreamingMessage(reply.id, u"lo"_s);
    QCOMPARE(db.message(reply.id)->content, u"Hello"_s);
    db.finishMessage(reply.id, u"Hello!"_s, MessageState::Complete, replyStats());
    reply = db.message(reply.id).value();
    QCOMPARE(reply.content, u"Hello!"_s);
    QCOMPARE(reply.state, MessageState::Complete);
    QCOMPARE(reply.ttftMs, 120.0);
    QCOMPARE(reply.tokensPerSecond, 14.2);
    QCOMPARE(reply.promptTokens, 31);
    QCOMPARE(reply.generatedTokens, 57);
    QCOMPARE(reply.expertHitRate, 0.83);
    QCOMPARE(reply.stopReason, u"eos"_s);
    // A finished reply takes no more flushes: a late flush is a bug to surface, not to apply.
    QVERIFY(errorOf([&] { db.setMessageContent(reply.id, u"late"_s); }).contains(u"streaming"_s));

    db.addMessage(chat.id, u"user"_s, u"follow-up"_s);
    db.addMessage(chat.id, u"assistant"_s, u"answer"_s);
    db.updateMessageContent(db.messages(chat.id)[3].id, u"edited follow-up"_s);
    std::vector<MessageRecord> all = db.messages(chat.id);
    QCOMPARE(all.size(), size_t{5});
    for (int i = 0; i < 5; ++i) QCOMPARE(all[static_cast<size_t>(i)].position, i);
    QCOMPARE(all[3].content, u"edited follow-up"_s);
    QCOMPARE(all[3].state, MessageState::Complete);

    // Edit-and-resend: everything after the edited message goes, new messages continue from there.
    QCOMPARE(db.deleteMessagesFrom(chat.id, 4), 1);
    QCOMPARE(db.deleteMessagesFrom(chat.id, 2), 2);
    QCOMPARE(db.messages(chat.id).size(), size_t{2});
    QCOMPARE(db.addMessage(chat.id, u"assistant"_s, u"again"_s).position, 2);

    QVERIFY(errorOf([&] { db.addMessage(chat.id, u"robot"_s, u"x"_s); })
                .contains(u"'robot'"_s));
    QVERIFY(errorOf([&] { db.addMessage(777, u"user"_s, u"x"_s); })
                .contains(u"no chat with id 777"_s));
    QVERIFY(errorOf([&] { db.finishMessage(778, {}, MessageState::Complete, {}); })
                .contains(u"no message with id 778"_s));
  }

  void searchMatchesTitlesAndMessageTextLiterally() {
    QTemporaryDir dir;
    ChatDatabase db(dir.filePath(u"search.sqlite"_s));
    db.createChat(u"Budget cut by 50%"_s, {}, {}, {});
    db.createChat(u"Budget 500"_s, {}, {}, {});
    const ChatRecord snake = db.createChat(u"Naming"_s, {}, {}, {});
    db.addMessage(snake.id, u"user"_s, u"Why SNAKE_CASE for names?"_s);
    const ChatRecord paths = db.createChat(u"Windows"_s, {}, {}, {});
    db.addMessage(paths.id, u"assistant"_s, u"Use C:\\Models\\qwen"_s);
    db.createChat(u"Nameless"_s, {}, {}, {});

    QCOMPARE(titles(db.listChats(u"50%"_s)), QStringList({"Budget cut by 50%"}));
    QCOMPARE(titles(db.listChats(u"%"_s)), QStringList({"Budget cut by 50%"}));
    QCOMPARE(titles(db.listChats(u"budget"_s)), QStringList({"Budget 500", "Budget cut by 50%"}));
    QCOMPARE(titles(db.listChats(u"snake_case"_s)), QStringList({"Naming"}));
    QCOMPARE(titles(db.listChats(u"_"_s)), QStringList({"Naming"}));
    QCOMPARE(titles(db.listChats(u"s\\q"_s)), QStringList({"Windows"}));
    QCOMPARE(titles(db.listChats(u"\\"_s)), QStringList({"Windows"}));
    QCOMPARE(titles(db.listChats(u"Name"_s)), QStringList({"Nameless", "Naming"}));
    QVERIFY(db.listChats(u"nowhere"_s).empty());
    QCOMPARE(db.listChats().size(), size_t{5});
  }

  void deletingAChatDeletesItsMessages() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"cascade.sqlite"_s);
    ChatDatabase db(path);
    const ChatRecord gone = db.createChat(u"gone"_s, {}, {}, {});
    const ChatRecord kept = db.createChat(u"kept"_s, {}, {}, {});
    for (int i = 0; i < 3; ++i) {
      db.addMessage(gone.id, u"user"_s, u"g%1"_s.arg(i));
      db.addMessage(kept.id, u"user"_s, u"k%1"_s.arg(i));
    }
    db.deleteChat(gone.id);
    QVERIFY(!db.chat(gone.id));
    QVERIFY(db.messages(gone.id).empty());
    QCOMPARE(db.messages(kept.id).size(), size_t{3});
    {
      RawSqlite raw(path);
      QCOMPARE(raw.scalar(u"SELECT COUNT(*) FROM messages WHERE chat_id = %1"_s.arg(gone.id)).toInt(), 0);
    }
    QVERIFY(errorOf([&] { db.deleteChat(gone.id); }).contains(u"no chat with id"_s));
  }

  void eachThreadWritesThroughItsOwnConnection() {
    QTemporaryDir dir;
    auto db = std::make_unique<ChatDatabase>(dir.filePath(u"threads.sqlite"_s));
    const ChatRecord shared = db->createChat(u"shared"_s, {}, {}, {});
    const QString mainConnection = db->connection().connectionName();
    {
      QSqlQuery q(db->connection());
      QVERIFY(q.exec(u"PRAGMA journal_mode"_s) && q.next());
      QCOMPARE(q.value(0).toString(), u"wal"_s);
      QVERIFY(q.exec(u"PRAGMA foreign_keys"_s) && q.next());
      QCOMPARE(q.value(0).toInt(), 1);
    }

    constexpr int kPerThread = 150;
    struct Result {
      QString connection, error;
      qint64 ownChat = 0;
    };
    Result results[3];
    // Worker 2 leaves its connection open: the thread's exit or the database's destructor closes it.
    auto work = [&](int w) {
      Result& r = results[w];
      try {
        r.connection = db->connection().connectionName();
        r.ownChat = db->createChat(u"own %1"_s.arg(w), {}, {}, {}).id;
        for (int i = 0; i < kPerThread; ++i) {
          db->addMessage(shared.id, u"user"_s, u"w%1 m%2"_s.arg(w).arg(i));
          db->addMessage(r.ownChat, u"user"_s, u"m%1"_s.arg(i));
          if (i % 10 == 0) db->listChats(u"m1"_s);
        }
        if (w != 2) db->closeThreadConnection();
      } catch (const std::exception& e) {
        r.error = QString::fromStdString(e.what());
      }
    };
    std::unique_ptr<QThread> threads[3];
    for (int w = 0; w < 3; ++w) threads[w].reset(QThread::create(work, w));
    for (auto& t : threads) t->start();
    for (auto& t : threads) QVERIFY(t->wait());
    for (const Result& r : results) QVERIFY2(r.error.isEmpty(), qPrintable(r.error));

    QStringList names{mainConnection};
    for (const Result& r : results) {
      QVERIFY(!names.contains(r.connection));
      names << r.connection;
    }
    QVERIFY(!QSqlDatabase::connectionNames().contains(results[0].connection));  // closed by the worker

    const std::vector<MessageRecord> all = db->messages(shared.id);
    QCOMPARE(all.size(), size_t{3 * kPerThread});
    QSet<QString> texts;
    for (size_t i = 0; i < all.size(); ++i) {
      QCOMPARE(all[i].position, static_cast<int>(i));
      texts.insert(all[i].content);
    }
    QCOMPARE(texts.size(), 3 * kPerThread);
    for (const Result& r : results) QCOMPARE(db->messages(r.ownChat).size(), size_t{kPerThread});

    db.reset();
    for (const QString& n : names) QVERIFY2(!QSqlDatabase::connectionNames().contains(n), qPrintable(n));
  }

  void upgradesAVersion1DatabaseWithoutLosingData() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"v1.sqlite"_s);
    const qint64 t0 = QDateTime(QDate(2024, 3, 1), QTime(12, 0), Qt::UTC).toMSecsSinceEpoch();
    {
      RawSqlite raw(path);
      createVersion1Schema(raw);
      raw.exec(u"INSERT INTO chats VALUES (1, 'Old chat', ?, ?, 'Be nice.', '{\"temperature\":0.5}', 'olmoe')"_s,
               {t0, t0 + 1000});
      raw.exec(u"INSERT INTO chats (id, title, created_at, updated_at) VALUES (2, 'Other', ?, ?)"_s, {t0, t0});
      const char* rows[][3] = {{"user", "Hello?", "complete"},
                               {"assistant", "Hi! ```code```", "complete"},
                               {"user", "More", "complete"},
                               {"assistant", "Half a rep", "streaming"}};
      for (int i = 0; i < 4; ++i)
        raw.exec(QStringLiteral("INSERT INTO messages (chat_id, position, role, content, state, created_at)"
                                " VALUES (1, ?, ?, ?, ?, ?)"),
                 {i, QString::fromUtf8(rows[i][0]), QString::fromUtf8(rows[i][1]), QString::fromUtf8(rows[i][2]),
                  t0 + i});
      raw.exec(u"INSERT INTO settings VALUES ('theme', 'dark'), ('fontSize', 14)"_s);
      raw.exec(u"PRAGMA user_version = 1"_s);
    }

    ChatDatabase db(path);
    QCOMPARE(db.schemaVersion(), ChatDatabase::latestSchemaVersion());
    QVERIFY(ChatDatabase::latestSchemaVersion() >= 2);
    const ChatRecord old = db.chat(1).value();
    QCOMPARE(old.title, u"Old chat"_s);
    QCOMPARE(old.createdAt, QDateTime::fromMSecsSinceEpoch(t0, Qt::UTC));
    QCOMPARE(old.updatedAt, QDateTime::fromMSecsSinceEpoch(t0 + 1000, Qt::UTC));
    QCOMPARE(old.systemPrompt, u"Be nice."_s);
    QCOMPARE(old.samplingJson, u"{\"temperature\":0.5}"_s);
    QCOMPARE(old.modelKey, u"olmoe"_s);
    QCOMPARE(titles(db.listChats()), QStringList({"Old chat", "Other"}));
    const std::vector<MessageRecord> msgs = db.messages(1);
    QCOMPARE(msgs.size(), size_t{4});
    QCOMPARE(msgs[1].content, u"Hi! ```code```"_s);
    QCOMPARE(msgs[1].createdAt, QDateTime::fromMSecsSinceEpoch(t0 + 1, Qt::UTC));
    QCOMPARE(msgs[1].ttftMs, -1.0);  // the new stats columns are "unknown" on old rows
    QCOMPARE(msgs[1].promptTokens, 0);
    QCOMPARE(msgs[1].stopReason, QString());
    QCOMPARE(msgs[3].state, MessageState::Streaming);
    QCOMPARE(db.setting(u"theme"_s).toString(), u"dark"_s);
    QCOMPARE(db.setting(u"fontSize"_s).toInt(), 14);

    // The new columns and tables work on the upgraded file.
    QCOMPARE(db.recoverInterruptedReplies(), 1);
    db.finishMessage(msgs[1].id, msgs[1].content, MessageState::Complete, replyStats());
    QCOMPARE(db.message(msgs[1].id)->tokensPerSecond, 14.2);
    QCOMPARE(db.addMessage(1, u"user"_s, u"new"_s).position, 4);
    db.saveActivationCounts(u"olmoe"_s, 1, 2, {3, 4}, {5});
    QCOMPARE(db.loadActivationCounts(u"olmoe"_s)->counts, std::vector<quint64>({3, 4}));
    db.savePlan(u"olmoe"_s, 1 << 30, 3, u"{}"_s);
    QVERIFY(db.latestPlan(u"olmoe"_s));
    db.saveProfile(u"olmoe"_s, u"{\"ssd\":1}"_s);
    QVERIFY(db.loadProfile(u"olmoe"_s));
  }

  void aFailedUpgradeStepLeavesThePreviousVersion() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"conflict.sqlite"_s);
    {
      RawSqlite raw(path);
      createVersion1Schema(raw);
      raw.exec(u"INSERT INTO chats (title, created_at, updated_at) VALUES ('kept', 1, 1)"_s);
      raw.exec(u"CREATE TABLE plans (x)"_s);  // makes step 2's CREATE TABLE plans fail
      raw.exec(u"PRAGMA user_version = 1"_s);
    }
    const QString error = errorOf([&] { ChatDatabase db(path); });
    QVERIFY2(error.contains(path) && error.contains(u"version 2"_s) && error.contains(u"plans"_s) &&
                 error.contains(u"already exists"_s),
             qPrintable(error));
    RawSqlite raw(path);
    QCOMPARE(raw.scalar(u"PRAGMA user_version"_s).toInt(), 1);
    // Step 2's ALTER TABLEs ran before the failure and were rolled back with it.
    QCOMPARE(raw.scalar(u"SELECT COUNT(*) FROM pragma_table_info('messages') WHERE name = 'ttft_ms'"_s).toInt(),
             0);
    QCOMPARE(raw.scalar(u"SELECT title FROM chats"_s).toString(), u"kept"_s);
  }

  void refusesANewerSchemaAndLeavesTheFileUnchanged() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"future.sqlite"_s);
    const int future = ChatDatabase::latestSchemaVersion() + 7;
    {
      RawSqlite raw(path);
      raw.exec(u"CREATE TABLE chats (id INTEGER PRIMARY KEY, hologram BLOB)"_s);
      raw.exec(u"PRAGMA user_version = %1"_s.arg(future));
    }
    const QByteArray before = fileBytes(path);
    QVERIFY(!before.isEmpty());
    const QString error = errorOf([&] { ChatDatabase db(path); });
    QVERIFY2(error.contains(path) && error.contains(QString::number(future)) &&
                 error.contains(QString::number(ChatDatabase::latestSchemaVersion())),
             qPrintable(error));
    QCOMPARE(fileBytes(path), before);
    QVERIFY(!QFile::exists(path + u"-wal"_s));
    for (const QString& n : QSqlDatabase::connectionNames()) QVERIFY2(!n.startsWith(u"zipmoe"_s), qPrintable(n));
  }

  void refusesAFileThatIsNotSQLite() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"notes.sqlite"_s);
    QByteArray junk;
    for (int i = 0; i < 200; ++i) junk += "These are my notes, not a database. ";
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(junk);
    }
    const QString error = errorOf([&] { ChatDatabase db(path); });
    QVERIFY2(error.contains(path) && error.contains(u"not a database"_s), qPrintable(error));
    QCOMPARE(fileBytes(path), junk);
    for (const QString& n : QSqlDatabase::connectionNames()) QVERIFY2(!n.startsWith(u"zipmoe"_s), qPrintable(n));
  }

  void refusesAPathThatIsNotAFile() {
    QVERIFY(errorOf([] { ChatDatabase db{QString()}; }).contains(u"file path"_s));
    QVERIFY(errorOf([] { ChatDatabase db(u":memory:"_s); }).contains(u"file path"_s));
  }

  // Several instances (as several app processes would) creating and upgrading one new file at once.
  void concurrentOpensUpgradeOnce() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"race.sqlite"_s);
    QString errors[4];
    std::unique_ptr<QThread> threads[4];
    for (int i = 0; i < 4; ++i)
      threads[i].reset(QThread::create([&, i] {
        try {
          ChatDatabase db(path);
          db.createChat(u"from %1"_s.arg(i), {}, {}, {});
        } catch (const std::exception& e) {
          errors[i] = QString::fromStdString(e.what());
        }
      }));
    for (auto& t : threads) t->start();
    for (auto& t : threads) QVERIFY(t->wait());
    for (const QString& e : errors) QVERIFY2(e.isEmpty(), qPrintable(e));
    ChatDatabase db(path);
    QCOMPARE(db.schemaVersion(), ChatDatabase::latestSchemaVersion());
    QCOMPARE(db.listChats().size(), size_t{4});
  }

  void activationCountsRoundTrip() {
    QTemporaryDir dir;
    ChatDatabase db(dir.filePath(u"activations.sqlite"_s));
    constexpr int kLayers = 60, kExperts = 256;
    std::mt19937_64 rng(42);
    std::vector<quint64> counts(size_t{kLayers} * kExperts), steps(kLayers);
    for (quint64& c : counts) c = rng() >> (rng() % 64);
    counts[0] = std::numeric_limits<quint64>::max();  // the blob keeps all 64 bits
    for (quint64& s : steps) s = rng() >> 20;
    db.saveActivationCounts(u"deepseek"_s, kLayers, kExperts, counts, steps);
    const std::optional<ActivationStatsRecord> back = db.loadActivationCounts(u"deepseek"_s);
    QVERIFY(back);
    QCOMPARE(back->layers, kLayers);
    QCOMPARE(back->experts, kExperts);
    QVERIFY(back->counts == counts);
    QVERIFY(back->steps == steps);

    // Saving replaces the model's rows, whatever their old shape; other models are untouched.
    db.saveActivationCounts(u"other"_s, 1, 1, {9}, {1});
    db.saveActivationCounts(u"deepseek"_s, 2, 3, {1, 2, 3, 4, 5, 6}, {7, 8});
    const ActivationStatsRecord small = db.loadActivationCounts(u"deepseek"_s).value();
    QCOMPARE(small.layers, 2);
    QCOMPARE(small.experts, 3);
    QVERIFY(small.counts == std::vector<quint64>({1, 2, 3, 4, 5, 6}));
    QVERIFY(small.steps == std::vector<quint64>({7, 8}));
    QCOMPARE(db.loadActivationCounts(u"other"_s)->counts, std::vector<quint64>({9}));
    QVERIFY(!db.loadActivationCounts(u"never-seen"_s));
  }

  void activationCountsShapeIsValidated() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"shapes.sqlite"_s);
    ChatDatabase db(path);
    const QString model = u"mixtral"_s;
    QVERIFY(errorOf([&] { db.saveActivationCounts(model, 2, 3, {1, 2, 3}, {1, 1}); }).contains(u"6 counts"_s));
    QVERIFY(errorOf([&] { db.saveActivationCounts(model, 2, 3, std::vector<quint64>(6), {1}); }).contains(model));
    QVERIFY(errorOf([&] { db.saveActivationCounts(model, 0, 3, {}, {}); }).contains(model));
    QVERIFY(errorOf([&] { db.saveActivationCounts(model, 1, 1, {1}, {std::numeric_limits<quint64>::max()}); })
                .contains(u"2^63"_s));
    QVERIFY(!db.loadActivationCounts(model));  // nothing was half-saved

    db.saveActivationCounts(model, 8, 4, std::vector<quint64>(32, 5), std::vector<quint64>(8, 2));
    {
      RawSqlite raw(path);
      raw.exec(u"UPDATE activation_stats SET counts = zeroblob(7) WHERE model_key = ? AND layer = 5"_s, {model});
    }
    QString error = errorOf([&] { db.loadActivationCounts(model); });
    QVERIFY2(error.contains(model) && error.contains(u"layer 5"_s) && error.contains(u"7 bytes"_s),
             qPrintable(error));
    {
      RawSqlite raw(path);
      raw.exec(u"DELETE FROM activation_stats WHERE model_key = ? AND layer = 3"_s, {model});
    }
    error = errorOf([&] { db.loadActivationCounts(model); });
    QVERIFY2(error.contains(model) && error.contains(u"layer 3 is missing"_s), qPrintable(error));
  }

  void plansProfilesAndSettingsRoundTrip() {
    QTemporaryDir dir;
    ChatDatabase db(dir.filePath(u"misc.sqlite"_s));
    QVERIFY(!db.latestPlan(u"m"_s));
    db.savePlan(u"m"_s, 8ull << 30, 0b101, u"{\"v\":1}"_s);
    const PlanRecord saved = db.savePlan(u"m"_s, 12ull << 30, 0b011, u"{\"v\":2}"_s);
    db.savePlan(u"n"_s, 1, 1, u"{\"v\":3}"_s);
    const PlanRecord latest = db.latestPlan(u"m"_s).value();
    QCOMPARE(latest.id, saved.id);
    QCOMPARE(latest.budgetBytes, 12ull << 30);
    QCOMPARE(latest.poolMask, 0b011u);
    QCOMPARE(latest.planJson, u"{\"v\":2}"_s);
    QCOMPARE(latest.createdAt, saved.createdAt);
    QVERIFY(errorOf([&] { db.savePlan(u"m"_s, ~0ull, 1, {}); }).contains(u"budget"_s));

    QVERIFY(!db.loadProfile(u"m"_s));
    db.saveProfile(u"m"_s, u"{\"a\":1}"_s);
    db.saveProfile(u"m"_s, u"{\"a\":2}"_s);
    QCOMPARE(db.loadProfile(u"m"_s).value(), u"{\"a\":2}"_s);

    QCOMPARE(db.setting(u"missing"_s, 7).toInt(), 7);
    QVERIFY(!db.setting(u"missing"_s).isValid());
    db.setSetting(u"text"_s, u"hello"_s);
    db.setSetting(u"int"_s, 42);
    db.setSetting(u"big"_s, qint64{1} << 40);
    db.setSetting(u"double"_s, 0.25);
    db.setSetting(u"bool"_s, true);
    db.setSetting(u"bytes"_s, QByteArray("\x00\x01\xff", 3));
    QCOMPARE(db.setting(u"text"_s).toString(), u"hello"_s);
    QCOMPARE(db.setting(u"int"_s).toInt(), 42);
    QCOMPARE(db.setting(u"big"_s).toLongLong(), qint64{1} << 40);
    QCOMPARE(db.setting(u"double"_s).toDouble(), 0.25);
    QCOMPARE(db.setting(u"bool"_s).toBool(), true);
    QCOMPARE(db.setting(u"bytes"_s).toByteArray(), QByteArray("\x00\x01\xff", 3));
    db.setSetting(u"text"_s, u"again"_s);
    QCOMPARE(db.setting(u"text"_s).toString(), u"again"_s);
    db.setSetting(u"text"_s, QVariant());
    QCOMPARE(db.setting(u"text"_s, u"gone"_s).toString(), u"gone"_s);
    const QString error = errorOf([&] { db.setSetting(u"list"_s, QStringList{u"a"_s}); });
    QVERIFY2(error.contains(u"'list'"_s) && error.contains(u"QStringList"_s), qPrintable(error));
  }

  void markdownExportKeepsTextVerbatim() {
    ChatRecord chat;
    chat.title = u"Printing\nin C++"_s;
    chat.systemPrompt = u"You write C++."_s;
    chat.modelKey = u"qwen"_s;
    chat.createdAt = QDateTime(QDate(2024, 5, 6), QTime(7, 8, 9), Qt::UTC);
    const QString code = u"Like this:\n\n```cpp\nint main() {\n  std::puts(\"50% _done_\");\n}\n```\n"_s;
    const MessageRecord user = makeMessage(0, u"user"_s, u"How do I print?"_s);
    MessageRecord reply = makeMessage(1, u"assistant"_s, code);
    const MessageStats s = replyStats();
    reply.ttftMs = s.ttftMs;
    reply.tokensPerSecond = s.tokensPerSecond;
    reply.expertHitRate = s.expertHitRate;
    const MessageRecord cut =
        makeMessage(2, u"assistant"_s, u"```python\nprint("_s, MessageState::Incomplete);
    const MessageRecord after = makeMessage(3, u"user"_s, u"Thanks"_s);

    const QString md = exportChatMarkdown(chat, {user, reply, cut, after});
    QVERIFY2(md.startsWith(u"# Printing in C++\n"_s), qPrintable(md));
    QVERIFY(md.contains(u"## System prompt\n\nYou write C++.\n"_s));
    QVERIFY(md.contains(u"## User\n\nHow do I print?\n"_s));
    QVERIFY(md.contains(u"## Assistant\n\n"_s + code));
    QVERIFY2(md.contains(u"TTFT 120 ms \u00b7 14.2 tok/s \u00b7 expert hit rate 83 %"_s), qPrintable(md));
    QVERIFY(md.contains(u"Incomplete reply"_s));
    QCOMPARE(md.count(u"TTFT"_s), 1);  // the cut reply has no stats
    // The fence the cut reply left open is closed before the next heading.
    const qsizetype fenceClose = md.indexOf(u"print(\n```\n"_s);
    QVERIFY2(fenceClose > 0 && fenceClose < md.indexOf(u"## User\n\nThanks"_s), qPrintable(md));
    QCOMPARE(md.count(u"```"_s) % 2, 0);
  }

  void jsonExportHasEveryField() {
    QTemporaryDir dir;
    ChatDatabase db(dir.filePath(u"export.sqlite"_s));
    const ChatRecord chat = db.createChat(u"Export \"me\""_s, u"sys"_s,
                                          u"{\"temperature\":0.7,\"top_p\":0.9}"_s, u"olmoe"_s);
    db.addMessage(chat.id, u"user"_s, u"Q\n```\ncode\n```"_s);
    const MessageRecord reply = db.addMessage(chat.id, u"assistant"_s, {}, MessageState::Streaming);
    db.finishMessage(reply.id, u"A"_s, MessageState::Incomplete, replyStats());
    const std::vector<MessageRecord> msgs = db.messages(chat.id);
    const ChatRecord stored = db.chat(chat.id).value();

    const QString text = exportChatJson(stored, msgs);
    QJsonParseError err{};
    const QJsonDocument doc = QJsonDocument::fromJson(text.toUtf8(), &err);
    QVERIFY2(err.error == QJsonParseError::NoError, qPrintable(err.errorString()));
    const QJsonObject root = doc.object();
    QCOMPARE(root[u"format"_s].toString(), u"zipmoe-chat"_s);
    const QJsonObject c = root[u"chat"_s].toObject();
    QCOMPARE(c[u"id"_s].toInteger(), stored.id);
    QCOMPARE(c[u"title"_s].toString(), stored.title);
    QCOMPARE(c[u"systemPrompt"_s].toString(), u"sys"_s);
    QCOMPARE(c[u"modelKey"_s].toString(), u"olmoe"_s);
    QCOMPARE(c[u"sampling"_s].toObject()[u"top_p"_s].toDouble(), 0.9);
    const QString created = c[u"createdAt"_s].toString();
    QVERIFY2(created.endsWith(QLatin1Char('Z')), qPrintable(created));
    QCOMPARE(QDateTime::fromString(created, Qt::ISODateWithMs), stored.createdAt);
    QCOMPARE(QDateTime::fromString(c[u"updatedAt"_s].toString(), Qt::ISODateWithMs), stored.updatedAt);

    const QJsonArray list = root[u"messages"_s].toArray();
    QCOMPARE(list.size(), qsizetype{2});
    for (qsizetype i = 0; i < list.size(); ++i) {
      const QJsonObject o = list[i].toObject();
      const MessageRecord& m = msgs[static_cast<size_t>(i)];
      QCOMPARE(o[u"id"_s].toInteger(), m.id);
      QCOMPARE(o[u"chatId"_s].toInteger(), m.chatId);
      QCOMPARE(o[u"position"_s].toInt(), m.position);
      QCOMPARE(o[u"role"_s].toString(), m.role);
      QCOMPARE(o[u"content"_s].toString(), m.content);
      QCOMPARE(o[u"state"_s].toString(), messageStateName(m.state));
      QCOMPARE(QDateTime::fromString(o[u"createdAt"_s].toString(), Qt::ISODateWithMs), m.createdAt);
      QCOMPARE(o[u"ttftMs"_s].toDouble(-1), m.ttftMs);
      QCOMPARE(o[u"tokensPerSecond"_s].toDouble(-1), m.tokensPerSecond);
      QCOMPARE(o[u"promptTokens"_s].toInt(), m.promptTokens);
      QCOMPARE(o[u"generatedTokens"_s].toInt(), m.generatedTokens);
      QCOMPARE(o[u"expertHitRate"_s].toDouble(-1), m.expertHitRate);
      QCOMPARE(o[u"stopReason"_s].toString(), m.stopReason);
    }
    QVERIFY(list[0].toObject()[u"ttftMs"_s].isNull());  // unknown is null, not -1
    QCOMPARE(list[1].toObject()[u"state"_s].toString(), u"incomplete"_s);
  }

  void exportsAreWrittenAtomically() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"chat.md"_s);
    writeTextFileAtomically(path, u"first \u00e9"_s);
    writeTextFileAtomically(path, u"second"_s);
    QCOMPARE(fileBytes(path), QByteArray("second"));
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files), QStringList({"chat.md"}));  // no temporary left behind

    const QString bad = dir.filePath(u"no/such/folder/chat.md"_s);
    try {
      writeTextFileAtomically(bad, u"x"_s);
      QFAIL("writing into a missing folder did not throw");
    } catch (const ExportError& e) {
      QVERIFY2(QString::fromStdString(e.what()).contains(bad), e.what());
    }
  }

  void killMidReplyKeepsTheCommittedPrefix() {
    QTemporaryDir dir;
    const QString path = dir.filePath(u"killed.sqlite"_s);
    QProcess child;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QString::fromLatin1(kChildEnv), path);
    child.setProcessEnvironment(env);
    child.setProgram(QCoreApplication::applicationFilePath());
    child.start();
    QVERIFY2(child.waitForStarted(), qPrintable(child.errorString()));

    // Kill once a few flushes are known to be committed (the child goes on writing): they must all
    // survive. No deadline: the child streams until it is killed.
    int lastSeen = -1;
    while (lastSeen < 5 && child.state() == QProcess::Running) {
      if (!child.canReadLine()) child.waitForReadyRead(-1);
      while (child.canReadLine()) {
        const QByteArray line = child.readLine().trimmed();
        if (line.startsWith("flushed ")) lastSeen = line.mid(8).toInt();
      }
    }
    QVERIFY2(lastSeen >= 5, child.readAllStandardError().constData());
    QCOMPARE(::kill(static_cast<pid_t>(child.processId()), SIGKILL), 0);
    QVERIFY(child.waitForFinished(-1));
    QCOMPARE(child.exitStatus(), QProcess::CrashExit);
    while (child.canReadLine()) {
      const QByteArray line = child.readLine().trimmed();
      if (line.startsWith("flushed ")) lastSeen = line.mid(8).toInt();
    }

    ChatDatabase db(path);
    const std::vector<ChatRecord> chats = db.listChats();
    QCOMPARE(chats.size(), size_t{1});
    std::vector<MessageRecord> msgs = db.messages(chats[0].id);
    QCOMPARE(msgs.size(), size_t{2});
    QCOMPARE(msgs[0].content, u"What is ZipMoE?"_s);
    QCOMPARE(msgs[0].state, MessageState::Complete);
    QCOMPARE(msgs[1].state, MessageState::Streaming);
    // Whole flushes only: the text is the first N chunks, N at least what the child reported.
    const QString partial = msgs[1].content;
    const int flushes = static_cast<int>(partial.count(u"chunk "_s));
    QVERIFY2(flushes >= lastSeen + 1, qPrintable(u"%1 flushes stored, %2 reported"_s.arg(flushes).arg(lastSeen + 1)));
    QCOMPARE(partial, streamedText(flushes - 1));

    QCOMPARE(db.recoverInterruptedReplies(), 1);
    msgs = db.messages(chats[0].id);
    QCOMPARE(msgs[1].state, MessageState::Incomplete);
    QCOMPARE(msgs[1].content, partial);
    QCOMPARE(msgs[1].stopReason, u"interrupted"_s);
    QCOMPARE(db.recoverInterruptedReplies(), 0);
    QSqlQuery q(db.connection());
    QVERIFY(q.exec(u"PRAGMA integrity_check"_s) && q.next());
    QCOMPARE(q.value(0).toString(), u"ok"_s);
  }
};

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  if (qEnvironmentVariableIsSet(kChildEnv)) {
    try {
      return streamingChild(qEnvironmentVariable(kChildEnv));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "streaming child: %s\n", e.what());
      return 2;
    }
  }
  TestChatDatabase tc;
  QTEST_SET_MAIN_SOURCE_PATH
  return QTest::qExec(&tc, argc, argv);
}

#include "test_chat_database.moc"
