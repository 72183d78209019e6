// ExpertCache (see expert_cache.h).
#include "cache/expert_cache.h"

#include <algorithm>
#include <limits>
#include <string>

#include "base/random.h"
#include "zipmoe/base/error.h"

namespace zipmoe::cache {

ExpertCache::ExpertCache(int layers, int experts, EvictionPolicy policy, bool global, uint64_t seed, bool keepSurplus,
                         bool lendRoom)
    : layers_(layers), experts_(experts), policy_(policy), global_(global), rng_(seed), keepSurplus_(keepSurplus && !global),
      lendRoom_(lendRoom && keepSurplus && !global),
      counts_(static_cast<size_t>(layers) * static_cast<size_t>(experts), 0),
      steps_(static_cast<size_t>(layers), 0),
      tokens_(counts_.size(), 0),
      tokenSums_(static_cast<size_t>(layers), 0),
      entries_(counts_.size()),
      capacityBytes_(global ? 1 : static_cast<size_t>(layers) * 4, 0),
      usedBytes_(capacityBytes_.size(), 0),
      capacityExperts_(capacityBytes_.size(), 0),
      members_(capacityBytes_.size(), 0) {}

void ExpertCache::recordActivations(int layer, const std::vector<int>& experts, const std::vector<int>& tokens) {
  if (!tokens.empty() && tokens.size() != experts.size())
    throw Error("recordActivations: " + std::to_string(tokens.size()) + " token counts for " +
                std::to_string(experts.size()) + " experts");
  for (size_t i = 0; i < experts.size(); ++i) {
    ++counts_[index(layer, experts[i])];
    const uint64_t t = tokens.empty() ? 1 : static_cast<uint64_t>(std::max(tokens[i], 1));
    tokens_[index(layer, experts[i])] += t;
    tokenSums_[static_cast<size_t>(layer)] += t;
  }
  ++steps_[static_cast<size_t>(layer)];
  uint64_t& sum = tokenSums_[static_cast<size_t>(layer)];
  if (blend_.topK > 0 && blend_.windowTokens > 0 && sum > 2 * blend_.windowTokens * static_cast<uint64_t>(blend_.topK)) {
    sum = 0;
    for (int e = 0; e < experts_; ++e) sum += tokens_[index(layer, e)] /= 2;
  }
}

ActivationCounts ExpertCache::activationCounts() const {
  return ActivationCounts{layers_, experts_, counts_, steps_, tokens_};
}

void ExpertCache::setActivationCounts(const ActivationCounts& counts) {
  if (counts.layers != layers_ || counts.experts != experts_ || counts.counts.size() != counts_.size() ||
      counts.steps.size() != steps_.size())
    throw Error("activation counts are for " + std::to_string(counts.layers) + " layers × " +
                std::to_string(counts.experts) + " experts; this model has " + std::to_string(layers_) + " × " +
                std::to_string(experts_));
  counts_ = counts.counts;
  steps_ = counts.steps;
  if (counts.tokens.size() == tokens_.size()) tokens_ = counts.tokens;
  else std::fill(tokens_.begin(), tokens_.end(), 0);
  for (int l = 0; l < layers_; ++l) {
    uint64_t sum = 0;
    for (int e = 0; e < experts_; ++e) sum += tokens_[index(l, e)];
    tokenSums_[static_cast<size_t>(l)] = sum;
  }
  priorCounts_ = counts.counts;
  priorSteps_ = counts.steps;
}

double ExpertCache::usageProbability(int layer, int expert) const {
  const bool prior = !priorSteps_.empty() && priorSteps_[static_cast<size_t>(layer)] > 0;
  const uint64_t c = prior ? priorCounts_[index(layer, expert)] : counts_[index(layer, expert)];
  const uint64_t s = prior ? priorSteps_[static_cast<size_t>(layer)] : steps_[static_cast<size_t>(layer)];
  return s == 0 ? 0.0 : static_cast<double>(c) / static_cast<double>(s);
}

int ExpertCache::rank(int layer, int expert) const {
  const Usage mine = usage(layer, expert);
  int r = 0;
  for (int e = 0; e < experts_; ++e) {
    const Usage theirs = usage(layer, e);
    if (lessUsed(layer, mine, layer, theirs) || (e < expert && !lessUsed(layer, theirs, layer, mine))) ++r;
  }
  return r;
}

double ExpertCache::blendWeight(int layer) const {
  return global_ ? 0.0 : blend_.weight(steps_[static_cast<size_t>(layer)], tokenSum(layer));
}

bool ExpertCache::lessUsed(int la, Usage a, int lb, Usage b) const {
  const double wa = blendWeight(la), wb = blendWeight(lb);
  if (wa <= 0 && wb <= 0) return a < b;
  const double va = blend_.value(a, steps_[static_cast<size_t>(la)], tokenSum(la), wa);
  const double vb = blend_.value(b, steps_[static_cast<size_t>(lb)], tokenSum(lb), wb);
  if (va != vb) return va < vb;
  return a.tokens < b.tokens;
}

void ExpertCache::setCapacity(int layer, int pool, uint64_t bytes, int experts) {
  const size_t s = slot(layer, pool);
  capacityBytes_[s] = bytes;
  capacityExperts_[s] = experts;
}

int ExpertCache::residentCount(int layer, int pool) const { return members_[slot(layer, pool)]; }

uint64_t ExpertCache::totalUsedBytes() const {
  uint64_t sum = 0;
  for (uint64_t b : usedBytes_) sum += b;
  return sum;
}

std::array<uint64_t, 4> ExpertCache::usedBytesPerPool() const {
  std::array<uint64_t, 4> out{};
  for (const Entry& e : entries_)
    if (e.pool != kNoPool) out[static_cast<size_t>(e.pool)] += e.bytes;
  return out;
}

std::array<int, 4> ExpertCache::residentPerPool() const {
  std::array<int, 4> out{};
  for (const Entry& e : entries_)
    if (e.pool != kNoPool) ++out[static_cast<size_t>(e.pool)];
  return out;
}

int ExpertCache::dispatch(int layer, int r, unsigned poolMask, int tolerance) const {
  int tau = tolerance;
  for (int p = 0; p < 4; ++p) {
    if (!(poolMask & (1u << p))) continue;
    const int size = capacityExperts(layer, p);
    tau += size;
    if (size > 0 && r < tau) return p;
  }
  return kNoPool;
}

uint64_t ExpertCache::nextRandom() { return detail::splitmix64(rng_); }

std::optional<int> ExpertCache::pickVictim(int layer, int pool, Usage newcomer) {
  // Candidates: unpinned members of the slot.
  const int first = global_ ? 0 : layer * experts_;
  const int last = global_ ? layers_ * experts_ : first + experts_;
  std::optional<int> best;
  auto better = [&](const Entry& a, size_t ia, const Entry& b, size_t ib) {
    switch (policy_) {
      case EvictionPolicy::LeastFrequent: {
        const int la = static_cast<int>(ia) / experts_, lb = static_cast<int>(ib) / experts_;
        const Usage ua{counts_[ia], tokens_[ia]}, ub{counts_[ib], tokens_[ib]};
        if (lessUsed(la, ua, lb, ub)) return true;
        if (lessUsed(lb, ub, la, ua)) return false;
        return a.lastUsed < b.lastUsed;
      }
      case EvictionPolicy::Lfu:
        if (counts_[ia] != counts_[ib]) return counts_[ia] < counts_[ib];
        if (tokens_[ia] != tokens_[ib]) return tokens_[ia] < tokens_[ib];
        return a.lastUsed < b.lastUsed;
      case EvictionPolicy::Lru: return a.lastUsed < b.lastUsed;
      case EvictionPolicy::Fifo: return a.insertedAt < b.insertedAt;
      case EvictionPolicy::Marking: return false;
      case EvictionPolicy::UsageProbability: {
        const int la = static_cast<int>(ia) / experts_, lb = static_cast<int>(ib) / experts_;
        const double pa = usageProbability(la, static_cast<int>(ia) % experts_);
        const double pb = usageProbability(lb, static_cast<int>(ib) % experts_);
        if (pa != pb) return pa < pb;
        if (a.bytes != b.bytes) return a.bytes > b.bytes;
        return a.lastUsed < b.lastUsed;
      }
    }
    return false;
  };
  std::vector<int> unmarked;
  bool anyCandidate = false;
  for (int i = first; i < last; ++i) {
    const Entry& e = entries_[static_cast<size_t>(i)];
    if (e.pool != pool || e.pinned) continue;
    anyCandidate = true;
    if (policy_ == EvictionPolicy::Marking) {
      if (!e.marked) unmarked.push_back(i);
      continue;
    }
    if (!best || better(e, static_cast<size_t>(i), entries_[static_cast<size_t>(*best)], static_cast<size_t>(*best)))
      best = i;
  }
  if (!anyCandidate) return std::nullopt;
  if (policy_ == EvictionPolicy::Marking) {
    if (unmarked.empty()) {  // a new phase: unmark everyone in the slot
      for (int i = first; i < last; ++i) {
        Entry& e = entries_[static_cast<size_t>(i)];
        if (e.pool == pool && !e.pinned) {
          e.marked = false;
          unmarked.push_back(i);
        }
      }
    }
    return unmarked[static_cast<size_t>(nextRandom() % unmarked.size())];
  }
  if (policy_ == EvictionPolicy::LeastFrequent &&
      !lessUsed(*best / experts_, Usage{counts_[static_cast<size_t>(*best)], tokens_[static_cast<size_t>(*best)]}, layer,
                newcomer))
    return std::nullopt;
  return best;
}

bool ExpertCache::makeRoom(int layer, int pool, uint64_t bytes, Usage newcomer,
                           std::vector<TensorParts>* recycled, uint64_t otherReserved) {
  const size_t s = slot(layer, pool);
  // Room nobody uses, in this layer or (lent) in another: taken before anyone is evicted.
  if (lendRoom_ && hasFreeRoom(bytes + otherReserved)) return true;
  const uint64_t limit = keepSurplus_ ? std::max(capacityBytes_[s], usedBytes_[s]) : capacityBytes_[s];
  if (bytes > limit) return false;
  // Choose the victims first so that a failed attempt evicts nothing.
  std::vector<int> victims;
  Freed freed = noneFreed();
  while (usedBytes_[s] - freed.slot[s] + bytes > limit) {
    const auto v = pickVictim(layer, pool, newcomer);
    if (!v) break;
    victims.push_back(*v);
    freed.add(s, entries_[static_cast<size_t>(*v)].bytes);
    entries_[static_cast<size_t>(*v)].pinned = true;  // exclude from the next pick
  }
  bool ok = usedBytes_[s] - freed.slot[s] + bytes <= limit;
  if (ok && keepSurplus_) ok = chooseSurplus(layer, bytes + otherReserved, victims, freed);
  for (int v : victims) entries_[static_cast<size_t>(v)].pinned = false;
  if (!ok) return false;
  evictChosen(victims, recycled);
  return true;
}

bool ExpertCache::makeLayerRoom(int layer, uint64_t bytes, std::vector<TensorParts>* recycled) {
  if (!keepSurplus_) return global_ || layerUsedBytes(layer) + bytes <= layerCapacityBytes(layer);
  std::vector<int> victims;
  Freed freed = noneFreed();
  const bool ok = chooseSurplus(layer, bytes, victims, freed);
  for (int v : victims) entries_[static_cast<size_t>(v)].pinned = false;
  if (!ok) return false;
  evictChosen(victims, recycled);
  return true;
}

uint64_t ExpertCache::layerUsedBytes(int layer) const {
  if (global_) return usedBytes_[0];
  uint64_t sum = 0;
  for (int p = 0; p < 4; ++p) sum += usedBytes_[slot(layer, p)];
  return sum;
}

uint64_t ExpertCache::layerCapacityBytes(int layer) const {
  if (global_) return capacityBytes_[0];
  uint64_t sum = 0;
  for (int p = 0; p < 4; ++p) sum += capacityBytes_[slot(layer, p)];
  return sum;
}

uint64_t ExpertCache::totalCapacityBytes() const {
  uint64_t sum = 0;
  for (uint64_t b : capacityBytes_) sum += b;
  return sum;
}

bool ExpertCache::hasFreeRoom(uint64_t bytes) const { return totalUsedBytes() + bytes <= totalCapacityBytes(); }

uint64_t ExpertCache::lentBytes() const {
  if (global_) return 0;
  uint64_t sum = 0;
  for (int layer = 0; layer < layers_; ++layer) {
    const uint64_t used = layerUsedBytes(layer), capacity = layerCapacityBytes(layer);
    if (used > capacity) sum += used - capacity;
  }
  return sum;
}

uint64_t ExpertCache::freedInLayer(int layer, const Freed& freed) const {
  uint64_t sum = 0;
  for (int p = 0; p < 4; ++p) sum += freed.slot[slot(layer, p)];
  return sum;
}

std::optional<int> ExpertCache::pickSurplus(int layer, const Freed& freed) const {
  std::optional<int> best;
  const auto consider = [&](int l) {
    for (int i = l * experts_; i < (l + 1) * experts_; ++i) {
      const Entry& e = entries_[static_cast<size_t>(i)];
      if (e.pool == kNoPool || e.pinned) continue;
      const size_t s = slot(l, e.pool);
      if (usedBytes_[s] - freed.slot[s] <= capacityBytes_[s]) continue;  // within its pool
      if (!best) {
        best = i;
        continue;
      }
      const Entry& b = entries_[static_cast<size_t>(*best)];
      const int bl = *best / experts_;
      const Usage mine = usage(l, i % experts_), theirs = usage(bl, *best % experts_);
      if (lessUsed(l, mine, bl, theirs) || (!lessUsed(bl, theirs, l, mine) && e.lastUsed < b.lastUsed)) best = i;
    }
  };
  for (int l = 0; l < layers_; ++l) {
    const bool borrower = lendRoom_ && layerUsedBytes(l) - freedInLayer(l, freed) > layerCapacityBytes(l);
    if (l == layer || layer < 0 || borrower) consider(l);
  }
  return best;
}

bool ExpertCache::chooseSurplus(int layer, uint64_t bytes, std::vector<int>& victims, Freed& freed) {
  const bool whole = lendRoom_ || layer < 0;
  const uint64_t capacity = whole ? totalCapacityBytes() : layerCapacityBytes(layer);
  const uint64_t used = whole ? totalUsedBytes() : layerUsedBytes(layer);
  const auto gone = [&] { return whole ? freed.total : freedInLayer(layer, freed); };
  while (used - gone() + bytes > capacity) {
    const auto v = pickSurplus(layer, freed);
    if (!v) break;
    victims.push_back(*v);
    Entry& e = entries_[static_cast<size_t>(*v)];
    freed.add(slot(*v / experts_, e.pool), e.bytes);
    e.pinned = true;
  }
  return used - gone() + bytes <= capacity;
}

void ExpertCache::evictChosen(const std::vector<int>& victims, std::vector<TensorParts>* recycled) {
  for (int v : victims) {
    Entry& e = entries_[static_cast<size_t>(v)];
    if (recycled)
      for (auto& t : e.tensors) recycled->push_back(std::move(t));
    evict(v / experts_, v % experts_);
  }
}

void ExpertCache::enforceCapacities() {
  if (keepSurplus_) {
    // As far as unpinned surplus goes; the rest when unpinned. With room lent, the cache's total.
    for (int layer = lendRoom_ ? -1 : 0; layer < (lendRoom_ ? 0 : layers_); ++layer) {
      std::vector<int> victims;
      Freed freed = noneFreed();
      chooseSurplus(layer, 0, victims, freed);
      for (int v : victims) entries_[static_cast<size_t>(v)].pinned = false;
      evictChosen(victims, nullptr);
    }
    return;
  }
  for (size_t s = 0; s < usedBytes_.size(); ++s) {
    const int layer = global_ ? 0 : static_cast<int>(s / 4);
    const int pool = global_ ? 0 : static_cast<int>(s % 4);
    while (usedBytes_[s] > capacityBytes_[s]) {
      const auto v = pickVictim(layer, pool, Usage{std::numeric_limits<uint64_t>::max(), 0});
      if (!v) break;  // only pinned members left: they go when unpinned (next boundary)
      evict(*v / experts_, *v % experts_);
    }
  }
}

void ExpertCache::insert(int layer, int expert, int pool, std::vector<TensorParts> parts, uint64_t now) {
  evict(layer, expert);
  Entry& e = entries_[index(layer, expert)];
  e.pool = pool;
  e.tensors = std::move(parts);
  e.bytes = 0;
  for (const auto& t : e.tensors) e.bytes += t.bytes();
  e.insertedAt = now;
  e.lastUsed = now;
  e.marked = true;
  const size_t s = slot(layer, pool);
  usedBytes_[s] += e.bytes;
  ++members_[s];
}

void ExpertCache::evict(int layer, int expert) {
  Entry& e = entries_[index(layer, expert)];
  if (e.pool == kNoPool) return;
  const size_t s = slot(layer, e.pool);
  usedBytes_[s] -= e.bytes;
  --members_[s];
  e.pool = kNoPool;
  e.tensors.clear();
  e.nibbleState = 0;
  e.nibble.clear();
  e.bytes = 0;
  e.marked = false;
}

void ExpertCache::touch(int layer, int expert, uint64_t now) {
  Entry& e = entries_[index(layer, expert)];
  e.lastUsed = now;
  e.marked = true;
}

}  // namespace zipmoe::cache
