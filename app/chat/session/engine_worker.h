// EngineWorker — the engine on its own thread: opens a model (converting an HF directory to a
// ZipMoE store first, with progress, cancellable), generates replies, and keeps the model's cost
// profile in the database (the engine keeps the expert activation statistics per user).
//
// The worker is a QObject moved to a QThread that the ChatController owns; the controller calls its
// slots through queued connections and receives its signals queued on the GUI thread, so the GUI
// thread never waits for the engine. A reply streams as textArrived signals, each carrying only the
// new text. Stopping a reply and cancelling a conversion are atomic flags the GUI thread sets and
// the engine checks between tokens and between tensors. The expert runtime is published through a
// RuntimeHandle so the GUI thread can read its statistics, drain its trace and move the memory
// budget while a reply streams (the runtime replans on its own thread); the same handle carries the
// engine's "follow free memory" control, cleared before the engine goes.
// Thread-safety: slots run on the worker's thread; requestStop/requestCancel from any thread.
// Cost: the engine's.
#pragma once

#include <QObject>
#include <QString>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "chat_types.h"
#include "zipmoe/generation/reply.h"
#include "zipmoe/experts/runtime_options.h"
#include "local_server.h"
#include "runtime_handle.h"

namespace zipmoe {
class ChatSession;
class Engine;
}

namespace zipmoe::app {

class ChatDatabase;

struct OpenModelRequest {
  QString path;               // an HF directory (converted first) or a ZipMoE store
  QString storesDir;          // where converted stores are kept
  // The budget the user chose for this model last time, or half its experts' BF16 bytes; one that a
  // changed store has made too small or too large is moved to the nearest end, not refused.
  MemoryBudget budget = MemoryBudget::shareOfExperts(0.5);
  unsigned pools = 0xF;
  int decompressWorkers = 0;  // 0 = one per core
  ContextOverflow contextOverflow = ContextOverflow::DropOldest;
  // The budget follows the machine's free memory from the start (EngineOptions::followFreeMemory;
  // `budget` is then only the floor's fallback). A machine whose memory cannot be read opens the
  // model with `budget` and says why in ModelInfo::followError.
  bool followFreeMemory = false;
};

class EngineWorker : public QObject {
  Q_OBJECT

 public:
  // `database` may be null (no statistics kept). The worker opens its own connection to it.
  EngineWorker(std::shared_ptr<ChatDatabase> database, std::shared_ptr<RuntimeHandle> runtime);
  ~EngineWorker() override;

  void requestStop();
  // Holds the streaming reply after the next token it emits until resumed (ChatController::
  // setGenerationPaused). requestStop ends a held reply.
  void setPaused(bool paused);
  // Cancels the open being done or queued. The caller clears the flag (clearCancel) before it
  // queues the next openModel, so a cancel that comes before the worker starts that open counts.
  void requestCancel() { cancel_.store(true); }
  void clearCancel() { cancel_.store(false); }

  // The store an HF directory converts to, under storesDir: its name plus a hash of its path.
  static QString storePathFor(const QString& hfDir, const QString& storesDir);

 public Q_SLOTS:
  void openModel(const zipmoe::app::OpenModelRequest& request);
  void generate(qint64 requestId, const QList<zipmoe::app::ChatTurn>& turns,
                const zipmoe::app::SamplingSettings& sampling);
  // Adds the activation statistics to the engine's per-user history (Engine::saveActivationHistory;
  // also done after every reply and on close).
  void saveStatistics();
  // Saves statistics, releases the model and this thread's database connection. Call before the
  // thread ends.
  void shutdown();
  // The app's "Local server" (LocalServer): serves the open model on loopback; while it runs, this
  // worker's replies go through the server's scheduler too. Answered by serverChanged.
  void startServer(int port);
  void stopServer();

 Q_SIGNALS:
  void loadProgress(const QString& stage, double fraction);  // fraction < 0: no measure of progress
  void modelReady(const zipmoe::app::ModelInfo& info);
  void modelFailed(const QString& error);
  void textArrived(qint64 requestId, const QString& text);
  void replyFinished(qint64 requestId, const zipmoe::app::ReplyStats& stats);
  void replyFailed(qint64 requestId, const QString& error);
  void serverChanged(bool running, const QString& url, const QString& key, const QString& error);

 private:
  void closeModel();
  QString ensureStore(const QString& path, const QString& storesDir);

  std::shared_ptr<ChatDatabase> database_;
  std::shared_ptr<RuntimeHandle> runtime_;
  std::unique_ptr<Engine> engine_;
  // The conversation on the engine, keeping its KV cache between replies: a new turn prefills only
  // its own tokens; a regenerated or edited one rolls back to where the conversation changed.
  std::unique_ptr<ChatSession> session_;
  // The local server: HTTP clients on the engine's generation core, which session_ shares.
  std::unique_ptr<LocalServer> server_;
  ModelInfo info_;
  // Waits while the reply is held (the generation thread, between tokens).
  void waitWhilePaused();
  // A database call of the worker's own (statistics, profiles): a failure is reported as a
  // notice and never fails the model or the reply — statistics are an optimisation.
  void tryDatabase(const char* what, const std::function<void(ChatDatabase&)>& call);

  std::atomic<bool> stop_{false};
  std::atomic<bool> cancel_{false};
  std::mutex pauseMutex_;
  std::condition_variable pauseCv_;
  bool paused_ = false;
  std::atomic<bool> pausedFlag_{false};  // paused_, for the engine's core to poll
};

}  // namespace zipmoe::app

Q_DECLARE_METATYPE(zipmoe::app::OpenModelRequest)
