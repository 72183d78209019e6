// ChatDatabase: branches of a conversation, the replies' measured TPOT at their budgets, and the
// model stores' last use (schema version 3). See chat_database.h.
#include <QDateTime>

#include "chat_database.h"
#include "sql_statement.h"

namespace zipmoe::app {

using namespace sql;  // NOLINT: the shared helpers of this data layer

ChatRecord ChatDatabase::branchChat(qint64 chatId, int position, const QString& title) {
  const QSqlDatabase db = connection();
  const QString what = QStringLiteral("branching chat %1 at message %2 in chats").arg(chatId).arg(position);
  WriteTransaction tx(db, path_, what);
  qint64 id = 0;
  {
    Statement exists(db, path_, what, QStringLiteral("SELECT COUNT(*) FROM messages WHERE chat_id = ? AND position = ?"));
    exists.bind(chatId).bind(position).exec();
    if (!exists.next() || exists.value(0).toInt() != 1)
      exists.fail(QStringLiteral("chat %1 has no message at position %2").arg(chatId).arg(position));
  }
  {
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    Statement q(db, path_, what,
                QStringLiteral("INSERT INTO chats (title, created_at, updated_at, system_prompt, sampling_json, model_key,"
                               " parent_chat_id, branch_position)"
                               " SELECT ?, ?, ?, system_prompt, sampling_json, model_key, id, ? FROM chats WHERE id = ?"));
    q.bind(text(title)).bind(now).bind(now).bind(position).bind(chatId).exec();
    q.requireOneRowChanged(QStringLiteral("no chat with id %1").arg(chatId));
    id = q.lastInsertId();
  }
  {
    Statement q(db, path_, what + QStringLiteral(" (copying messages)"),
                QStringLiteral("INSERT INTO messages (chat_id, position, role, content, state, created_at, ttft_ms,"
                               " tokens_per_second, prompt_tokens, generated_tokens, expert_hit_rate, stop_reason,"
                               " model_key, budget_bytes, tpot_ms)"
                               " SELECT ?, position, role, content,"
                               " CASE state WHEN 'streaming' THEN 'incomplete' ELSE state END, created_at, ttft_ms,"
                               " tokens_per_second, prompt_tokens, generated_tokens, expert_hit_rate, stop_reason,"
                               " model_key, 0, -1"  // the copies are not measurements of their own
                               " FROM messages WHERE chat_id = ? AND position <= ? ORDER BY position"));
    q.bind(id).bind(chatId).bind(position).exec();
  }
  {
    Statement q(db, path_, what + QStringLiteral(" (updating chats.updated_at)"),
                QStringLiteral("UPDATE chats SET updated_at = MAX(?, (SELECT MAX(updated_at) FROM chats) + 1) WHERE id = ?"));
    q.bind(QDateTime::currentMSecsSinceEpoch()).bind(id).exec();
  }
  tx.commit();
  return chat(id).value();
}

std::vector<ChatRecord> ChatDatabase::branchesOf(qint64 chatId) const {
  Statement q(connection(), path_, QStringLiteral("listing the branches of chat %1").arg(chatId),
              QStringLiteral("SELECT %1 FROM chats WHERE parent_chat_id = ? ORDER BY created_at, id")
                  .arg(QLatin1String(kChatColumns)));
  q.bind(chatId).exec();
  std::vector<ChatRecord> out;
  while (q.next()) out.push_back(readChat(q));
  return out;
}

std::vector<ReplyMeasurement> ChatDatabase::replyMeasurements(const QString& modelKey, int limit) const {
  Statement q(connection(), path_, QStringLiteral("reading the measured replies of model '%1'").arg(modelKey),
              QStringLiteral("SELECT id, budget_bytes, tpot_ms, ttft_ms, prompt_tokens, created_at FROM messages"
                             " WHERE model_key = ? AND tpot_ms > 0 AND budget_bytes > 0 ORDER BY id DESC LIMIT ?"));
  q.bind(text(modelKey)).bind(std::max(0, limit)).exec();
  std::vector<ReplyMeasurement> out;
  while (q.next()) {
    ReplyMeasurement m;
    m.messageId = q.value(0).toLongLong();
    m.budgetBytes = static_cast<quint64>(q.value(1).toLongLong());
    m.tpotMs = q.value(2).toDouble();
    m.ttftMs = q.value(3).toDouble();
    m.promptTokens = q.value(4).toInt();
    m.createdAt = utcFromMs(q.value(5));
    out.push_back(m);
  }
  return out;
}

void ChatDatabase::touchModelStore(const QString& path, const QString& modelKey) {
  Statement q(connection(), path_, QStringLiteral("recording the use of store '%1' in model_stores").arg(path),
              QStringLiteral("INSERT INTO model_stores (path, model_key, last_used) VALUES (?, ?, ?)"
                             " ON CONFLICT(path) DO UPDATE SET model_key = excluded.model_key, last_used = excluded.last_used"));
  q.bind(text(path)).bind(text(modelKey)).bind(QDateTime::currentMSecsSinceEpoch()).exec();
}

QDateTime ChatDatabase::modelStoreLastUse(const QString& path) const {
  Statement q(connection(), path_, QStringLiteral("reading the last use of store '%1' from model_stores").arg(path),
              QStringLiteral("SELECT last_used FROM model_stores WHERE path = ?"));
  if (!q.bind(text(path)).exec().next()) return {};
  return utcFromMs(q.value(0));
}

void ChatDatabase::forgetModelStore(const QString& path) {
  Statement(connection(), path_, QStringLiteral("forgetting store '%1' in model_stores").arg(path),
            QStringLiteral("DELETE FROM model_stores WHERE path = ?"))
      .bind(text(path)).exec();
}

}  // namespace zipmoe::app
