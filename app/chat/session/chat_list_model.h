// ChatListModel — the chat list in the sidebar (newest first), as a list model for QML.
// The controller refills it from the database (after a search, a new message, a rename…).
// Only the GUI thread touches it. Cost: O(chats) per refill.
#pragma once

#include <QAbstractListModel>
#include <QDateTime>
#include <QString>
#include <QtQml/qqmlregistration.h>

#include <vector>

namespace zipmoe::app {

struct ChatRow {
  qint64 id = 0;
  QString title;
  QDateTime updatedAt;
  qint64 parentId = 0;  // the chat it branched from (0: none)
};

class ChatListModel : public QAbstractListModel {
  Q_OBJECT
  QML_ELEMENT
  QML_UNCREATABLE("the app's controller owns it")
  Q_PROPERTY(int count READ count NOTIFY countChanged)

 public:
  enum Role { IdRole = Qt::UserRole + 1, TitleRole, UpdatedAtRole, ParentIdRole };
  explicit ChatListModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QHash<int, QByteArray> roleNames() const override;
  int count() const { return static_cast<int>(rows_.size()); }
  Q_INVOKABLE int indexOf(qint64 chatId) const;

  void reset(std::vector<ChatRow> rows);

 Q_SIGNALS:
  void countChanged();

 private:
  std::vector<ChatRow> rows_;
};

}  // namespace zipmoe::app
