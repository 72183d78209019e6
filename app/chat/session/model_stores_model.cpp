#include "model_stores_model.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSqlQuery>

#include <algorithm>
#include <optional>

#include "chat_database.h"

namespace zipmoe::app {

namespace {

QString canonical(const QString& path) {
  const QString c = QFileInfo(path).canonicalFilePath();
  return c.isEmpty() ? QDir::cleanPath(path) : c;
}

// What manifest.json says, without reading the experts (a store's manifest is its table of contents).
std::optional<StoreRow> readStore(const QString& dir) {
  QFile f(dir + QStringLiteral("/manifest.json"));
  if (!f.open(QIODevice::ReadOnly)) return std::nullopt;
  const QJsonDocument doc = QJsonDocument::fromJson(f.readAll());
  if (!doc.isObject() || doc.object().value(QStringLiteral("format")).toString() != QStringLiteral("zipmoe-store"))
    return std::nullopt;
  const QJsonObject m = doc.object();
  StoreRow row;
  row.path = canonical(dir);
  row.name = QFileInfo(dir).fileName();
  row.family = m.value(QStringLiteral("family")).toString();
  const QJsonObject codec = m.value(QStringLiteral("codec")).toObject();
  row.codec = codec.value(QStringLiteral("name")).toString();
  if (const int level = codec.value(QStringLiteral("level")).toInt(); level != 0)
    row.codec += QStringLiteral(":%1").arg(level);
  row.layers = static_cast<int>(m.value(QStringLiteral("layers")).toArray().size());
  row.experts = m.value(QStringLiteral("num_experts")).toInt();
  QDirIterator it(dir, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    it.next();
    row.sizeBytes += static_cast<double>(it.fileInfo().size());
  }
  return row;
}

}  // namespace

ModelStoresModel::ModelStoresModel(QString storesDir, std::shared_ptr<ChatDatabase> database, QObject* parent)
    : QAbstractListModel(parent), storesDir_(std::move(storesDir)), database_(std::move(database)) {}

int ModelStoresModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : count(); }

QVariant ModelStoresModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= count()) return {};
  const StoreRow& r = rows_[static_cast<size_t>(index.row())];
  switch (role) {
    case PathRole: return r.path;
    case Qt::DisplayRole:
    case NameRole: return r.name;
    case FamilyRole: return r.family;
    case CodecRole: return r.codec;
    case SizeRole: return r.sizeBytes;
    case LayersRole: return r.layers;
    case ExpertsRole: return r.experts;
    case LastUsedRole: return r.lastUsed;
    case ManagedRole: return r.managed;
    case IsOpenRole: return !openStore_.isEmpty() && r.path == openStore_;
    default: return {};
  }
}

QHash<int, QByteArray> ModelStoresModel::roleNames() const {
  return {{PathRole, "path"},       {NameRole, "name"},         {FamilyRole, "family"},     {CodecRole, "codec"},
          {SizeRole, "sizeBytes"},  {LayersRole, "layers"},     {ExpertsRole, "experts"},  {LastUsedRole, "lastUsed"},
          {ManagedRole, "managed"}, {IsOpenRole, "isOpen"}};
}

int ModelStoresModel::indexOf(const QString& path) const {
  const QString c = canonical(path);
  for (int i = 0; i < count(); ++i)
    if (rows_[static_cast<size_t>(i)].path == c) return i;
  return -1;
}

void ModelStoresModel::setError(const QString& e) {
  if (e == error_) return;
  error_ = e;
  Q_EMIT errorChanged();
}

void ModelStoresModel::setOpenStore(const QString& path) {
  const QString c = path.isEmpty() ? QString() : canonical(path);
  if (c == openStore_) return;
  openStore_ = c;
  Q_EMIT openStoreChanged();
  refresh();
}

void ModelStoresModel::refresh() {
  QStringList dirs;
  const QString managedRoot = canonical(storesDir_);
  for (const QFileInfo& fi : QDir(storesDir_).entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name))
    dirs << fi.filePath();
  if (database_) {
    try {
      QSqlQuery q(database_->connection());
      if (q.exec(QStringLiteral("SELECT path FROM model_stores ORDER BY last_used DESC")))
        while (q.next()) dirs << q.value(0).toString();
    } catch (const std::exception& e) {
      setError(QString::fromUtf8(e.what()));
    }
  }
  if (!openStore_.isEmpty()) dirs << openStore_;
  std::vector<StoreRow> rows;
  for (const QString& dir : dirs) {
    auto row = readStore(dir);
    if (!row || std::any_of(rows.begin(), rows.end(), [&](const StoreRow& r) { return r.path == row->path; })) continue;
    row->managed = !managedRoot.isEmpty() && row->path.startsWith(managedRoot + QLatin1Char('/'));
    if (database_) {
      try {
        row->lastUsed = database_->modelStoreLastUse(row->path);
        if (!row->lastUsed.isValid() && row->path != dir) row->lastUsed = database_->modelStoreLastUse(dir);
      } catch (const std::exception& e) {
        setError(QString::fromUtf8(e.what()));
      }
    }
    rows.push_back(std::move(*row));
  }
  // Most recently used first, never-used last (by name).
  std::stable_sort(rows.begin(), rows.end(), [](const StoreRow& a, const StoreRow& b) {
    if (a.lastUsed.isValid() != b.lastUsed.isValid()) return a.lastUsed.isValid();
    if (a.lastUsed != b.lastUsed) return a.lastUsed > b.lastUsed;
    return a.name < b.name;
  });
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
  Q_EMIT countChanged();
}

bool ModelStoresModel::remove(const QString& path) {
  const int i = indexOf(path);
  if (i < 0) {
    setError(tr("'%1' is not a ZipMoE store the app knows.").arg(path));
    return false;
  }
  const StoreRow row = rows_[static_cast<size_t>(i)];
  if (row.path == openStore_) {
    setError(tr("'%1' is open: open another model before deleting it.").arg(row.name));
    return false;
  }
  if (row.managed) {
    if (!readStore(row.path) || !QDir(row.path).removeRecursively()) {
      setError(tr("Could not delete '%1'.").arg(row.path));
      refresh();
      return false;
    }
  }
  if (database_) {
    try {
      database_->forgetModelStore(row.path);
    } catch (const std::exception& e) {
      setError(QString::fromUtf8(e.what()));
    }
  }
  setError({});
  refresh();
  return true;
}

}  // namespace zipmoe::app
