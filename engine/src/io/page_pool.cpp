#include "io/page_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>

namespace zipmoe::io {

namespace {

// Fresh anonymous memory, not yet faulted in. From kHugePageBytes up it starts on a 2 MiB boundary
// and is advised for huge pages (see kHugePageBytes): mapped kHugePageBytes larger, the ends cut.
uint8_t* mapFresh(size_t bytes) {
  const size_t slack = bytes >= kHugePageBytes ? kHugePageBytes : 0;
  void* p = ::mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<uint8_t*>(p);
  if (slack == 0) return base;
  const uintptr_t at = reinterpret_cast<uintptr_t>(base);
  const size_t head = static_cast<size_t>(alignUp(at, kHugePageBytes) - at);
  if (head > 0) ::munmap(base, head);
  if (slack - head > 0) ::munmap(base + head + bytes, slack - head);
  adviseHugePages(base + head, bytes);
  return base + head;
}

}  // namespace

std::shared_ptr<PagePool> PagePool::create() { return std::shared_ptr<PagePool>(new PagePool()); }

PagePool::~PagePool() {
  // Live buffers hold the pool, so none is left here: only free runs.
  for (const Run& r : free_) ::munmap(r.addr, r.bytes);
}

AlignedBuffer PagePool::allocate(size_t bytes) {
  const size_t n = std::max<size_t>(kPageBytes, static_cast<size_t>(alignUp(bytes, kPageBytes)));
  std::lock_guard lock(mutex_);
  std::vector<Run> pieces;
  uint8_t* start = nullptr;
  // An exact-size run: one piece, no system call.
  const auto exact = std::find_if(free_.begin(), free_.end(), [n](const Run& r) { return r.bytes == n; });
  if (exact != free_.end()) {
    start = exact->addr;
    pieces.push_back(*exact);
    *exact = free_.back();
    free_.pop_back();
    stats_.pooledBytes -= n;
    stats_.reusedBytes += n;
  } else {
    start = mapFresh(n);
    size_t filled = 0;
    // Every piece and every free run may be a mapping of its own: stitch only while both together
    // stay under the limit.
    const bool stitch = stats_.livePieces + free_.size() + kMaxPieces <= kMaxLivePieces;
    // Largest runs first (fewest pieces); a run larger than what is left is split.
    while (stitch && filled < n && static_cast<int>(pieces.size()) < kMaxPieces - 1 && !free_.empty()) {
      auto best = std::max_element(free_.begin(), free_.end(), [](const Run& a, const Run& b) { return a.bytes < b.bytes; });
      // The smallest run that covers the rest, if any, keeps the large runs whole.
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->bytes >= n - filled && it->bytes < best->bytes) best = it;
      const size_t take = std::min(best->bytes, n - filled);
      void* moved = ::mremap(best->addr, take, take, MREMAP_MAYMOVE | MREMAP_FIXED, start + filled);
      if (moved == MAP_FAILED) break;  // the run stays where it was; the rest is fresh
      pieces.push_back(Run{start + filled, take});
      filled += take;
      stats_.pooledBytes -= take;
      stats_.reusedBytes += take;
      if (take == best->bytes) {
        *best = free_.back();
        free_.pop_back();
      } else {
        best->addr += take;
        best->bytes -= take;
      }
    }
    if (filled < n) {
      pieces.push_back(Run{start + filled, n - filled});
      stats_.freshBytes += n - filled;
    }
  }
  stats_.livePieces += pieces.size();
  ++stats_.liveBuffers;
  live_.emplace(start, std::move(pieces));
  return AlignedBuffer(start, n, shared_from_this());
}

void PagePool::release(uint8_t* p) {
  std::lock_guard lock(mutex_);
  auto node = live_.extract(p);
  if (node.empty()) return;  // not ours: cannot happen (only allocate hands out pool buffers)
  for (const Run& r : node.mapped()) {
    free_.push_back(r);
    stats_.pooledBytes += r.bytes;
  }
  stats_.livePieces -= node.mapped().size();
  --stats_.liveBuffers;
}

void PagePool::trim(uint64_t maxPooledBytes) {
  std::lock_guard lock(mutex_);
  if (stats_.pooledBytes <= maxPooledBytes) return;
  std::sort(free_.begin(), free_.end(), [](const Run& a, const Run& b) { return a.bytes > b.bytes; });
  while (stats_.pooledBytes > maxPooledBytes && !free_.empty()) {
    const Run r = free_.back();
    free_.pop_back();
    ::munmap(r.addr, r.bytes);
    stats_.pooledBytes -= r.bytes;
    stats_.trimmedBytes += r.bytes;
  }
}

PagePool::Run PagePool::faultIn(size_t bytes) {
  const size_t n = std::max<size_t>(kPageBytes, static_cast<size_t>(alignUp(bytes, kPageBytes)));
  uint8_t* p = mapFresh(n);
  // One write per page: the first write maps a zeroed page, so the contents stay zero.
  for (size_t i = 0; i < n; i += kPageBytes) reinterpret_cast<volatile uint8_t*>(p)[i] = 0;
  return Run{p, n};
}

void PagePool::freeRun(const Run& run) { ::munmap(run.addr, run.bytes); }

bool PagePool::adopt(const Run& run) {
  std::lock_guard lock(mutex_);
  if (stats_.livePieces + free_.size() >= kMaxLivePieces / 2) return false;
  free_.push_back(run);
  stats_.pooledBytes += run.bytes;
  stats_.reservedBytes += run.bytes;
  return true;
}

uint64_t PagePool::pooledBytes() const {
  std::lock_guard lock(mutex_);
  return stats_.pooledBytes;
}

PagePoolStats PagePool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void BufferDeleter::operator()(uint8_t* p) const {
  if (pool)
    pool->release(p);
  else if (release)
    release(p);
  else
    std::free(p);
}

}  // namespace zipmoe::io
