// ZipMoeStrategy (see zipmoe_strategy.h).
#include "experts/zipmoe_strategy.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "sched/schedule.h"
#include "sched/tensor_codes.h"
#include "zipmoe/base/error.h"

namespace zipmoe::experts {

using cache::TensorParts;

namespace {

// A prefetched part is the task's resident input; a part the cache keeps moves there (no copy).
const uint8_t* usePrefetched(io::AlignedBuffer& prefetched, bool keep, io::AlignedBuffer& kept) {
  if (!keep) return prefetched.data();
  kept = std::move(prefetched);
  return kept.data();
}

// Indexes a C member's E-chunks so that the model reads its nibble codes in place, once per entry
// (cache::Entry::nibbleState; sched/tensor_codes.h says which tensors can be). False (and the entry
// keeps decoding) otherwise. Throws zipmoe::Error, naming the chunk, on a malformed one.
bool indexInPlace(const Manifest& m, int layer, int expert, cache::Entry& entry) {
  if (entry.nibbleState != 0) return entry.nibbleState > 0;
  entry.nibbleState = -1;
  std::vector<std::vector<NibbleShard>> kinds;
  for (size_t kind = 0; kind < entry.tensors.size(); ++kind) {
    const ExpertTensorEntry& te = m.expert(layer, expert, static_cast<int>(kind));
    auto shards = sched::indexTensorCodes(te, entry.tensors[kind].e.data(), entry.tensors[kind].e.size(),
                                          "layer " + std::to_string(layer) + " expert " + std::to_string(expert) +
                                              " tensor " + te.name);
    if (!shards) return false;
    kinds.push_back(std::move(*shards));
  }
  entry.nibble = std::move(kinds);
  entry.nibbleState = 1;
  return true;
}

}  // namespace

bool readsCodesInPlace(const RuntimeOptions& options, const Store& store) {
  return options.mode == OffloadMode::ZipMoE && options.fuseRecovery && options.readCodesInPlace &&
         store.manifest().codec.id == CodecId::Nibble;
}

ZipMoeStrategy::ZipMoeStrategy(const Store& store, const ExpertSizes& sizes, const RuntimeOptions& options,
                               const CostProfile& profile)
    : store_(store),
      sizes_(sizes),
      options_(options),
      profile_(profile),
      codesInPlace_(readsCodesInPlace(options, store)) {
  planInputs_.layers = sizes.layers();
  planInputs_.experts = sizes.experts();
  planInputs_.topK = sizes.topK();
  planInputs_.bytesPerExpert = sizes.bytesPerExpert();
  if (options.rawMisses == RawMisses::Always && options.checkpointDir.empty())
    throw Error("expert runtime: raw misses (RawMisses::Always) need the HF checkpoint (RuntimeOptions::checkpointDir)");
  if (!options.checkpointDir.empty() && options.rawMisses != RawMisses::Never)
    raw_ = std::make_unique<FullTensorSource>(store, options.checkpointDir, options.readMode);
  planInputs_.cost = costModel(profile, options.decompressWorkers, sizes.shards(), sizes.kinds(), options.coalesceReads,
                               raw_ != nullptr);
  // Decoding computes from the planes: no hit or miss is recovered (the plans are for decoding).
  if (options.fuseRecovery) planInputs_.cost.recover = 0;
  planInputs_.cost.cInPlace = codesInPlace_;
  planInputs_.gridStep = options.gridStep;
  planInputs_.fromPrompt = options.planFromPrompt;
  planInputs_.sessionPriorTokens = options.sessionPriorTokens;
  planInputs_.smoothingTokens = options.smoothingTokens;
  rawLayer_.assign(static_cast<size_t>(sizes.layers()), options.rawMisses == RawMisses::Always ? 1 : 0);
  rawInF_.assign(static_cast<size_t>(sizes.layers()) * static_cast<size_t>(sizes.experts()), 0);
}

sched::SlotLayout ZipMoeStrategy::outputLayout() const {
  if (!raw_) return sizes_.outputLayout(options_.outputSlots);
  // A raw miss reads the checkpoint's aligned superset of the tensor into the output slot.
  sched::SlotLayout output;
  output.count = options_.outputSlots;
  for (int kind = 0; kind < sizes_.kinds(); ++kind) {
    output.outOffset.push_back(output.slotBytes);
    output.slotBytes += std::max(sizes_.fullBytes(kind), raw_->maxReadBytes(kind));
  }
  return output;
}

Plan ZipMoeStrategy::plan(uint64_t poolBytes, PoolMask pools, const ActivationCounts& counts,
                          const ObservedCosts& observed) const {
  const auto start = std::chrono::steady_clock::now();
  Plan p;
  p.pools = pools;
  PoolPlanInputs inputs = planInputs_;
  inputs.cost = observedCostModel(inputs.cost, observed);
  p.layers = options_.planning ? planPools(inputs, static_cast<double>(poolBytes), pools, counts)
                               : fixedRatioPlan(planInputs_, static_cast<double>(poolBytes), pools, options_.fixedRatios);
  for (auto& lp : p.layers) settleRawMisses(lp);
  for (int l = 0; l < sizes_.layers() && options_.planning; ++l) {
    const FrequencySource from = frequencySource(counts, l, sizes_.experts(), sizes_.topK(), options_.planFromPrompt);
    p.historyLayers += from == FrequencySource::History || from == FrequencySource::Session ? 1 : 0;
    p.sessionLayers += from == FrequencySource::Session ? 1 : 0;
    p.promptLayers += from == FrequencySource::Prompt ? 1 : 0;
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

bool ZipMoeStrategy::replanLayerFromPrompt(Plan& plan, int layer, uint64_t poolBytes, const ActivationCounts& counts,
                                           const ObservedCosts& observed) const {
  if (!options_.planning || !options_.planFromPrompt || plan.layers.size() != static_cast<size_t>(sizes_.layers()))
    return false;
  const FrequencySource from = frequencySource(counts, layer, sizes_.experts(), sizes_.topK(), true);
  if (from != FrequencySource::Prompt && from != FrequencySource::Session) return false;
  PoolPlanInputs inputs = planInputs_;
  inputs.cost = observedCostModel(inputs.cost, observed);
  plan::LayerPlan lp = planPoolsOfLayer(inputs, static_cast<double>(poolBytes), plan.pools, counts, layer);
  settleRawMisses(lp);
  plan.layers[static_cast<size_t>(layer)] = lp;
  if (from == FrequencySource::Prompt) ++plan.promptLayers;  // it was the prior's
  else plan.sessionLayers = std::min(plan.sessionLayers + 1, plan.historyLayers);  // it was the history's alone
  return true;
}

void ZipMoeStrategy::settleRawMisses(plan::LayerPlan& lp) const {
  if (!raw_) lp.rawMisses = false;
  else if (options_.rawMisses == RawMisses::Always) lp.rawMisses = true;
}

void ZipMoeStrategy::applyPlan(cache::ExpertCache& cache, const Plan& plan, uint64_t poolBytes) const {
  const uint64_t layerBytes = poolBytes / static_cast<uint64_t>(sizes_.layers());
  for (int l = 0; l < sizes_.layers(); ++l) {
    const auto& lp = plan.layers[static_cast<size_t>(l)];
    rawLayer_[static_cast<size_t>(l)] = raw_ && lp.rawMisses ? 1 : 0;
    // Byte capacity: the planned experts at their measured average size, never more than the
    // layer's share of the budget in total. What that leaves of the share (less than an expert per
    // pool: capacities are whole experts) goes to the pool with the largest planned share, so that
    // an expert larger than the average still fits where the plan counted it.
    std::array<uint64_t, kNumPools> bytes{};
    uint64_t assigned = 0;
    int largest = -1;
    for (Pool p : kPools) {
      const auto i = static_cast<size_t>(poolIndex(p));
      if (!hasPool(plan.pools, p) || lp.capacity[i] <= 0) continue;
      bytes[i] = std::min(static_cast<uint64_t>(std::ceil(lp.capacity[i] * sizes_.bytesPerExpert()[i])),
                          layerBytes - assigned);
      assigned += bytes[i];
      if (largest < 0 || lp.ratio[i] > lp.ratio[static_cast<size_t>(largest)]) largest = static_cast<int>(i);
    }
    if (largest >= 0) bytes[static_cast<size_t>(largest)] += layerBytes - assigned;
    for (Pool p : kPools) {
      const auto i = static_cast<size_t>(poolIndex(p));
      cache.setCapacity(l, poolIndex(p), bytes[i], hasPool(plan.pools, p) ? lp.capacity[i] : 0);
    }
  }
}

double ZipMoeStrategy::buildJob(cache::ExpertCache& cache, const LayerRequest& request, sched::LayerJob& job,
                                std::vector<Keep>& kept, JobCounts& counts) const {
  const Manifest& m = store_.manifest();
  const int layer = request.layer, kinds = sizes_.kinds();
  pinRequested(cache, layer, request.requests);
  std::array<uint64_t, kNumPools> reserved{};
  std::vector<TensorParts> recycled;
  std::vector<sched::JobTask> rawTasks;  // appended after the scheduled tasks
  const bool rawLayer = rawLayer_[static_cast<size_t>(layer)] != 0;
  // Best ranked first: the room this step's experts reserve in a pool goes to those the plan ranks
  // for it (a prefill requests most of a layer's experts at once, and its most-routed ones may have
  // any id).
  std::vector<std::pair<int, const ExpertRequest*>> ranked;
  for (const ExpertRequest& r : request.requests) ranked.emplace_back(cache.rank(layer, r.expert), &r);
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [rank, rp] : ranked) {
    const ExpertRequest& r = *rp;
    const int idx = static_cast<int>(job.experts.size());
    sched::JobExpert je = startExpert(r, kinds, counts);
    cache::Entry& entry = cache.entry(layer, r.expert);
    if (entry.pool == poolIndex(Pool::F)) {
      ++counts.hits[static_cast<size_t>(poolIndex(Pool::F))];
      const bool fromRaw = rawInF_[static_cast<size_t>(layer * sizes_.experts() + r.expert)] != 0;
      for (int kind = 0; kind < kinds; ++kind) {
        // A raw read left the tensor inside the checkpoint's aligned read.
        const uint64_t at = fromRaw ? sched::fullReadTensorOffset(raw_->tensor(layer, r.expert, kind).dataOffset) : 0;
        je.tensors[static_cast<size_t>(kind)] =
            reinterpret_cast<const uint16_t*>(entry.tensors[static_cast<size_t>(kind)].full.data() + at);
      }
      cache.touch(layer, r.expert, request.useClock);
      job.experts.push_back(std::move(je));
      continue;
    }
    const bool resident = entry.pool != cache::kNoPool;
    const bool hasE = resident && keepsExponents(static_cast<Pool>(entry.pool));
    const bool hasSM = resident && keepsSignMantissa(static_cast<Pool>(entry.pool));
    PrefetchedParts* pf = nullptr;
    for (PrefetchedParts& p : request.prefetched)
      if (p.expert == r.expert) pf = &p;
    if (resident) {
      ++counts.hits[static_cast<size_t>(entry.pool)];
      cache.touch(layer, r.expert, request.useClock);
    } else {
      ++counts.misses;
    }

    // Where should it live? Promote when its rank maps to a better pool than where it is. When the
    // pool its rank maps to cannot make room (its members are all used at least as often), the next
    // enabled pool below that has room keeps it instead of nothing: free capacity is never left
    // unused while an expert is dropped after use.
    int target = cache.dispatch(layer, rank, request.activePools, options_.tolerance);
    // Ranked beyond every pool: with room lent, kept in the plan's last pool, in free room only.
    bool freeRoomOnly = false;
    if (target == cache::kNoPool && !resident && cache.lendsRoom())
      for (int pool = 0; pool < kNumPools; ++pool)
        if ((request.activePools & (1u << pool)) && cache.capacityExperts(layer, pool) > 0) {
          target = pool;
          freeRoomOnly = true;
        }
    int keepPool = cache::kNoPool;
    bool rawRead = false;  // a raw read serves a miss kept nowhere or in F (C, S, E need the split parts)
    if (target != cache::kNoPool && (!resident || target < entry.pool)) {
      for (int pool = target; pool < kNumPools && (!resident || pool < entry.pool); ++pool) {
        if (!(request.activePools & (1u << pool))) continue;
        if (freeRoomOnly && pool != target) break;
        const bool raw = rawLayer && !resident && pool == poolIndex(Pool::F);
        uint64_t need = 0;
        for (int kind = 0; kind < kinds; ++kind)
          need += raw ? raw_->tensor(layer, r.expert, kind).range.length
                      : sizes_.partBytes(static_cast<Pool>(pool), layer, r.expert, kind);
        // A resident expert moves up only into free room: evicting for it would drop the victim
        // (an F member has no C parts to fall back to), and that victim's next use would read it
        // again — the F↔C churn that left the budget half used at 75 % (docs/RUNTIME.md).
        // With surplus kept (a pool a plan shrank keeps its members while the layer's total fits),
        // the layer's total must hold what this move adds: surplus goes for it. With room lent,
        // room no layer uses is free room too.
        uint64_t reservedElsewhere = 0;
        for (int q = 0; q < kNumPools; ++q)
          if (q != pool) reservedElsewhere += reserved[static_cast<size_t>(q)];
        const uint64_t grows = resident ? (need > entry.bytes ? need - entry.bytes : 0) : need;
        const bool fits =
            freeRoomOnly ? cache.hasFreeRoom(reserved[static_cast<size_t>(pool)] + reservedElsewhere + need)
            : resident
                ? (cache.lendsRoom() &&
                   cache.hasFreeRoom(reserved[static_cast<size_t>(pool)] + reservedElsewhere + grows)) ||
                      (cache.usedBytes(layer, pool) + reserved[static_cast<size_t>(pool)] + need <=
                           cache.capacityBytes(layer, pool) &&
                       (!cache.keepsSurplus() ||
                        cache.makeLayerRoom(layer, reserved[static_cast<size_t>(pool)] + reservedElsewhere + grows,
                                            &recycled)))
                : cache.makeRoom(layer, pool, reserved[static_cast<size_t>(pool)] + need, cache.usage(layer, r.expert),
                                 &recycled, reservedElsewhere);
        if (fits) {
          reserved[static_cast<size_t>(pool)] += need;
          keepPool = pool;
          rawRead = raw;
          break;
        }
      }
    }
    if (keepPool == cache::kNoPool) rawRead = rawLayer && !resident;
    Keep& kp = kept.emplace_back();
    kp.expert = r.expert;
    kp.pool = keepPool;
    kp.parts.resize(static_cast<size_t>(kinds));
    if (keepPool == poolIndex(Pool::F)) rawInF_[static_cast<size_t>(layer * sizes_.experts() + r.expert)] = rawRead ? 1 : 0;
    if (rawRead) {
      for (int kind = 0; kind < kinds; ++kind)
        rawTasks.push_back(fullReadTask(store_, *raw_, layer, r.expert, kind, idx,
                                        keepPool == poolIndex(Pool::F) ? &kp : nullptr, recycled));
      job.experts.push_back(std::move(je));
      continue;
    }
    const bool keepE = keepPool != cache::kNoPool && keepsExponents(static_cast<Pool>(keepPool));
    const bool keepSM = keepPool != cache::kNoPool && keepsSignMantissa(static_cast<Pool>(keepPool));
    const bool keepFull = keepPool == poolIndex(Pool::F);
    // The model computes it from the planes, unless F keeps the recovered tensor anyway.
    // Without output slots, the model merges what it cannot compute from (ExpertRequest::mergesSplit).
    const bool planes = r.acceptsSplit || (r.mergesSplit && options_.outputSlots == 0);
    const bool split = options_.fuseRecovery && planes && !keepFull;
    // A C hit that stays where it is, from a nibble store, handed split (decoding: the GEMV reads the
    // codes; prefill: the model turns them into words in one pass): its codes are read in place,
    // nothing to decode.
    const bool indexedBefore = entry.nibbleState != 0;
    if (split && hasE && hasSM && keepPool == cache::kNoPool && codesInPlace_ &&
        indexInPlace(m, layer, r.expert, entry)) {
      if (!indexedBefore) ++counts.indexedExperts;
      for (int kind = 0; kind < kinds; ++kind) {
        je.nibble.emplace_back(entry.nibble[static_cast<size_t>(kind)]);
        je.nibbleSignMantissa.push_back(entry.tensors[static_cast<size_t>(kind)].sm.data());
      }
      counts.inPlaceTensors += static_cast<uint64_t>(kinds);
      job.experts.push_back(std::move(je));
      continue;
    }
    je.needsStaging = true;
    for (int kind = 0; kind < kinds; ++kind) {
      const ExpertTensorEntry& te = m.expert(layer, r.expert, kind);
      // A prefetched part is as good as a resident one (the same stored bytes).
      io::AlignedBuffer* pfE = !hasE && pf ? pf->e[static_cast<size_t>(kind)] : nullptr;
      io::AlignedBuffer* pfSM = !hasSM && pf ? pf->sm[static_cast<size_t>(kind)] : nullptr;
      const bool haveE = hasE || pfE, haveSM = hasSM || pfSM;
      sched::JobTask t;
      t.expertIndex = idx;
      t.kind = kind;
      t.state = haveE && haveSM ? sched::TaskState::C
                : haveSM        ? sched::TaskState::S
                : haveE         ? sched::TaskState::E
                                : sched::TaskState::Miss;
      t.key = ChunkKey{layer, r.expert, kind, 0};
      t.entry = &te;
      t.split = split;
      // A prefill's miss that C keeps, read whole: its codes are indexed in its kept buffer instead
      // of decoded (sched::JobTask::indexCodes), so that it needs its staging slot only until then.
      t.indexCodes = codesInPlace_ && split && !r.acceptsSplit && keepPool == poolIndex(Pool::C) &&
                     t.state == sched::TaskState::Miss && options_.coalesceReads;
      uint64_t off = 0;
      for (const ChunkRef& c : te.eChunks) {
        t.eOffsets.push_back(off);
        off += c.paddedSize;
      }
      t.eBytes = off;
      if (hasE) t.eResident = entry.tensors[static_cast<size_t>(kind)].e.data();
      if (hasSM) t.smResident = entry.tensors[static_cast<size_t>(kind)].sm.data();
      TensorParts& parts = kp.parts[static_cast<size_t>(kind)];
      if (pfE) {
        pf->usedBytes += t.eBytes;
        t.eResident = usePrefetched(*pfE, keepE, parts.e);
      } else if (keepE && !hasE) {
        reuseBuffer(recycled, parts.e, t.eBytes);
        t.keepE = &parts.e;
      }
      if (pfSM) {
        pf->usedBytes += te.smChunk.paddedSize;
        t.smResident = usePrefetched(*pfSM, keepSM, parts.sm);
      } else if (keepSM && !hasSM) {
        reuseBuffer(recycled, parts.sm, te.smChunk.paddedSize);
        t.keepSM = &parts.sm;
      }
      if (keepFull) {
        reuseBuffer(recycled, parts.full, sizes_.fullBytes(kind));
        t.keepFull = &parts.full;
      }
      job.tasks.push_back(std::move(t));
    }
    job.experts.push_back(std::move(je));
  }
  double predicted = order(job);
  if (!rawTasks.empty()) {
    // After the scheduled reads: a raw read has no CPU work behind it to overlap (Johnson's rule puts
    // the reads that feed decompression first). The prediction adds them to the I/O lane.
    for (sched::JobTask& t : rawTasks) {
      sched::ExecOp op;
      op.kind = sched::ExecKind::ReadFull;
      op.task = static_cast<int>(job.tasks.size());
      job.io.push_back(op);
      job.tasks.push_back(std::move(t));
    }
    predicted += static_cast<double>(rawTasks.size()) * profile_.fullRead;
  }
  return predicted;
}

double ZipMoeStrategy::order(sched::LayerJob& job) const {
  std::vector<sched::TaskSpec> specs;
  for (const auto& t : job.tasks) specs.push_back({job.experts[static_cast<size_t>(t.expertIndex)].expert, t.kind, t.state});
  std::vector<double> compute(static_cast<size_t>(sizes_.experts()), 0.0);
  std::vector<int> ready;
  for (const auto& e : job.experts) {
    const double p = profile_.expertCompute(e.tokens);
    compute[static_cast<size_t>(e.expert)] = p > 0 ? p : static_cast<double>(e.tokens) * 1e-4;
    // Ready: F hits (their tensors are set) and C hits read in place. Raw misses have no scheduled
    // task either (their reads are appended after the schedule) and are not ready.
    if (((!e.tensors.empty() && e.tensors[0] != nullptr) || !e.nibble.empty()) &&
        std::none_of(job.tasks.begin(), job.tasks.end(), [&](const sched::JobTask& t) {
          return job.experts[static_cast<size_t>(t.expertIndex)].expert == e.expert;
        }))
      ready.push_back(e.expert);
  }
  // Split tasks are not recovered: when no task is, the schedule prices no recovery.
  const bool anyRecovery =
      std::any_of(job.tasks.begin(), job.tasks.end(), [](const sched::JobTask& t) { return !t.split; });
  const sched::Costs costs{profile_.smRead, profile_.eRead, profile_.decompress,
                           anyRecovery ? profile_.recover : 0.0, sizes_.shards(), options_.decompressWorkers};
  const sched::Schedule schedule = options_.fifoSchedule ? sched::fifoSchedule(specs, costs, ready)
                                                         : sched::buildSchedule(specs, compute, costs, ready);
  const double predicted = specs.empty() && ready.empty() ? 0.0 : sched::simulate(specs, compute, costs, schedule).makespan;
  std::vector<int> indexOfExpert(static_cast<size_t>(sizes_.experts()), -1);
  for (size_t i = 0; i < job.experts.size(); ++i) indexOfExpert[static_cast<size_t>(job.experts[i].expert)] = static_cast<int>(i);
  const auto convert = [](const std::vector<sched::Op>& ops, std::vector<sched::ExecOp>& out) {
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
    // The first ReadE of a task reads all its E-chunks (with the SM-chunk when it is a miss, into the
    // staging slot or the buffers its pool keeps); its other ReadE ops, and the merged ReadSM, go.
    std::vector<char> eDone(job.tasks.size(), 0);
    for (const sched::Op& op : schedule.io) {
      sched::JobTask& t = job.tasks[static_cast<size_t>(op.task)];
      sched::ExecOp x;
      x.task = op.task;
      if (op.kind == sched::OpKind::ReadE) {
        if (eDone[static_cast<size_t>(op.task)]++) continue;
        t.wholeRead = t.state == sched::TaskState::Miss;
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
  std::erase_if(job.recover, [&](const sched::ExecOp& op) { return job.tasks[static_cast<size_t>(op.task)].split; });
  std::vector<char> admitted(job.experts.size(), 0);
  for (int task : schedule.taskOrder) {
    const int idx = job.tasks[static_cast<size_t>(task)].expertIndex;
    if (!admitted[static_cast<size_t>(idx)]++) job.admissionOrder.push_back(idx);
  }
  for (int expert : schedule.computeOrder) job.computeOrder.push_back(indexOfExpert[static_cast<size_t>(expert)]);
  for (size_t i = 0; i < job.experts.size(); ++i)  // anything the schedule did not list
    if (std::find(job.computeOrder.begin(), job.computeOrder.end(), static_cast<int>(i)) == job.computeOrder.end())
      job.computeOrder.push_back(static_cast<int>(i));
  return predicted;
}

std::vector<int> ZipMoeStrategy::warmSet(const cache::ExpertCache& cache, const Plan& plan, int layer) const {
  // The ranks the plan's pools hold (S_p summed; the tolerance δ only moves the boundaries between
  // pools, as buildJob's dispatch does), each where dispatch sends it while the pool's bytes hold it
  // (what would not fit would be read only to be evicted again).
  int held = 0;
  for (int p = 0; p < kNumPools; ++p)
    if (plan.pools & (1u << p)) held += cache.capacityExperts(layer, p);
  std::vector<std::pair<int, int>> ranked;  // (rank, expert)
  for (int e = 0; e < sizes_.experts(); ++e)
    if (const int r = cache.rank(layer, e); r < held) ranked.emplace_back(r, e);
  std::sort(ranked.begin(), ranked.end());
  const bool rawLayer = rawLayer_[static_cast<size_t>(layer)] != 0;
  std::array<uint64_t, kNumPools> used{};
  std::vector<int> experts;
  for (const auto& [r, e] : ranked) {
    const int pool = cache.dispatch(layer, r, plan.pools, options_.tolerance);
    if (pool == cache::kNoPool) continue;
    const bool raw = rawLayer && pool == poolIndex(Pool::F);
    uint64_t need = 0;
    for (int kind = 0; kind < sizes_.kinds(); ++kind)
      need += raw ? raw_->tensor(layer, e, kind).range.length : sizes_.partBytes(static_cast<Pool>(pool), layer, e, kind);
    uint64_t& u = used[static_cast<size_t>(pool)];
    if (u + need > cache.capacityBytes(layer, pool)) continue;
    u += need;
    const int now = cache.entry(layer, e).pool;
    if (now == cache::kNoPool || now > pool) experts.push_back(e);
  }
  return experts;
}

bool ZipMoeStrategy::prepareWarm(cache::ExpertCache& cache, int layer, int expert) const {
  cache::Entry& entry = cache.entry(layer, expert);
  if (!codesInPlace_ || entry.pool != poolIndex(Pool::C) || entry.nibbleState != 0) return false;
  indexInPlace(store_.manifest(), layer, expert, entry);
  return true;
}

void ZipMoeStrategy::poolStats(const cache::ExpertCache& cache, const Plan& plan, RuntimeStats& stats) const {
  for (Pool p : kPools) {
    const auto i = static_cast<size_t>(poolIndex(p));
    PoolState& pool = stats.pools[i];
    pool.capacityBytes = 0;
    double ratio = 0;
    for (int l = 0; l < sizes_.layers(); ++l) {
      pool.capacityBytes += cache.capacityBytes(l, poolIndex(p));
      if (l < static_cast<int>(plan.layers.size())) ratio += plan.layers[static_cast<size_t>(l)].ratio[i];
    }
    pool.ratio = ratio / std::max(1, sizes_.layers());
  }
}

}  // namespace zipmoe::experts
