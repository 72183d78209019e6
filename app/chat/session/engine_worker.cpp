#include "engine_worker.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QThread>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <random>

#include "chat_database.h"
#include "zipmoe/chat_session.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/engine.h"
#include "zipmoe/base/error.h"
#include "zipmoe/model/generator.h"
#include "zipmoe/hf/model_family.h"
#include "zipmoe/format/store.h"

namespace zipmoe::app {

namespace {

std::filesystem::path toPath(const QString& s) { return std::filesystem::path(s.toStdString()); }

bool isStore(const QString& dir) { return QFileInfo::exists(dir + QStringLiteral("/manifest.json")); }
bool isHfModel(const QString& dir) { return QFileInfo::exists(dir + QStringLiteral("/config.json")); }

uint64_t sum(const std::array<uint64_t, 4>& a) { return a[0] + a[1] + a[2] + a[3]; }

FollowStatus followStatusOf(Engine& engine) {
  FollowStatus s;
  BudgetFollower* follower = engine.budgetFollower();
  if (!follower) return s;
  s.enabled = follower->enabled();
  s.reading = follower->lastReading();
  if (s.reading) s.marginBytes = follower->policy().margin(s.reading->totalBytes);
  s.lastMove = follower->lastMove();
  s.error = follower->lastError();
  return s;
}

}  // namespace

EngineWorker::EngineWorker(std::shared_ptr<ChatDatabase> database, std::shared_ptr<RuntimeHandle> runtime)
    : database_(std::move(database)), runtime_(std::move(runtime)) {}

EngineWorker::~EngineWorker() = default;

void EngineWorker::requestStop() {
  {
    std::lock_guard lock(pauseMutex_);
    stop_.store(true);
  }
  pauseCv_.notify_all();
}

void EngineWorker::setPaused(bool paused) {
  {
    std::lock_guard lock(pauseMutex_);
    paused_ = paused;
    pausedFlag_.store(paused);
  }
  pauseCv_.notify_all();
}

void EngineWorker::waitWhilePaused() {
  std::unique_lock lock(pauseMutex_);
  pauseCv_.wait(lock, [&] { return !paused_ || stop_.load(); });
}

void EngineWorker::tryDatabase(const char* what, const std::function<void(ChatDatabase&)>& call) {
  if (!database_) return;
  try {
    call(*database_);
  } catch (const std::exception& e) {
    Q_EMIT loadProgress(tr("Could not %1: %2").arg(tr(what), QString::fromUtf8(e.what())), -1.0);
  }
}

QString EngineWorker::storePathFor(const QString& hfDir, const QString& storesDir) {
  // The name changes when the checkpoint does (path, config and weight files' sizes and times), so a
  // replaced checkpoint is converted again instead of running on a stale store.
  QCryptographicHash hash(QCryptographicHash::Sha1);
  const QFileInfo dir(hfDir);
  hash.addData(dir.canonicalFilePath().toUtf8());
  const QStringList files = QDir(hfDir).entryList({QStringLiteral("*.json"), QStringLiteral("*.safetensors")},
                                                  QDir::Files, QDir::Name);
  for (const QString& f : files) {
    const QFileInfo fi(QDir(hfDir).filePath(f));
    hash.addData(QStringLiteral("%1:%2:%3;").arg(f).arg(fi.size()).arg(fi.lastModified().toMSecsSinceEpoch()).toUtf8());
  }
  return QDir(storesDir).filePath(dir.fileName() + QLatin1Char('-') +
                                  QString::fromLatin1(hash.result().toHex().left(12)));
}

QString EngineWorker::ensureStore(const QString& path, const QString& storesDir) {
  if (isStore(path)) return path;
  if (!isHfModel(path))
    throw Error("'" + path.toStdString() +
                "' is neither a Hugging Face model directory (no config.json) nor a ZipMoE store (no manifest.json)");
  const QString storePath = storePathFor(path, storesDir);
  if (isStore(storePath)) {
    try {
      Store::open(toPath(storePath));
      return storePath;
    } catch (const Error&) {
      // A damaged earlier conversion: convert again below.
    }
  }
  Q_EMIT loadProgress(tr("Converting %1 to a ZipMoE store…").arg(QFileInfo(path).fileName()), 0.0);
  QDir().mkpath(storesDir);
  ConvertOptions options;
  options.cancel = &cancel_;
  options.onProgress = [this](const ConvertProgress& p) {
    const double fraction = p.bytesTotal ? static_cast<double>(p.bytesDone) / static_cast<double>(p.bytesTotal) : -1.0;
    Q_EMIT loadProgress(tr("Converting: %1").arg(QString::fromStdString(p.currentTensor)), fraction);
  };
  try {
    convertCheckpoint(toPath(path), toPath(storePath), options);
  } catch (...) {
    QDir(storePath).removeRecursively();  // a cancelled or failed conversion leaves nothing behind
    throw;
  }
  return storePath;
}

void EngineWorker::openModel(const OpenModelRequest& request) {
  closeModel();
  try {
    const QString storePath = ensureStore(request.path, request.storesDir);
    Q_EMIT loadProgress(tr("Opening the model…"), -1.0);
    QString modelKey;
    int layers = 0, experts = 0;
    {
      const auto store = Store::open(toPath(storePath));
      modelKey = QString::fromLatin1(familyName(store->manifest().family)) + QLatin1Char(':') +
                 QString::fromStdString(storeIdentity(*store));
      layers = store->manifest().numLayers();
      experts = store->manifest().numExperts;
    }
    // A cost profile measured earlier on this machine for this store (kept in the database) saves
    // the few seconds of measuring again when the store's own copy is gone.
    const QString profilePath = storePath + QStringLiteral("/profile.json");
    if (!QFileInfo::exists(profilePath)) {
      tryDatabase(QT_TR_NOOP("read the saved cost profile"), [&](ChatDatabase& db) {
        if (const auto saved = db.loadProfile(modelKey)) {
          QFile f(profilePath);
          if (f.open(QIODevice::WriteOnly)) f.write(saved->toUtf8());
        }
      });
    }
    if (cancel_.load()) throw Cancelled("opening the model was cancelled");

    EngineOptions options;
    RuntimeOptions runtime;
    runtime.budget = request.budget.clamped();
    runtime.pools = request.pools;
    runtime.decompressWorkers = request.decompressWorkers;
    // The planner starts from the statistics of earlier runs, which the engine keeps per user for
    // every door (EngineOptions::persistHistory). Counts an earlier version of the app kept in its
    // database seed them once, while the engine has none yet.
    tryDatabase(QT_TR_NOOP("read the saved expert statistics"), [&](ChatDatabase& db) {
      if (const auto counts = db.loadActivationCounts(modelKey)) {
        if (counts->layers != layers || counts->experts != experts) {
          Q_EMIT loadProgress(tr("Ignoring saved expert statistics for %1 layers × %2 experts: the model has %3 × %4.")
                                  .arg(counts->layers).arg(counts->experts).arg(layers).arg(experts),
                              -1.0);
          return;
        }
        ActivationCounts c;
        c.layers = counts->layers;
        c.experts = counts->experts;
        c.counts.assign(counts->counts.begin(), counts->counts.end());
        c.steps.assign(counts->steps.begin(), counts->steps.end());
        runtime.history = std::move(c);
      }
    });
    options.runtime = runtime;
    QString followError;
    if (request.followFreeMemory) {
      // Following is an addition: a machine whose memory cannot be read opens the model with the
      // budget the user chose, and the page says why the switch is off.
      try {
        ProcMemorySource().read();
        options.followFreeMemory = FollowPolicy{};
      } catch (const Error& e) {
        followError = QString::fromUtf8(e.what());
      }
    }
    options.onStatus = [this](const std::string& status) { Q_EMIT loadProgress(QString::fromStdString(status), -1.0); };
    // EngineOptions' default warm start fills the pools while the user reads and types; the first prompt stops it.
    engine_ = Engine::open(toPath(storePath), options);
    auto rt = engine_->sharedRuntime();
    tryDatabase(QT_TR_NOOP("save the cost profile"), [&](ChatDatabase& db) {
      QFile profile(profilePath);
      if (profile.open(QIODevice::ReadOnly)) db.saveProfile(modelKey, QString::fromUtf8(profile.readAll()));
    });
    const uint64_t expertBytes = rt->expertBytes(), minimum = rt->minimumBudget();
    const uint64_t budget = rt->stats().budgetBytes;

    const ModelConfig& config = engine_->model().config();
    info_ = ModelInfo{};
    info_.name = QFileInfo(request.path).fileName();
    info_.sourcePath = request.path;
    info_.storePath = storePath;
    info_.modelKey = modelKey;
    info_.family = QString::fromLatin1(familyName(config.family));
    info_.layers = config.numMoeLayers();
    info_.experts = config.numExperts;
    info_.expertsPerToken = config.numExpertsPerTok;
    info_.contextLength = config.maxPositionEmbeddings;
    info_.expertBytes = expertBytes;
    info_.minimumBudget = minimum;
    info_.budgetBytes = budget;
    info_.decompressWorkers = rt->lanes().workers;
    info_.pools = rt->options().pools;
    info_.computeDtype = engine_->model().computeDtype() == ComputeDtype::BFloat16 ? QStringLiteral("bf16")
                                                                                 : QStringLiteral("fp32");
    info_.loadSeconds = engine_->loadSeconds();
    info_.historyPath = QString::fromStdString(engine_->historyPath().string());
    info_.following = engine_->budgetFollower() && engine_->budgetFollower()->enabled();
    info_.followError = followError;
    session_ = std::make_unique<ChatSession>(*engine_, ChatSessionOptions{true, request.contextOverflow});
    Engine* engine = engine_.get();
    runtime_->setFollowControl({[engine](bool on) { engine->followFreeMemory(on); }, [engine] { return followStatusOf(*engine); },
                                [engine](const MemoryBudget& b) { return engine->setBudget(b); },
                                [engine] { return engine->budget(); }});
    runtime_->set(rt);
    Q_EMIT modelReady(info_);
  } catch (const Cancelled&) {
    closeModel();
    Q_EMIT modelFailed(tr("Cancelled."));
  } catch (const std::exception& e) {
    closeModel();
    Q_EMIT modelFailed(QString::fromUtf8(e.what()));
  }
}

void EngineWorker::generate(qint64 requestId, const QList<ChatTurn>& turns, const SamplingSettings& sampling) {
  stop_.store(false);
  if (!engine_ || !session_) {
    Q_EMIT replyFailed(requestId, tr("No model is open."));
    return;
  }
  try {
    // The conversation as the chat shows it; the session keeps its cache for whatever prefix of it
    // the model has already seen (the last reply, a regenerated or edited one's common start).
    std::string system;
    std::vector<ChatMessage> messages;
    for (const ChatTurn& t : turns) {
      if (t.role == QStringLiteral("system")) system = t.content.toStdString();
      else messages.push_back({t.role.toStdString(), t.content.toStdString()});
    }
    SamplingParams params;
    params.temperature = sampling.temperature;
    params.topK = sampling.topK;
    params.topP = sampling.topP;
    params.minP = sampling.minP;
    params.repetitionPenalty = sampling.repetitionPenalty;
    params.seed = sampling.seed ? sampling.seed : std::random_device{}();
    params.maxTokens = sampling.maxTokens;
    ExpertRuntime* rt = engine_->runtime();
    const RuntimeStats before = rt ? rt->stats() : RuntimeStats{};
    std::optional<RuntimeStats> atFirstToken;  // the prefill's end: what the decode steps are measured from
    const TextCallback onText = [&](std::string_view text) {
      if (rt && !atFirstToken) atFirstToken = rt->stats();
      Q_EMIT textArrived(requestId, QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size())));
      waitWhilePaused();
      return !stop_.load(std::memory_order_relaxed);
    };
    // Either mode, the same door: the session's turns go to the engine's generation core, which
    // the local server's HTTP clients share while it runs. The pause flag holds the reply in the
    // core too, so a held reply generates nothing meanwhile.
    session_->setSystemPrompt(std::move(system));
    session_->setMessages(std::move(messages));
    const GenerationStats g = session_->reply(params, onText, &stop_, &pausedFlag_);

    ReplyStats stats;
    stats.ttftMs = g.timeToFirstTokenMs;
    stats.tokensPerSecond = g.timePerOutputTokenMs > 0 ? 1000.0 / g.timePerOutputTokenMs : 0.0;
    stats.promptTokens = g.promptTokens;
    stats.reusedTokens = g.reusedTokens;
    stats.prefilledTokens = g.prefilledTokens;
    stats.generatedTokens = g.generatedTokens;
    stats.stopReason = QString::fromLatin1(stopReasonName(g.stopReason));
    stats.droppedTurns = g.droppedMessages;
    if (g.generatedTokens >= 2 && g.timePerOutputTokenMs > 0) stats.tpotMs = g.timePerOutputTokenMs;
    if (rt) {
      const RuntimeStats after = rt->stats();
      const uint64_t activations = after.activations - before.activations;
      if (activations > 0)
        stats.expertHitRate = static_cast<double>(sum(after.hits) - sum(before.hits)) / static_cast<double>(activations);
      // A budget moved while the reply streamed makes its TPOT a mix of two budgets: not a measurement of either.
      if (after.budgetBytes == before.budgetBytes) stats.budgetBytes = after.budgetBytes;
      if (atFirstToken) {
        // Decode: the runtime's time between expert batches per step, from the first token on (the
        // gap before the prefill may hold idle time, so the prefill is measured apart).
        const uint64_t steps = after.steps - atFirstToken->steps;
        if (steps > 0) stats.denseMsPerToken = (after.denseSeconds - atFirstToken->denseSeconds) * 1e3 / static_cast<double>(steps);
        // Prefill: its time to the first token less its expert batches.
        const double prefillExperts = (atFirstToken->measuredMakespan - before.measuredMakespan) * 1e3;
        if (g.prefilledTokens > 0 && g.timeToFirstTokenMs > prefillExperts)
          stats.densePrefillMsPerToken = (g.timeToFirstTokenMs - prefillExperts) / g.prefilledTokens;
      }
    }
    saveStatistics();  // before the signal: whoever reacts to it finds the statistics saved
    Q_EMIT replyFinished(requestId, stats);
  } catch (const std::exception& e) {
    Q_EMIT replyFailed(requestId, QString::fromUtf8(e.what()));
  }
}

void EngineWorker::startServer(int port) {
  if (server_) {
    Q_EMIT serverChanged(true, QString::fromStdString(server_->url()), QString::fromStdString(server_->apiKey()), {});
    return;
  }
  if (!engine_) {
    Q_EMIT serverChanged(false, {}, {}, tr("Open a model first: the local server serves the loaded model."));
    return;
  }
  try {
    server_ = std::make_unique<LocalServer>(*engine_, port, info_.name.isEmpty() ? std::string("zipmoe") : info_.name.toStdString());
    Q_EMIT serverChanged(true, QString::fromStdString(server_->url()), QString::fromStdString(server_->apiKey()), {});
  } catch (const std::exception& e) {
    server_.reset();
    Q_EMIT serverChanged(false, {}, {}, QString::fromUtf8(e.what()));
  }
}

void EngineWorker::stopServer() {
  server_.reset();
  Q_EMIT serverChanged(false, {}, {}, {});
}

void EngineWorker::saveStatistics() {
  if (!engine_ || !engine_->runtime()) return;
  // Statistics are an optimisation for the next start; a full disk must not end the chat.
  try {
    engine_->saveActivationHistory();
  } catch (const std::exception& e) {
    Q_EMIT loadProgress(tr("Could not save the expert statistics: %1").arg(QString::fromUtf8(e.what())), -1.0);
  }
}

void EngineWorker::closeModel() {
  if (!engine_) return;
  if (server_) stopServer();  // the server serves this model: it goes first
  saveStatistics();
  runtime_->setFollowControl({});  // waits for a GUI call into the engine to return
  runtime_->set(nullptr);
  session_.reset();
  engine_.reset();
}

void EngineWorker::shutdown() {
  closeModel();
  if (database_) database_->closeThreadConnection();
}

}  // namespace zipmoe::app
