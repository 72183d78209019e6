// ChatController — what the QML pages talk to (the `App` singleton of the ZipMoE.Chat module).
//
// It owns the engine worker's thread, the database, and the models the pages show: the chat list,
// the messages of the open chat, the runtime monitor (memory budget page) and the timeline (schedule
// page). Data flows one way: the worker's queued signals → this object (GUI thread) → the models →
// QML. A streaming reply's text is gathered and handed to the message model at most once per frame
// (~30 ms) and committed to the database every 0.5 s in state "streaming": if the app is killed, the
// committed prefix survives and is marked "incomplete" at the next start. Every chat keeps its own
// system prompt and sampling settings. Errors never end the app: they land in `lastError`.
// Thread-safety: GUI thread only. Cost: the engine runs on the worker thread.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QPointer>
#include <QThread>
#include <QTimer>
#include <QTranslator>
#include <QVariantList>
#include <QVariantMap>
#include <QtQml/qqmlregistration.h>

#include <functional>
#include <memory>

#include <QQmlEngine>

#include "budget_advisor_model.h"
#include "chat_list_model.h"
#include "chat_types.h"
#include "local_server_controller.h"
#include "message_model.h"
#include "model_stores_model.h"
#include "runtime_monitor.h"
#include "schedule_inspector.h"
#include "timeline_model.h"
#include "zipmoe/generation/reply.h"

namespace zipmoe::app {

class ChatDatabase;
struct ChatRecord;
class EngineWorker;
struct MessageStats;
enum class MessageState;
class RuntimeHandle;

struct ControllerOptions {
  QString databasePath;      // empty: no history is kept
  QString storesDir;         // converted stores
  QString demoModelDir;      // the built-in demo model (HF directory)
  QString translationsPath = QStringLiteral(":/i18n");
  // A conversation longer than the model's context: drop its oldest turns (the notice says how
  // many) or refuse the reply with an error naming the limit (--context-overflow, as on every door).
  ContextOverflow contextOverflow = ContextOverflow::DropOldest;
};

class ChatController : public QObject {
  Q_OBJECT
  QML_NAMED_ELEMENT(App)
  QML_SINGLETON
  Q_PROPERTY(zipmoe::app::ChatListModel* chats READ chats CONSTANT FINAL)
  Q_PROPERTY(zipmoe::app::MessageModel* messages READ messages CONSTANT FINAL)
  Q_PROPERTY(zipmoe::app::RuntimeMonitor* runtime READ runtime CONSTANT FINAL)
  Q_PROPERTY(zipmoe::app::TimelineModel* timeline READ timeline CONSTANT FINAL)
  Q_PROPERTY(zipmoe::app::LocalServerController* localServer READ localServer CONSTANT FINAL)
  Q_PROPERTY(zipmoe::app::BudgetAdvisorModel* advisor READ advisor CONSTANT FINAL)
  Q_PROPERTY(zipmoe::app::ScheduleInspector* inspector READ inspector CONSTANT FINAL)
  Q_PROPERTY(zipmoe::app::ModelStoresModel* stores READ stores CONSTANT FINAL)
  Q_PROPERTY(QString modelState READ modelState NOTIFY modelChanged)  // none, loading, ready, failed
  Q_PROPERTY(QString loadStage READ loadStage NOTIFY loadProgressChanged FINAL)
  Q_PROPERTY(double loadProgress READ loadProgress NOTIFY loadProgressChanged)  // < 0: indeterminate
  Q_PROPERTY(QString modelError READ modelError NOTIFY modelChanged FINAL)
  Q_PROPERTY(QVariantMap modelInfo READ modelInfo NOTIFY modelChanged FINAL)
  Q_PROPERTY(QString demoModelPath READ demoModelPath CONSTANT FINAL)
  Q_PROPERTY(bool generating READ generating NOTIFY generatingChanged FINAL)
  Q_PROPERTY(qint64 currentChatId READ currentChatId NOTIFY currentChatChanged FINAL)
  Q_PROPERTY(QString currentChatTitle READ currentChatTitle NOTIFY currentChatChanged FINAL)
  // Branching (chat_branching.cpp): the chat this one branched from, {id, title, position} (empty
  // for a root), and the chats branched from this one, [{id, title, position}] oldest first.
  Q_PROPERTY(QVariantMap branchParent READ branchParent NOTIFY currentChatChanged FINAL)
  Q_PROPERTY(QVariantList branches READ branches NOTIFY currentChatChanged FINAL)
  Q_PROPERTY(QString searchText READ searchText WRITE setSearchText NOTIFY searchTextChanged FINAL)
  Q_PROPERTY(QString systemPrompt READ systemPrompt WRITE setSystemPrompt NOTIFY chatSettingsChanged FINAL)
  Q_PROPERTY(QVariantMap sampling READ sampling NOTIFY chatSettingsChanged FINAL)
  Q_PROPERTY(int decompressWorkers READ decompressWorkers WRITE setDecompressWorkers NOTIFY modelChanged FINAL)
  Q_PROPERTY(int cpuCores READ cpuCores CONSTANT FINAL)
  Q_PROPERTY(QString language READ language WRITE setLanguage NOTIFY languageChanged FINAL)
  // Dark palette in force (color_scheme.h): main() follows the system; the pages pick their own
  // accents by it.
  Q_PROPERTY(bool darkMode READ darkMode WRITE setDarkMode NOTIFY darkModeChanged FINAL)
  Q_PROPERTY(QString lastError READ lastError NOTIFY lastErrorChanged FINAL)
  Q_PROPERTY(QString notice READ notice NOTIFY noticeChanged FINAL)  // information, not an error
  Q_PROPERTY(QString databaseError READ databaseError CONSTANT FINAL)
  Q_PROPERTY(QString databasePath READ databasePath CONSTANT FINAL)
  // The last reply's prompt: promptTokens, reusedTokens (already in the engine's cache),
  // prefilledTokens, droppedTurns.
  Q_PROPERTY(QVariantMap lastReplyPrompt READ lastReplyPrompt NOTIFY replyFinished FINAL)

 public:
  explicit ChatController(const ControllerOptions& options, QObject* parent = nullptr);
  ~ChatController() override;

  // The instance QML gets as `App`: main() and the tests create the controller first.
  static void setInstance(ChatController* controller);
  static ChatController* create(QQmlEngine* qml, QJSEngine* js);
  // The engine the pages run in (for retranslation). Also makes it refuse every network request
  // that is not local (file:, qrc:, data:): nothing the app shows — a model's reply with an image
  // link, above all — may fetch a remote resource.
  void setQmlEngine(QQmlEngine* engine);

  ChatListModel* chats() const { return chats_; }
  MessageModel* messages() const { return messages_; }
  RuntimeMonitor* runtime() const { return runtime_; }
  TimelineModel* timeline() const { return timeline_; }
  LocalServerController* localServer() const { return localServer_; }
  BudgetAdvisorModel* advisor() const { return advisor_; }
  ScheduleInspector* inspector() const { return inspector_; }
  ModelStoresModel* stores() const { return stores_; }
  QString modelState() const { return modelState_; }
  QString loadStage() const { return loadStage_; }
  double loadProgress() const { return loadProgress_; }
  QString modelError() const { return modelError_; }
  QVariantMap modelInfo() const;
  QString demoModelPath() const { return options_.demoModelDir; }
  bool generating() const { return stream_.requestId != 0; }
  qint64 currentChatId() const { return currentChatId_; }
  QString currentChatTitle() const { return currentChatTitle_; }
  QVariantMap branchParent() const { return branchParent_; }
  QVariantList branches() const { return branches_; }
  QString searchText() const { return searchText_; }
  void setSearchText(const QString& text);
  QString systemPrompt() const { return systemPrompt_; }
  void setSystemPrompt(const QString& text);
  QVariantMap sampling() const;
  int decompressWorkers() const { return info_.decompressWorkers; }
  void setDecompressWorkers(int workers);
  int cpuCores() const;
  QString language() const { return language_; }
  bool darkMode() const { return darkMode_; }
  void setDarkMode(bool dark);
  void setLanguage(const QString& code);
  QString lastError() const { return lastError_; }
  QString notice() const;
  QString databaseError() const { return databaseError_; }
  QString databasePath() const { return options_.databasePath; }
  ChatDatabase* database() const { return database_.get(); }
  QVariantMap lastReplyPrompt() const { return lastReplyPrompt_; }

  // A model directory or store (a path or a file:// URL); the demo model when empty.
  Q_INVOKABLE void openModel(const QString& pathOrUrl = {});
  Q_INVOKABLE void cancelLoading();
  Q_INVOKABLE void newChat();
  Q_INVOKABLE void selectChat(qint64 chatId);
  Q_INVOKABLE void renameChat(qint64 chatId, const QString& title);
  Q_INVOKABLE void deleteChat(qint64 chatId);
  Q_INVOKABLE bool send(const QString& text);
  Q_INVOKABLE void stop();
  Q_INVOKABLE bool regenerate();
  Q_INVOKABLE bool editAndResend(int position, const QString& text);
  Q_INVOKABLE bool copyMessage(int position);
  // A new chat holding this chat's messages up to `position`, kept in the database as a branch of
  // it, and opened. False (with lastError) when no chat is open, a reply streams or the database
  // refuses.
  Q_INVOKABLE bool branchFrom(int position);
  // The fenced code blocks of a message's text: [{language, code}] in order (code_blocks.h).
  Q_INVOKABLE QVariantList codeBlocks(const QString& text) const;
  Q_INVOKABLE bool copyText(const QString& text);
  // Writes the chat as Markdown (.md) or JSON (.json, by the file's suffix). Returns false and sets
  // lastError on failure.
  Q_INVOKABLE bool exportChat(qint64 chatId, const QString& fileOrUrl);
  // One of: temperature, topK, topP, minP, repetitionPenalty, maxTokens, seed.
  Q_INVOKABLE void setSamplingValue(const QString& name, double value);
  Q_INVOKABLE QString formatBytes(double bytes) const;
  Q_INVOKABLE void clearError();
  Q_INVOKABLE void clearNotice();
  // Holds the streaming reply after the next token it emits until resumed (generating stays true;
  // stop() still ends it). For tests and scripted runs that must act while a reply is in flight
  // (scroll, kill the app) without racing the model.
  Q_INVOKABLE void setGenerationPaused(bool paused);

 Q_SIGNALS:
  void modelChanged();
  void loadProgressChanged();
  void generatingChanged();
  void currentChatChanged();
  void searchTextChanged();
  void chatSettingsChanged();
  void languageChanged();
  void darkModeChanged();
  void lastErrorChanged();
  void noticeChanged();
  void replyFinished(qint64 messageId);  // a reply ended (finished, stopped or failed)
  void streamingText();                  // new reply text reached the message model
  void streamCommitted(qint64 messageId, int characters);  // a streaming reply's text is in the database

 private:
  void onLoadProgress(const QString& stage, double fraction);
  void onModelReady(const ModelInfo& info);
  void onModelFailed(const QString& error);
  void onText(qint64 requestId, const QString& text);
  void onReplyFinished(qint64 requestId, const ReplyStats& stats);
  void onReplyFailed(qint64 requestId, const QString& error);
  void flushToView();
  void flushToDatabase();
  void endStream();
  bool startReply();
  void reloadChats();
  void loadCurrentChat();
  void loadBranches(const ChatRecord& chat);
  void saveChatSettings();
  void setError(const QString& error);
  void setModelState(const QString& state);
  qint64 ensureChat();
  void installTranslator(const QString& code);
  void savePlan();
  void finishStream(MessageState state, const MessageStats& stats);
  // Runs a database call on the GUI thread. A failure after open (a full disk, a file made
  // read-only, a broken page) becomes the error banner, never an exception out of a slot; data
  // already saved stays as it is. Returns false when there is no database or the call failed.
  bool tryDatabase(const std::function<void(ChatDatabase&)>& call);

  ControllerOptions options_;
  std::shared_ptr<ChatDatabase> database_;
  QString databaseError_;
  std::shared_ptr<RuntimeHandle> handle_;
  QThread thread_;
  EngineWorker* worker_ = nullptr;  // lives on thread_
  ChatListModel* chats_;
  MessageModel* messages_;
  TimelineModel* timeline_;
  RuntimeMonitor* runtime_;
  LocalServerController* localServer_;
  BudgetAdvisorModel* advisor_;
  ScheduleInspector* inspector_;
  ModelStoresModel* stores_ = nullptr;
  QPointer<QQmlEngine> qmlEngine_;
  QTranslator translator_;

  QString modelState_ = QStringLiteral("none");
  QString loadStage_;
  double loadProgress_ = 0;
  QString modelError_;
  ModelInfo info_;
  quint64 lastPlanBudget_ = 0;
  unsigned lastPlanPools_ = 0;

  qint64 currentChatId_ = 0;
  QString currentChatTitle_;
  QVariantMap branchParent_;
  QVariantList branches_;
  QString searchText_;
  QString systemPrompt_;
  SamplingSettings sampling_;
  QString language_ = QStringLiteral("en");
  bool darkMode_ = false;
  QString lastError_;
  int droppedTurns_ = 0;  // the notice: oldest turns the last reply left out (0 = no notice)
  QVariantMap lastReplyPrompt_;

  struct Stream {
    qint64 requestId = 0;  // 0 = no reply streaming
    qint64 chatId = 0;
    qint64 messageId = 0;
    QString text;          // everything so far
    QString unshown;       // not yet in the message model
    bool dirty = false;    // not yet in the database
  } stream_;
  qint64 nextRequestId_ = 1;
  QTimer viewFlush_;
  QTimer databaseFlush_;
};

}  // namespace zipmoe::app
