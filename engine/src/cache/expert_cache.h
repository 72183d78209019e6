// ExpertCache — residency of expert parts in the four pools, activation counts, rank-based dispatch
// and eviction (ZipMoE paper §3.4; docs/ARCHITECTURE.md "Cache pools, dispatch and planning").
//
// Per MoE layer and pool p ∈ {F, C, S, E} there is a byte capacity (from the plan) and an expert
// capacity S_p. An expert is resident in at most one pool; its entry holds, per tensor, what that
// pool keeps: F the BF16 tensor, C the E-chunks and the SM-chunk, S the SM-chunk, E the E-chunks.
// Dispatch: an expert of observed rank r (by Usage in its layer: activation count, then tokens
// routed to it, then lower id; in a layer whose history has the session's tokens blended in, by the
// blended usage first, see SessionBlend) goes to the first enabled pool i with r < τ_i = Σ_{j ≤ i}
// S_j + δ, or nowhere (dropped after use).
// Eviction from an overflowing pool picks a victim by the policy: LeastFrequent (ZipMoE: lowest
// Usage; a newcomer never displaces a member used at least as much), LRU, FIFO, LFU (lowest Usage,
// no admission test), Marking (random unmarked member; all unmarked when every member is marked) or
// UsageProbability (CoServe §4.3: lowest usage probability from the prior — the counts given by
// setActivationCounts, frozen there — or, without one, from the counts so far; ties: the larger,
// then the least recently used; no admission test).
// Surplus (per-layer pools, `keepSurplus`): a plan that shrinks a pool below what it holds (the first
// history replan moving a layer from C to F, a smaller budget) does not evict at once. The pool's
// members stay as surplus while the layer's total fits the layer's total capacity; room that
// another pool (or a promotion) needs is taken from the surplus first, least used first; a hit
// surplus member can be promoted in memory. So a plan switch reads nothing again. Without it, each
// pool is evicted down to its own capacity.
// Lent room (with surplus kept, `lendRoom`): the layers' shares bound the cache's total, not each
// layer. A newcomer takes room that any layer leaves unused before it evicts anyone (its pool then
// holds more than its capacity: surplus), an expert ranked beyond every pool is kept in free room
// only (ExpertCache::hasFreeRoom), and when the total is full the room comes back from surplus: the
// least used member of a pool over its capacity, in the layer that needs it or in a layer that holds
// more than its share. So a layer that routes to more experts than its share holds borrows what a
// layer routing to fewer leaves, as one global pool would, and gives it back when that layer needs it.
// The FullTensor baselines use one global pool (layer −1 semantics: capacity shared by all layers).
// Thread-safety: none — the runtime calls it from the model thread only (between layers).
// Cost: rank O(experts); evictions O(pool members) each.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "io/file_io.h"
#include "zipmoe/format/nibble_shard.h"
#include "zipmoe/base/pools.h"
#include "zipmoe/experts/runtime_options.h"

namespace zipmoe::cache {

// Entry::pool is a pool's index (zipmoe/base/pools.h: poolIndex(Pool::F) …) or kNoPool.
inline constexpr int kNoPool = -1;

// What one resident expert keeps, per tensor kind. Empty buffers = part not kept.
struct TensorParts {
  io::AlignedBuffer e;     // the K E-chunks, padded, back to back
  io::AlignedBuffer sm;    // the SM-chunk, padded
  io::AlignedBuffer full;  // BF16 words
  uint64_t bytes() const { return e.size() + sm.size() + full.size(); }
};

struct Entry {
  int pool = kNoPool;
  std::vector<TensorParts> tensors;
  uint64_t bytes = 0;
  uint64_t insertedAt = 0, lastUsed = 0;
  bool marked = false;
  bool pinned = false;  // requested by the layer being executed: never evicted
  // A C member's E-chunks indexed for reading its nibble codes in place (zipmoe/format/nibble_shard.h), per
  // tensor kind, built at its first such use (the positions live in the chunks' padding, inside
  // `tensors`): 0 not tried, 1 indexed, −1 cannot be read in place (kept decoding).
  int8_t nibbleState = 0;
  std::vector<std::vector<NibbleShard>> nibble;
};

// How much an expert of a layer is used: its count, and at an equal count its tokens (ranks and
// LeastFrequent eviction order experts by this, greater first).
struct Usage {
  uint64_t count = 0, tokens = 0;
  auto operator<=>(const Usage&) const = default;
};

// The session's tokens blended into a layer's history (ZipMoE with planFromPrompt): once the layer
// has `minSteps` steps of history and `minTokens` tokens or more have been routed through it since
// the counts were set (the session: stored statistics carry no tokens), an expert's usage is
//   w · (its share of the session's tokens) + (1 − w) · (its count per step),   w = n / (n + priorTokens)
// with n the session's tokens through the layer (Σ tokens / topK): the history weighs as much as
// `priorTokens` of the session's own tokens. The planner's rank frequencies (experts/planner_inputs.h)
// and the cache's ranks and LeastFrequent eviction use the same value, so the pools the plan sizes
// for a chat's experts hold that chat's experts. topK = 0: off (usage is the count, then the tokens).
// The session is a window of recent tokens: when more than 2 × `windowTokens` tokens have gone
// through a layer, its experts' token counts are halved, so older chats fade (a long-running app or
// server keeps between `windowTokens` and twice that, each halving weighing older tokens half).
// 0 = no window (every token since the counts were set).
struct SessionBlend {
  int topK = 0;
  uint64_t minSteps = 16, minTokens = 16;
  double priorTokens = 16;
  uint64_t windowTokens = 0;
  // w for a layer with `steps` steps whose experts served `tokenSum` tokens in all (Σ tokens); 0 when
  // not blended.
  double weight(uint64_t steps, uint64_t tokenSum) const {
    if (topK <= 0 || steps < minSteps || tokenSum < minTokens * static_cast<uint64_t>(topK)) return 0;
    const double n = static_cast<double>(tokenSum) / topK;
    return n / (n + priorTokens);
  }
  // An expert's blended usage (per step: Σ over a layer's experts ≈ topK).
  double value(Usage u, uint64_t steps, uint64_t tokenSum, double w) const {
    const double perStep = steps == 0 ? 0.0 : static_cast<double>(u.count) / static_cast<double>(steps);
    if (w <= 0) return perStep;
    return w * static_cast<double>(u.tokens) * topK / static_cast<double>(tokenSum) + (1 - w) * perStep;
  }
};

class ExpertCache {
 public:
  // `global` = one pool shared by all layers (FullTensor baselines); else per-layer pools.
  ExpertCache(int layers, int experts, EvictionPolicy policy, bool global, uint64_t seed = 0x5eed,
              bool keepSurplus = false, bool lendRoom = false);

  int layers() const { return layers_; }
  int experts() const { return experts_; }
  EvictionPolicy policy() const { return policy_; }

  // Counts one activation of each listed expert (distinct) and one step of the layer; tokens[i] is
  // how many of the step's tokens experts[i] serves (one each when `tokens` is empty).
  void recordActivations(int layer, const std::vector<int>& experts, const std::vector<int>& tokens = {});
  uint64_t count(int layer, int expert) const { return counts_[index(layer, expert)]; }
  // Tokens routed to the expert in the steps recorded here (not in counts set from history).
  uint64_t tokens(int layer, int expert) const { return tokens_[index(layer, expert)]; }
  Usage usage(int layer, int expert) const { return {count(layer, expert), tokens(layer, expert)}; }
  uint64_t steps(int layer) const { return steps_[static_cast<size_t>(layer)]; }
  ActivationCounts activationCounts() const;
  // REQUIRES: matching shape. Also becomes the UsageProbability policy's prior.
  void setActivationCounts(const ActivationCounts& counts);
  // P(a step of the layer uses the expert) as UsageProbability ranks it (see the file comment).
  double usageProbability(int layer, int expert) const;
  // 0-based rank of the expert in its layer: experts with a higher count come first; at an equal
  // count, those with more tokens (a prompt's prefill counts once per expert but routes many
  // tokens), then the lower id. In a layer whose session is blended (SessionBlend), by the blended
  // usage first.
  int rank(int layer, int expert) const;
  void setSessionBlend(const SessionBlend& blend) { blend_ = blend; }
  // The layer's blend weight now (0: not blended) and Σ tokens of its experts.
  double blendWeight(int layer) const;
  uint64_t tokenSum(int layer) const { return tokenSums_[static_cast<size_t>(layer)]; }
  // Whether `a` of layer `la` is used less than `b` of layer `lb` (ranks', LeastFrequent's order):
  // by the blended usage where a layer is blended, else by count, then tokens.
  bool lessUsed(int la, Usage a, int lb, Usage b) const;

  // Capacities of one layer's pools (or of the global pool: layer ignored, pool 0).
  void setCapacity(int layer, int pool, uint64_t bytes, int experts);
  uint64_t capacityBytes(int layer, int pool) const { return capacityBytes_[slot(layer, pool)]; }
  int capacityExperts(int layer, int pool) const { return capacityExperts_[slot(layer, pool)]; }
  uint64_t usedBytes(int layer, int pool) const { return usedBytes_[slot(layer, pool)]; }
  int residentCount(int layer, int pool) const;
  uint64_t totalUsedBytes() const;
  std::array<uint64_t, 4> usedBytesPerPool() const;
  std::array<int, 4> residentPerPool() const;

  // The pool an expert of this rank is dispatched to (kNoPool: drop after use).
  int dispatch(int layer, int rank, unsigned poolMask, int tolerance) const;

  Entry& entry(int layer, int expert) { return entries_[index(layer, expert)]; }
  const Entry& entry(int layer, int expert) const { return entries_[index(layer, expert)]; }

  // Frees room for `bytes` in (layer, pool) by evicting unpinned members per the policy. With
  // LeastFrequent, only members used less than `newcomer` (Usage) may go. With surplus kept,
  // the layer's total must also hold `bytes` plus `otherReserved` (bytes promised to its other
  // pools): surplus goes first for that; and a pool that holds more than its capacity (a plan shrank
  // it) is not evicted down to that capacity for a newcomer: it may not grow, so the newcomer
  // replaces members (as few as make its room), and the pool shrinks as other pools take the
  // layer's room from its surplus. With room lent, free room anywhere admits the newcomer first, and
  // the cache's total (not the layer's) must hold what is reserved. Returns false (and evicts nothing) if it cannot. Evicted
  // buffers are appended to `recycled` for reuse.
  bool makeRoom(int layer, int pool, uint64_t bytes, Usage newcomer, std::vector<TensorParts>* recycled,
                uint64_t otherReserved = 0);
  // Room for `bytes` more in the layer's total by evicting surplus only (a resident expert moving to
  // a pool with free room). Without surplus kept: true iff the layer's total already holds them.
  bool makeLayerRoom(int layer, uint64_t bytes, std::vector<TensorParts>* recycled);
  uint64_t layerUsedBytes(int layer) const;
  uint64_t layerCapacityBytes(int layer) const;
  uint64_t totalCapacityBytes() const;
  bool keepsSurplus() const { return keepSurplus_; }
  bool lendsRoom() const { return lendRoom_; }
  // Whether `bytes` more fit in room nobody uses (the cache's total capacity less what it holds).
  bool hasFreeRoom(uint64_t bytes) const;
  // Bytes the layers hold beyond their shares (Σ over layers of used − capacity, where positive).
  uint64_t lentBytes() const;
  // Evicts until every layer is within its capacity (after a budget shrink or a plan switch): each
  // pool within its own, or with surplus kept, each layer's total within its total, or with room
  // lent, the cache's total within its total (surplus goes, least used first).
  void enforceCapacities();
  // Records `parts` as the expert's entry in `pool` (replacing any previous entry; its bytes are
  // released). REQUIRES: room was made.
  void insert(int layer, int expert, int pool, std::vector<TensorParts> parts, uint64_t now);
  void evict(int layer, int expert);
  void touch(int layer, int expert, uint64_t now);  // a use: LRU time, Marking mark

 private:
  size_t index(int layer, int expert) const {
    return static_cast<size_t>(layer) * static_cast<size_t>(experts_) + static_cast<size_t>(expert);
  }
  size_t slot(int layer, int pool) const {
    return global_ ? 0 : static_cast<size_t>(layer) * 4 + static_cast<size_t>(pool);
  }
  std::optional<int> pickVictim(int layer, int pool, Usage newcomer);  // expert id (global: flat index)
  // What the victims chosen so far free: per slot, and in all.
  struct Freed {
    std::vector<uint64_t> slot;
    uint64_t total = 0;
    void add(size_t s, uint64_t bytes) {
      slot[s] += bytes;
      total += bytes;
    }
  };
  Freed noneFreed() const { return Freed{std::vector<uint64_t>(usedBytes_.size(), 0), 0}; }
  uint64_t freedInLayer(int layer, const Freed& freed) const;
  // The least used unpinned member (Usage, then least recently used) of a pool holding more than its
  // capacity once `freed` is gone; a flat index. Where: `layer`, and with room lent, every layer that
  // holds more than its share; layer −1: every layer.
  std::optional<int> pickSurplus(int layer, const Freed& freed) const;
  // Chooses surplus victims (pinned while chosen, as pickVictim's callers do) until the layer's total
  // (with room lent: the cache's total) holds `bytes` more; false if it cannot. Layer −1: the cache's
  // total, surplus from every layer.
  bool chooseSurplus(int layer, uint64_t bytes, std::vector<int>& victims, Freed& freed);
  void evictChosen(const std::vector<int>& victims, std::vector<TensorParts>* recycled);
  uint64_t nextRandom();

  int layers_, experts_;
  EvictionPolicy policy_;
  bool global_;
  uint64_t rng_;
  bool keepSurplus_;
  bool lendRoom_;
  std::vector<uint64_t> counts_, steps_, tokens_;
  std::vector<uint64_t> tokenSums_;  // per layer: Σ tokens_
  SessionBlend blend_;
  std::vector<uint64_t> priorCounts_, priorSteps_;  // UsageProbability's prior; empty = none
  std::vector<Entry> entries_;
  std::vector<uint64_t> capacityBytes_, usedBytes_;
  std::vector<int> capacityExperts_;
  std::vector<int> members_;  // per slot: number of resident experts
};

}  // namespace zipmoe::cache
