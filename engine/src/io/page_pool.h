// Internal: PagePool — memory for the expert caches' buffers that is reused, already faulted in.
//
// Why: a buffer a pool keeps (an F tensor, a C member's E-chunks or SM-chunk) is written once, by a
// read or a recovery. When it comes from the allocator it is fresh anonymous memory, and the write
// faults it in 4 KiB at a time: on this project's 2-vCPU VM 5.5 MiB took 1.3–11.7 ms that way against
// about 1 ms into memory already mapped (docs/RUNTIME.md, "Plan switches"). An expert leaving the
// cache frees exactly the pages the next one needs, but in other sizes: a C member's SM-chunk is half
// of an F tensor. So freed buffers come back here as runs of mapped pages, and a new buffer is built
// from them — an exact-size run if there is one, else up to kMaxPieces runs moved side by side into
// one fresh address range with mremap(2) (the kernel moves page-table entries; nothing is copied or
// faulted), the rest fresh pages.
//
// Fresh mappings from 2 MiB up start on a 2 MiB boundary and ask for huge pages (kHugePageBytes in
// file_io.h): a read into them is fewer device requests. A run moved by mremap keeps its physical
// pages, so what was a huge page stays contiguous in its new place.
//
// Contents of a buffer from the pool are unspecified (recycled pages): its writer fills it.
// The pool's free pages are memory held: the runtime counts pooledBytes() in its held bytes and
// trims the pool to what its budget leaves (trim). Buffers keep the pool alive (shared_ptr).
// Thread-safety: allocate, release (a buffer's destruction), trim and the counters may run on any
// threads concurrently (one mutex).
// Cost: allocate O(free runs) plus ≤ kMaxPieces mremap calls; release O(pieces).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "io/file_io.h"

namespace zipmoe::io {

struct PagePoolStats {
  uint64_t pooledBytes = 0;      // free pages held now
  uint64_t reusedBytes = 0;      // of all buffers handed out, bytes that were pooled pages
  uint64_t freshBytes = 0;       // … and bytes that were new mappings (faulted on first write)
  uint64_t trimmedBytes = 0;     // pooled pages returned to the system by trim
  uint64_t reservedBytes = 0;    // pages faulted in ahead of need and adopted (PageReserve)
  uint64_t liveBuffers = 0, livePieces = 0;
};

class PagePool : public std::enable_shared_from_this<PagePool> {
 public:
  static constexpr size_t kPageBytes = 4096;
  static constexpr int kMaxPieces = 4;  // runs stitched into one buffer (each is a mapping of its own)
  // Beyond this many live pieces and free runs in all, buffers are one fresh mapping each (the kernel
  // allows about 65,530 mappings per process; the rest of the program needs some too).
  static constexpr uint64_t kMaxLivePieces = 24576;

  struct Run {
    uint8_t* addr = nullptr;
    size_t bytes = 0;
  };

  static std::shared_ptr<PagePool> create();
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // A page-aligned buffer of at least `bytes` (rounded up to whole pages). Throws std::bad_alloc if
  // the system has no memory for its fresh part.
  AlignedBuffer allocate(size_t bytes);
  // Returns pooled pages to the system, smallest runs first, until at most `maxPooledBytes` remain.
  void trim(uint64_t maxPooledBytes);
  // A fresh run of `bytes` (whole pages) written once, page by page, so that every page is faulted
  // in: what PageReserve adds to the pool ahead of need. Throws std::bad_alloc when the system has
  // no memory. The run is no buffer's and not the pool's until adopt() (or freeRun) takes it.
  static Run faultIn(size_t bytes);
  static void freeRun(const Run& run);
  // Adds a run from faultIn to the free pages (counted in pooledBytes and reservedBytes); returns
  // false, leaving the run to the caller, while the pool's runs and pieces fill half kMaxLivePieces
  // (the rest is for stitching).
  bool adopt(const Run& run);
  uint64_t pooledBytes() const;
  PagePoolStats stats() const;

 private:
  friend struct BufferDeleter;
  PagePool() = default;
  void release(uint8_t* p);  // a buffer's destruction: its pieces become free runs

  mutable std::mutex mutex_;
  std::vector<Run> free_;
  std::unordered_map<uint8_t*, std::vector<Run>> live_;  // buffer start → its pieces
  PagePoolStats stats_;
};

}  // namespace zipmoe::io
