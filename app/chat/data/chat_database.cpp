#include "chat_database.h"

#include <QDeadlineTimer>
#include <QDir>
#include <QMutex>
#include <QMutexLocker>
#include <QSet>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QThread>
#include <QtEndian>

#include <algorithm>
#include <atomic>
#include <limits>
#include <unordered_map>

#include "schema_migrations.h"
#include "sql_statement.h"

namespace zipmoe::app {

using namespace sql;  // NOLINT: this file is the helpers' main user

// ---- per-thread connections

namespace detail {

struct ConnectionRegistry {
  QMutex mutex;
  QSet<QString> names;

  void add(const QString& name) {
    QMutexLocker lock(&mutex);
    QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), name);
    names.insert(name);
  }
  // Under the mutex, so that a thread exiting and the ChatDatabase's destructor never both remove
  // one connection.
  void remove(const QString& name) {
    QMutexLocker lock(&mutex);
    if (names.remove(name)) QSqlDatabase::removeDatabase(name);
  }
  void removeAll() {
    QMutexLocker lock(&mutex);
    for (const QString& name : std::as_const(names)) QSqlDatabase::removeDatabase(name);
    names.clear();
  }
};

}  // namespace detail

namespace {

using detail::ConnectionRegistry;

std::atomic<quint64> nextInstanceId{1};
std::atomic<quint64> nextConnectionSerial{1};

// A thread's handle on one ChatDatabase's connection. Destroyed by closeThreadConnection(), the
// ChatDatabase's destructor (on its own thread) or the thread's exit; if the ChatDatabase is gone by
// then, its destructor has already removed the connection.
struct ThreadConnection {
  QString name;
  std::weak_ptr<ConnectionRegistry> registry;

  ThreadConnection(QString n, std::weak_ptr<ConnectionRegistry> r) : name(std::move(n)), registry(std::move(r)) {}
  ThreadConnection(ThreadConnection&&) = default;
  ThreadConnection& operator=(ThreadConnection&&) = default;
  ThreadConnection(const ThreadConnection&) = delete;
  ThreadConnection& operator=(const ThreadConnection&) = delete;
  ~ThreadConnection() {
    if (auto r = registry.lock()) r->remove(name);
  }
};

// Keyed by instance id. thread_local rather than QThreadStorage: it also cleans up on threads Qt did
// not start, and a destroyed ChatDatabase leaves no dangling destructor behind.
std::unordered_map<quint64, ThreadConnection>& threadConnections() {
  thread_local std::unordered_map<quint64, ThreadConnection> connections;
  return connections;
}

constexpr char kMessageColumns[] =
    "id, chat_id, position, role, content, state, created_at, ttft_ms, tokens_per_second, prompt_tokens,"
    " generated_tokens, expert_hit_rate, stop_reason, model_key, budget_bytes, tpot_ms";

MessageRecord readMessage(const Statement& q) {
  MessageRecord m;
  m.id = q.value(0).toLongLong();
  m.chatId = q.value(1).toLongLong();
  m.position = q.value(2).toInt();
  m.role = q.value(3).toString();
  m.content = q.value(4).toString();
  try {
    m.state = messageStateFromName(q.value(5).toString());
  } catch (const DatabaseError& e) {
    q.fail(QStringLiteral("message %1: ").arg(m.id) + QString::fromStdString(e.what()));
  }
  m.createdAt = utcFromMs(q.value(6));
  m.ttftMs = q.value(7).toDouble();
  m.tokensPerSecond = q.value(8).toDouble();
  m.promptTokens = q.value(9).toInt();
  m.generatedTokens = q.value(10).toInt();
  m.expertHitRate = q.value(11).toDouble();
  m.stopReason = q.value(12).toString();
  m.modelKey = q.value(13).toString();
  m.budgetBytes = static_cast<quint64>(std::max<qint64>(0, q.value(14).toLongLong()));
  m.tpotMs = q.value(15).toDouble();
  return m;
}

// Sets the chat's updated_at to now, or just past the newest updated_at of any chat when the clock
// has not moved on (same millisecond, or a clock stepped back): the list order stays the order of
// activity. Throws when the chat does not exist.
void touchChat(const QSqlDatabase& db, const QString& path, qint64 chatId, const QString& what) {
  Statement q(db, path, what + QStringLiteral(" (updating chats.updated_at)"),
              QStringLiteral("UPDATE chats SET updated_at = MAX(?, (SELECT MAX(updated_at) FROM chats) + 1)"
                             " WHERE id = ?"));
  q.bind(QDateTime::currentMSecsSinceEpoch()).bind(chatId).exec();
  q.requireOneRowChanged(QStringLiteral("no chat with id %1").arg(chatId));
}

}  // namespace

QString messageStateName(MessageState state) {
  switch (state) {
    case MessageState::Complete: return QStringLiteral("complete");
    case MessageState::Streaming: return QStringLiteral("streaming");
    case MessageState::Incomplete: return QStringLiteral("incomplete");
    case MessageState::Error: return QStringLiteral("error");
  }
  throw DatabaseError(QStringLiteral("message state %1 is not a MessageState").arg(static_cast<int>(state)));
}

MessageState messageStateFromName(const QString& name) {
  for (MessageState s :
       {MessageState::Complete, MessageState::Streaming, MessageState::Incomplete, MessageState::Error})
    if (name == messageStateName(s)) return s;
  throw DatabaseError(QStringLiteral("message state '%1' is not complete, streaming, incomplete or error").arg(name));
}

// ---- opening

ChatDatabase::ChatDatabase(const QString& path)
    : path_(path), instanceId_(nextInstanceId++), registry_(std::make_shared<ConnectionRegistry>()) {
  // Every thread opens its own connection to the path: ":memory:" would give each its own database.
  if (path_.isEmpty() || path_ == QLatin1String(":memory:"))
    throw DatabaseError(QStringLiteral("'%1': the chat database needs a file path").arg(path_));
  try {
    migrate();
  } catch (...) {
    threadConnections().erase(instanceId_);
    registry_->removeAll();
    throw;
  }
}

ChatDatabase::~ChatDatabase() {
  threadConnections().erase(instanceId_);
  registry_->removeAll();
}

QString ChatDatabase::defaultPath() {
  const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
  if (dir.isEmpty()) throw DatabaseError(QStringLiteral("no writable app data location for the chat database"));
  if (!QDir().mkpath(dir)) throw DatabaseError(QStringLiteral("%1: cannot create the app data folder").arg(dir));
  return dir + QStringLiteral("/zipmoe.sqlite");
}

int ChatDatabase::latestSchemaVersion() { return schemaMigrations().back().version; }

int ChatDatabase::schemaVersion() const { return readUserVersion(connection(), path_); }

QSqlDatabase ChatDatabase::connection() const {
  auto& mine = threadConnections();
  if (auto it = mine.find(instanceId_); it != mine.end()) return QSqlDatabase::database(it->second.name, false);
  std::erase_if(mine, [](const auto& entry) { return entry.second.registry.expired(); });

  const QString name = QStringLiteral("zipmoe-chat-db%1-thread%2-%3")
                           .arg(instanceId_)
                           .arg(reinterpret_cast<quintptr>(QThread::currentThreadId()), 0, 16)
                           .arg(nextConnectionSerial++);
  registry_->add(name);
  try {
    configureConnection(name);
  } catch (...) {
    registry_->remove(name);
    throw;
  }
  mine.emplace(instanceId_, ThreadConnection(name, registry_));
  return QSqlDatabase::database(name, false);
}

void ChatDatabase::closeThreadConnection() const { threadConnections().erase(instanceId_); }

void ChatDatabase::configureConnection(const QString& name) const {
  QSqlDatabase db = QSqlDatabase::database(name, false);
  db.setDatabaseName(path_);
  if (!db.open()) throwError(path_, QStringLiteral("opening the chat database"), sqlErrorText(db.lastError()));

  // Nothing may write to the file before it is known to be ours: journal_mode=WAL rewrites the
  // header. Reading user_version is the first access, so it is also what fails on a file that is
  // not a SQLite database.
  int version = 0;
  {
    QSqlQuery probe(db);  // scoped: an unfinished read would hold a lock that blocks the WAL switch
    if (!probe.exec(QStringLiteral("PRAGMA user_version")) || !probe.next())
      throwError(path_, QStringLiteral("opening the chat database"),
                 QStringLiteral("not a readable SQLite database (reading PRAGMA user_version: %1)")
                     .arg(sqlErrorText(probe.lastError())));
    version = probe.value(0).toInt();
  }
  if (version > latestSchemaVersion())
    throwError(path_, QStringLiteral("opening the chat database"),
               QStringLiteral("its schema version is %1, but this ZipMoE knows versions up to %2 only: it was "
                              "written by a newer ZipMoE. The file was not changed.")
                   .arg(version).arg(latestSchemaVersion()));

  // busy_timeout first, so that switching to WAL waits for another process's transaction.
  for (const char* pragma : {"busy_timeout = 5000", "foreign_keys = ON"})
    execOrThrow(db, path_, QStringLiteral("setting PRAGMA %1").arg(QLatin1String(pragma)),
                QStringLiteral("PRAGMA %1").arg(QLatin1String(pragma)));
  // Switching a rollback-journal file to WAL takes an exclusive lock, and SQLite answers SQLITE_BUSY
  // at once, without the busy handler, while another connection reads or switches it too (two app
  // instances starting on a new file): retry for as long as busy_timeout would have waited.
  const QString what = QStringLiteral("setting PRAGMA journal_mode = WAL");
  const QDeadlineTimer deadline(5000);
  for (QString mode;;) {
    QSqlQuery q(db);
    if (q.exec(QStringLiteral("PRAGMA journal_mode = WAL")) && q.next()) {
      mode = q.value(0).toString();
      if (mode.compare(QStringLiteral("wal"), Qt::CaseInsensitive) != 0)
        throwError(path_, what, QStringLiteral("SQLite kept journal mode '%1'").arg(mode));
      break;
    }
    const bool busy = (q.lastError().nativeErrorCode().toInt() & 0xff) == 5;  // SQLITE_BUSY and its variants
    if (!busy || deadline.hasExpired()) throwError(path_, what, sqlErrorText(q.lastError()));
    QThread::msleep(5);
  }
  // In WAL mode NORMAL loses no committed transaction when the app dies, only at a power cut.
  execOrThrow(db, path_, QStringLiteral("setting PRAGMA synchronous = NORMAL"),
              QStringLiteral("PRAGMA synchronous = NORMAL"));
}

void ChatDatabase::migrate() {
  const QSqlDatabase db = connection();
  for (const SchemaMigration& step : schemaMigrations()) {
    if (readUserVersion(db, path_) >= step.version) continue;
    const QString what = QStringLiteral("upgrading the schema to version %1 (").arg(step.version) +
                         QString::fromUtf8(step.description) + QLatin1Char(')');
    WriteTransaction tx(db, path_, what);
    // Read again under the write lock: another process may have run this step meanwhile.
    const int current = readUserVersion(db, path_);
    if (current < step.version) {
      if (current != step.version - 1)
        throwError(path_, what,
                   QStringLiteral("the file is at version %1, expected %2").arg(current).arg(step.version - 1));
      for (const char* sql : step.statements)
        execOrThrow(db, path_, what + QStringLiteral(": `%1`").arg(QString::fromUtf8(sql)), QString::fromUtf8(sql));
      // PRAGMA takes no bound parameters; the value is our own integer.
      execOrThrow(db, path_, what, QStringLiteral("PRAGMA user_version = %1").arg(step.version));
    }
    tx.commit();
  }
}

// ---- chats

ChatRecord ChatDatabase::createChat(const QString& title, const QString& systemPrompt, const QString& samplingJson,
                                    const QString& modelKey) {
  const QSqlDatabase db = connection();
  const QString what = QStringLiteral("creating chat '%1' in chats").arg(title);
  WriteTransaction tx(db, path_, what);
  qint64 id = 0;
  {
    Statement q(db, path_, what,
                QStringLiteral("INSERT INTO chats (title, created_at, updated_at, system_prompt, sampling_json,"
                               " model_key) VALUES (?, ?, ?, ?, ?, ?)"));
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    q.bind(text(title)).bind(now).bind(now).bind(text(systemPrompt)).bind(text(samplingJson)).bind(text(modelKey));
    id = q.exec().lastInsertId();
  }
  touchChat(db, path_, id, what);
  tx.commit();
  return chat(id).value();
}

void ChatDatabase::renameChat(qint64 chatId, const QString& title) {
  const QSqlDatabase db = connection();
  const QString what = QStringLiteral("renaming chat %1 in chats").arg(chatId);
  WriteTransaction tx(db, path_, what);
  touchChat(db, path_, chatId, what);
  Statement(db, path_, what, QStringLiteral("UPDATE chats SET title = ? WHERE id = ?"))
      .bind(text(title)).bind(chatId).exec();
  tx.commit();
}

void ChatDatabase::updateChatSettings(qint64 chatId, const QString& systemPrompt, const QString& samplingJson) {
  const QSqlDatabase db = connection();
  const QString what = QStringLiteral("updating the settings of chat %1 in chats").arg(chatId);
  WriteTransaction tx(db, path_, what);
  touchChat(db, path_, chatId, what);
  Statement(db, path_, what, QStringLiteral("UPDATE chats SET system_prompt = ?, sampling_json = ? WHERE id = ?"))
      .bind(text(systemPrompt)).bind(text(samplingJson)).bind(chatId).exec();
  tx.commit();
}

void ChatDatabase::deleteChat(qint64 chatId) {
  Statement q(connection(), path_, QStringLiteral("deleting chat %1 from chats").arg(chatId),
              QStringLiteral("DELETE FROM chats WHERE id = ?"));
  q.bind(chatId).exec().requireOneRowChanged(QStringLiteral("no chat with id %1").arg(chatId));
}

std::optional<ChatRecord> ChatDatabase::chat(qint64 chatId) const {
  Statement q(connection(), path_, QStringLiteral("reading chat %1 from chats").arg(chatId),
              QStringLiteral("SELECT %1 FROM chats WHERE id = ?").arg(QLatin1String(kChatColumns)));
  if (!q.bind(chatId).exec().next()) return std::nullopt;
  return readChat(q);
}

std::vector<ChatRecord> ChatDatabase::listChats(const QString& search) const {
  QString sql = QStringLiteral("SELECT %1 FROM chats c").arg(QLatin1String(kChatColumns));
  if (!search.isEmpty())
    sql += QStringLiteral(" WHERE c.title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m"
                          " WHERE m.chat_id = c.id AND m.content LIKE ? ESCAPE '\\')");
  sql += QStringLiteral(" ORDER BY updated_at DESC, id DESC");
  Statement q(connection(), path_,
              search.isEmpty() ? QStringLiteral("listing chats")
                               : QStringLiteral("searching chats and messages for '%1'").arg(search),
              sql);
  if (!search.isEmpty()) q.bind(likeContains(search)).bind(likeContains(search));
  q.exec();
  std::vector<ChatRecord> out;
  while (q.next()) out.push_back(readChat(q));
  return out;
}

// ---- messages

MessageRecord ChatDatabase::addMessage(qint64 chatId, const QString& role, const QString& content,
                                       MessageState state) {
  const QString what = QStringLiteral("adding a %1 message to chat %2 in messages").arg(role, QString::number(chatId));
  if (role != QLatin1String("system") && role != QLatin1String("user") && role != QLatin1String("assistant"))
    throwError(path_, what, QStringLiteral("role '%1' is not system, user or assistant").arg(role));
  const QSqlDatabase db = connection();
  WriteTransaction tx(db, path_, what);
  touchChat(db, path_, chatId, what);  // also proves that the chat exists
  qint64 id = 0;
  {
    Statement q(db, path_, what,
                QStringLiteral("INSERT INTO messages (chat_id, position, role, content, state, created_at) VALUES"
                               " (?, (SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE chat_id = ?),"
                               " ?, ?, ?, ?)"));
    q.bind(chatId).bind(chatId).bind(role).bind(text(content)).bind(messageStateName(state));
    id = q.bind(QDateTime::currentMSecsSinceEpoch()).exec().lastInsertId();
  }
  tx.commit();
  return message(id).value();
}

void ChatDatabase::setMessageContent(qint64 messageId, const QString& content) {
  Statement q(connection(), path_, QStringLiteral("flushing streaming message %1 in messages").arg(messageId),
              QStringLiteral("UPDATE messages SET content = ? WHERE id = ? AND state = 'streaming'"));
  q.bind(text(content)).bind(messageId).exec();
  q.requireOneRowChanged(QStringLiteral("no streaming message with id %1").arg(messageId));
}

void ChatDatabase::appendToStreamingMessage(qint64 messageId, const QString& newText) {
  Statement q(connection(), path_, QStringLiteral("appending to streaming message %1 in messages").arg(messageId),
              QStringLiteral("UPDATE messages SET content = content || ? WHERE id = ? AND state = 'streaming'"));
  q.bind(text(newText)).bind(messageId).exec();
  q.requireOneRowChanged(QStringLiteral("no streaming message with id %1").arg(messageId));
}

void ChatDatabase::finishMessage(qint64 messageId, const QString& content, MessageState state,
                                 const MessageStats& stats) {
  const QSqlDatabase db = connection();
  const QString what = QStringLiteral("finishing message %1 in messages").arg(messageId);
  WriteTransaction tx(db, path_, what);
  qint64 chatId = 0;
  {
    Statement q(db, path_, what,
                QStringLiteral("UPDATE messages SET content = ?, state = ?, ttft_ms = ?, tokens_per_second = ?,"
                               " prompt_tokens = ?, generated_tokens = ?, expert_hit_rate = ?, stop_reason = ?, model_key = ?,"
                               " budget_bytes = ?, tpot_ms = ? WHERE id = ? RETURNING chat_id"));
    q.bind(text(content)).bind(messageStateName(state)).bind(stats.ttftMs).bind(stats.tokensPerSecond);
    q.bind(stats.promptTokens).bind(stats.generatedTokens).bind(stats.expertHitRate).bind(text(stats.stopReason));
    q.bind(text(stats.modelKey)).bind(toSqlInteger(stats.budgetBytes, path_, what)).bind(stats.tpotMs);
    if (!q.bind(messageId).exec().next()) q.fail(QStringLiteral("no message with id %1").arg(messageId));
    chatId = q.value(0).toLongLong();
  }
  touchChat(db, path_, chatId, what);
  tx.commit();
}

void ChatDatabase::updateMessageContent(qint64 messageId, const QString& content) {
  Statement q(connection(), path_, QStringLiteral("editing message %1 in messages").arg(messageId),
              QStringLiteral("UPDATE messages SET content = ? WHERE id = ?"));
  q.bind(text(content)).bind(messageId).exec();
  q.requireOneRowChanged(QStringLiteral("no message with id %1").arg(messageId));
}

std::optional<MessageRecord> ChatDatabase::message(qint64 messageId) const {
  Statement q(connection(), path_, QStringLiteral("reading message %1 from messages").arg(messageId),
              QStringLiteral("SELECT %1 FROM messages WHERE id = ?").arg(QLatin1String(kMessageColumns)));
  if (!q.bind(messageId).exec().next()) return std::nullopt;
  return readMessage(q);
}

std::vector<MessageRecord> ChatDatabase::messages(qint64 chatId) const {
  Statement q(connection(), path_, QStringLiteral("reading the messages of chat %1").arg(chatId),
              QStringLiteral("SELECT %1 FROM messages WHERE chat_id = ? ORDER BY position")
                  .arg(QLatin1String(kMessageColumns)));
  q.bind(chatId).exec();
  std::vector<MessageRecord> out;
  while (q.next()) out.push_back(readMessage(q));
  return out;
}

int ChatDatabase::deleteMessagesFrom(qint64 chatId, int position) {
  const QSqlDatabase db = connection();
  const QString what = QStringLiteral("deleting the messages of chat %1 from position %2").arg(chatId).arg(position);
  WriteTransaction tx(db, path_, what);
  touchChat(db, path_, chatId, what);
  int deleted = 0;
  {
    Statement q(db, path_, what, QStringLiteral("DELETE FROM messages WHERE chat_id = ? AND position >= ?"));
    deleted = q.bind(chatId).bind(position).exec().rowsAffected();
  }
  tx.commit();
  return deleted;
}

int ChatDatabase::recoverInterruptedReplies() {
  Statement q(connection(), path_, QStringLiteral("marking interrupted streaming replies incomplete in messages"),
              QStringLiteral("UPDATE messages SET state = 'incomplete', stop_reason = 'interrupted'"
                             " WHERE state = 'streaming'"));
  return q.exec().rowsAffected();
}

// ---- activation statistics, plans, profiles

void ChatDatabase::saveActivationCounts(const QString& modelKey, int layers, int experts,
                                        const std::vector<quint64>& counts, const std::vector<quint64>& steps) {
  const QString what = QStringLiteral("saving the activation counts of model '%1' to activation_stats").arg(modelKey);
  const size_t cells = layers > 0 && experts > 0 ? static_cast<size_t>(layers) * static_cast<size_t>(experts) : 0;
  if (cells == 0 || counts.size() != cells || steps.size() != static_cast<size_t>(layers))
    throwError(path_, what,
               QStringLiteral("%1 layers x %2 experts need %3 counts and %1 steps, got %4 and %5")
                   .arg(layers).arg(experts).arg(cells).arg(counts.size()).arg(steps.size()));
  const QSqlDatabase db = connection();
  WriteTransaction tx(db, path_, what);
  Statement(db, path_, what, QStringLiteral("DELETE FROM activation_stats WHERE model_key = ?"))
      .bind(text(modelKey)).exec();
  {
    Statement q(db, path_, what,
                QStringLiteral("INSERT INTO activation_stats (model_key, layer, experts, steps, counts)"
                               " VALUES (?, ?, ?, ?, ?)"));
    QByteArray row(static_cast<qsizetype>(experts) * 8, Qt::Uninitialized);
    for (int l = 0; l < layers; ++l) {
      const quint64* layerCounts = counts.data() + static_cast<size_t>(l) * static_cast<size_t>(experts);
      for (int e = 0; e < experts; ++e) qToLittleEndian<quint64>(layerCounts[e], row.data() + qsizetype{8} * e);
      const qint64 layerSteps =
          toSqlInteger(steps[static_cast<size_t>(l)], path_, what + QStringLiteral(", steps of layer %1").arg(l));
      q.bind(text(modelKey)).bind(l).bind(experts).bind(layerSteps).bind(row).exec();
    }
  }
  tx.commit();
}

std::optional<ActivationStatsRecord> ChatDatabase::loadActivationCounts(const QString& modelKey) const {
  Statement q(connection(), path_,
              QStringLiteral("loading the activation counts of model '%1' from activation_stats").arg(modelKey),
              QStringLiteral("SELECT layer, experts, steps, counts FROM activation_stats WHERE model_key = ?"
                             " ORDER BY layer"));
  q.bind(text(modelKey)).exec();
  ActivationStatsRecord r;
  while (q.next()) {
    const qint64 layer = q.value(0).toLongLong();
    const qint64 experts = q.value(1).toLongLong();
    const qint64 steps = q.value(2).toLongLong();
    const QByteArray row = q.value(3).toByteArray();
    if (layer != r.layers)
      q.fail(QStringLiteral("layer %1 is missing (the next stored layer is %2)").arg(r.layers).arg(layer));
    if (layer == 0 && (experts <= 0 || experts > std::numeric_limits<int>::max()))
      q.fail(QStringLiteral("layer 0 has %1 experts").arg(experts));
    if (layer == 0) r.experts = static_cast<int>(experts);
    if (experts != r.experts)
      q.fail(QStringLiteral("layer %1 has %2 experts, layer 0 has %3").arg(layer).arg(experts).arg(r.experts));
    if (row.size() != experts * 8)
      q.fail(QStringLiteral("layer %1 has %2 bytes of counts, expected %3 (%4 experts x 8)")
                 .arg(layer).arg(row.size()).arg(experts * 8).arg(experts));
    if (steps < 0) q.fail(QStringLiteral("layer %1 has a negative step count %2").arg(layer).arg(steps));
    for (qsizetype e = 0; e < experts; ++e) r.counts.push_back(qFromLittleEndian<quint64>(row.constData() + e * 8));
    r.steps.push_back(static_cast<quint64>(steps));
    ++r.layers;
  }
  if (r.layers == 0) return std::nullopt;
  return r;
}

PlanRecord ChatDatabase::savePlan(const QString& modelKey, quint64 budgetBytes, unsigned poolMask,
                                  const QString& planJson) {
  const QString what = QStringLiteral("saving a plan for model '%1' to plans").arg(modelKey);
  PlanRecord p{0, modelKey, budgetBytes, poolMask, planJson, QDateTime::currentDateTimeUtc()};
  Statement q(connection(), path_, what,
              QStringLiteral("INSERT INTO plans (model_key, budget_bytes, pool_mask, plan_json, created_at)"
                             " VALUES (?, ?, ?, ?, ?)"));
  q.bind(text(modelKey)).bind(toSqlInteger(budgetBytes, path_, what + QStringLiteral(", budget bytes")));
  q.bind(static_cast<qint64>(poolMask)).bind(text(planJson)).bind(p.createdAt.toMSecsSinceEpoch());
  p.id = q.exec().lastInsertId();
  return p;
}

std::optional<PlanRecord> ChatDatabase::latestPlan(const QString& modelKey) const {
  Statement q(connection(), path_, QStringLiteral("reading the latest plan of model '%1' from plans").arg(modelKey),
              QStringLiteral("SELECT id, budget_bytes, pool_mask, plan_json, created_at FROM plans"
                             " WHERE model_key = ? ORDER BY id DESC LIMIT 1"));
  if (!q.bind(text(modelKey)).exec().next()) return std::nullopt;
  return PlanRecord{q.value(0).toLongLong(),
                    modelKey,
                    static_cast<quint64>(q.value(1).toLongLong()),
                    static_cast<unsigned>(q.value(2).toLongLong()),
                    q.value(3).toString(),
                    utcFromMs(q.value(4))};
}

void ChatDatabase::saveProfile(const QString& modelKey, const QString& profileJson) {
  Statement(connection(), path_, QStringLiteral("saving the profile of model '%1' to profiles").arg(modelKey),
            QStringLiteral("INSERT INTO profiles (model_key, profile_json, updated_at) VALUES (?, ?, ?)"
                           " ON CONFLICT (model_key) DO UPDATE SET profile_json = excluded.profile_json,"
                           " updated_at = excluded.updated_at"))
      .bind(text(modelKey)).bind(text(profileJson)).bind(QDateTime::currentMSecsSinceEpoch()).exec();
}

std::optional<QString> ChatDatabase::loadProfile(const QString& modelKey) const {
  Statement q(connection(), path_, QStringLiteral("loading the profile of model '%1' from profiles").arg(modelKey),
              QStringLiteral("SELECT profile_json FROM profiles WHERE model_key = ?"));
  if (!q.bind(text(modelKey)).exec().next()) return std::nullopt;
  return q.value(0).toString();
}

// ---- settings

void ChatDatabase::setSetting(const QString& key, const QVariant& value) {
  const QString what = QStringLiteral("setting '%1' in settings").arg(key);
  QVariant stored;
  switch (value.typeId()) {
    case QMetaType::UnknownType:
      Statement(connection(), path_, what, QStringLiteral("DELETE FROM settings WHERE key = ?")).bind(text(key)).exec();
      return;
    case QMetaType::Bool: stored = static_cast<qint64>(value.toBool()); break;
    case QMetaType::Int:
    case QMetaType::UInt:
    case QMetaType::LongLong: stored = value.toLongLong(); break;
    case QMetaType::ULongLong: stored = toSqlInteger(value.toULongLong(), path_, what); break;
    case QMetaType::Float:
    case QMetaType::Double: stored = value.toDouble(); break;
    case QMetaType::QString: stored = text(value.toString()); break;
    case QMetaType::QByteArray: stored = value.toByteArray(); break;
    default:
      throwError(path_, what,
                 QStringLiteral("a %1 cannot be stored (use bool, an integer, double, QString or QByteArray)")
                     .arg(QLatin1String(value.metaType().name())));
  }
  Statement(connection(), path_, what,
            QStringLiteral("INSERT INTO settings (key, value) VALUES (?, ?)"
                           " ON CONFLICT (key) DO UPDATE SET value = excluded.value"))
      .bind(text(key)).bind(stored).exec();
}

QVariant ChatDatabase::setting(const QString& key, const QVariant& fallback) const {
  Statement q(connection(), path_, QStringLiteral("reading setting '%1' from settings").arg(key),
              QStringLiteral("SELECT value FROM settings WHERE key = ?"));
  return q.bind(text(key)).exec().next() ? q.value(0) : fallback;
}

}  // namespace zipmoe::app
