// Engine — a model ready to chat: the forward pass, its tokenizer and chat template, and (for a
// ZipMoE store with a memory budget) the expert runtime that feeds it, with a measured cost profile.
//
// Engine::open loads an HF directory or a store. With `runtime` set (stores only) the routed experts
// come from an ExpertRuntime: ZipMoE or a full-tensor baseline, under the given budget; the cost
// profile is read from `profilePath` (default STORE/profile.json) when it belongs to this machine
// and store, and otherwise measured (I/O, decompression, recovery and the expert FFN) and saved
// there (or beside, if the store is read-only, in the user's cache directory). With `replayTrace`
// set, every MoE layer's routing is forced from a real activation trace (TraceRouting). The budget
// is moved on the runtime (ExpertRuntime::setBudget): it replans off the critical path while
// generation goes on.
// The runtime plans from the activation statistics of every earlier run on the store (persistHistory,
// on by default: kept per user, shared by the CLI, the app and `zipmoe serve`), and this run's
// counts are added to them when the engine closes.
// With `warmStart` (the default) the runtime's pools are filled on a background thread once the
// model has loaded (ExpertRuntime::warmUp): the first prompt finds the experts its history ranks
// highest in memory, and that prompt's first layer stops the fill (it waits at most for one layer's
// batch).
// With `followFreeMemory` (`--budget auto`) the budget follows the machine's free memory
// (BudgetFollower, zipmoe/plan/memory_follower.h): it opens at what is available above a margin and
// moves, replanning live, as other programs take and give back memory.
// Every door generates through the engine's one generation core, scheduler(): a ServeScheduler
// whose thread owns the model from its first use on (ChatSession posts its turns there, `zipmoe
// serve` and the app's local server their HTTP requests), so the same conversation is rendered,
// fitted to the context, sampled and stopped by the same code whichever door it comes through.
// Thread-safety: once the core runs, only its thread drives the model (model() may still be read:
// its config, or its counters between replies); runtime()->setBudget, stats() and drainTrace may be
// called from any thread. Cost: loading reads the dense weights; profiling takes a few seconds.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "zipmoe/trace/activation_trace.h"
#include "zipmoe/text/chat_template.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/model/model.h"
#include "zipmoe/plan/memory_follower.h"
#include "zipmoe/trace/request_routing.h"
#include "zipmoe/serve/serve_scheduler.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe {

struct EngineOptions {
  ModelOptions model;                     // dtype, threads (its `experts` and `routing` are set here)
  std::optional<RuntimeOptions> runtime;  // none = every expert resident
  std::filesystem::path profilePath;      // default: STORE/profile.json
  int profileSamples = 24;
  std::filesystem::path replayTrace;      // ../shared/data/traces/*.tsv; empty = the model's router
  int replayPrompt = 0;
  uint64_t replaySeed = 1;
  // With replayTrace: each served request replays its own prompt (RequestTraceRouting, for the
  // serving scheduler: ServeOptions::routing = requestRouting()) instead of every token replayPrompt.
  bool replayPerRequest = false;
  std::function<void(const std::string&)> onStatus;  // "measuring cost profile…" etc.
  // With `runtime`: fill its pools in the background until the first prompt (see above).
  bool warmStart = true;
  // With `runtime`: plan from the statistics earlier runs kept (they take the place of
  // RuntimeOptions::history, which seeds them when there are none yet) and add this run's to them
  // at close. `historyPath` empty: the per-user place (history::defaultPath). Off (`--no-history`):
  // RuntimeOptions::history or the prior, and nothing is saved.
  bool persistHistory = true;
  std::filesystem::path historyPath;
  // With `runtime`: the budget follows free memory from the start (its floor and ceiling are set
  // from the runtime; RuntimeOptions::budget is ignored). `memorySource` null: /proc.
  std::optional<FollowPolicy> followFreeMemory;
  std::shared_ptr<MemorySource> memorySource;
  std::chrono::milliseconds followInterval{250};
  // Wraps the routed-expert provider before the model loads (e.g. DistributedExperts, which has some
  // experts computed on other machines). Given the local provider — the runtime, or null when every
  // expert is resident (the hook then loads what it needs from `dir`) — it returns the model's.
  std::function<std::shared_ptr<ExpertProvider>(std::shared_ptr<ExpertProvider> local, const std::filesystem::path& dir)>
      wrapExperts;
  // The generation core's options (scheduler()): `zipmoe serve` gives its batch, policy and memory
  // budget here. With a memory budget and `runtime`, the runtime opens with the experts' part of it.
  ServeOptions serve = ServeOptions::interactive();
};

// Measures the store's I/O / decompression / recovery costs (measureCostProfile) and the expert FFN
// time a + b·tokens with libtorch in `dtype` (the compute the model will run), on this machine.
CostProfile profileStore(const Store& store, ReadMode mode, ComputeDtype dtype, int threads, int samples = 24);

class Engine {
 public:
  static std::unique_ptr<Engine> open(const std::filesystem::path& modelDir, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  MoeModel& model() { return *model_; }
  Tokenizer& tokenizer() { return *tokenizer_; }
  const ChatTemplate* chatTemplate() const { return chatTemplate_ ? &*chatTemplate_ : nullptr; }
  ExpertRuntime* runtime() { return runtime_.get(); }  // null when all experts are resident
  // The same, shareable with threads that read stats or move the budget (the app's GUI thread).
  std::shared_ptr<ExpertRuntime> sharedRuntime() const { return runtime_; }
  TraceRouting* traceRouting() { return traceRouting_.get(); }  // null with replayPerRequest
  std::shared_ptr<RequestTraceRouting> requestRouting() const { return requestRouting_; }
  const CostProfile& profile() const { return profile_; }
  std::shared_ptr<const Store> store() const { return store_; }
  double loadSeconds() const { return loadSeconds_; }
  // The engine's generation core, started on first use with EngineOptions::serve. From any thread.
  // Throws zipmoe::Error for options ServeScheduler refuses.
  ServeScheduler& scheduler();
  ServeScheduler* runningScheduler();  // null until the core has started
  // Writes the operation costs the runtime observed (RuntimeStats::observed) into the cost profile
  // it was opened with, so that the next Engine on this machine and store plans with them from its
  // first token. No-op without a runtime or observations. Throws zipmoe::Error when the file cannot
  // be written. The destructor calls it and ignores a failure (the profile stays as it was: it is
  // replaced atomically).
  void saveObservedCosts();
  // The background warm start (EngineOptions::warmStart): blocks until it has ended and returns what
  // it did; std::nullopt when none was started. Throws zipmoe::Error with the warm start's failure
  // (an unreadable store: the first prompt would fail the same way).
  std::optional<WarmUpResult> waitForWarmUp();
  // Adds this run's activation counts since the last save (or the open) to the persisted history
  // (persistHistory), so it may be called after every reply. The destructor calls it and ignores a
  // failure. Throws zipmoe::Error naming the file it could not write. From any thread.
  void saveActivationHistory();
  const std::filesystem::path& historyPath() const { return historyPath_; }  // empty: not persisted
  // Following free memory: on creates the follower (EngineOptions' policy, or the defaults) and
  // starts it, or enables it again; off keeps the budget where it is (a move being applied when it
  // is called has been applied when it returns). No-op without a runtime.
  // Throws zipmoe::Error when the machine's memory cannot be read. From any thread.
  void followFreeMemory(bool on);
  BudgetFollower* budgetFollower();  // null until following was asked for
  // The user's budget (the app's slider, the follower's moves): the expert runtime's, or, while
  // serving within the budget, the whole memory the generation core splits between the experts,
  // the KV caches and the activations (below what that split needs, it becomes that minimum).
  // Returns the bytes in effect. Throws zipmoe::Error as ExpertRuntime::setBudget and
  // ServeScheduler::setMemoryBudget do, changing nothing. 0 without a runtime. From any thread.
  uint64_t setBudget(const MemoryBudget& budget);
  uint64_t budget() const;  // the user's budget in bytes, as above (0 without a runtime)
  // Serving within the budget (the app's local server): on, what every request holds — its KV
  // cache, the forward's activations — counts inside the user's budget and the experts get the rest
  // (ServeScheduler::setMemoryBudget, with `zipmoe serve`'s step sizes, halved while a step's
  // activations would take more than half of what the budget leaves beside the experts' minimum:
  // prompts are prefilled in chunks), so HTTP clients cannot take memory beyond it; off, the experts get the whole budget
  // back and a prompt is prefilled in one forward again. Waits for the generation core's next step
  // boundary. Throws zipmoe::Error, changing nothing, when the budget cannot hold the activations
  // and the runtime's minimum. No-op without a runtime. From any thread.
  void serveWithinBudget(bool on);
  bool servingWithinBudget() const;

 private:
  Engine() = default;
  std::shared_ptr<const Store> store_;
  std::shared_ptr<ExpertRuntime> runtime_;
  std::shared_ptr<TraceRouting> traceRouting_;
  std::shared_ptr<RequestTraceRouting> requestRouting_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chatTemplate_;
  std::unique_ptr<MoeModel> model_;
  ServeOptions serveOptions_;
  std::mutex schedulerMutex_;
  std::unique_ptr<ServeScheduler> scheduler_;  // declared after the model: destroyed before it
  CostProfile profile_;
  std::filesystem::path profilePath_;  // where profile_ was loaded from or saved to
  double loadSeconds_ = 0;
  // The warm start's thread and its outcome (set by it before it ends; read after join).
  std::atomic<bool> stopWarm_{false};
  std::thread warm_;
  std::optional<WarmUpResult> warmResult_;
  std::string warmError_;
  // Persisted activation statistics: where, for which store, and what the runtime started with.
  std::filesystem::path historyPath_;
  std::string storeIdentity_;
  std::mutex historyMutex_;
  std::optional<ActivationCounts> historyAtOpen_;  // what the file has of this run's counts
  // Declared after the runtime: stopped before it goes.
  std::mutex followerMutex_;
  FollowPolicy followPolicy_;
  std::shared_ptr<MemorySource> memorySource_;
  std::chrono::milliseconds followInterval_{250};
  std::unique_ptr<BudgetFollower> follower_;
  // serveWithinBudget: the whole budget while on (setBudget moves it on the generation core).
  mutable std::mutex budgetMutex_;
  std::optional<uint64_t> wholeBudget_;
  ServeScheduler::MemoryLimit withinBudget(uint64_t total) const;
};

}  // namespace zipmoe
