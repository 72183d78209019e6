// MessageModel — the messages of the chat on screen, as a list model with named roles for QML.
//
// The controller fills it from the database and appends a streaming reply's text as it arrives
// (appendText touches one row and signals only that row's content). Only the GUI thread touches it.
// Cost: appendText is O(length of the new text); a reset is O(messages).
#pragma once

#include <QAbstractListModel>
#include <QString>
#include <QtQml/qqmlregistration.h>

#include <vector>

namespace zipmoe::app {

struct MessageRow {
  qint64 id = 0;
  int position = 0;
  QString role;     // "user", "assistant", "system"
  QString content;
  QString state;    // "complete", "streaming", "incomplete", "error"
  double ttftMs = 0;
  double tokensPerSecond = 0;
  double expertHitRate = -1;
  int generatedTokens = 0;
  QString stopReason;  // for errors: the error text
};

// The text as markdown to show: a single line break is kept as a line break (verse, lists of lines,
// chat replies are written that way), except inside fenced code blocks, which keep their text.
QString withHardLineBreaks(const QString& text);

// Model output is untrusted: shown as markdown it must never make the app fetch anything. Outside
// code (fenced blocks and `code spans`, left as they are), an inline image ![alt](url) or
// ![alt][ref] becomes the link [alt](url) / [alt][ref], and a raw HTML tag's '<' becomes &lt; so the
// tag shows as text (an <img>, <iframe> or <a> is never interpreted). The QML engine also refuses
// every non-local network request (ChatController::setQmlEngine), whatever gets past this.
QString withoutRemoteContent(const QString& markdown);

class MessageModel : public QAbstractListModel {
  Q_OBJECT
  QML_ELEMENT
  QML_UNCREATABLE("the app's controller owns it")
  Q_PROPERTY(int count READ count NOTIFY countChanged)

 public:
  enum Role {
    IdRole = Qt::UserRole + 1, PositionRole, RoleRole, ContentRole, StateRole, TtftRole, TokensPerSecondRole,
    HitRateRole, GeneratedTokensRole, StopReasonRole, MarkdownRole
  };
  Q_ENUM(Role)

  explicit MessageModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QHash<int, QByteArray> roleNames() const override;
  int count() const { return static_cast<int>(rows_.size()); }

  void reset(std::vector<MessageRow> rows);
  void append(const MessageRow& row);
  void appendText(qint64 messageId, const QString& text);  // no-op for an id not shown
  void update(const MessageRow& row);                      // by id
  void removeFrom(int position);                           // that position and the ones after it
  const std::vector<MessageRow>& rows() const { return rows_; }
  int rowOf(qint64 messageId) const;                       // -1 when not shown

 Q_SIGNALS:
  void countChanged();

 private:
  std::vector<MessageRow> rows_;
};

}  // namespace zipmoe::app
