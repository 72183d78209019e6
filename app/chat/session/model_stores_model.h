// ModelStoresModel — the model manager's list: every ZipMoE store on disk that the app knows — the
// stores it converted (its stores folder) and every store opened from elsewhere (the database's
// model_stores table) — with its size on disk, family, codec, shape and when it was last opened.
// remove() deletes a store's folder after the page has asked the user; it refuses the store that is
// open, a folder that is not a store, and a store outside the app's stores folder (the user's own
// files: the app only forgets those).
// Thread-safety: GUI thread only. Cost: refresh() reads each store's manifest.json and sizes its files.
#pragma once

#include <QAbstractListModel>
#include <QDateTime>
#include <QString>
#include <QtQml/qqmlregistration.h>

#include <memory>
#include <vector>

namespace zipmoe::app {

class ChatDatabase;

struct StoreRow {
  QString path, name, family, codec;
  double sizeBytes = 0;
  int layers = 0, experts = 0;
  QDateTime lastUsed;  // invalid: never opened by the app
  bool managed = false;  // inside the app's stores folder (the app converted it)
};

class ModelStoresModel : public QAbstractListModel {
  Q_OBJECT
  QML_ELEMENT
  QML_UNCREATABLE("the app's controller owns it")
  Q_PROPERTY(int count READ count NOTIFY countChanged FINAL)
  Q_PROPERTY(QString storesDir READ storesDir CONSTANT FINAL)
  Q_PROPERTY(QString openStore READ openStore NOTIFY openStoreChanged FINAL)
  Q_PROPERTY(QString error READ error NOTIFY errorChanged FINAL)

 public:
  enum Role {
    PathRole = Qt::UserRole + 1,
    NameRole,
    FamilyRole,
    CodecRole,
    SizeRole,
    LayersRole,
    ExpertsRole,
    LastUsedRole,
    ManagedRole,
    IsOpenRole
  };
  ModelStoresModel(QString storesDir, std::shared_ptr<ChatDatabase> database, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QHash<int, QByteArray> roleNames() const override;
  int count() const { return static_cast<int>(rows_.size()); }
  QString storesDir() const { return storesDir_; }
  QString openStore() const { return openStore_; }
  QString error() const { return error_; }
  void setOpenStore(const QString& path);

  Q_INVOKABLE void refresh();
  // Deletes the store's folder (managed stores) or forgets it (others). False with `error` set when
  // it is open or not a store.
  Q_INVOKABLE bool remove(const QString& path);
  Q_INVOKABLE int indexOf(const QString& path) const;

 Q_SIGNALS:
  void countChanged();
  void openStoreChanged();
  void errorChanged();

 private:
  void setError(const QString& e);
  std::vector<StoreRow> rows_;
  QString storesDir_;
  std::shared_ptr<ChatDatabase> database_;
  QString openStore_;
  QString error_;
};

}  // namespace zipmoe::app
