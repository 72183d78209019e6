// Internal to app/chat/data: the SQL helpers every ChatDatabase source file shares — a prepared
// statement whose every failure throws DatabaseError naming the file and the operation, a write
// transaction taken with BEGIN IMMEDIATE, value conversions, and the chat row's columns.
// Thread-safety: a Statement or WriteTransaction belongs to the thread whose connection it uses.
// Cost: one prepared query each.
#pragma once

#include <QDateTime>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QString>
#include <QVariant>

#include <limits>

#include "chat_database.h"

namespace zipmoe::app::sql {

// ---- statements

[[noreturn]] inline void throwError(const QString& path, const QString& what, const QString& problem) {
  throw DatabaseError(QStringLiteral("%1: %2: %3").arg(path, what, problem));
}

inline QString sqlErrorText(const QSqlError& e) {
  const QString text = e.text().trimmed();
  return text.isEmpty() ? QStringLiteral("unknown SQLite error") : text;
}

// A prepared statement whose every failure throws DatabaseError "<file>: <what>: <SQLite's text>".
class Statement {
 public:
  Statement(const QSqlDatabase& db, const QString& path, QString what, const QString& sql)
      : query_(db), path_(path), what_(std::move(what)) {
    query_.setForwardOnly(true);  // no client-side row cache
    if (!query_.prepare(sql)) fail(sqlErrorText(query_.lastError()));
  }

  Statement& bind(const QVariant& value) {
    query_.bindValue(nextBind_++, value);
    return *this;
  }
  Statement& exec() {
    nextBind_ = 0;  // the next bind() starts the next execution's values
    if (!query_.exec()) fail(sqlErrorText(query_.lastError()));
    return *this;
  }
  bool next() {
    if (query_.next()) return true;
    if (query_.lastError().isValid()) fail(sqlErrorText(query_.lastError()));
    return false;
  }
  QVariant value(int column) const { return query_.value(column); }
  int rowsAffected() const { return query_.numRowsAffected(); }
  qint64 lastInsertId() const { return query_.lastInsertId().toLongLong(); }
  void requireOneRowChanged(const QString& problem) const {
    if (rowsAffected() != 1) fail(problem);
  }

  [[noreturn]] void fail(const QString& problem) const { throwError(path_, what_, problem); }

 private:
  QSqlQuery query_;
  const QString& path_;
  QString what_;
  int nextBind_ = 0;
};

inline void execOrThrow(const QSqlDatabase& db, const QString& path, const QString& what, const QString& sql) {
  Statement(db, path, what, sql).exec();
}

// BEGIN IMMEDIATE takes the write lock up front, waiting up to busy_timeout: a deferred BEGIN that
// reads and then writes fails at once with SQLITE_BUSY when another writer committed in between.
// Rolls back unless commit() was called.
class WriteTransaction {
 public:
  WriteTransaction(QSqlDatabase db, const QString& path, QString what)
      : db_(std::move(db)), path_(path), what_(std::move(what)) {
    execOrThrow(db_, path_, what_ + QStringLiteral(" (BEGIN IMMEDIATE)"), QStringLiteral("BEGIN IMMEDIATE"));
  }
  ~WriteTransaction() {
    if (!done_) QSqlQuery(db_).exec(QStringLiteral("ROLLBACK"));
  }
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;

  // REQUIRES: the transaction's Statements are destroyed.
  void commit() {
    execOrThrow(db_, path_, what_ + QStringLiteral(" (COMMIT)"), QStringLiteral("COMMIT"));
    done_ = true;
  }

 private:
  QSqlDatabase db_;
  const QString& path_;
  QString what_;
  bool done_ = false;
};

inline int readUserVersion(const QSqlDatabase& db, const QString& path) {
  Statement q(db, path, QStringLiteral("reading the schema version (PRAGMA user_version)"),
              QStringLiteral("PRAGMA user_version"));
  q.exec();
  if (!q.next()) q.fail(QStringLiteral("no result"));
  return q.value(0).toInt();
}

// SQLite binds a null QString as NULL, which the NOT NULL text columns refuse.
inline QVariant text(const QString& s) { return s.isNull() ? QVariant(QStringLiteral("")) : QVariant(s); }

inline QDateTime utcFromMs(const QVariant& ms) { return QDateTime::fromMSecsSinceEpoch(ms.toLongLong(), Qt::UTC); }

// '\' escapes LIKE's '%', '_' and itself, so that the user's text matches literally.
inline QString likeContains(const QString& userText) {
  QString escaped = userText;
  escaped.replace(QLatin1Char('\\'), QStringLiteral("\\\\"));
  escaped.replace(QLatin1Char('%'), QStringLiteral("\\%"));
  escaped.replace(QLatin1Char('_'), QStringLiteral("\\_"));
  return QLatin1Char('%') + escaped + QLatin1Char('%');
}

inline qint64 toSqlInteger(quint64 v, const QString& path, const QString& what) {
  if (v > static_cast<quint64>(std::numeric_limits<qint64>::max()))
    throwError(path, what, QStringLiteral("%1 exceeds SQLite's largest integer 2^63 - 1").arg(v));
  return static_cast<qint64>(v);
}

constexpr char kChatColumns[] =
    "id, title, created_at, updated_at, system_prompt, sampling_json, model_key, parent_chat_id, branch_position";

inline ChatRecord readChat(const Statement& q) {
  ChatRecord c;
  c.id = q.value(0).toLongLong();
  c.title = q.value(1).toString();
  c.createdAt = utcFromMs(q.value(2));
  c.updatedAt = utcFromMs(q.value(3));
  c.systemPrompt = q.value(4).toString();
  c.samplingJson = q.value(5).toString();
  c.modelKey = q.value(6).toString();
  c.parentChatId = q.value(7).isNull() ? 0 : q.value(7).toLongLong();
  c.branchPosition = q.value(8).toInt();
  return c;
}


}  // namespace zipmoe::app::sql
