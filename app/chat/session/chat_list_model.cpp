#include "chat_list_model.h"

namespace zipmoe::app {

ChatListModel::ChatListModel(QObject* parent) : QAbstractListModel(parent) {}

int ChatListModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : count(); }

QVariant ChatListModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= count()) return {};
  const ChatRow& r = rows_[static_cast<size_t>(index.row())];
  switch (role) {
    case IdRole: return r.id;
    case Qt::DisplayRole:
    case TitleRole: return r.title;
    case UpdatedAtRole: return r.updatedAt;
    case ParentIdRole: return r.parentId;
    default: return {};
  }
}

QHash<int, QByteArray> ChatListModel::roleNames() const {
  return {{IdRole, "chatId"}, {TitleRole, "title"}, {UpdatedAtRole, "updatedAt"}, {ParentIdRole, "parentId"}};
}

int ChatListModel::indexOf(qint64 chatId) const {
  for (int i = 0; i < count(); ++i)
    if (rows_[static_cast<size_t>(i)].id == chatId) return i;
  return -1;
}

void ChatListModel::reset(std::vector<ChatRow> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
  Q_EMIT countChanged();
}

}  // namespace zipmoe::app
