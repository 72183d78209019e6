// ChatDatabase — the chat app's one SQLite file: chats, their messages with timings and stats,
// per-model expert-activation counts, pool plans, cost profiles and settings.
//
// The file is opened with Qt's QSQLITE driver in WAL mode with synchronous=NORMAL: a committed
// transaction survives the app being killed (not a power cut), readers never wait for the writer,
// and writers wait up to 5 s for each other (busy_timeout) before failing. Every write call is one
// transaction: a single statement, or several under BEGIN IMMEDIATE (which takes the write lock
// first, so that two writers never fail upgrading a read lock).
//
// Schema: versioned with PRAGMA user_version and upgraded on open by the ordered steps in
// schema_migrations.h, each step and its version bump one transaction (an interrupted upgrade leaves
// the previous version, never half of one). A file whose version is newer than latestSchemaVersion()
// is refused before anything is written to it; so is a file that is not a SQLite database.
//
// Streaming replies (the kill-mid-reply contract): the worker adds the reply as Streaming and calls
// setMessageContent() every ~0.5 s, each call its own committed transaction. If the app dies, the
// last committed text survives; at the next start recoverInterruptedReplies() turns every Streaming
// message into Incomplete, keeping that text.
//
// Thread-safety: every member may be called from any thread at the same time. Each thread gets its
// own connection, opened lazily by connection() and named after this instance and the thread.
// REQUIRES: destroy the ChatDatabase after the threads that used it stopped using it. A worker thread
// should call closeThreadConnection() before it exits; a connection it leaves open is closed when the
// thread exits or when the ChatDatabase is destroyed, whichever comes first.
//
// Errors: every failure throws DatabaseError naming the file, the operation and table, the value
// concerned, and SQLite's own error text. Nothing fails silently.
//
// Cost (measured on the build VM): opening a thread's connection ~0.3 ms; a streaming flush ~30 µs
// and addMessage() ~130 µs (WAL with synchronous=NORMAL does not fsync per commit); saving 60 × 256
// activation counts (60 rows) ~0.7 ms, loading them ~0.15 ms. A search in listChats() scans titles
// and message text (LIKE cannot use an index): ~1.5 ms per 5,000 messages.
#pragma once

#include <QDateTime>
#include <QSqlDatabase>
#include <QString>
#include <QVariant>
#include <QtGlobal>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zipmoe::app {

namespace detail {
struct ConnectionRegistry;  // the connection names this instance opened, on any thread
}

class DatabaseError : public std::runtime_error {
 public:
  explicit DatabaseError(const QString& message) : std::runtime_error(message.toStdString()) {}
};

// Stored as text: "complete", "streaming", "incomplete", "error".
enum class MessageState { Complete, Streaming, Incomplete, Error };
QString messageStateName(MessageState state);
// Throws DatabaseError naming the unknown text.
MessageState messageStateFromName(const QString& name);

struct ChatRecord {
  qint64 id = 0;
  QString title;
  QDateTime createdAt;  // UTC
  QDateTime updatedAt;  // UTC; the last rename, settings change or message added, finished or deleted
  QString systemPrompt;
  QString samplingJson;
  QString modelKey;
  qint64 parentChatId = 0;  // the chat this one branched from; 0 = none (a root, or its parent was deleted)
  int branchPosition = -1;  // the last message position copied from the parent; -1 = not a branch
};

// A finished reply's measurements; -1 means unknown (a user message, or a reply that never started).
struct MessageStats {
  double ttftMs = -1;
  double tokensPerSecond = -1;
  int promptTokens = 0;
  int generatedTokens = 0;
  double expertHitRate = -1;  // a fraction in [0, 1]
  QString stopReason;         // e.g. "eos", "max_tokens", "stopped", or an error's text
  QString modelKey;           // the model that wrote it (empty: unknown)
  quint64 budgetBytes = 0;    // the memory budget it ran under (0: unknown, or moved while it streamed)
  double tpotMs = -1;         // measured time per output token
};

// A reply's measured TPOT at its budget (the budget advisor's measured points).
struct ReplyMeasurement {
  qint64 messageId = 0;
  quint64 budgetBytes = 0;
  double tpotMs = 0;
  double ttftMs = -1;
  int promptTokens = 0;
  QDateTime createdAt;  // UTC
};

struct MessageRecord {
  qint64 id = 0;
  qint64 chatId = 0;
  int position = 0;  // 0, 1, 2, … within the chat
  QString role;      // "system", "user" or "assistant"
  QString content;
  MessageState state = MessageState::Complete;
  QDateTime createdAt;  // UTC
  double ttftMs = -1;
  double tokensPerSecond = -1;
  int promptTokens = 0;
  int generatedTokens = 0;
  double expertHitRate = -1;  // a fraction in [0, 1]; -1 = unknown
  QString stopReason;
  QString modelKey;
  quint64 budgetBytes = 0;
  double tpotMs = -1;
};

struct ActivationStatsRecord {
  int layers = 0;
  int experts = 0;
  std::vector<quint64> counts;  // [layer * experts + expert]
  std::vector<quint64> steps;   // [layer]: how many routing steps the layer's counts cover
};

struct PlanRecord {
  qint64 id = 0;
  QString modelKey;
  quint64 budgetBytes = 0;
  unsigned poolMask = 0;
  QString planJson;
  QDateTime createdAt;  // UTC
};

class ChatDatabase {
 public:
  // Opens (creating it if absent) and upgrades the database at `path` on the calling thread. The
  // path must name a file (not ":memory:": each thread's connection would get its own database).
  // Throws DatabaseError when the file cannot be opened, is not a SQLite database, has a schema
  // version newer than this app knows (the file is then left untouched), or an upgrade step fails
  // (the file then stays at the last version that completed).
  explicit ChatDatabase(const QString& path);
  ~ChatDatabase();
  ChatDatabase(const ChatDatabase&) = delete;
  ChatDatabase& operator=(const ChatDatabase&) = delete;

  // AppDataLocation/zipmoe.sqlite; creates the folder. Throws DatabaseError if it cannot.
  static QString defaultPath();
  static int latestSchemaVersion();

  QString path() const { return path_; }
  int schemaVersion() const;  // PRAGMA user_version as the file says now

  // The calling thread's open connection to the file, opened on first use (for raw queries, such as
  // PRAGMA integrity_check). Use it on this thread only.
  QSqlDatabase connection() const;
  // Closes the calling thread's connection, if it has one. REQUIRES: no QSqlQuery of it is alive.
  void closeThreadConnection() const;

  // ---- chats
  ChatRecord createChat(const QString& title, const QString& systemPrompt, const QString& samplingJson,
                        const QString& modelKey);
  void renameChat(qint64 chatId, const QString& title);
  void updateChatSettings(qint64 chatId, const QString& systemPrompt, const QString& samplingJson);
  void deleteChat(qint64 chatId);  // its messages go with it
  std::optional<ChatRecord> chat(qint64 chatId) const;
  // Newest-updated first. A non-empty `search` keeps the chats whose title or any message contains
  // it, case-insensitively for ASCII letters (SQLite's LIKE; other scripts match case-sensitively);
  // '%', '_' and '\' in it are literal.
  std::vector<ChatRecord> listChats(const QString& search = {}) const;

  // ---- messages. The functions that take an id throw DatabaseError when no such row exists.
  // Appends at the next position of the chat and touches the chat's updatedAt.
  MessageRecord addMessage(qint64 chatId, const QString& role, const QString& content,
                           MessageState state = MessageState::Complete);
  // A streaming reply's periodic flush: replaces the text of a message that is still Streaming
  // (throws otherwise), or appends to it. Each call is its own committed transaction.
  void setMessageContent(qint64 messageId, const QString& content);
  void appendToStreamingMessage(qint64 messageId, const QString& newText);
  // Ends a reply: its final text, state (Complete, Incomplete or Error) and measurements.
  void finishMessage(qint64 messageId, const QString& content, MessageState state, const MessageStats& stats);
  // An edit: replaces the text, keeps state and stats.
  void updateMessageContent(qint64 messageId, const QString& content);
  std::optional<MessageRecord> message(qint64 messageId) const;
  std::vector<MessageRecord> messages(qint64 chatId) const;  // by position
  // Deletes the message at `position` and every later one (regenerate, edit-and-resend); returns
  // how many went.
  int deleteMessagesFrom(qint64 chatId, int position);
  // At startup: every Streaming message (a reply the previous run did not finish) becomes
  // Incomplete with stop reason "interrupted" and the text it had last committed. Returns how many.
  int recoverInterruptedReplies();

  // ---- branches (chat_branches.cpp)
  // A new chat holding copies of the chat's messages at positions 0..position, with the chat's
  // system prompt, sampling and model, titled `title`, recorded as a branch of it. One transaction.
  // Throws DatabaseError when the chat or a message at `position` does not exist.
  ChatRecord branchChat(qint64 chatId, int position, const QString& title);
  // The chats branched from `chatId`, oldest first.
  std::vector<ChatRecord> branchesOf(qint64 chatId) const;

  // ---- measured replies and model stores (chat_branches.cpp)
  // The model's finished replies with a known budget and TPOT, newest first, at most `limit`.
  std::vector<ReplyMeasurement> replyMeasurements(const QString& modelKey, int limit = 500) const;
  // Records that the store at `path` was opened now.
  void touchModelStore(const QString& path, const QString& modelKey);
  // When the store at `path` was last opened (invalid QDateTime: never recorded).
  QDateTime modelStoreLastUse(const QString& path) const;
  void forgetModelStore(const QString& path);

  // ---- per-model statistics and plans
  // Replaces the model's counts in one transaction. Throws DatabaseError when the vectors do not
  // have layers × experts and layers entries, or a step count exceeds 2^63 − 1.
  void saveActivationCounts(const QString& modelKey, int layers, int experts, const std::vector<quint64>& counts,
                            const std::vector<quint64>& steps);
  // Throws DatabaseError naming the model and layer when the stored rows are inconsistent.
  std::optional<ActivationStatsRecord> loadActivationCounts(const QString& modelKey) const;

  // Every saved plan is kept; latestPlan() is the model's most recently saved one. Throws when
  // budgetBytes exceeds 2^63 − 1.
  PlanRecord savePlan(const QString& modelKey, quint64 budgetBytes, unsigned poolMask, const QString& planJson);
  std::optional<PlanRecord> latestPlan(const QString& modelKey) const;
  void saveProfile(const QString& modelKey, const QString& profileJson);  // replaces the model's profile
  std::optional<QString> loadProfile(const QString& modelKey) const;

  // Values keep their SQLite storage class: bool and integer types come back as qlonglong, double
  // as double, QString as QString, QByteArray as QByteArray. Other types throw DatabaseError. An
  // invalid (null) QVariant removes the key.
  void setSetting(const QString& key, const QVariant& value);
  QVariant setting(const QString& key, const QVariant& fallback = {}) const;

 private:
  void configureConnection(const QString& name) const;
  void migrate();

  const QString path_;
  const quint64 instanceId_;  // never reused in a process: connection names stay unique
  // Shared with the threads' connection handles, which outlive this object on threads that did not
  // call closeThreadConnection().
  std::shared_ptr<detail::ConnectionRegistry> registry_;
};

}  // namespace zipmoe::app
