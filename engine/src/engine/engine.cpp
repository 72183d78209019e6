// Engine (see zipmoe/engine.h).
#include "zipmoe/engine.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "serve/memory_split.h"
#include "zipmoe/hf/model_config.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

std::filesystem::path userCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "zipmoe";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "zipmoe";
  return std::filesystem::temp_directory_path() / "zipmoe";
}

}  // namespace

Engine::~Engine() {
  if (scheduler_) scheduler_->stop();  // its thread drives the model: it goes first
  stopWarm_ = true;
  if (warm_.joinable()) warm_.join();
  try {
    saveObservedCosts();
  } catch (const std::exception&) {
    // Best effort: a profile that cannot be written stays as it was.
  }
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
      const int context = config.maxPositionEmbeddings > 0 ? config.maxPositionEmbeddings : (1 << 30);
      const uint64_t total = options.serve.memoryBudget.resolve(0, e->store_->manifest().routedExpertBytes());
      const serve::MemorySplit split(total, serve::activationBytes(config, options.serve.maxStepTokens, context), 0,
                                     options.serve.expertFloorShare);
      runtimeOptions.budget = MemoryBudget::bytes(split.experts());
    }
    e->runtime_ = ExpertRuntime::open(e->store_, runtimeOptions, e->profile_);
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
