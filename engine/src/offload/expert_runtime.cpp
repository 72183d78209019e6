// ExpertRuntime: the ZipMoE runtime and the full-tensor baselines (see zipmoe/expert_runtime.h).
//
// Plans are computed on a background thread and applied as soon as they are ready (capacities;
// shrinking evicts every unpinned expert at once). Per acquire (model thread): count the activations, dispatch each requested expert by rank, decide which parts the cache will
// keep (making room by the eviction policy), build the tensors' DAGs, order them (Algorithm 1 or
// FIFO) and hand the job to the executor. When the batch ends, kept parts are committed to the pools
// and the layer's measured makespan, lower bound and predicted makespan are added to the stats.
#include "zipmoe/expert_runtime.h"

#include <fcntl.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include <nlohmann/json.hpp>

#include "cache/expert_cache.h"
#include "io/file_io.h"
#include "plan/planner.h"
#include "sched/executor.h"
#include "sched/schedule.h"
#include "zipmoe/error.h"
#include "zipmoe/safetensors.h"

namespace zipmoe {

const char* evictionPolicyName(EvictionPolicy p) {
  switch (p) {
    case EvictionPolicy::LeastFrequent: return "zipmoe";
    case EvictionPolicy::Lru: return "lru";
    case EvictionPolicy::Fifo: return "fifo";
    case EvictionPolicy::Lfu: return "lfu";
    case EvictionPolicy::Marking: return "marking";
  }
  return "?";
}

EvictionPolicy parseEvictionPolicy(const std::string& text) {
  if (text == "zipmoe" || text == "lfreq") return EvictionPolicy::LeastFrequent;
  if (text == "lru") return EvictionPolicy::Lru;
  if (text == "fifo") return EvictionPolicy::Fifo;
  if (text == "lfu") return EvictionPolicy::Lfu;
  if (text == "marking") return EvictionPolicy::Marking;
  throw Error("unknown eviction policy '" + text + "' (expected zipmoe, lru, fifo, lfu or marking)");
}

namespace {

using sched::Clock;
using cache::TensorParts;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB (%llu bytes)", static_cast<double>(bytes) / (1024.0 * 1024.0),
                static_cast<unsigned long long>(bytes));
  return buf;
}

// Rescales f (non-increasing, each ≤ 1) so that Σ f = k, keeping every value ≤ 1.
std::vector<double> normaliseFrequencies(std::vector<double> f, int k) {
  for (int round = 0; round < 64; ++round) {
    double fixed = 0, free = 0;
    for (double x : f) (x >= 1.0 ? fixed : free) += std::min(x, 1.0);
    if (free <= 0) break;
    const double scale = (k - fixed) / free;
    bool capped = false;
    for (double& x : f)
      if (x < 1.0) {
        x *= scale;
        if (x > 1.0) {
          x = 1.0;
          capped = true;
        }
      }
    if (!capped) break;
  }
  return f;
}

struct Plan {
  std::vector<plan::LayerPlan> layers;
  uint64_t budget = 0;
  unsigned pools = 0;
  double seconds = 0;
};

class Runtime final : public ExpertRuntime {
 public:
  Runtime(std::shared_ptr<const Store> store, const RuntimeOptions& options, const CostProfile& profile)
      : store_(std::move(store)), options_(options), profile_(profile), epoch_(Clock::now()) {
    const Manifest& m = store_->manifest();
    layers_ = m.numLayers();
    experts_ = m.numExperts;
    kinds_ = m.numKinds();
    K_ = m.shards;
    topK_ = static_cast<int>(m.config->value("num_experts_per_tok", 1));
    if (options_.mode == OffloadMode::FullTensor && options_.eviction == EvictionPolicy::LeastFrequent)
      options_.eviction = EvictionPolicy::Lru;
    if (options_.decompressWorkers <= 0)
      options_.decompressWorkers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    if (options_.outputSlots < 1) throw Error("expert runtime: outputSlots must be at least 1");
    if (options_.stagingSlots < 1) throw Error("expert runtime: stagingSlots must be at least 1");
    if (options_.tolerance < 0) throw Error("expert runtime: tolerance δ must be ≥ 0");
    if (options_.pools == 0 || options_.pools > 0xF)
      throw Error("expert runtime: the pool subset must enable at least one of F, C, S, E");
    for (int kind = 0; kind < kinds_; ++kind) {
      const auto& shape = m.expert(0, 0, kind).shape;
      if (shape.size() != 2) throw Error(store_->dir().string() + ": expert tensors must be 2-D");
      shapes_.emplace_back(shape[0], shape[1]);
    }
    if (options_.traceCapacity > 0) trace_ = std::make_unique<TraceBuffer>(options_.traceCapacity);
    measureSizes();
    if (options_.mode == OffloadMode::FullTensor) openCheckpoint();

    sched::SlotLayout staging, output;
    if (options_.mode == OffloadMode::ZipMoE) {
      staging.count = options_.stagingSlots;
      for (int kind = 0; kind < kinds_; ++kind) {
        staging.eOffset.push_back(staging.slotBytes);
        staging.slotBytes += maxEBytes_[static_cast<size_t>(kind)];
        staging.smOffset.push_back(staging.slotBytes);
        staging.slotBytes += io::alignUp(numel(kind), kChunkAlignment);
        staging.planeOffset.push_back(staging.slotBytes);
        staging.slotBytes += io::alignUp(numel(kind), kChunkAlignment);
      }
      for (int kind = 0; kind < kinds_; ++kind) {
        output.outOffset.push_back(output.slotBytes);
        output.slotBytes += io::alignUp(numel(kind) * 2, 64);
      }
    } else {
      for (int kind = 0; kind < kinds_; ++kind) {
        output.outOffset.push_back(output.slotBytes);
        output.slotBytes += maxFullReadBytes_[static_cast<size_t>(kind)];
      }
    }
    output.count = options_.outputSlots;
    workingSet_ = static_cast<uint64_t>(staging.count) * staging.slotBytes +
                  static_cast<uint64_t>(output.count) * output.slotBytes;
    checkBudget(options_.budgetBytes);
    cache_ = std::make_unique<cache::ExpertCache>(layers_, experts_, options_.eviction,
                                                  options_.mode == OffloadMode::FullTensor);
    applyPlan(computePlan(options_.budgetBytes, options_.pools, cache_->activationCounts()));
    executor_ = std::make_unique<sched::Executor>(
        store_.get(), options_.mode == OffloadMode::ZipMoE ? options_.decompressWorkers : 0, options_.readMode,
        trace_.get(), epoch_, staging, output);
    planner_ = std::thread([this] { plannerLoop(); });
  }

  ~Runtime() override {
    {
      std::lock_guard lock(planMutex_);
      stopping_ = true;
    }
    planCv_.notify_all();
    planner_.join();
    executor_.reset();
  }

  // ExpertProvider ------------------------------------------------------------------------------
  int numLayers() const override { return layers_; }
  int numExperts() const override { return experts_; }
  std::pair<int64_t, int64_t> tensorShape(int kind) const override { return shapes_.at(static_cast<size_t>(kind)); }

  std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) override {
    if (layer < 0 || layer >= layers_)
      throw Error("expert runtime: MoE layer " + std::to_string(layer) + " out of range (0.." +
                  std::to_string(layers_ - 1) + ")");
    std::vector<char> seen(static_cast<size_t>(experts_), 0);
    for (const ExpertRequest& r : requests) {
      if (r.expert < 0 || r.expert >= experts_)
        throw Error("expert runtime: expert " + std::to_string(r.expert) + " out of range (0.." +
                    std::to_string(experts_ - 1) + ")");
      if (seen[static_cast<size_t>(r.expert)]++) throw Error("expert runtime: expert " + std::to_string(r.expert) + " requested twice");
    }
    const auto now = Clock::now();
    std::lock_guard lock(cacheMutex_);
    if (layer == 0 && started_) ++token_;
    started_ = true;
    if (lastBatchEnd_ && trace_) {
      TraceEvent ev;
      ev.startNs = ns(*lastBatchEnd_);
      ev.endNs = ns(now);
      ev.token = static_cast<int32_t>(token_);
      ev.layer = static_cast<int16_t>(layer);
      ev.op = TraceOp::Dense;
      ev.lane = static_cast<uint8_t>(lanes().compute());
      trace_->record(ev);
    }
    std::vector<int> ids;
    for (const ExpertRequest& r : requests) ids.push_back(r.expert);
    cache_->recordActivations(layer, ids);
    if (layer == 0) maybeScheduleReplan();
    ++useClock_;

    auto job = std::make_shared<sched::LayerJob>();
    job->layer = layer;
    job->token = static_cast<int>(token_);
    job->start = now;
    auto kept = std::make_shared<std::vector<Keep>>();
    if (options_.mode == OffloadMode::ZipMoE)
      buildZipMoeJob(*job, *kept, layer, requests);
    else
      buildFullTensorJob(*job, *kept, layer, requests);
    auto predicted = std::make_shared<double>(0.0);
    if (options_.mode == OffloadMode::ZipMoE) orderZipMoeJob(*job, *predicted);
    return executor_->run(job, [this, kept, predicted](sched::LayerJob& done) { endJob(done, *kept, *predicted); });
  }

  // ExpertRuntime -------------------------------------------------------------------------------
  uint64_t minimumBudget() const override { return workingSet_; }
  uint64_t expertBytes() const override {
    uint64_t total = 0;
    for (int kind = 0; kind < kinds_; ++kind) total += numel(kind) * 2;
    return total * static_cast<uint64_t>(layers_) * static_cast<uint64_t>(experts_);
  }

  void setMemoryBudget(uint64_t bytes) override {
    checkBudget(bytes);
    requestReplan(bytes, std::nullopt);
  }

  void setPools(unsigned poolMask) override {
    if (poolMask == 0 || poolMask > 0xF) throw Error("expert runtime: the pool subset must enable at least one of F, C, S, E");
    requestReplan(std::nullopt, poolMask);
  }

  RuntimeStats stats() const override {
    RuntimeStats s;
    {
      std::lock_guard lock(statsMutex_);
      s = stats_;
    }
    std::lock_guard lock(cacheMutex_);
    const auto used = cache_->usedBytesPerPool();
    const auto resident = cache_->residentPerPool();
    for (int p = 0; p < 4; ++p) {
      auto& pool = s.pools[static_cast<size_t>(p)];
      pool.usedBytes = used[static_cast<size_t>(p)];
      pool.residentExperts = resident[static_cast<size_t>(p)];
      pool.capacityBytes = 0;
      double ratio = 0;
      const int perLayer = options_.mode == OffloadMode::FullTensor ? 1 : layers_;
      for (int l = 0; l < perLayer; ++l) {
        pool.capacityBytes += cache_->capacityBytes(l, options_.mode == OffloadMode::FullTensor ? 0 : p);
        if (l < static_cast<int>(currentPlan_.layers.size())) ratio += currentPlan_.layers[static_cast<size_t>(l)].ratio[static_cast<size_t>(p)];
      }
      if (options_.mode == OffloadMode::FullTensor && p > 0) pool.capacityBytes = 0;
      pool.ratio = options_.mode == OffloadMode::FullTensor ? (p == 0 ? 1.0 : 0.0) : ratio / std::max(1, perLayer);
    }
    s.workingSetBytes = workingSet_;
    s.budgetBytes = currentPlan_.budget;
    s.heldBytes = workingSet_ + cache_->totalUsedBytes();
    s.droppedTraceEvents = trace_ ? trace_->dropped() : 0;
    return s;
  }

  size_t drainTrace(std::vector<TraceEvent>& out) override {
    if (!trace_) return 0;
    std::lock_guard lock(drainMutex_);
    return trace_->drain(out);
  }
  TraceLanes lanes() const override {
    return TraceLanes{options_.mode == OffloadMode::ZipMoE ? options_.decompressWorkers : 0};
  }

  ActivationCounts activationCounts() const override {
    std::lock_guard lock(cacheMutex_);
    return cache_->activationCounts();
  }
  void loadActivationCounts(const ActivationCounts& counts) override {
    {
      std::lock_guard lock(cacheMutex_);
      cache_->setActivationCounts(counts);
    }
    requestReplan(std::nullopt, std::nullopt);
  }

  void waitForPlan() override {
    std::unique_lock lock(planMutex_);
    planCv_.wait(lock, [&] { return !planRequested_ && !planning_; });
  }
  const RuntimeOptions& options() const override { return options_; }

 private:
  struct Keep {  // parts the cache keeps when the batch ends
    int expert = 0;
    int pool = cache::kNoPool;
    std::vector<TensorParts> parts;
  };

  uint64_t numel(int kind) const {
    return static_cast<uint64_t>(shapes_[static_cast<size_t>(kind)].first * shapes_[static_cast<size_t>(kind)].second);
  }
  int64_t ns(Clock::time_point t) const { return std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch_).count(); }

  uint64_t eBytes(int layer, int expert, int kind) const {
    uint64_t sum = 0;
    for (const ChunkRef& c : store_->manifest().expert(layer, expert, kind).eChunks) sum += c.paddedSize;
    return sum;
  }
  uint64_t smBytes(int layer, int expert, int kind) const {
    return store_->manifest().expert(layer, expert, kind).smChunk.paddedSize;
  }
  uint64_t fullBytes(int kind) const { return io::alignUp(numel(kind) * 2, 64); }

  // Bytes one expert takes in pool p (averages over the store for C and E; the planner's unit).
  void measureSizes() {
    maxEBytes_.assign(static_cast<size_t>(kinds_), 0);
    double eTotal = 0, smTotal = 0;
    for (int l = 0; l < layers_; ++l)
      for (int e = 0; e < experts_; ++e)
        for (int kind = 0; kind < kinds_; ++kind) {
          const uint64_t eb = eBytes(l, e, kind);
          maxEBytes_[static_cast<size_t>(kind)] = std::max(maxEBytes_[static_cast<size_t>(kind)], eb);
          eTotal += static_cast<double>(eb);
          smTotal += static_cast<double>(smBytes(l, e, kind));
        }
    const double n = static_cast<double>(layers_) * experts_;
    double full = 0;
    for (int kind = 0; kind < kinds_; ++kind) full += static_cast<double>(fullBytes(kind));
    bytesPerExpert_ = {full, (eTotal + smTotal) / n, smTotal / n, eTotal / n};
  }

  void openCheckpoint() {
    if (options_.checkpointDir.empty())
      throw Error("full-tensor offloading needs the HF checkpoint directory with the BF16 expert tensors");
    checkpoint_ = std::make_unique<HfCheckpoint>(options_.checkpointDir);
    const int flags = O_RDONLY | O_CLOEXEC | (options_.readMode == ReadMode::Direct ? O_DIRECT : 0);
    std::map<const SafetensorsFile*, int> fds;  // each safetensors file opened once, closed with the runtime
    const Manifest& m = store_->manifest();
    fullTensors_.resize(static_cast<size_t>(layers_) * static_cast<size_t>(experts_) * static_cast<size_t>(kinds_));
    maxFullReadBytes_.assign(static_cast<size_t>(kinds_), 0);
    for (int l = 0; l < layers_; ++l)
      for (int e = 0; e < experts_; ++e)
        for (int kind = 0; kind < kinds_; ++kind) {
          const ExpertTensorEntry& entry = m.expert(l, e, kind);
          const auto* found = checkpoint_->find(entry.name);
          if (!found)
            throw Error(options_.checkpointDir.string() + ": the checkpoint has no tensor '" + entry.name +
                        "' that the store has (is it the model the store was converted from?)");
          if (found->info->dtype != DType::BF16 || found->info->numel() != entry.numel)
            throw Error(found->file->path().string() + ": tensor '" + entry.name + "' is not BF16 with " +
                        std::to_string(entry.numel) + " elements as in the store");
          auto [it, inserted] = fds.emplace(found->file, -1);
          if (inserted) {
            files_.emplace_back(found->file->path(), flags);  // throws naming the file (and O_DIRECT)
            it->second = files_.back().fd();
          }
          FullTensor& t = fullTensors_[fullIndex(l, e, kind)];
          t.fd = it->second;
          t.file = found->file->path().string();
          const uint64_t off = found->info->offset, size = found->info->numel() * 2;
          t.fileOffset = off / kChunkAlignment * kChunkAlignment;
          t.dataOffset = off - t.fileOffset;
          t.readBytes = io::alignUp(t.dataOffset + size, kChunkAlignment);
          t.tensorBytes = size;
          maxFullReadBytes_[static_cast<size_t>(kind)] = std::max(maxFullReadBytes_[static_cast<size_t>(kind)], t.readBytes);
        }
  }
  size_t fullIndex(int l, int e, int kind) const {
    return (static_cast<size_t>(l) * static_cast<size_t>(experts_) + static_cast<size_t>(e)) * static_cast<size_t>(kinds_) +
           static_cast<size_t>(kind);
  }

  void checkBudget(uint64_t bytes) const {
    if (bytes < workingSet_)
      throw Error("memory budget " + mib(bytes) + " is below the minimum this model needs, " + mib(workingSet_) + " (" +
                  (options_.mode == OffloadMode::ZipMoE ? std::to_string(options_.stagingSlots) + " staging and " : std::string()) +
                  std::to_string(options_.outputSlots) + " output slots for one expert each)");
  }

  // Planning ------------------------------------------------------------------------------------
  Plan computePlan(uint64_t budget, unsigned pools, const ActivationCounts& counts) const {
    const auto start = Clock::now();
    Plan plan;
    plan.budget = budget;
    plan.pools = pools;
    const double poolBudget = static_cast<double>(budget - workingSet_);
    if (options_.mode == OffloadMode::FullTensor) {
      plan::LayerPlan lp;
      lp.ratio = {1, 0, 0, 0};
      const double all = static_cast<double>(layers_) * experts_;
      lp.capacity = {static_cast<int>(std::min(all, std::floor(poolBudget / bytesPerExpert_[0]))), 0, 0, 0};
      plan.layers.push_back(lp);
      plan.seconds = seconds(Clock::now() - start);
      return plan;
    }
    const double layerBudget = poolBudget / layers_;
    if (!options_.planning) {
      double total = 0;
      for (int p = 0; p < 4; ++p)
        if (pools & (1u << p)) total += options_.fixedRatios[static_cast<size_t>(p)];
      plan::LayerPlan lp;
      int sum = 0;
      for (int p = 0; p < 4; ++p) {
        if (!(pools & (1u << p)) || total <= 0) continue;
        lp.ratio[static_cast<size_t>(p)] = options_.fixedRatios[static_cast<size_t>(p)] / total;
        lp.capacity[static_cast<size_t>(p)] =
            static_cast<int>(std::min(static_cast<double>(experts_ - sum),
                                      std::floor(lp.ratio[static_cast<size_t>(p)] * layerBudget / bytesPerExpert_[static_cast<size_t>(p)])));
        sum += lp.capacity[static_cast<size_t>(p)];
      }
      plan.layers.assign(static_cast<size_t>(layers_), lp);
      plan.seconds = seconds(Clock::now() - start);
      return plan;
    }
    std::vector<std::vector<double>> frequencies;
    for (int l = 0; l < layers_; ++l) {
      const uint64_t steps = counts.steps[static_cast<size_t>(l)];
      if (steps < kMinHistorySteps) {
        frequencies.push_back(plan::priorRankFrequency(experts_, topK_));
        continue;
      }
      std::span<const uint64_t> layerCounts(counts.counts.data() + static_cast<size_t>(l) * static_cast<size_t>(experts_),
                                            static_cast<size_t>(experts_));
      auto f = plan::rankFrequency(layerCounts, steps, topK_);
      const double mean = std::accumulate(f.begin(), f.end(), 0.0);
      const int k = std::clamp(static_cast<int>(std::lround(mean)), 1, experts_);
      frequencies.push_back(normaliseFrequencies(std::move(f), std::max(k, topK_)));
    }
    // Layers may see different k (batches): planModel plans each with its own Σ f.
    plan::CostModel cost;
    cost.u = profile_.smRead;
    cost.v = profile_.eRead;
    cost.c = profile_.decompress;
    cost.recover = profile_.recover;
    cost.threads = options_.decompressWorkers;
    cost.shards = K_;
    cost.tensorsPerExpert = kinds_;
    plan.layers = plan::planModel(frequencies, 0, pools, cost, bytesPerExpert_, poolBudget, options_.gridStep);
    plan.seconds = seconds(Clock::now() - start);
    return plan;
  }

  // REQUIRES: cacheMutex_ held (or construction).
  void applyPlan(Plan plan) {
    if (options_.mode == OffloadMode::FullTensor) {
      const uint64_t bytes = plan.budget - workingSet_;
      cache_->setCapacity(0, 0, bytes, plan.layers[0].capacity[0]);
    } else {
      const uint64_t layerBytes = (plan.budget - workingSet_) / static_cast<uint64_t>(layers_);
      for (int l = 0; l < layers_; ++l) {
        const auto& lp = plan.layers[static_cast<size_t>(l)];
        // Byte capacity: the planned experts at their measured average size, never more than the
        // layer's share of the budget in total.
        uint64_t assigned = 0;
        for (int p = 0; p < 4; ++p) {
          uint64_t bytes = 0;
          if (plan.pools & (1u << p)) {
            bytes = static_cast<uint64_t>(std::ceil(lp.capacity[static_cast<size_t>(p)] * bytesPerExpert_[static_cast<size_t>(p)]));
            bytes = std::min(bytes, layerBytes - assigned);
          }
          assigned += bytes;
          cache_->setCapacity(l, p, bytes, (plan.pools & (1u << p)) ? lp.capacity[static_cast<size_t>(p)] : 0);
        }
      }
    }
    cache_->enforceCapacities();
    activePools_ = plan.pools;
    {
      std::lock_guard lock(statsMutex_);
      stats_.lastReplanSeconds = plan.seconds;
      ++stats_.replans;
    }
    currentPlan_ = std::move(plan);
  }

  void requestReplan(std::optional<uint64_t> budget, std::optional<unsigned> pools) {
    {
      std::lock_guard lock(planMutex_);
      if (budget) requestedBudget_ = *budget;
      if (pools) requestedPools_ = *pools;
      planRequested_ = true;
    }
    planCv_.notify_all();
  }

  void maybeScheduleReplan() {  // cacheMutex_ held
    if (options_.replanEverySteps <= 0 || options_.mode == OffloadMode::FullTensor || !options_.planning) return;
    const uint64_t steps = cache_->steps(0);
    if (steps == kMinHistorySteps || (steps > 0 && steps % static_cast<uint64_t>(options_.replanEverySteps) == 0))
      requestReplan(std::nullopt, std::nullopt);
  }

  void plannerLoop() {
    std::unique_lock lock(planMutex_);
    for (;;) {
      planCv_.wait(lock, [&] { return stopping_ || planRequested_; });
      if (stopping_) return;
      planRequested_ = false;
      planning_ = true;
      const uint64_t budget = requestedBudget_ ? *requestedBudget_ : 0;
      const unsigned pools = requestedPools_ ? *requestedPools_ : 0;
      lock.unlock();
      // A plan that fails (the planner throws: a bug, an allocation, a test's injected failure) is
      // reported in the stats and the previous plan stays in force: the runtime never ends the
      // process from this thread, and generation goes on under the plan it had.
      try {
        ActivationCounts counts;
        uint64_t currentBudget;
        unsigned currentPools;
        {
          std::lock_guard cacheLock(cacheMutex_);
          counts = cache_->activationCounts();
          currentBudget = currentPlan_.budget;
          currentPools = currentPlan_.pools;
        }
        if (options_.beforeReplan) options_.beforeReplan();
        Plan plan = computePlan(budget ? budget : currentBudget, pools ? pools : currentPools, counts);
        std::lock_guard cacheLock(cacheMutex_);
        // Applied at once, also while a layer runs: the experts it uses are pinned and never
        // evicted, and what it keeps is fitted into the new capacities when it ends (endJob).
        applyPlan(std::move(plan));
      } catch (const std::exception& e) {
        std::lock_guard statsLock(statsMutex_);
        ++stats_.planFailures;
        stats_.lastPlanError = e.what();
      }
      lock.lock();
      planning_ = false;
      planCv_.notify_all();
    }
  }

  // Jobs ----------------------------------------------------------------------------------------
  // Pins every requested expert (their resident parts are in use until the batch ends).
  void pinRequested(int layer, std::span<const ExpertRequest> requests) {
    for (const ExpertRequest& r : requests) cache_->entry(layer, r.expert).pinned = true;
  }
  sched::JobExpert jobExpert(const ExpertRequest& r, RuntimeStats& delta) const {
    sched::JobExpert je;
    je.expert = r.expert;
    je.tokens = r.tokens;
    je.tensors.assign(static_cast<size_t>(kinds_), nullptr);
    ++delta.activations;
    return je;
  }

  void buildZipMoeJob(sched::LayerJob& job, std::vector<Keep>& kept, int layer, std::span<const ExpertRequest> requests) {
    const Manifest& m = store_->manifest();
    pinRequested(layer, requests);
    std::array<uint64_t, 4> reserved{};
    std::vector<TensorParts> recycled;
    RuntimeStats delta;
    for (const ExpertRequest& r : requests) {
      const int idx = static_cast<int>(job.experts.size());
      sched::JobExpert je = jobExpert(r, delta);
      cache::Entry& entry = cache_->entry(layer, r.expert);
      if (entry.pool == cache::kPoolF) {
        ++delta.hits[0];
        for (int kind = 0; kind < kinds_; ++kind)
          je.tensors[static_cast<size_t>(kind)] = reinterpret_cast<const uint16_t*>(entry.tensors[static_cast<size_t>(kind)].full.data());
        cache_->touch(layer, r.expert, useClock_);
        job.experts.push_back(std::move(je));
        continue;
      }
      const bool hasE = entry.pool == cache::kPoolC || entry.pool == cache::kPoolE;
      const bool hasSM = entry.pool == cache::kPoolC || entry.pool == cache::kPoolS;
      const sched::TaskState state = hasE && hasSM ? sched::TaskState::C
                                     : hasSM       ? sched::TaskState::S
                                     : hasE        ? sched::TaskState::E
                                                   : sched::TaskState::Miss;
      if (entry.pool == cache::kNoPool)
        ++delta.misses;
      else
        ++delta.hits[static_cast<size_t>(entry.pool)];
      if (entry.pool != cache::kNoPool) cache_->touch(layer, r.expert, useClock_);

      // Where should it live? Promote when its rank maps to a better pool than where it is.
      const int target = cache_->dispatch(layer, cache_->rank(layer, r.expert), activePools_, options_.tolerance);
      int keepPool = cache::kNoPool;
      if (target != cache::kNoPool && (entry.pool == cache::kNoPool || target < entry.pool)) {
        uint64_t need = 0;
        for (int kind = 0; kind < kinds_; ++kind) need += partBytes(target, layer, r.expert, kind);
        if (cache_->makeRoom(layer, target, reserved[static_cast<size_t>(target)] + need, cache_->count(layer, r.expert),
                             &recycled)) {
          reserved[static_cast<size_t>(target)] += need;
          keepPool = target;
        }
      }
      Keep keep;
      keep.expert = r.expert;
      keep.pool = keepPool;
      keep.parts.resize(static_cast<size_t>(kinds_));
      kept.push_back(std::move(keep));
      Keep& kp = kept.back();
      je.needsStaging = true;
      for (int kind = 0; kind < kinds_; ++kind) {
        const ExpertTensorEntry& te = m.expert(layer, r.expert, kind);
        sched::JobTask t;
        t.expertIndex = idx;
        t.kind = kind;
        t.state = state;
        t.key = ChunkKey{layer, r.expert, kind, 0};
        t.entry = &te;
        uint64_t off = 0;
        for (const ChunkRef& c : te.eChunks) {
          t.eOffsets.push_back(off);
          off += c.paddedSize;
        }
        t.eBytes = off;
        if (hasE) t.eResident = entry.tensors[static_cast<size_t>(kind)].e.data();
        if (hasSM) t.smResident = entry.tensors[static_cast<size_t>(kind)].sm.data();
        TensorParts& parts = kp.parts[static_cast<size_t>(kind)];
        const bool keepE = keepPool == cache::kPoolC || keepPool == cache::kPoolE;
        const bool keepSM = keepPool == cache::kPoolC || keepPool == cache::kPoolS;
        if (keepE && !hasE) {
          reuse(recycled, parts.e, t.eBytes);
          t.keepE = &parts.e;
        }
        if (keepSM && !hasSM) {
          reuse(recycled, parts.sm, te.smChunk.paddedSize);
          t.keepSM = &parts.sm;
        }
        if (keepPool == cache::kPoolF) {
          reuse(recycled, parts.full, fullBytes(kind));
          t.keepFull = &parts.full;
        }
        job.tasks.push_back(std::move(t));
      }
      job.experts.push_back(std::move(je));
    }
    addStats(delta);
  }

  // The ZipMoE job's order: Algorithm 1 (or FIFO), and the predicted makespan from simulating it.
  void orderZipMoeJob(sched::LayerJob& job, double& predicted) {
    std::vector<sched::TaskSpec> specs;
    for (const auto& t : job.tasks) specs.push_back({job.experts[static_cast<size_t>(t.expertIndex)].expert, t.kind, t.state});
    std::vector<double> compute(static_cast<size_t>(experts_), 0.0);
    std::vector<int> ready;
    for (const auto& e : job.experts) {
      compute[static_cast<size_t>(e.expert)] = expertComputeEstimate(e.tokens);
      if (std::none_of(job.tasks.begin(), job.tasks.end(), [&](const sched::JobTask& t) {
            return job.experts[static_cast<size_t>(t.expertIndex)].expert == e.expert;
          }))
        ready.push_back(e.expert);
    }
    sched::Costs costs{profile_.smRead, profile_.eRead, profile_.decompress, profile_.recover, K_,
                       options_.decompressWorkers};
    const sched::Schedule schedule = options_.fifoSchedule ? sched::fifoSchedule(specs, costs, ready)
                                                           : sched::buildSchedule(specs, compute, costs, ready);
    predicted = specs.empty() && ready.empty() ? 0.0 : sched::simulate(specs, compute, costs, schedule).makespan;
    std::vector<int> indexOfExpert(static_cast<size_t>(experts_), -1);
    for (size_t i = 0; i < job.experts.size(); ++i) indexOfExpert[static_cast<size_t>(job.experts[i].expert)] = static_cast<int>(i);
    auto convert = [&](const std::vector<sched::Op>& ops, std::vector<sched::ExecOp>& out) {
      for (const sched::Op& op : ops) {
        sched::ExecOp x;
        x.task = op.task;
        x.shard = op.shard;
        switch (op.kind) {
          case sched::OpKind::ReadE: x.kind = sched::ExecKind::ReadE; break;
          case sched::OpKind::ReadSM: x.kind = sched::ExecKind::ReadSM; break;
          case sched::OpKind::Decompress: x.kind = sched::ExecKind::Decompress; break;
          case sched::OpKind::Recover: x.kind = sched::ExecKind::Recover; break;
          case sched::OpKind::Compute: continue;
        }
        out.push_back(x);
      }
    };
    if (options_.coalesceReads) {
      // The first ReadE of a task reads all its E-chunks (with the SM-chunk when nothing is kept
      // and it is a plain miss); its other ReadE ops, and the merged ReadSM, go.
      std::vector<char> eDone(job.tasks.size(), 0);
      for (const sched::Op& op : schedule.io) {
        sched::JobTask& t = job.tasks[static_cast<size_t>(op.task)];
        sched::ExecOp x;
        x.task = op.task;
        if (op.kind == sched::OpKind::ReadE) {
          if (eDone[static_cast<size_t>(op.task)]++) continue;
          t.wholeRead = t.state == sched::TaskState::Miss && !t.keepE && !t.keepSM;
          x.kind = t.wholeRead ? sched::ExecKind::ReadTensor : sched::ExecKind::ReadE;
          x.shard = sched::kAllShards;
        } else if (op.kind == sched::OpKind::ReadSM) {
          if (t.wholeRead) continue;
          x.kind = sched::ExecKind::ReadSM;
        } else {
          continue;
        }
        job.io.push_back(x);
      }
    } else {
      convert(schedule.io, job.io);
    }
    convert(schedule.decompress, job.decompress);
    convert(schedule.recover, job.recover);
    std::vector<char> admitted(job.experts.size(), 0);
    for (int task : schedule.taskOrder) {
      const int idx = job.tasks[static_cast<size_t>(task)].expertIndex;
      if (!admitted[static_cast<size_t>(idx)]++) job.admissionOrder.push_back(idx);
    }
    for (int expert : schedule.computeOrder) job.computeOrder.push_back(indexOfExpert[static_cast<size_t>(expert)]);
    for (size_t i = 0; i < job.experts.size(); ++i)  // anything the schedule did not list
      if (std::find(job.computeOrder.begin(), job.computeOrder.end(), static_cast<int>(i)) == job.computeOrder.end())
        job.computeOrder.push_back(static_cast<int>(i));
  }

  double expertComputeEstimate(int tokens) const {
    const double p = profile_.expertCompute(tokens);
    return p > 0 ? p : static_cast<double>(tokens) * 1e-4;
  }

  void buildFullTensorJob(sched::LayerJob& job, std::vector<Keep>& kept, int layer, std::span<const ExpertRequest> requests) {
    pinRequested(layer, requests);
    uint64_t reserved = 0;
    std::vector<TensorParts> recycled;
    RuntimeStats delta;
    for (const ExpertRequest& r : requests) {
      const int idx = static_cast<int>(job.experts.size());
      sched::JobExpert je = jobExpert(r, delta);
      cache::Entry& entry = cache_->entry(layer, r.expert);
      if (entry.pool != cache::kNoPool) {
        ++delta.hits[0];
        for (int kind = 0; kind < kinds_; ++kind)
          je.tensors[static_cast<size_t>(kind)] = reinterpret_cast<const uint16_t*>(
              entry.tensors[static_cast<size_t>(kind)].full.data() + fullTensors_[fullIndex(layer, r.expert, kind)].dataOffset);
        cache_->touch(layer, r.expert, useClock_);
        job.experts.push_back(std::move(je));
        job.computeOrder.push_back(idx);
        continue;
      }
      ++delta.misses;
      uint64_t need = 0;
      for (int kind = 0; kind < kinds_; ++kind) need += fullTensors_[fullIndex(layer, r.expert, kind)].readBytes;
      const bool keep = cache_->makeRoom(layer, 0, reserved + need, cache_->count(layer, r.expert), &recycled);
      if (keep) reserved += need;
      Keep kp;
      kp.expert = r.expert;
      kp.pool = keep ? 0 : cache::kNoPool;
      kp.parts.resize(static_cast<size_t>(kinds_));
      kept.push_back(std::move(kp));
      for (int kind = 0; kind < kinds_; ++kind) {
        const FullTensor& ft = fullTensors_[fullIndex(layer, r.expert, kind)];
        sched::JobTask t;
        t.expertIndex = idx;
        t.kind = kind;
        t.fullRead = true;
        t.key = ChunkKey{layer, r.expert, kind, 0};
        t.entry = &store_->manifest().expert(layer, r.expert, kind);
        t.fd = ft.fd;
        t.fileName = ft.file;
        t.fileOffset = ft.fileOffset;
        t.readBytes = ft.readBytes;
        t.dataOffset = ft.dataOffset;
        t.tensorBytes = ft.tensorBytes;
        if (keep) {
          reuse(recycled, kept.back().parts[static_cast<size_t>(kind)].full, ft.readBytes);
          t.keepFull = &kept.back().parts[static_cast<size_t>(kind)].full;
        }
        sched::ExecOp op;
        op.kind = sched::ExecKind::ReadFull;
        op.task = static_cast<int>(job.tasks.size());
        job.io.push_back(op);
        job.tasks.push_back(std::move(t));
      }
      job.experts.push_back(std::move(je));
      job.computeOrder.push_back(idx);
    }
    addStats(delta);
  }

  static void reuse(std::vector<TensorParts>& recycled, io::AlignedBuffer& dst, uint64_t bytes) {
    for (auto& parts : recycled)
      for (io::AlignedBuffer* b : {&parts.full, &parts.e, &parts.sm})
        if (b->size() >= bytes && b->size() < bytes + bytes / 8 + kChunkAlignment) {
          dst = std::move(*b);
          *b = io::AlignedBuffer();
          return;
        }
  }

  uint64_t partBytes(int pool, int layer, int expert, int kind) const {
    switch (pool) {
      case cache::kPoolF: return fullBytes(kind);
      case cache::kPoolC: return eBytes(layer, expert, kind) + smBytes(layer, expert, kind);
      case cache::kPoolS: return smBytes(layer, expert, kind);
      case cache::kPoolE: return eBytes(layer, expert, kind);
    }
    return 0;
  }

  void addStats(const RuntimeStats& d) {
    std::lock_guard lock(statsMutex_);
    stats_.activations += d.activations;
    for (size_t p = 0; p < 4; ++p) stats_.hits[p] += d.hits[p];
    stats_.misses += d.misses;
  }

  // Model thread, batch destructor: commit kept parts and account the layer.
  void endJob(sched::LayerJob& job, std::vector<Keep>& kept, double predicted) {
    std::lock_guard lock(cacheMutex_);
    const int layer = job.layer;
    if (job.error.empty()) {
      for (Keep& k : kept) {
        if (k.pool == cache::kNoPool) continue;
        cache::Entry& old = cache_->entry(layer, k.expert);
        for (int kind = 0; kind < kinds_ && old.pool != cache::kNoPool; ++kind) {
          TensorParts& from = old.tensors[static_cast<size_t>(kind)];
          TensorParts& to = k.parts[static_cast<size_t>(kind)];
          const bool wantE = k.pool == cache::kPoolC || k.pool == cache::kPoolE;
          const bool wantSM = k.pool == cache::kPoolC || k.pool == cache::kPoolS;
          if (wantE && to.e.size() == 0) to.e = std::move(from.e);
          if (wantSM && to.sm.size() == 0) to.sm = std::move(from.sm);
        }
        cache_->insert(layer, k.expert, k.pool, std::move(k.parts), useClock_);
      }
    }
    for (const auto& e : job.experts) cache_->entry(layer, e.expert).pinned = false;
    cache_->enforceCapacities();  // a plan applied while this layer ran may have shrunk the pools
    lastBatchEnd_ = job.lastRelease;

    // Lower bound (Lemma B.3) from the measured durations of this layer.
    double io = 0, dec = 0, rec = 0, compute = 0, z = 0;
    const int L = std::max(1, options_.decompressWorkers);
    std::vector<double> expertCompute(job.experts.size(), 0.0);
    for (size_t i = 0; i < job.experts.size(); ++i) {
      expertCompute[i] = job.experts[i].computeSeconds;
      compute += expertCompute[i];
      z = std::max(z, expertCompute[i]);
    }
    for (const auto& t : job.tasks) {
      io += t.readESeconds + t.readSMSeconds;
      dec += t.decompressSeconds;
      rec += t.recoverSeconds;
      const double path = t.readESeconds + std::max(t.decompressSeconds / std::min(K_, L), t.readSMSeconds) +
                          t.recoverSeconds + expertCompute[static_cast<size_t>(t.expertIndex)];
      z = std::max(z, path);
    }
    const double bound = std::max({io, dec / L, compute, z, rec});
    std::lock_guard statsLock(statsMutex_);
    if (job.error.empty()) {
      stats_.layers += 1;
      stats_.measuredMakespan += seconds(job.lastRelease - job.start);
      stats_.lowerBound += bound;
      stats_.predictedMakespan += predicted;
    }
    stats_.bytesRead += job.bytesRead;
    stats_.stallSeconds += job.stallSeconds;
    if (layer == 0) stats_.steps += 1;
  }

  static constexpr uint64_t kMinHistorySteps = 16;

  struct FullTensor {
    int fd = -1;
    std::string file;
    uint64_t fileOffset = 0, readBytes = 0, dataOffset = 0, tensorBytes = 0;
  };

  std::shared_ptr<const Store> store_;
  RuntimeOptions options_;
  CostProfile profile_;
  Clock::time_point epoch_;
  int layers_ = 0, experts_ = 0, kinds_ = 0, K_ = 1, topK_ = 1;
  std::vector<std::pair<int64_t, int64_t>> shapes_;
  std::vector<uint64_t> maxEBytes_, maxFullReadBytes_;
  std::array<double, 4> bytesPerExpert_{};
  uint64_t workingSet_ = 0;
  std::unique_ptr<TraceBuffer> trace_;
  std::mutex drainMutex_;
  std::unique_ptr<HfCheckpoint> checkpoint_;
  std::vector<FullTensor> fullTensors_;
  std::deque<io::FileHandle> files_;  // the checkpoint's files (FullTensor); closed when the runtime goes

  mutable std::mutex cacheMutex_;  // cache_, plans, token counters
  std::unique_ptr<cache::ExpertCache> cache_;
  Plan currentPlan_;
  unsigned activePools_ = 0xF;
  uint64_t token_ = 0, useClock_ = 0;
  bool started_ = false;
  std::optional<Clock::time_point> lastBatchEnd_;

  mutable std::mutex statsMutex_;
  RuntimeStats stats_;

  std::mutex planMutex_;
  std::condition_variable planCv_;
  bool planRequested_ = false, planning_ = false, stopping_ = false;
  std::optional<uint64_t> requestedBudget_;
  std::optional<unsigned> requestedPools_;
  std::thread planner_;

  std::unique_ptr<sched::Executor> executor_;
};

}  // namespace

std::shared_ptr<ExpertRuntime> ExpertRuntime::open(std::shared_ptr<const Store> store, const RuntimeOptions& options,
                                                   const CostProfile& profile) {
  if (!store) throw Error("expert runtime: no store");
  checkProfile(profile, *store, options.readMode, "cost profile");
  return std::make_shared<Runtime>(std::move(store), options, profile);
}

}  // namespace zipmoe
