#include "chat_export.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QSaveFile>
#include <QStringList>

namespace zipmoe::app {

namespace {

QString isoUtc(const QDateTime& t) { return t.isValid() ? t.toUTC().toString(Qt::ISODateWithMs) : QString(); }

// -1 (or any negative) means "not measured": null in JSON, left out of the stats line.
QJsonValue measured(double v) { return v < 0 ? QJsonValue(QJsonValue::Null) : QJsonValue(v); }

QString roleHeading(const QString& role) {
  if (role == QLatin1String("user")) return QStringLiteral("User");
  if (role == QLatin1String("assistant")) return QStringLiteral("Assistant");
  if (role == QLatin1String("system")) return QStringLiteral("System");
  return role;
}

// The fence that `text` leaves open at its end ("```", "~~~~", …), or empty. CommonMark: a fence is
// 3+ backticks or tildes indented at most 3 spaces; it is closed by a line of the same character,
// at least as long, with nothing after it but spaces.
QString openCodeFence(const QString& text) {
  QString open;
  for (const QString& rawLine : text.split(QLatin1Char('\n'))) {
    QString line = rawLine;
    if (line.endsWith(QLatin1Char('\r'))) line.chop(1);
    qsizetype indent = 0;
    while (indent < line.size() && indent < 4 && line[indent] == QLatin1Char(' ')) ++indent;
    if (indent > 3 || indent >= line.size()) continue;
    const QChar c = line[indent];
    if (c != QLatin1Char('`') && c != QLatin1Char('~')) continue;
    qsizetype run = indent;
    while (run < line.size() && line[run] == c) ++run;
    const qsizetype length = run - indent;
    if (length < 3) continue;
    if (open.isEmpty()) {
      open = QString(length, c);
    } else if (c == open[0] && length >= open.size() && line.mid(run).trimmed().isEmpty()) {
      open.clear();
    }
  }
  return open;
}

QString stateNote(const MessageRecord& m) {
  const QString why = m.stopReason.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(m.stopReason);
  switch (m.state) {
    case MessageState::Complete: return {};
    case MessageState::Streaming: return QStringLiteral("*This reply was still being generated when exported.*");
    case MessageState::Incomplete: return QStringLiteral("*Incomplete reply: cut off before it finished%1.*").arg(why);
    case MessageState::Error: return QStringLiteral("*The reply failed%1.*").arg(why);
  }
  return {};
}

// Appends `text` verbatim as a block: ends it with a newline, closes a code fence it left open, and
// leaves a blank line after it.
void appendBlock(QString& out, const QString& text) {
  out += text;
  if (!text.isEmpty() && !text.endsWith(QLatin1Char('\n'))) out += QLatin1Char('\n');
  if (const QString fence = openCodeFence(text); !fence.isEmpty()) out += fence + QLatin1Char('\n');
  out += QLatin1Char('\n');
}

// The title on one line: a newline in it would end the heading.
QString headingText(const QString& title) {
  const QString oneLine = title.simplified();
  return oneLine.isEmpty() ? QStringLiteral("Untitled chat") : oneLine;
}

}  // namespace

QString messageStatsLine(const MessageRecord& m) {
  const QLocale c = QLocale::c();
  QStringList parts;
  if (m.ttftMs >= 0) parts << QStringLiteral("TTFT %1 ms").arg(c.toString(m.ttftMs, 'f', 0));
  if (m.tokensPerSecond >= 0) parts << QStringLiteral("%1 tok/s").arg(c.toString(m.tokensPerSecond, 'f', 1));
  if (m.expertHitRate >= 0)
    parts << QStringLiteral("expert hit rate %1 %").arg(c.toString(m.expertHitRate * 100.0, 'f', 0));
  return parts.join(QStringLiteral(" \u00b7 "));
}

QString exportChatMarkdown(const ChatRecord& chat, const std::vector<MessageRecord>& messages) {
  QString out = QStringLiteral("# %1\n\n").arg(headingText(chat.title));
  QStringList about;
  if (!chat.modelKey.isEmpty()) about << QStringLiteral("Model: %1").arg(chat.modelKey);
  if (chat.createdAt.isValid()) about << QStringLiteral("created %1").arg(isoUtc(chat.createdAt));
  if (!about.isEmpty()) out += about.join(QStringLiteral(" \u00b7 ")) + QStringLiteral("\n\n");
  if (!chat.systemPrompt.isEmpty()) {
    out += QStringLiteral("## System prompt\n\n");
    appendBlock(out, chat.systemPrompt);
  }
  for (const MessageRecord& m : messages) {
    out += QStringLiteral("## %1\n\n").arg(roleHeading(m.role));
    appendBlock(out, m.content);
    if (m.role == QLatin1String("assistant")) {
      if (const QString stats = messageStatsLine(m); !stats.isEmpty())
        out += QStringLiteral("*%1*\n\n").arg(stats);
    }
    if (const QString note = stateNote(m); !note.isEmpty()) out += note + QStringLiteral("\n\n");
  }
  return out;
}

QString exportChatJson(const ChatRecord& chat, const std::vector<MessageRecord>& messages) {
  QJsonParseError parseError{};
  const QJsonDocument sampling = QJsonDocument::fromJson(chat.samplingJson.toUtf8(), &parseError);
  QJsonValue samplingValue(chat.samplingJson);
  if (parseError.error == QJsonParseError::NoError)
    samplingValue = sampling.isObject() ? QJsonValue(sampling.object()) : QJsonValue(sampling.array());

  QJsonObject c;
  c[QStringLiteral("id")] = chat.id;
  c[QStringLiteral("title")] = chat.title;
  c[QStringLiteral("createdAt")] = isoUtc(chat.createdAt);
  c[QStringLiteral("updatedAt")] = isoUtc(chat.updatedAt);
  c[QStringLiteral("systemPrompt")] = chat.systemPrompt;
  c[QStringLiteral("sampling")] = samplingValue;
  c[QStringLiteral("modelKey")] = chat.modelKey;

  QJsonArray list;
  for (const MessageRecord& m : messages) {
    QJsonObject o;
    o[QStringLiteral("id")] = m.id;
    o[QStringLiteral("chatId")] = m.chatId;
    o[QStringLiteral("position")] = m.position;
    o[QStringLiteral("role")] = m.role;
    o[QStringLiteral("content")] = m.content;
    o[QStringLiteral("state")] = messageStateName(m.state);
    o[QStringLiteral("createdAt")] = isoUtc(m.createdAt);
    o[QStringLiteral("ttftMs")] = measured(m.ttftMs);
    o[QStringLiteral("tokensPerSecond")] = measured(m.tokensPerSecond);
    o[QStringLiteral("promptTokens")] = m.promptTokens;
    o[QStringLiteral("generatedTokens")] = m.generatedTokens;
    o[QStringLiteral("expertHitRate")] = measured(m.expertHitRate);
    o[QStringLiteral("stopReason")] = m.stopReason;
    list.append(o);
  }

  QJsonObject root;
  root[QStringLiteral("format")] = QStringLiteral("zipmoe-chat");
  root[QStringLiteral("formatVersion")] = 1;
  root[QStringLiteral("chat")] = c;
  root[QStringLiteral("messages")] = list;
  return QString::fromUtf8(QJsonDocument(root).toJson(QJsonDocument::Indented));
}

void writeTextFileAtomically(const QString& path, const QString& text) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly))
    throw ExportError(QStringLiteral("%1: cannot open for writing: %2").arg(path, file.errorString()));
  const QByteArray bytes = text.toUtf8();
  if (file.write(bytes) != bytes.size())
    throw ExportError(QStringLiteral("%1: cannot write %2 bytes: %3")
                          .arg(path, QString::number(bytes.size()), file.errorString()));
  if (!file.commit())
    throw ExportError(QStringLiteral("%1: cannot replace the file with the new text: %2")
                          .arg(path, file.errorString()));
}

}  // namespace zipmoe::app
