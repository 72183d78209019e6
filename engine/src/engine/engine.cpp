// Engine (see zipmoe/engine.h).
#include "zipmoe/engine.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "experts/activation_history.h"
#include "io/file_io.h"
#include "serve/memory_split.h"
#include "zipmoe/hf/model_config.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

int contextOf(const ModelConfig& c) { return c.maxPositionEmbeddings > 0 ? c.maxPositionEmbeddings : (1 << 30); }

std::filesystem::path userCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "zipmoe";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "zipmoe";
  return std::filesystem::temp_directory_path() / "zipmoe";
}

}  // namespace

Engine::~Engine() {
  {
    std::lock_guard lock(followerMutex_);
    if (follower_) follower_->stop();  // it moves the runtime's budget
  }
  if (scheduler_) scheduler_->stop();  // its thread drives the model: it goes first
  stopWarm_ = true;
  if (warm_.joinable()) warm_.join();
  try {
    saveObservedCosts();
  } catch (const std::exception&) {
    // Best effort: a profile that cannot be written stays as it was.
  }
  try {
    saveActivationHistory();
  } catch (const std::exception&) {
    // Best effort: the statistics are an optimisation for the next run.
  }
}

void Engine::saveActivationHistory() {
  if (!runtime_ || historyPath_.empty()) return;
  std::lock_guard lock(historyMutex_);
  ActivationCounts now = runtime_->activationCounts();
  history::save(historyPath_, storeIdentity_, now, historyAtOpen_);
  historyAtOpen_ = std::move(now);  // saved: the next save adds only what comes after
}

void Engine::followFreeMemory(bool on) {
  if (!runtime_) return;
  std::lock_guard lock(followerMutex_);
  if (follower_) {
    if (on) follower_->budgetMovedTo(budget());
    follower_->setEnabled(on);
    return;
  }
  if (!on) return;
  FollowPolicy policy = followPolicy_;
  policy.floorBytes = runtime_->minimumBudget();
  const uint64_t all = runtime_->minimumBudget() + runtime_->expertBytes();
  policy.ceilingBytes = policy.ceilingBytes > 0 ? std::clamp(policy.ceilingBytes, policy.floorBytes, all) : all;
  if (!memorySource_) memorySource_ = std::make_shared<ProcMemorySource>();
  const uint64_t start = BudgetFollower::initialBudget(memorySource_->read(), policy);
  std::shared_ptr<ExpertRuntime> rt = runtime_;
  const uint64_t resolved = setBudget(MemoryBudget::bytes(start).clamped());
  // The follower stops before the engine goes (the destructor), so its moves may come back here.
  follower_ = std::make_unique<BudgetFollower>(
      memorySource_, policy, resolved, [this](uint64_t bytes) { return setBudget(MemoryBudget::bytes(bytes).clamped()); },
      [rt] { return rt->stats().heldBytes; });
  follower_->start(followInterval_);
}

uint64_t Engine::budget() const {
  if (!runtime_) return 0;
  std::lock_guard lock(budgetMutex_);
  return wholeBudget_ ? *wholeBudget_ : runtime_->stats().budgetBytes;
}

ServeScheduler::MemoryLimit Engine::withinBudget(uint64_t total) const {
  // zipmoe serve's step sizes (a prompt whole in one forward would need activations for all its
  // tokens, which no budget near the experts' can hold), halved while such a step's activations
  // would take more than half of what the budget leaves beside the experts' minimum, down to twice
  // the batch: a small budget keeps its room for experts and KV rather than for one large step.
  const ServeOptions defaults;
  const ModelConfig& c = model_->config();
  const int batch = serveOptions_.maxBatch;
  ServeScheduler::MemoryLimit limit{total, std::max(defaults.maxStepTokens, batch + 1), defaults.prefillChunk};
  const uint64_t room = total > runtime_->minimumBudget() ? total - runtime_->minimumBudget() : 0;
  while (limit.maxStepTokens / 2 > batch &&
         serve::servingActivationBytes(c, limit.maxStepTokens, batch, contextOf(c), total, serveOptions_.expertFloorShare) >
             room / 2) {
    limit.maxStepTokens /= 2;
    limit.prefillChunk = std::max(1, limit.prefillChunk / 2);
  }
  return limit;
}

uint64_t Engine::setBudget(const MemoryBudget& budget) {
  if (!runtime_) return 0;
  std::lock_guard lock(budgetMutex_);
  if (!wholeBudget_) return runtime_->setBudget(budget);
  // Below what the split needs, the budget becomes that minimum: the slider's and the follower's
  // range is the runtime's, which leaves no room for the KV caches and activations.
  const ModelConfig& c = model_->config();
  const uint64_t total =
      std::max(budget.resolve(0, runtime_->expertBytes()),
               serve::minimumServingBudget(c, withinBudget(0).maxStepTokens, serveOptions_.maxBatch, contextOf(c),
                                           runtime_->minimumBudget(), serveOptions_.expertFloorShare));
  scheduler().setMemoryBudget(withinBudget(total));
  wholeBudget_ = total;
  return total;
}

void Engine::serveWithinBudget(bool on) {
  if (!runtime_) return;
  std::lock_guard lock(budgetMutex_);
  if (on == wholeBudget_.has_value()) return;
  if (on) {
    const uint64_t total = runtime_->stats().budgetBytes;
    scheduler().setMemoryBudget(withinBudget(total));
    wholeBudget_ = total;
  } else {
    scheduler().setMemoryBudget(std::nullopt);  // the experts get the whole budget back
    wholeBudget_.reset();
  }
}

bool Engine::servingWithinBudget() const {
  std::lock_guard lock(budgetMutex_);
  return wholeBudget_.has_value();
}

BudgetFollower* Engine::budgetFollower() {
  std::lock_guard lock(followerMutex_);
  return follower_.get();
}

ServeScheduler& Engine::scheduler() {
  std::lock_guard lock(schedulerMutex_);
  if (!scheduler_)
    scheduler_ = std::make_unique<ServeScheduler>(*model_, *tokenizer_, chatTemplate(), runtime_.get(), serveOptions_);
  return *scheduler_;
}

ServeScheduler* Engine::runningScheduler() {
  std::lock_guard lock(schedulerMutex_);
  return scheduler_.get();
}

std::optional<WarmUpResult> Engine::waitForWarmUp() {
  if (warm_.joinable()) warm_.join();
  if (!warmError_.empty()) throw Error("warm start: " + warmError_);
  return warmResult_;
}

void Engine::saveObservedCosts() {
  if (!runtime_ || profilePath_.empty()) return;
  const ObservedCosts observed = runtime_->stats().observed;
  if (!observed.any()) return;
  CostProfile p = profile_;
  p.observed = observed;
  saveCostProfile(p, profilePath_);
}

std::unique_ptr<Engine> Engine::open(const std::filesystem::path& dir, const EngineOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto status = [&](const std::string& s) {
    if (options.onStatus) options.onStatus(s);
  };
  if (!std::filesystem::is_directory(dir))
    throw Error(dir.string() + " is not a directory (expected an HF model or a ZipMoE store)");
  const auto tokenizerJson = dir / "tokenizer.json";
  if (!std::filesystem::exists(tokenizerJson))
    throw Error(dir.string() + " has no tokenizer.json (needed to encode prompts and decode replies)");
  std::unique_ptr<Engine> e(new Engine());
  e->tokenizer_ = Tokenizer::fromFile(tokenizerJson);
  const auto configJson = dir / "tokenizer_config.json";
  if (ChatTemplate::hasChatTemplate(configJson)) e->chatTemplate_ = ChatTemplate::fromTokenizerConfig(configJson);
  ModelOptions modelOptions = options.model;
  const bool isStore = std::filesystem::exists(dir / "manifest.json");
  if (options.runtime) {
    if (!isStore)
      throw Error(dir.string() + " is an HF directory; a memory budget needs a ZipMoE store (run `zipmoe convert " +
                  dir.string() + " STORE` first)");
    e->store_ = std::shared_ptr<const Store>(Store::open(dir).release());
    const ReadMode mode = options.runtime->readMode;
    std::filesystem::path profilePath = options.profilePath.empty() ? dir / "profile.json" : options.profilePath;
    std::string whyNot;
    std::optional<CostProfile> profile = loadMatchingProfile(profilePath, *e->store_, mode, &whyNot);
    if (profile) e->profilePath_ = profilePath;
    if (!profile && !whyNot.empty()) {
      if (!options.profilePath.empty()) throw Error(whyNot);  // an explicitly named profile must fit
      status("re-measuring costs: " + whyNot);
    }
    if (!profile) {
      const auto cached = userCacheDir() / "profiles" / (std::to_string(std::hash<std::string>{}(
                                                             std::filesystem::absolute(dir).string() +
                                                             (mode == ReadMode::Direct ? "direct" : "buffered"))) +
                                                         ".json");
      if (options.profilePath.empty()) profile = loadMatchingProfile(cached, *e->store_, mode);
      if (profile) e->profilePath_ = cached;
      if (!profile) {
        status("measuring this machine's cost profile on " + dir.string() + "…");
        profile = profileStore(*e->store_, mode, modelOptions.dtype, modelOptions.threads, options.profileSamples);
        const bool writable = ::access(profilePath.parent_path().c_str(), W_OK) == 0;
        const auto target = writable || !options.profilePath.empty() ? profilePath : cached;
        std::filesystem::create_directories(target.parent_path());
        saveCostProfile(*profile, target);
        e->profilePath_ = target;
      }
    }
    e->profile_ = *profile;
    RuntimeOptions runtimeOptions = *options.runtime;
    if (options.serve.memoryBudget.isSet()) {
      // Serving's budget holds the experts, the KV cache and the activations: the runtime starts with
      // what the split leaves the experts before any request (all but the activations' reserve), so
      // the model is planned once here, not again when the core starts.
      const ModelConfig config = parseModelConfig(*e->store_->manifest().config, (dir / "manifest.json").string());
      const int context = contextOf(config);
      const uint64_t total = options.serve.memoryBudget.resolve(0, e->store_->manifest().routedExpertBytes());
      const serve::MemorySplit split(total,
                                     serve::servingActivationBytes(config, options.serve.maxStepTokens,
                                                                   options.serve.maxBatch, context, total,
                                                                   options.serve.expertFloorShare),
                                     0, options.serve.expertFloorShare);
      // Clamped: experts' part below the runtime's minimum (not known before it opens) opens it at
      // that minimum, and the core's split then refuses the budget naming the activations and
      // --step-tokens, rather than the runtime naming a budget the user never gave.
      runtimeOptions.budget = MemoryBudget::bytes(split.experts()).clamped();
    }
    if (options.persistHistory) {
      e->storeIdentity_ = storeIdentity(*e->store_);
      e->historyPath_ = options.historyPath.empty() ? history::defaultPath(*e->store_) : options.historyPath;
      const Manifest& m = e->store_->manifest();
      history::Loaded kept = history::load(e->historyPath_, e->storeIdentity_, m.numLayers(), m.numExperts);
      if (!kept.note.empty()) status("activation history not used: " + kept.note);
      if (kept.counts) runtimeOptions.history = std::move(kept.counts);
      e->historyAtOpen_ = runtimeOptions.history;
    }
    if (options.followFreeMemory) {
      // Opened at its minimum; followFreeMemory moves it to what the machine has free at once.
      runtimeOptions.budget = MemoryBudget::bytes(1).clamped();
      e->followPolicy_ = *options.followFreeMemory;
    }
    e->memorySource_ = options.memorySource;
    e->followInterval_ = options.followInterval;
    e->runtime_ = ExpertRuntime::open(e->store_, runtimeOptions, e->profile_);
    if (options.followFreeMemory) e->followFreeMemory(true);
    modelOptions.experts = e->runtime_;
  }
  status("loading " + dir.string() + "…");
  if (!options.replayTrace.empty()) {
    // The model's shape comes from its config; the trace routing needs it before the model loads.
    const auto trace = ActivationTrace::load(options.replayTrace);
    std::shared_ptr<const Store> store = e->store_;
    if (isStore && !store) store = std::shared_ptr<const Store>(Store::open(dir).release());
    const nlohmann::json json = store ? *store->manifest().config
                                      : nlohmann::json::parse(io::readTextFile(dir / "config.json"), nullptr, false);
    const ModelConfig config = parseModelConfig(json, (dir / "config.json").string());
    if (options.replayPerRequest) {
      e->requestRouting_ = std::make_shared<RequestTraceRouting>(trace, config.numMoeLayers(), config.numExperts,
                                                                 config.numExpertsPerTok, options.replaySeed);
      modelOptions.routing = e->requestRouting_;
    } else {
      e->traceRouting_ = std::make_shared<TraceRouting>(trace, config.numMoeLayers(), config.numExperts,
                                                        config.numExpertsPerTok, options.replaySeed);
      e->traceRouting_->setPrompt(options.replayPrompt);
      modelOptions.routing = e->traceRouting_;
    }
  }
  if (options.wrapExperts) modelOptions.experts = options.wrapExperts(modelOptions.experts, dir);
  e->model_ = MoeModel::load(dir, modelOptions);
  e->serveOptions_ = options.serve;
  if (!e->serveOptions_.routing) e->serveOptions_.routing = e->requestRouting_;  // each request its trace prompt
  e->loadSeconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.warmStart && e->runtime_) {
    Engine* engine = e.get();
    engine->warm_ = std::thread([engine] {
      try {
        engine->warmResult_ = engine->runtime_->warmUp(&engine->stopWarm_);
      } catch (const std::exception& ex) {
        engine->warmError_ = ex.what();
      }
    });
  }
  return e;
}

}  // namespace zipmoe
