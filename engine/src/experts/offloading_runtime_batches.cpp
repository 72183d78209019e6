// OffloadingRuntime (experts/offloading_runtime.h): a layer's batch. acquire() checks the request,
// counts the activations and the dense time since the last batch (re-planning the layer from a prompt,
// or asking for a replan, when due), lets the strategy build the layer's job from the cache and what
// was prefetched, and hands it to the executor; when the batch ends the kept parts are committed, the
// cache fitted into the capacities in force, and the layer's measured makespan, lower bound and
// operation times added to the stats.
#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "experts/offloading_runtime.h"
#include "experts/planner_inputs.h"
#include "zipmoe/base/error.h"
#include "zipmoe/plan/pool_planner.h"

namespace zipmoe::experts {
namespace {

using sched::seconds;

// Lemma B.3's lower bound max{I, C/L, P, Z} (and the recovery stream's total) from the measured
// durations of one layer's operations: what no schedule of these operations could beat.
double measuredLowerBound(const sched::LayerJob& job, int shards, int workers) {
  double io = 0, dec = 0, rec = 0, compute = 0, z = 0;
  const int L = std::max(1, workers);
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
    const double path = t.readESeconds + std::max(t.decompressSeconds / std::min(shards, L), t.readSMSeconds) +
                        t.recoverSeconds + expertCompute[static_cast<size_t>(t.expertIndex)];
    z = std::max(z, path);
  }
  return std::max({io, dec / L, compute, z, rec});
}

// Adds one layer's operation times to the observed costs (a task's times are per tensor).
void observe(const sched::LayerJob& job, ObservedCosts& observed) {
  for (const sched::JobTask& t : job.tasks) {
    if (t.fullRead) {
      observed.fullRead.add(t.readSMSeconds);
      continue;
    }
    const double chunks = t.entry ? static_cast<double>(std::max<size_t>(1, t.entry->eChunks.size())) : 1.0;
    if (t.wholeRead) {
      observed.tensorRead.add(t.readESeconds + t.readSMSeconds);
    } else {
      if (t.readESeconds > 0) observed.eRead.add(t.readESeconds / chunks);
      if (t.readSMSeconds > 0) observed.smRead.add(t.readSMSeconds);
    }
    if (t.decompressSeconds > 0) observed.decompress.add(t.decompressSeconds / chunks);
    if (t.recoverSeconds > 0) observed.recover.add(t.recoverSeconds);
  }
}

}  // namespace

std::unique_ptr<ExpertBatch> OffloadingRuntime::acquire(int layer, std::span<const ExpertRequest> requests) {
  if (layer < 0 || layer >= sizes_.layers())
    throw Error("expert runtime: MoE layer " + std::to_string(layer) + " out of range (0.." +
                std::to_string(sizes_.layers() - 1) + ")");
  std::vector<char> seen(static_cast<size_t>(sizes_.experts()), 0);
  for (const ExpertRequest& r : requests) {
    if (r.expert < 0 || r.expert >= sizes_.experts())
      throw Error("expert runtime: expert " + std::to_string(r.expert) + " out of range (0.." +
                  std::to_string(sizes_.experts() - 1) + ")");
    if (seen[static_cast<size_t>(r.expert)]++)
      throw Error("expert runtime: expert " + std::to_string(r.expert) + " requested twice");
  }
  for (const ExpertRequest& r : requests) {
    if (options_.outputSlots == 0 && !r.acceptsSplit && !r.mergesSplit)
      throw Error("expert runtime: expert " + std::to_string(r.expert) + " of MoE layer " + std::to_string(layer) +
                  " was requested as BF16 words only (ExpertRequest::acceptsSplit and mergesSplit both false), and "
                  "this runtime has no output slots to recover it into (RuntimeOptions::outputSlots = 0; give it "
                  "1 or more for such a consumer)");
  }
  if (!demanded_.exchange(true)) {
    // The first demand ends a warm start for good; it waits for the layer batch one is running.
    std::lock_guard warm(warmMutex_);
  }
  const auto now = Clock::now();
  std::lock_guard lock(cacheMutex_);
  if (layer == 0 && started_) ++token_;
  started_ = true;
  if (lastBatchEnd_) {
    std::lock_guard statsLock(statsMutex_);
    stats_.denseSeconds += seconds(now - *lastBatchEnd_);
  }
  if (lastBatchEnd_ && trace_) {  // the model's dense work between the last layer and this one
    TraceEvent ev;
    ev.startNs = ns(*lastBatchEnd_);
    ev.endNs = ns(now);
    ev.token = static_cast<int32_t>(token_);
    ev.layer = static_cast<int16_t>(layer);
    ev.op = TraceOp::Dense;
    ev.lane = static_cast<uint8_t>(lanes().compute());
    trace_->record(ev);
  }
  std::vector<int> ids, tokens;
  for (const ExpertRequest& r : requests) {
    ids.push_back(r.expert);
    tokens.push_back(r.tokens);
  }
  const bool waitsForPrompt = layerWaitsForPrompt(layer);
  cache_->recordActivations(layer, ids, tokens);
  if (waitsForPrompt) planLayerFromPrompt(layer);
  if (layer == 0) maybeScheduleReplan();
  ++useClock_;

  auto job = std::make_shared<sched::LayerJob>();
  job->layer = layer;
  job->token = static_cast<int>(token_);
  job->start = now;
  auto kept = std::make_shared<std::vector<Keep>>();
  experts::JobCounts counts;
  std::vector<experts::PrefetchedParts> prefetched = takePrefetched(layer, requests);
  const experts::LayerRequest request{layer, requests, prefetched, plan_.pools, useClock_};
  const double predicted = strategy_->buildJob(*cache_, request, *job, *kept, counts);
  {
    std::lock_guard statsLock(statsMutex_);
    for (const experts::PrefetchedParts& p : prefetched) {
      stats_.prefetchUsefulBytes += p.usedBytes;
      stats_.prefetchWastedBytes += slots_[static_cast<size_t>(slotOf(layer, p.expert))].doneBytes - p.usedBytes;
      if (p.usedBytes > 0) ++stats_.prefetchHitExperts;
    }
    stats_.activations += counts.activations;
    for (size_t p = 0; p < kNumPools; ++p) stats_.hits[p] += counts.hits[p];
    stats_.misses += counts.misses;
    stats_.inPlaceTensors += counts.inPlaceTensors;
    stats_.indexedOnDemand += counts.indexedExperts;
  }
  return executor_->run(job, [this, kept, predicted, counts](sched::LayerJob& done) { endJob(done, *kept, predicted, counts); });
}

void OffloadingRuntime::endJob(sched::LayerJob& job, std::vector<Keep>& kept, double predicted,
                               const JobCounts& counts) {
  std::lock_guard lock(cacheMutex_);
  const int layer = job.layer;
  finishBatch(job, kept);
  lastBatchEnd_ = job.lastRelease;
  for (PrefetchSlot& slot : slots_)  // the job no longer reads them (or they moved into the cache)
    if (slot.state == SlotState::InUse) slot.state = SlotState::Free;
  assignSlots();

  const double bound = measuredLowerBound(job, sizes_.shards(), options_.decompressWorkers);
  std::lock_guard statsLock(statsMutex_);
  if (job.error.empty()) {
    observe(job, stats_.observed);
    observeLayer(job, counts, seconds(job.lastRelease - job.start), stats_.observed);
    stats_.layers += 1;
    stats_.measuredMakespan += seconds(job.lastRelease - job.start);
    stats_.lowerBound += bound;
    stats_.predictedMakespan += predicted;
  }
  stats_.bytesRead += job.bytesRead;
  stats_.stallSeconds += job.stallSeconds;
  for (const sched::JobTask& t : job.tasks) {
    stats_.splitTensors += t.split && t.recovered && !t.indexed ? 1 : 0;
    stats_.indexedMissTensors += t.recovered && t.indexed ? 1 : 0;
  }
  if (layer == 0) stats_.steps += 1;
}

uint64_t OffloadingRuntime::finishBatch(const sched::LayerJob& job, std::vector<Keep>& kept) {
  const int layer = job.layer;
  uint64_t committed = 0;
  if (job.error.empty()) {
    for (Keep& k : kept) {
      if (k.pool == cache::kNoPool) continue;
      cache::Entry& old = cache_->entry(layer, k.expert);
      for (int kind = 0; kind < sizes_.kinds() && old.pool != cache::kNoPool; ++kind) {
        // Parts the expert already had and keeps in its new pool move over (C → from E or S).
        cache::TensorParts& from = old.tensors[static_cast<size_t>(kind)];
        cache::TensorParts& to = k.parts[static_cast<size_t>(kind)];
        if (keepsExponents(static_cast<Pool>(k.pool)) && to.e.size() == 0) to.e = std::move(from.e);
        if (keepsSignMantissa(static_cast<Pool>(k.pool)) && to.sm.size() == 0) to.sm = std::move(from.sm);
      }
      cache_->insert(layer, k.expert, k.pool, std::move(k.parts), useClock_);
      adoptIndexedCodes(job, layer, k.expert);
      ++committed;
    }
  }
  for (const auto& e : job.experts) cache_->entry(layer, e.expert).pinned = false;
  cache_->enforceCapacities();  // a plan applied while this layer ran may have shrunk the pools
  trimPages(plan_.budget);
  return committed;
}

void OffloadingRuntime::adoptIndexedCodes(const sched::LayerJob& job, int layer, int expert) {
  cache::Entry& entry = cache_->entry(layer, expert);
  if (entry.pool != poolIndex(Pool::C)) return;
  std::vector<std::vector<NibbleShard>> shards(static_cast<size_t>(sizes_.kinds()));
  int indexed = 0;
  for (const sched::JobTask& t : job.tasks)
    if (t.key.expert == expert && t.indexed && t.recovered) {
      shards[static_cast<size_t>(t.kind)] = t.nibble;
      ++indexed;
    }
  if (indexed != sizes_.kinds()) return;
  entry.nibble = std::move(shards);
  entry.nibbleState = 1;
}

void OffloadingRuntime::observeLayer(const sched::LayerJob& job, const JobCounts& counts, double measured,
                                     ObservedCosts& observed) const {
  bool cpu = false, raw = false;
  for (const sched::JobTask& t : job.tasks) {
    cpu = cpu || t.decompressSeconds > 0 || t.recoverSeconds > 0;
    raw = raw || t.fullRead;
  }
  const int k = static_cast<int>(job.experts.size());
  if (k < 1 || (raw && !(layerCost_.fullRead > 0))) return;
  std::array<int, kNumPools> hits{};
  int total = 0;
  for (size_t p = 0; p < kNumPools; ++p) total += hits[p] = static_cast<int>(counts.hits[p]);
  if (total > k) return;
  plan::CostModel cost = experts::observedCostModel(layerCost_, observed);
  cost.cpuLayerFactor = 0;
  try {
    const double estimate = plan::estimateMakespan(k, hits, cost, raw);
    if (estimate > 0) (cpu ? observed.cpuLayer : observed.readLayer).add(measured / estimate);
  } catch (const Error&) {
    // A layer the estimate has no figures for (none of the validated inputs gives one): not observed.
  }
}

}  // namespace zipmoe::experts
