#include "message_model.h"

namespace zipmoe::app {

QString withHardLineBreaks(const QString& text) {
  const QStringList lines = text.split(QLatin1Char('\n'));
  QString out;
  out.reserve(text.size() + text.size() / 16);
  bool inFence = false;
  for (qsizetype i = 0; i < lines.size(); ++i) {
    const QString& line = lines[i];
    const QString trimmed = line.trimmed();
    if (trimmed.startsWith(QStringLiteral("```")) || trimmed.startsWith(QStringLiteral("~~~"))) inFence = !inFence;
    out += line;
    if (i + 1 == lines.size()) break;
    // Markdown joins a line with the next into one paragraph; two trailing spaces make a break.
    if (!inFence && !trimmed.isEmpty() && !lines[i + 1].trimmed().isEmpty() && !line.endsWith(QStringLiteral("  ")))
      out += QStringLiteral("  ");
    out += QLatin1Char('\n');
  }
  return out;
}

MessageModel::MessageModel(QObject* parent) : QAbstractListModel(parent) {}

int MessageModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : count(); }

QVariant MessageModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= count()) return {};
  const MessageRow& r = rows_[static_cast<size_t>(index.row())];
  switch (role) {
    case IdRole: return r.id;
    case PositionRole: return r.position;
    case RoleRole: return r.role;
    case Qt::DisplayRole:
    case ContentRole: return r.content;
    case StateRole: return r.state;
    case TtftRole: return r.ttftMs;
    case TokensPerSecondRole: return r.tokensPerSecond;
    case HitRateRole: return r.expertHitRate;
    case GeneratedTokensRole: return r.generatedTokens;
    case StopReasonRole: return r.stopReason;
    case MarkdownRole: return withHardLineBreaks(r.content);
    default: return {};
  }
}

QHash<int, QByteArray> MessageModel::roleNames() const {
  return {{IdRole, "messageId"},       {PositionRole, "position"},   {RoleRole, "role"},
          {ContentRole, "content"},    {StateRole, "messageState"},         {TtftRole, "ttftMs"},
          {TokensPerSecondRole, "tokensPerSecond"}, {HitRateRole, "hitRate"},
          {GeneratedTokensRole, "generatedTokens"}, {StopReasonRole, "stopReason"}, {MarkdownRole, "markdown"}};
}

void MessageModel::reset(std::vector<MessageRow> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
  Q_EMIT countChanged();
}

void MessageModel::append(const MessageRow& row) {
  beginInsertRows({}, count(), count());
  rows_.push_back(row);
  endInsertRows();
  Q_EMIT countChanged();
}

int MessageModel::rowOf(qint64 messageId) const {
  for (int i = count() - 1; i >= 0; --i)
    if (rows_[static_cast<size_t>(i)].id == messageId) return i;
  return -1;
}

void MessageModel::appendText(qint64 messageId, const QString& text) {
  const int row = rowOf(messageId);
  if (row < 0 || text.isEmpty()) return;
  rows_[static_cast<size_t>(row)].content += text;
  const QModelIndex i = index(row);
  Q_EMIT dataChanged(i, i, {ContentRole, Qt::DisplayRole, MarkdownRole});
}

void MessageModel::update(const MessageRow& row) {
  const int r = rowOf(row.id);
  if (r < 0) return;
  rows_[static_cast<size_t>(r)] = row;
  const QModelIndex i = index(r);
  Q_EMIT dataChanged(i, i);
}

void MessageModel::removeFrom(int position) {
  int first = count();
  for (int i = 0; i < count(); ++i)
    if (rows_[static_cast<size_t>(i)].position >= position) {
      first = i;
      break;
    }
  if (first >= count()) return;
  beginRemoveRows({}, first, count() - 1);
  rows_.erase(rows_.begin() + first, rows_.end());
  endRemoveRows();
  Q_EMIT countChanged();
}

}  // namespace zipmoe::app
