// RuntimeOptions — how an expert runtime (zipmoe/experts/expert_runtime.h) is opened: ZipMoE or a
// full-tensor baseline, under which memory budget, with which pools, eviction rule, threads and
// schedule, and seeded with which activation history.
//
// The budget is a MemoryBudget: bytes, or a share of the model's routed-expert bytes in BF16. A
// share means one thing everywhere (`--budget 25%`, the bench suites, docs/BENCHMARKS.md): the whole
// budget, the runtime's working set (its staging and output slots) included. The app's presets name
// the pools' room instead (poolsForShare: the working set plus that share of the experts). Only the
// runtime knows its working set and expert bytes, so it resolves a budget itself (at open and at
// every move): no caller needs to open a runtime with a placeholder budget to learn them first.
// Thread-safety: plain values. Cost: none.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/pools.h"
#include "zipmoe/format/store.h"

namespace zipmoe {

enum class OffloadMode { ZipMoE, FullTensor };

// ZipMoE: how a miss is served when a checkpoint is given (RuntimeOptions::checkpointDir): by the
// store's chunks (read, decompress, recover), or by a raw read of the whole BF16 tensor from the
// checkpoint (no CPU work). Planned: the planner decides per layer from the measured costs.
enum class RawMisses { Planned, Never, Always };

// ZipMoE's own rule evicts the least frequently activated member of a pool; the others replace it.
// UsageProbability (CoServe §4.3): the member with the lowest pre-assessed usage probability goes —
// from the activation history the runtime was opened with (RuntimeOptions::history), not from what
// it counts while it runs; without a history, from the counts so far. Among equals the larger
// member goes first (fewest evictions), then the least recently used. No admission test.
enum class EvictionPolicy { LeastFrequent, Lru, Fifo, Lfu, Marking, UsageProbability };
const char* evictionPolicyName(EvictionPolicy p);               // "zipmoe", "lru", ..., "usage"
EvictionPolicy parseEvictionPolicy(const std::string& text);    // "zipmoe"/"lfreq", "lru", "fifo", "lfu", "marking", "usage"

class MemoryBudget {
 public:
  MemoryBudget() = default;
  static MemoryBudget bytes(uint64_t bytes);
  // `share` (0 < share ≤ 1) of the expert bytes in BF16 as the whole budget: what `--budget N%` means.
  static MemoryBudget shareOfExperts(double share);
  // The working set plus `share` (0 ≤ share ≤ 1) of the expert bytes: room for that share in the pools.
  static MemoryBudget poolsForShare(double share);
  // Outside what the runtime can use, the budget becomes the nearest end (the minimum, or the
  // working set plus every expert) instead of being refused: for budgets remembered from an earlier
  // session, which a changed store or profile may have made too small.
  MemoryBudget clamped() const;
  // What a user writes: bytes with an optional K/M/G (KiB/MiB/GiB) suffix, at least 1 byte, or PCT%
  // with 0 < PCT <= 100 — shareOfExperts(PCT / 100). Every door reads `--budget` (and the app its
  // saved budget) with it. Throws zipmoe::Error quoting the text and saying what was expected.
  static MemoryBudget parse(const std::string& text);
  // The bytes of a budget given as bytes; nullopt for a share (which needs the model to resolve).
  std::optional<uint64_t> fixedBytes() const;

  // The bytes for a runtime whose working set is `minimum` and whose experts take `expertBytes`.
  // Throws zipmoe::Error naming this budget, its bytes and the minimum (in bytes and as a share of
  // the expert bytes) when it is below the minimum and not clamped, and for an invalid share.
  uint64_t resolve(uint64_t minimum, uint64_t expertBytes) const;
  std::string describe() const;  // "2.0 MiB (… bytes)", "25 % of the expert bytes", "the working set + 10 % …"
  // The bytes of `share` of the expert bytes: the one definition of what a percentage budget is.
  static uint64_t shareBytes(double share, uint64_t expertBytes);
  bool isSet() const { return kind_ != Kind::Unset; }

 private:
  enum class Kind { Unset, Bytes, ShareOfExperts, PoolsForShare };
  Kind kind_ = Kind::Unset;
  uint64_t bytes_ = 0;
  double share_ = 0;
  bool clamped_ = false;
};

// Activation counts per (layer, expert), plus how many steps they were counted over per layer.
struct ActivationCounts {
  int layers = 0, experts = 0;
  std::vector<uint64_t> counts;  // [layer * experts + expert]
  std::vector<uint64_t> steps;   // [layer]
  // Tokens routed to each expert, [layer * experts + expert]: a step of n tokens adds up to n. Kept
  // by the runtime for the steps it ran (a prompt's prefill is one step of many tokens); empty when
  // unknown (stored statistics keep only counts and steps).
  std::vector<uint64_t> tokens;
};

struct RuntimeOptions {
  OffloadMode mode = OffloadMode::ZipMoE;
  MemoryBudget budget;             // required: everything the runtime holds for routed experts
  PoolMask pools = kAllPools;      // ZipMoE: the enabled pools
  EvictionPolicy eviction = EvictionPolicy::LeastFrequent;  // FullTensor: LRU unless another is given
  bool planning = true;            // false: fixedRatios (over the enabled pools)
  std::array<double, kNumPools> fixedRatios{0.25, 0.25, 0.25, 0.25};
  int tolerance = 1;               // δ of the dispatch thresholds
  int decompressWorkers = 0;       // L; 0 = number of cores
  ReadMode readMode = ReadMode::Direct;
  bool fifoSchedule = false;       // plain request order instead of Algorithm 1 (for comparison)
  // One request per tensor for its K E-chunks (and its SM-chunk too when the tensor is a plain miss)
  // instead of one per chunk: they are contiguous in the store. Fewer, larger reads.
  bool coalesceReads = true;
  // Recovery fused into the model's compute: an expert the model computes from split planes
  // (ExpertRequest::acceptsSplit: decoding) gets its decompressed exponent plane and its sign-mantissa
  // plane instead of a recovered BF16 tensor — no merge pass, no output slot, the same result. Off:
  // every tensor is recovered first (the paper's pipeline; for comparison).
  bool fuseRecovery = true;
  // With fused recovery and a `nibble` store: a C hit the model computes from planes is handed as its
  // nibble codes, which decoding's kernels read in place (zipmoe/format/nibble_shard.h) — no decompression,
  // no worker, no plane; the planner prices such hits as CPU-free. A prefill (ExpertRequest::
  // mergesSplit, no output slots) gets them too and turns them into words in one pass on its own
  // threads. Off: the exponents are decoded into a plane first, as for every other codec (for comparison).
  bool readCodesInPlace = true;
  // Buffers the cache pools keep come from the pages of buffers the pools freed (reused, already
  // faulted in; io/page_pool.h) instead of fresh memory. The free pages count as held and are
  // trimmed to what the budget leaves. Off: every kept buffer is fresh memory (for comparison).
  bool recyclePages = true;
  // With recyclePages: a background thread at the lowest priority faults in the budget's free room
  // ahead of need and adds it to the free pages (io/page_reserve.h), so that the buffers the caches
  // keep while they fill are not fresh memory either. Off: they are (for comparison).
  bool reservePages = true;
  // ZipMoE mode: a pool that a new plan shrinks keeps its members as surplus while the layer's total
  // fits (cache/expert_cache.h); room is taken from the surplus first, and a hit surplus member moves
  // to its new pool in memory. Off: the shrunk pool is evicted at once and its experts read again.
  bool keepSurplus = true;
  // ZipMoE mode with keepSurplus: the layers' shares of the budget bound the pools' total, not each
  // layer. Room a layer leaves unused is lent: a newcomer takes it before anyone is evicted, an
  // expert ranked beyond every pool is kept in it, and its owner takes it back (the least used
  // surplus goes) when it needs it — one global pool's advantage when the layers route to unequal
  // numbers of experts (cache/expert_cache.h). Off: each layer within its own share (for comparison).
  bool lendRoom = true;
  // ZipMoE mode with planning: a layer with too little history of its own (fewer than 16 steps)
  // plans from the tokens of the prompt it is prefilling, once they are 16 or more, at that layer
  // and before its experts are placed: the prompt's most-routed experts go straight into the pools
  // the plan ranks them for, instead of where the prior puts them (the prior's all-C split at high
  // budgets, promoted to F one recovery at a time after 16 steps). Ranks break count ties by tokens.
  // Off: the prior until 16 steps (for comparison).
  bool planFromPrompt = true;
  // The session blend (planFromPrompt with stored history): the history weighs as much as this many
  // of the session's tokens, w = n / (n + sessionPriorTokens) for n tokens (cache::SessionBlend).
  // 4 was chosen on a replay that repeats each prompt's experts; fitted on the traces' own prompts
  // it is 16–32 (docs/RUNTIME.md, "A chat's tokens blended into stored history"). 0 … 1e6.
  double sessionPriorTokens = 4;
  // ZipMoE mode with planning: what a layer has seen (a prompt's tokens, a history's steps) is
  // smoothed toward uniform by this many tokens before it is planned from, so that the experts nothing
  // has routed to yet are planned for (experts/planner_inputs.h, kSmoothingTokens). Fitted on the
  // traces' prompts: 16–24; off (0, the counts alone) until the planner prices a C hit as this
  // machine measures it (with 16, all-C plans at 75 % ran 1.3–2× slower). 0 … 1e6.
  double smoothingTokens = 0;
  // Recovered experts waiting for / used by the model. −1 = as needed: none where every tensor the
  // model does not keep in F can reach it as split planes (ZipMoE mode, fuseRecovery, no raw
  // misses: a request that accepts or merges planes, ExpertRequest), so that their room goes to the
  // pools; otherwise 3. 0 is refused where they are needed (the full-tensor baseline's reads, raw
  // misses, unfused recovery land in them).
  int outputSlots = -1;
  int stagingSlots = 3;            // experts whose chunks are in flight at once
  // Speculative prefetch (ZipMoE mode): slots, each holding one expert's stored chunks (E + SM of
  // every tensor), for the experts the model hints (ExpertProvider::prefetch) of a layer not yet
  // acquired. Counted in the working set, so inside the budget. 0 = no prefetching; −1 = twice the
  // model's top-k (ZipMoE mode; none for the full-tensor baseline).
  int prefetchSlots = 0;
  int replanEverySteps = 64;       // re-plan from the growing history; 0 = only on budget changes
  double gridStep = 0.05;          // δ of Algorithm 4
  size_t traceCapacity = 1 << 18;  // events; 0 = no tracing
  std::filesystem::path checkpointDir;  // FullTensor: the HF directory with the BF16 safetensors;
                                        // ZipMoE: when set, misses may be raw reads from it (rawMisses)
  RawMisses rawMisses = RawMisses::Planned;  // ZipMoE with a checkpointDir; Always needs one
  // Activation history to plan from at open (e.g. the app's database); a shape different from the
  // model's is an error.
  std::optional<ActivationCounts> history;
  // Operation costs observed in earlier runs on this machine and store (RuntimeStats::observed) to
  // plan from at open; the runtime goes on observing from there.
  std::optional<ObservedCosts> observed;
  // Called on the planner thread before each replan (not for the plan the runtime opens with).
  // Tests use it to inject a planner failure; whatever it throws is handled like a failed plan.
  std::function<void()> beforeReplan;
};

// Whether a runtime with these options needs output slots: the full-tensor baseline reads into
// them, a raw miss lands in one, unfused recovery writes every tensor there. Otherwise a tensor not
// kept in F reaches the model as split planes from its staging slot.
inline bool needsOutputSlots(const RuntimeOptions& o) {
  return o.mode != OffloadMode::ZipMoE || !o.fuseRecovery || (!o.checkpointDir.empty() && o.rawMisses != RawMisses::Never);
}

}  // namespace zipmoe
