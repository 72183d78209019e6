#include "chat_controller.h"

#include <functional>

#include <QClipboard>
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QGuiApplication>
#include <QJsonArray>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QQmlNetworkAccessManagerFactory>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QQmlEngine>
#include <QUrl>

#include <sys/resource.h>
#include <unistd.h>

#include "chat_database.h"
#include "zipmoe/profile/cost_profile.h"
#include "chat_export.h"
#include "chat_list_model.h"
#include "engine_worker.h"
#include "message_model.h"
#include "runtime_handle.h"
#include "runtime_monitor.h"
#include "timeline_model.h"

namespace zipmoe::app {

namespace {

ChatController* g_instance = nullptr;

MessageRow toRow(const MessageRecord& m) {
  MessageRow r;
  r.id = m.id;
  r.position = m.position;
  r.role = m.role;
  r.content = m.content;
  r.state = messageStateName(m.state);
  r.ttftMs = m.ttftMs;
  r.tokensPerSecond = m.tokensPerSecond;
  r.expertHitRate = m.expertHitRate;
  r.generatedTokens = m.generatedTokens;
  r.stopReason = m.stopReason;
  return r;
}

QString localPath(const QString& pathOrUrl) {
  const QUrl url(pathOrUrl);
  return url.isLocalFile() ? url.toLocalFile() : pathOrUrl;
}

}  // namespace

ChatController::ChatController(const ControllerOptions& options, QObject* parent)
    : QObject(parent),
      options_(options),
      handle_(std::make_shared<RuntimeHandle>()),
      chats_(new ChatListModel(this)),
      messages_(new MessageModel(this)),
      timeline_(new TimelineModel(this)),
      runtime_(new RuntimeMonitor(handle_, timeline_, this)),
      localServer_(new LocalServerController(this)),
      advisor_(new BudgetAdvisorModel(handle_, this)),
      inspector_(new ScheduleInspector(timeline_, this)) {
  qRegisterMetaType<ChatTurn>();
  qRegisterMetaType<QList<ChatTurn>>();
  qRegisterMetaType<ReplyStats>();
  qRegisterMetaType<ModelInfo>();
  qRegisterMetaType<SamplingSettings>();
  qRegisterMetaType<OpenModelRequest>();

  if (!options_.databasePath.isEmpty()) {
    try {
      database_ = std::make_shared<ChatDatabase>(options_.databasePath);
      database_->recoverInterruptedReplies();
      language_ = database_->setting(QStringLiteral("language"), QStringLiteral("en")).toString();
    } catch (const std::exception& e) {
      // The chat still works; nothing is written to a file we could not read (it is left as it is).
      database_.reset();
      databaseError_ = QString::fromUtf8(e.what());
    }
  }

  stores_ = new ModelStoresModel(options_.storesDir, database_, this);
  worker_ = new EngineWorker(database_, handle_);
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  connect(worker_, &EngineWorker::loadProgress, this, &ChatController::onLoadProgress);
  connect(worker_, &EngineWorker::modelReady, this, &ChatController::onModelReady);
  connect(worker_, &EngineWorker::modelFailed, this, &ChatController::onModelFailed);
  connect(worker_, &EngineWorker::textArrived, this, &ChatController::onText);
  connect(worker_, &EngineWorker::replyFinished, this, &ChatController::onReplyFinished);
  connect(worker_, &EngineWorker::replyFailed, this, &ChatController::onReplyFailed);
  connect(runtime_, &RuntimeMonitor::replanned, this, &ChatController::savePlan);
  connect(localServer_, &LocalServerController::startRequested, worker_, &EngineWorker::startServer);
  connect(localServer_, &LocalServerController::stopRequested, worker_, &EngineWorker::stopServer);
  connect(worker_, &EngineWorker::serverChanged, localServer_, &LocalServerController::onServerChanged);
  thread_.setObjectName(QStringLiteral("engine worker"));
  thread_.start();
  // The engine's threads (this one, libtorch's pool and the runtime's I/O and decompression threads,
  // all created from it and inheriting its niceness) yield to the GUI thread when the cores are
  // busy: a streaming reply never makes the window stutter, and an idle GUI costs the engine nothing.
  QMetaObject::invokeMethod(worker_, [] { ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 5); },
                            Qt::QueuedConnection);

  viewFlush_.setInterval(30);  // about one frame: many small tokens become one model update
  connect(&viewFlush_, &QTimer::timeout, this, &ChatController::flushToView);
  databaseFlush_.setInterval(500);
  connect(&databaseFlush_, &QTimer::timeout, this, &ChatController::flushToDatabase);

  // "Follow free memory" is a choice about the machine, not a model: one switch for every model,
  // applied when one opens (openModel) and remembered whenever it changes (also when a budget the
  // user sets turns it off).
  tryDatabase([&](ChatDatabase& db) { runtime_->setFollowing(db.setting(QStringLiteral("followFreeMemory"), false).toBool()); });
  connect(runtime_, &RuntimeMonitor::followingChanged, this, [this] {
    tryDatabase([&](ChatDatabase& db) { db.setSetting(QStringLiteral("followFreeMemory"), runtime_->following()); });
  });

  reloadChats();
  tryDatabase([&](ChatDatabase& db) {
    const qint64 last = db.setting(QStringLiteral("lastChatId"), 0).toLongLong();
    if (last && db.chat(last)) selectChat(last);
  });
  installTranslator(language_);
}

bool ChatController::tryDatabase(const std::function<void(ChatDatabase&)>& call) {
  if (!database_) return false;
  try {
    call(*database_);
    return true;
  } catch (const std::exception& e) {
    setError(tr("The chat history could not be updated: %1").arg(QString::fromUtf8(e.what())));
    return false;
  }
}

void ChatController::setGenerationPaused(bool paused) { worker_->setPaused(paused); }

ChatController::~ChatController() {
  if (stream_.requestId) {
    worker_->requestStop();
    flushToDatabase();
  }
  worker_->requestCancel();
  QMetaObject::invokeMethod(worker_, &EngineWorker::shutdown, Qt::BlockingQueuedConnection);
  thread_.quit();
  thread_.wait();
  if (g_instance == this) g_instance = nullptr;
}

void ChatController::setInstance(ChatController* controller) { g_instance = controller; }

namespace {

// Sends every request that is not for a local resource to a scheme no handler knows, so it fails
// at once with QNetworkReply::ProtocolUnknownError and no connection is ever made.
class LocalOnlyNetworkAccessManager : public QNetworkAccessManager {
 public:
  using QNetworkAccessManager::QNetworkAccessManager;

 protected:
  QNetworkReply* createRequest(Operation op, const QNetworkRequest& request, QIODevice* data) override {
    const QString scheme = request.url().scheme();
    if (scheme == QStringLiteral("file") || scheme == QStringLiteral("qrc") || scheme == QStringLiteral("data"))
      return QNetworkAccessManager::createRequest(op, request, data);
    QNetworkRequest refused(request);
    refused.setUrl(QUrl(QStringLiteral("zipmoe-refused-remote:") + request.url().toString()));
    return QNetworkAccessManager::createRequest(op, refused, data);
  }
};

class LocalOnlyNetworkFactory : public QQmlNetworkAccessManagerFactory {
 public:
  QNetworkAccessManager* create(QObject* parent) override { return new LocalOnlyNetworkAccessManager(parent); }
};

}  // namespace

void ChatController::setQmlEngine(QQmlEngine* engine) {
  qmlEngine_ = engine;
  static LocalOnlyNetworkFactory factory;  // outlives every engine (the engine does not own it)
  if (engine && engine->networkAccessManagerFactory() != &factory) engine->setNetworkAccessManagerFactory(&factory);
}

ChatController* ChatController::create(QQmlEngine* qml, QJSEngine*) {
  Q_ASSERT(g_instance);
  QJSEngine::setObjectOwnership(g_instance, QJSEngine::CppOwnership);
  g_instance->setQmlEngine(qml);
  return g_instance;
}

// Model --------------------------------------------------------------------------------------------

void ChatController::openModel(const QString& pathOrUrl) {
  if (stream_.requestId) stop();
  const QString path = pathOrUrl.isEmpty() ? options_.demoModelDir : localPath(pathOrUrl);
  OpenModelRequest request;
  request.path = path;
  request.storesDir = options_.storesDir;
  request.contextOverflow = options_.contextOverflow;
  request.followFreeMemory = runtime_->following();
  request.decompressWorkers = info_.decompressWorkers > 0 && path == info_.sourcePath ? info_.decompressWorkers : 0;
  tryDatabase([&](ChatDatabase& db) {
    // The budget and pools the user chose for this model last time, by path (the key needs the store).
    const QVariant budget = db.setting(QStringLiteral("budget:") + path);
    if (budget.isValid()) request.budget = zipmoe::MemoryBudget::bytes(budget.toULongLong());
    request.pools = db.setting(QStringLiteral("pools:") + path, 0xF).toUInt();
    if (request.pools == 0 || request.pools > 0xF) request.pools = 0xF;
    if (!request.decompressWorkers) request.decompressWorkers = db.setting(QStringLiteral("workers:") + path, 0).toInt();
  });
  modelError_.clear();
  loadStage_ = tr("Opening %1…").arg(QFileInfo(path).fileName());
  loadProgress_ = -1;
  setModelState(QStringLiteral("loading"));
  Q_EMIT loadProgressChanged();
  worker_->clearCancel();
  QMetaObject::invokeMethod(worker_, [w = worker_, request] { w->openModel(request); }, Qt::QueuedConnection);
}

void ChatController::cancelLoading() { worker_->requestCancel(); }

void ChatController::onLoadProgress(const QString& stage, double fraction) {
  loadStage_ = stage;
  loadProgress_ = fraction;
  Q_EMIT loadProgressChanged();
}

void ChatController::onModelReady(const ModelInfo& info) {
  info_ = info;
  tryDatabase([&](ChatDatabase& db) { db.setSetting(QStringLiteral("lastModel"), info.sourcePath); });
  runtime_->modelOpened(info.following, info.followError);  // reads the new runtime
  const QString store = QFileInfo(info.storePath).canonicalFilePath();
  tryDatabase([&](ChatDatabase& db) { db.touchModelStore(store.isEmpty() ? info.storePath : store, info.modelKey); });
  stores_->setOpenStore(info.storePath);
  advisor_->setModel(info.storePath, info.modelKey, database_);
  advisor_->recompute();
  try {
    inspector_->setProfile(loadCostProfile((info.storePath + QStringLiteral("/profile.json")).toStdString()));
  } catch (const std::exception&) {
    inspector_->setProfile(std::nullopt);  // the schedule page says that it cannot predict
  }
  inspector_->setObservedExpertMs(0);
  lastPlanBudget_ = 0;
  lastPlanPools_ = 0;
  savePlan();  // the plan the runtime opened with
  setModelState(QStringLiteral("ready"));
}

void ChatController::onModelFailed(const QString& error) {
  modelError_ = error;
  setModelState(QStringLiteral("failed"));
}

void ChatController::setModelState(const QString& state) {
  modelState_ = state;
  Q_EMIT modelChanged();
}

QVariantMap ChatController::modelInfo() const {
  QVariantMap m;
  m[QStringLiteral("name")] = info_.name;
  m[QStringLiteral("modelKey")] = info_.modelKey;
  m[QStringLiteral("sourcePath")] = info_.sourcePath;
  m[QStringLiteral("storePath")] = info_.storePath;
  m[QStringLiteral("family")] = info_.family;
  m[QStringLiteral("layers")] = info_.layers;
  m[QStringLiteral("experts")] = info_.experts;
  m[QStringLiteral("expertsPerToken")] = info_.expertsPerToken;
  m[QStringLiteral("contextLength")] = info_.contextLength;
  m[QStringLiteral("expertBytes")] = static_cast<double>(info_.expertBytes);
  m[QStringLiteral("computeDtype")] = info_.computeDtype;
  m[QStringLiteral("loadSeconds")] = info_.loadSeconds;
  m[QStringLiteral("historyPath")] = info_.historyPath;
  m[QStringLiteral("openedFollowing")] = info_.following;  // the engine opened with the budget following free memory
  return m;
}

void ChatController::setDecompressWorkers(int workers) {
  if (workers < 1 || workers == info_.decompressWorkers || info_.sourcePath.isEmpty()) return;
  tryDatabase([&](ChatDatabase& db) { db.setSetting(QStringLiteral("workers:") + info_.sourcePath, workers); });
  savePlan();  // the budget and pools in use now, for the reopen
  // The runtime's thread count is fixed when it opens: reopen (the store and profile are reused).
  // Queued behind a streaming reply on the worker's thread, so the reply finishes first.
  info_.decompressWorkers = workers;
  openModel(info_.sourcePath);
}

int ChatController::cpuCores() const { return QThread::idealThreadCount(); }

// Keeps the plan the runtime applied, when the user changed what it plans for (budget or pools):
// the plans table is the history of the user's choices and what the planner made of them, not a
// row for every periodic replan, nor for every move of the budget that follows free memory. The
// budget and pools are also remembered for the next start.
void ChatController::savePlan() {
  if (!database_ || info_.modelKey.isEmpty() || !runtime_->active()) return;
  const auto budget = static_cast<quint64>(runtime_->budgetBytes());
  const auto pools = static_cast<unsigned>(runtime_->poolMask());
  if (runtime_->following()) {
    // The budget is the follower's, not the user's: only the pools are the user's choice.
    if (pools != lastPlanPools_ &&
        tryDatabase([&](ChatDatabase& db) { db.setSetting(QStringLiteral("pools:") + info_.sourcePath, pools); }))
      lastPlanPools_ = pools;
    return;
  }
  if (budget == lastPlanBudget_ && pools == lastPlanPools_) return;
  QJsonArray split;
  for (const QVariant& p : runtime_->pools()) split.append(QJsonObject::fromVariantMap(p.toMap()));
  QJsonObject plan;
  plan[QStringLiteral("pools")] = split;
  plan[QStringLiteral("lastReplanMs")] = runtime_->lastReplanMs();
  try {
    database_->savePlan(info_.modelKey, budget, pools, QString::fromUtf8(QJsonDocument(plan).toJson(QJsonDocument::Compact)));
    database_->setSetting(QStringLiteral("budget:") + info_.sourcePath, static_cast<qulonglong>(budget));
    database_->setSetting(QStringLiteral("pools:") + info_.sourcePath, pools);
    lastPlanBudget_ = budget;
    lastPlanPools_ = pools;
  } catch (const std::exception& e) {
    setError(QString::fromUtf8(e.what()));
  }
}

// Chats --------------------------------------------------------------------------------------------

void ChatController::reloadChats() {
  std::vector<ChatRow> rows;
  if (database_) {
    try {
      for (const ChatRecord& c : database_->listChats(searchText_)) rows.push_back({c.id, c.title, c.updatedAt, c.parentChatId});
    } catch (const std::exception& e) {
      setError(QString::fromUtf8(e.what()));
    }
  }
  chats_->reset(std::move(rows));
}

void ChatController::setSearchText(const QString& text) {
  if (text == searchText_) return;
  searchText_ = text;
  Q_EMIT searchTextChanged();
  reloadChats();
}

qint64 ChatController::ensureChat() {
  if (currentChatId_) return currentChatId_;
  newChat();
  return currentChatId_;
}

void ChatController::newChat() {
  if (!database_) {
    setError(tr("History is not available: %1").arg(databaseError_));
    return;
  }
  try {
    const ChatRecord c = database_->createChat(tr("New chat"), systemPrompt_, sampling_.toJson(), info_.modelKey);
    currentChatId_ = c.id;
    currentChatTitle_ = c.title;
    messages_->reset({});
    database_->setSetting(QStringLiteral("lastChatId"), c.id);
    Q_EMIT currentChatChanged();
    reloadChats();
  } catch (const std::exception& e) {
    setError(QString::fromUtf8(e.what()));
  }
}

void ChatController::selectChat(qint64 chatId) {
  if (!database_) return;
  currentChatId_ = chatId;
  loadCurrentChat();
  tryDatabase([&](ChatDatabase& db) { db.setSetting(QStringLiteral("lastChatId"), chatId); });
}

void ChatController::loadCurrentChat() {
  try {
    const auto chat = database_->chat(currentChatId_);
    if (!chat) {
      currentChatId_ = 0;
      currentChatTitle_.clear();
      branchParent_.clear();
      branches_.clear();
      messages_->reset({});
      Q_EMIT currentChatChanged();
      return;
    }
    currentChatTitle_ = chat->title;
    loadBranches(*chat);
    systemPrompt_ = chat->systemPrompt;
    QString problem;
    sampling_ = SamplingSettings::fromJson(chat->samplingJson, &problem);
    if (!problem.isEmpty()) setError(tr("Chat settings: %1").arg(problem));
    std::vector<MessageRow> rows;
    for (const MessageRecord& m : database_->messages(currentChatId_)) {
      MessageRow r = toRow(m);
      // The reply still streaming shows what has arrived, not only what was committed.
      if (stream_.requestId && m.id == stream_.messageId) r.content = stream_.text;
      rows.push_back(r);
    }
    messages_->reset(std::move(rows));
    Q_EMIT currentChatChanged();
    Q_EMIT chatSettingsChanged();
  } catch (const std::exception& e) {
    setError(QString::fromUtf8(e.what()));
  }
}

void ChatController::renameChat(qint64 chatId, const QString& title) {
  if (!database_ || title.trimmed().isEmpty()) return;
  try {
    database_->renameChat(chatId, title.trimmed());
    if (chatId == currentChatId_) {
      currentChatTitle_ = title.trimmed();
      Q_EMIT currentChatChanged();
    }
    reloadChats();
  } catch (const std::exception& e) {
    setError(QString::fromUtf8(e.what()));
  }
}

void ChatController::deleteChat(qint64 chatId) {
  if (!database_) return;
  if (stream_.requestId && stream_.chatId == chatId) {
    worker_->requestStop();
    endStream();
  }
  try {
    database_->deleteChat(chatId);
    if (chatId == currentChatId_) {
      currentChatId_ = 0;
      currentChatTitle_.clear();
      messages_->reset({});
      Q_EMIT currentChatChanged();
    }
    reloadChats();
  } catch (const std::exception& e) {
    setError(QString::fromUtf8(e.what()));
  }
}

// Settings of the chat ------------------------------------------------------------------------------

QVariantMap ChatController::sampling() const {
  QVariantMap m;
  m[QStringLiteral("temperature")] = sampling_.temperature;
  m[QStringLiteral("topK")] = sampling_.topK;
  m[QStringLiteral("topP")] = sampling_.topP;
  m[QStringLiteral("minP")] = sampling_.minP;
  m[QStringLiteral("repetitionPenalty")] = sampling_.repetitionPenalty;
  m[QStringLiteral("maxTokens")] = sampling_.maxTokens;
  m[QStringLiteral("seed")] = static_cast<double>(sampling_.seed);
  return m;
}

void ChatController::setSamplingValue(const QString& name, double value) {
  SamplingSettings s = sampling_;
  if (name == QStringLiteral("temperature")) s.temperature = qBound(0.0, value, 5.0);
  else if (name == QStringLiteral("topK")) s.topK = qBound(0, static_cast<int>(value), 100000);
  else if (name == QStringLiteral("topP")) s.topP = qBound(0.01, value, 1.0);
  else if (name == QStringLiteral("minP")) s.minP = qBound(0.0, value, 1.0);
  else if (name == QStringLiteral("repetitionPenalty")) s.repetitionPenalty = qBound(0.1, value, 10.0);
  else if (name == QStringLiteral("maxTokens")) s.maxTokens = qBound(1, static_cast<int>(value), 1 << 20);
  else if (name == QStringLiteral("seed")) s.seed = static_cast<quint64>(qMax(0.0, value));
  else {
    setError(tr("Unknown sampling setting '%1'.").arg(name));
    return;
  }
  sampling_ = s;
  saveChatSettings();
  Q_EMIT chatSettingsChanged();
}

void ChatController::setSystemPrompt(const QString& text) {
  if (text == systemPrompt_) return;
  systemPrompt_ = text;
  saveChatSettings();
  Q_EMIT chatSettingsChanged();
}

void ChatController::saveChatSettings() {
  if (!database_ || !currentChatId_) return;
  try {
    database_->updateChatSettings(currentChatId_, systemPrompt_, sampling_.toJson());
  } catch (const std::exception& e) {
    setError(QString::fromUtf8(e.what()));
  }
}

// Replies ------------------------------------------------------------------------------------------

bool ChatController::send(const QString& text) {
  const QString message = text.trimmed();
  if (message.isEmpty()) return false;
  if (stream_.requestId) {
    setError(tr("Wait for the reply to finish, or stop it."));
    return false;
  }
  if (modelState_ != QStringLiteral("ready")) {
    setError(tr("No model is ready yet."));
    return false;
  }
  const qint64 chatId = ensureChat();
  if (!chatId) return false;
  try {
    const MessageRecord m = database_->addMessage(chatId, QStringLiteral("user"), message, MessageState::Complete);
    messages_->append(toRow(m));
    if (currentChatTitle_ == tr("New chat") && messages_->count() == 1) {
      QString title = message.simplified();
      if (title.size() > 48) title = title.left(47) + QChar(0x2026);
      renameChat(chatId, title);
    }
  } catch (const std::exception& e) {
    setError(QString::fromUtf8(e.what()));
    return false;
  }
  return startReply();
}

bool ChatController::startReply() {
  QList<ChatTurn> turns;
  if (!systemPrompt_.trimmed().isEmpty()) turns.append({QStringLiteral("system"), systemPrompt_});
  for (const MessageRow& r : messages_->rows())
    if (r.state != QStringLiteral("error") && !r.content.isEmpty()) turns.append({r.role, r.content});
  try {
    const MessageRecord reply =
        database_->addMessage(currentChatId_, QStringLiteral("assistant"), QString(), MessageState::Streaming);
    messages_->append(toRow(reply));
    stream_ = Stream{};
    stream_.requestId = nextRequestId_++;
    stream_.chatId = currentChatId_;
    stream_.messageId = reply.id;
  } catch (const std::exception& e) {
    setError(QString::fromUtf8(e.what()));
    return false;
  }
  viewFlush_.start();
  databaseFlush_.start();
  Q_EMIT generatingChanged();
  QMetaObject::invokeMethod(
      worker_, [w = worker_, id = stream_.requestId, turns, s = sampling_] { w->generate(id, turns, s); },
      Qt::QueuedConnection);
  reloadChats();
  return true;
}

void ChatController::stop() {
  if (stream_.requestId) worker_->requestStop();
}

bool ChatController::regenerate() {
  if (stream_.requestId || !currentChatId_ || modelState_ != QStringLiteral("ready")) return false;
  const auto& rows = messages_->rows();
  if (rows.empty()) return false;
  int position = -1;
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
    if (it->role == QStringLiteral("assistant")) position = it->position;
    else break;
  }
  if (position < 0) {
    if (rows.back().role != QStringLiteral("user")) return false;  // a user message waiting for a reply
  } else {
    try {
      database_->deleteMessagesFrom(currentChatId_, position);
    } catch (const std::exception& e) {
      setError(QString::fromUtf8(e.what()));
      return false;
    }
    messages_->removeFrom(position);
  }
  return startReply();
}

bool ChatController::editAndResend(int position, const QString& text) {
  if (stream_.requestId || !currentChatId_ || text.trimmed().isEmpty()) return false;
  const auto& rows = messages_->rows();
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const MessageRow& r) { return r.position == position; });
  if (it == rows.end() || it->role != QStringLiteral("user")) return false;
  try {
    database_->deleteMessagesFrom(currentChatId_, position);
  } catch (const std::exception& e) {
    setError(QString::fromUtf8(e.what()));
    return false;
  }
  messages_->removeFrom(position);
  return send(text);
}

bool ChatController::copyMessage(int position) {
  for (const MessageRow& r : messages_->rows())
    if (r.position == position) {
      if (auto* clipboard = QGuiApplication::clipboard()) {
        clipboard->setText(r.content);
        return true;
      }
    }
  return false;
}

void ChatController::onText(qint64 requestId, const QString& text) {
  if (requestId != stream_.requestId) return;  // a reply already ended here (deleted chat)
  stream_.text += text;
  stream_.unshown += text;
  stream_.dirty = true;
}

void ChatController::flushToView() {
  if (stream_.unshown.isEmpty()) return;
  if (stream_.chatId == currentChatId_) messages_->appendText(stream_.messageId, stream_.unshown);
  stream_.unshown.clear();
  Q_EMIT streamingText();
}

void ChatController::flushToDatabase() {
  if (!stream_.dirty) return;
  if (tryDatabase([&](ChatDatabase& db) { db.setMessageContent(stream_.messageId, stream_.text); })) {
    stream_.dirty = false;
    Q_EMIT streamCommitted(stream_.messageId, static_cast<int>(stream_.text.size()));
  }
}

void ChatController::endStream() {
  viewFlush_.stop();
  databaseFlush_.stop();
  stream_ = Stream{};
  Q_EMIT generatingChanged();
}

// Ends the streaming reply in the database and shows it as stored there. When the database refuses
// (full, read-only), the view still shows the reply as ended and the banner says it was not saved;
// at the next start its last committed text comes back as "incomplete".
void ChatController::finishStream(MessageState state, const MessageStats& stats) {
  const bool saved = tryDatabase([&](ChatDatabase& db) {
    db.finishMessage(stream_.messageId, stream_.text, state, stats);
    if (stream_.chatId == currentChatId_)
      if (const auto stored = db.message(stream_.messageId)) messages_->update(toRow(*stored));
  });
  if (saved || stream_.chatId != currentChatId_) return;
  for (MessageRow row : messages_->rows())
    if (row.id == stream_.messageId) {
      row.content = stream_.text;
      row.state = messageStateName(state);
      row.ttftMs = stats.ttftMs;
      row.tokensPerSecond = stats.tokensPerSecond;
      row.expertHitRate = stats.expertHitRate;
      row.generatedTokens = stats.generatedTokens;
      row.stopReason = stats.stopReason;
      messages_->update(row);
      break;
    }
}

void ChatController::onReplyFinished(qint64 requestId, const ReplyStats& stats) {
  if (requestId != stream_.requestId) return;
  flushToView();
  const qint64 messageId = stream_.messageId;
  MessageStats s;
  s.ttftMs = stats.ttftMs;
  s.tokensPerSecond = stats.tokensPerSecond;
  s.promptTokens = stats.promptTokens;
  s.generatedTokens = stats.generatedTokens;
  s.expertHitRate = stats.expertHitRate;
  s.stopReason = stats.stopReason;
  s.modelKey = info_.modelKey;
  s.budgetBytes = stats.budgetBytes;
  s.tpotMs = stats.tpotMs;
  finishStream(MessageState::Complete, s);
  runtime_->refresh();  // drains the reply's trace: the FFN times below are this reply's too
  advisor_->setObservedExpertMs(runtime_->expertFfnMs());
  inspector_->setObservedExpertMs(runtime_->expertFfnMs());
  advisor_->recordDense(stats.denseMsPerToken, stats.densePrefillMsPerToken, stats.promptTokens);
  lastReplyPrompt_ = {{QStringLiteral("promptTokens"), stats.promptTokens},
                      {QStringLiteral("reusedTokens"), stats.reusedTokens},
                      {QStringLiteral("prefilledTokens"), stats.prefilledTokens},
                      {QStringLiteral("droppedTurns"), stats.droppedTurns}};
  if (stats.droppedTurns != droppedTurns_) {
    droppedTurns_ = stats.droppedTurns;
    Q_EMIT noticeChanged();
  }
  endStream();
  reloadChats();
  Q_EMIT replyFinished(messageId);
}

void ChatController::onReplyFailed(qint64 requestId, const QString& error) {
  if (requestId != stream_.requestId) return;
  flushToView();
  const qint64 messageId = stream_.messageId;
  MessageStats s;
  s.stopReason = error;
  finishStream(MessageState::Error, s);
  setError(error);
  endStream();
  Q_EMIT replyFinished(messageId);
}

// Export, language, errors ------------------------------------------------------------------------------

bool ChatController::exportChat(qint64 chatId, const QString& fileOrUrl) {
  if (!database_) return false;
  const QString path = localPath(fileOrUrl);
  try {
    const auto chat = database_->chat(chatId);
    if (!chat) {
      setError(tr("There is no chat %1 to export.").arg(chatId));
      return false;
    }
    const auto messages = database_->messages(chatId);
    const bool json = path.endsWith(QStringLiteral(".json"), Qt::CaseInsensitive);
    writeTextFileAtomically(path, json ? exportChatJson(*chat, messages) : exportChatMarkdown(*chat, messages));
    return true;
  } catch (const std::exception& e) {
    setError(QString::fromUtf8(e.what()));
    return false;
  }
}

void ChatController::setLanguage(const QString& code) {
  if (code == language_) return;
  language_ = code;
  installTranslator(code);
  tryDatabase([&](ChatDatabase& db) { db.setSetting(QStringLiteral("language"), code); });
  Q_EMIT languageChanged();
  Q_EMIT noticeChanged();
}

void ChatController::installTranslator(const QString& code) {
  QCoreApplication::removeTranslator(&translator_);
  // English is the source language; its file only adds plural forms, so it may be absent.
  if (translator_.load(QStringLiteral("zipmoe_") + code, options_.translationsPath))
    QCoreApplication::installTranslator(&translator_);
  else if (code != QStringLiteral("en"))
    setError(tr("No translation for '%1' in %2.").arg(code, options_.translationsPath));
  if (qmlEngine_) qmlEngine_->retranslate();
}

QString ChatController::formatBytes(double bytes) const {
  return QLocale().formattedDataSize(static_cast<qint64>(bytes), 1, QLocale::DataSizeTraditionalFormat);
}

void ChatController::setError(const QString& error) {
  lastError_ = error;
  Q_EMIT lastErrorChanged();
}

void ChatController::clearError() { setError({}); }

QString ChatController::notice() const {
  // Formatted when read, so that it follows a change of language.
  if (droppedTurns_ <= 0) return {};
  return tr("The conversation is longer than the model's context: the %n oldest message(s) were left out.", "",
            droppedTurns_);
}

void ChatController::clearNotice() {
  droppedTurns_ = 0;
  Q_EMIT noticeChanged();
}

}  // namespace zipmoe::app
