// Values that cross from the engine worker's thread to the GUI thread in queued signals: a chat turn,
// the sampling settings of a chat, a reply's statistics and what a loaded model is. Plain copyable
// values with Qt types; registered with the meta-object system so queued connections can carry them.
// Thread-safety: values. Cost: copies.
#pragma once

#include <QList>
#include <QMetaType>
#include <QString>

namespace zipmoe::app {

struct ChatTurn {
  QString role;  // "system", "user", "assistant"
  QString content;
};

// Per chat; stored in the database as JSON (toJson/fromJson).
struct SamplingSettings {
  double temperature = 0.8;
  int topK = 40;
  double topP = 1.0;
  double minP = 0.0;
  double repetitionPenalty = 1.0;
  int maxTokens = 200;
  quint64 seed = 0;  // 0 = a new seed for every reply

  QString toJson() const;
  // Missing fields keep their defaults; a field of the wrong type or out of range is replaced by the
  // default and named in *problem (stored settings from an older or edited database never crash).
  static SamplingSettings fromJson(const QString& json, QString* problem = nullptr);
};

struct ReplyStats {
  double ttftMs = 0;
  double tokensPerSecond = 0;
  int promptTokens = 0;
  int generatedTokens = 0;
  double expertHitRate = -1;  // share of this reply's expert activations served from a pool; -1 = no runtime
  QString stopReason;         // the engine's: eos, stop_string, max_tokens, context_window, stopped
  int droppedTurns = 0;       // oldest turns left out so the conversation fits the context window
  int reusedTokens = 0;       // prompt tokens the engine's cache already held (ChatSession)
  int prefilledTokens = 0;    // prompt tokens run through the model for this reply
  double tpotMs = -1;         // measured time per output token (-1: fewer than two tokens)
  quint64 budgetBytes = 0;    // the memory budget the reply ran under; 0 = no runtime, or it moved meanwhile
  // The model outside the expert batches (attention, router, shared experts, sampling): per decode
  // step, and per prompt token during prefill; -1 = not measured. The budget advisor adds these to
  // the planner's expert path.
  double denseMsPerToken = -1;
  double densePrefillMsPerToken = -1;
};

struct ModelInfo {
  QString name;       // directory name
  QString sourcePath; // what the user opened (HF directory or store)
  QString storePath;  // the store the engine runs on (converted if needed)
  QString modelKey;   // identity for the database: family + manifest checksum
  QString family;
  int layers = 0, experts = 0, expertsPerToken = 0, contextLength = 0;
  quint64 expertBytes = 0, minimumBudget = 0, budgetBytes = 0;
  int decompressWorkers = 0;
  unsigned pools = 0xF;
  QString computeDtype;
  double loadSeconds = 0;
  QString historyPath;  // the engine's activation statistics for this store (empty: not kept)
  bool following = false;  // the budget follows free memory (OpenModelRequest::followFreeMemory)
  QString followError;  // why following was asked for and is off (the machine's memory unreadable)
};

}  // namespace zipmoe::app

Q_DECLARE_METATYPE(zipmoe::app::ChatTurn)
Q_DECLARE_METATYPE(zipmoe::app::ReplyStats)
Q_DECLARE_METATYPE(zipmoe::app::ModelInfo)
Q_DECLARE_METATYPE(zipmoe::app::SamplingSettings)
