// OffloadingRuntime (experts/offloading_runtime.h): speculative prefetch. The model's hint for a later
// layer queues reads of the hinted experts' missing tensor parts into the prefetch slots (the executor's
// I/O thread runs them when no demand read is ready); acquire() takes what completed for the requested
// experts and frees the slots of wrong guesses, counting their bytes as wasted.
#include <algorithm>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "experts/offloading_runtime.h"
#include "zipmoe/base/error.h"

namespace zipmoe::experts {

void OffloadingRuntime::prefetch(int layer, std::span<const int> experts) {
  if (slots_.empty()) return;
  if (layer < 0 || layer >= sizes_.layers())
    throw Error("expert runtime: prefetch hint for MoE layer " + std::to_string(layer) + " out of range (0.." +
                std::to_string(sizes_.layers() - 1) + ")");
  for (int e : experts)
    if (e < 0 || e >= sizes_.experts())
      throw Error("expert runtime: prefetch hint for expert " + std::to_string(e) + " out of range (0.." +
                  std::to_string(sizes_.experts() - 1) + ")");
  std::lock_guard lock(cacheMutex_);
  {
    std::lock_guard statsLock(statsMutex_);
    stats_.prefetchHintedExperts += experts.size();
  }
  hint_.layer = layer;
  hint_.experts.assign(experts.begin(), experts.end());
  hint_.consumed = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const PrefetchSlot& slot = slots_[i];
    if (slot.state == SlotState::Assigned &&
        (slot.layer != layer || std::find(experts.begin(), experts.end(), slot.expert) == experts.end()))
      releaseSlot(static_cast<int>(i));
  }
  assignSlots();
}

int OffloadingRuntime::slotOf(int layer, int expert) const {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].state != SlotState::Free && slots_[i].layer == layer && slots_[i].expert == expert) return static_cast<int>(i);
  return -1;
}

void OffloadingRuntime::releaseSlot(int index) {
  PrefetchSlot& slot = slots_[static_cast<size_t>(index)];
  uint64_t wasted = 0;
  for (const sched::PrefetchRead& r : executor_->settlePrefetch(index)) wasted += r.bytes();
  slot.state = SlotState::Free;
  std::lock_guard statsLock(statsMutex_);
  stats_.prefetchWastedBytes += wasted;
}

void OffloadingRuntime::assignSlots() {
  if (slots_.empty() || hint_.consumed) return;
  std::vector<sched::PrefetchRead> reads;
  for (int expert : hint_.experts) {
    if (slotOf(hint_.layer, expert) >= 0) continue;
    const cache::Entry& entry = cache_->entry(hint_.layer, expert);
    const bool resident = entry.pool != cache::kNoPool;
    const bool needE = !resident || !keepsExponents(static_cast<Pool>(entry.pool));
    const bool needSM = !resident || !keepsSignMantissa(static_cast<Pool>(entry.pool));
    if (entry.pool == poolIndex(Pool::F) || (!needE && !needSM)) continue;
    const auto free = std::find_if(slots_.begin(), slots_.end(), [](const PrefetchSlot& s) { return s.state == SlotState::Free; });
    if (free == slots_.end()) break;
    free->state = SlotState::Assigned;
    free->layer = hint_.layer;
    free->expert = expert;
    free->doneBytes = 0;
    const int index = static_cast<int>(free - slots_.begin());
    for (int kind = 0; kind < sizes_.kinds(); ++kind) {  // one read per tensor: E and SM are contiguous
      sched::PrefetchRead r;
      r.slot = index;
      r.layer = hint_.layer;
      r.expert = expert;
      r.kind = kind;
      r.token = static_cast<int>(token_);
      if (needE) r.e = &free->e[static_cast<size_t>(kind)];
      if (needSM) r.sm = &free->sm[static_cast<size_t>(kind)];
      r.eBytes = sizes_.eBytes(hint_.layer, expert, kind);
      r.smBytes = sizes_.smBytes(hint_.layer, expert, kind);
      reads.push_back(r);
    }
  }
  if (!reads.empty()) executor_->addPrefetch(std::move(reads));
}

std::vector<PrefetchedParts> OffloadingRuntime::takePrefetched(int layer, std::span<const ExpertRequest> requests) {
  std::vector<experts::PrefetchedParts> parts;
  if (slots_.empty()) return parts;
  if (hint_.layer == layer) hint_.consumed = true;
  for (size_t i = 0; i < slots_.size(); ++i) {
    PrefetchSlot& slot = slots_[i];
    if (slot.state != SlotState::Assigned) continue;
    const bool requested = slot.layer == layer && std::any_of(requests.begin(), requests.end(), [&](const ExpertRequest& r) {
                             return r.expert == slot.expert;
                           });
    if (!requested) {  // a wrong guess, unless it is for the standing hint's (later) layer
      if (hint_.consumed || slot.layer != hint_.layer) releaseSlot(static_cast<int>(i));
      continue;
    }
    experts::PrefetchedParts p;
    p.expert = slot.expert;
    p.e.assign(static_cast<size_t>(sizes_.kinds()), nullptr);
    p.sm.assign(static_cast<size_t>(sizes_.kinds()), nullptr);
    slot.doneBytes = 0;
    for (const sched::PrefetchRead& r : executor_->settlePrefetch(static_cast<int>(i))) {
      if (r.e) p.e[static_cast<size_t>(r.kind)] = r.e;
      if (r.sm) p.sm[static_cast<size_t>(r.kind)] = r.sm;
      slot.doneBytes += r.bytes();
    }
    slot.state = SlotState::InUse;
    parts.push_back(std::move(p));
  }
  return parts;
}

}  // namespace zipmoe::experts
