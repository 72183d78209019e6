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

namespace {

// Rewrites one stretch of markdown text that is not code.
void appendSanitisedText(QStringView text, QString& out) {
  for (qsizetype i = 0; i < text.size(); ++i) {
    const QChar c = text[i];
    const bool escaped = i > 0 && text[i - 1] == QLatin1Char('\\');
    if (c == QLatin1Char('!') && !escaped && i + 1 < text.size() && text[i + 1] == QLatin1Char('[')) {
      // An image if the bracket closes and is followed by ( or [: drop the '!', keeping the link.
      int depth = 0;
      qsizetype close = -1;
      for (qsizetype j = i + 1; j < text.size(); ++j) {
        if (text[j] == QLatin1Char('\\')) {
          ++j;
          continue;
        }
        if (text[j] == QLatin1Char('[')) ++depth;
        if (text[j] == QLatin1Char(']') && --depth == 0) {
          close = j;
          break;
        }
      }
      if (close > 0 && close + 1 < text.size() && (text[close + 1] == QLatin1Char('(') || text[close + 1] == QLatin1Char('[')))
        continue;
    }
    if (c == QLatin1Char('<') && !escaped && i + 1 < text.size() &&
        (text[i + 1].isLetter() || text[i + 1] == QLatin1Char('/') || text[i + 1] == QLatin1Char('!') ||
         text[i + 1] == QLatin1Char('?'))) {
      out += QStringLiteral("&lt;");
      continue;
    }
    out += c;
  }
}

}  // namespace

QString withoutRemoteContent(const QString& markdown) {
  QString out;
  out.reserve(markdown.size() + 16);
  const QStringList lines = markdown.split(QLatin1Char('\n'));
  QString fence;  // the opening fence while inside a fenced code block
  for (qsizetype n = 0; n < lines.size(); ++n) {
    if (n) out += QLatin1Char('\n');
    const QString& line = lines[n];
    const QString trimmed = line.trimmed();
    if (!fence.isEmpty()) {
      out += line;
      if (trimmed.startsWith(fence) && trimmed.count(fence[0]) == trimmed.size()) fence.clear();
      continue;
    }
    if (trimmed.startsWith(QStringLiteral("```")) || trimmed.startsWith(QStringLiteral("~~~"))) {
      const QChar f = trimmed[0];
      qsizetype k = 0;
      while (k < trimmed.size() && trimmed[k] == f) ++k;
      fence = QString(k, f);
      out += line;
      continue;
    }
    // Code spans: a run of N backticks up to the next run of exactly N is code.
    qsizetype at = 0;
    while (at < line.size()) {
      const qsizetype tick = line.indexOf(QLatin1Char('`'), at);
      if (tick < 0) {
        appendSanitisedText(QStringView(line).mid(at), out);
        break;
      }
      appendSanitisedText(QStringView(line).mid(at, tick - at), out);
      qsizetype run = tick;
      while (run < line.size() && line[run] == QLatin1Char('`')) ++run;
      const qsizetype width = run - tick;
      qsizetype end = -1;
      for (qsizetype j = run; j < line.size();) {
        if (line[j] != QLatin1Char('`')) {
          ++j;
          continue;
        }
        qsizetype k = j;
        while (k < line.size() && line[k] == QLatin1Char('`')) ++k;
        if (k - j == width) {
          end = k;
          break;
        }
        j = k;
      }
      if (end < 0) {  // no closing run: the backticks are text
        out += QStringView(line).mid(tick, width);
        at = run;
      } else {
        out += QStringView(line).mid(tick, end - tick);
        at = end;
      }
    }
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
    case MarkdownRole: return withHardLineBreaks(withoutRemoteContent(r.content));
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
