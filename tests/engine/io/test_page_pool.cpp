// PagePool: freed buffers' pages come back as runs and new buffers are built from them — an exact
// run as it is, smaller runs moved side by side with mremap (their old contents show through, which
// is how these tests tell reused pages from fresh zero pages), a larger run split — never more than
// kMaxPieces pieces; trim returns pooled pages; a pool's buffer grows from the same pool; buffers
// outlive the caller's handle on the pool; threads allocating and freeing at once never share pages.
// PageReserve faults runs in ahead of need while its owner finds room, sleeps when there is none,
// wakes when told, and the pool builds buffers from those runs with no fresh page.
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "io/page_pool.h"
#include "io/page_reserve.h"

using zipmoe::io::AlignedBuffer;
using zipmoe::io::PagePool;
using zipmoe::io::PageReserve;

namespace {

constexpr size_t kPage = PagePool::kPageBytes;
constexpr size_t kMiB = 1 << 20;

AlignedBuffer filled(PagePool& pool, size_t bytes, uint8_t value) {
  AlignedBuffer b = pool.allocate(bytes);
  std::fill_n(b.data(), b.size(), value);
  return b;
}

size_t countOf(const AlignedBuffer& b, uint8_t value) { return static_cast<size_t>(std::count(b.data(), b.data() + b.size(), value)); }

// The VmFlags of the mapping holding p, from /proc/self/smaps ("hg": advised for huge pages).
std::string vmFlagsAt(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2)  // a mapping's first line
      inside = at >= begin && at < end;
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return {};
}

bool advisedHuge(const void* p) {
  const std::string flags = vmFlagsAt(p);
  return flags.find(" hg") != std::string::npos;
}

}  // namespace

class TestPagePool : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void anExactRunIsHandedBackAsItIs() {
    auto pool = PagePool::create();
    uint8_t* first = nullptr;
    {
      AlignedBuffer b = filled(*pool, 3 * kPage - 100, 0x5a);  // rounded up to whole pages
      QCOMPARE(b.size(), 3 * kPage);
      QCOMPARE(reinterpret_cast<uintptr_t>(b.data()) % kPage, uintptr_t{0});
      first = b.data();
      QCOMPARE(pool->stats().freshBytes, uint64_t{3 * kPage});
      QCOMPARE(pool->pooledBytes(), uint64_t{0});
    }
    QCOMPARE(pool->pooledBytes(), uint64_t{3 * kPage});
    const AlignedBuffer again = pool->allocate(3 * kPage);
    QCOMPARE(again.data(), first);
    QCOMPARE(countOf(again, 0x5a), 3 * kPage);  // the same pages, not zeroed
    QCOMPARE(pool->stats().reusedBytes, uint64_t{3 * kPage});
    QCOMPARE(pool->stats().freshBytes, uint64_t{3 * kPage});
    QCOMPARE(pool->pooledBytes(), uint64_t{0});
  }

  // A C member's SM-chunk is half an F tensor: two freed halves make one whole, no fresh page.
  void smallerRunsAreStitchedIntoOneBuffer() {
    auto pool = PagePool::create();
    {
      AlignedBuffer a = filled(*pool, 2 * kMiB, 0xa1);
      AlignedBuffer b = filled(*pool, 2 * kMiB, 0xb2);
    }
    AlignedBuffer whole = pool->allocate(4 * kMiB);
    QCOMPARE(whole.size(), 4 * kMiB);
    QCOMPARE(pool->stats().freshBytes, uint64_t{4 * kMiB});  // only the first two
    QCOMPARE(pool->stats().reusedBytes, uint64_t{4 * kMiB});
    QCOMPARE(pool->pooledBytes(), uint64_t{0});
    QCOMPARE(countOf(whole, 0xa1) + countOf(whole, 0xb2), 4 * kMiB);
    QCOMPARE(countOf(whole, 0xa1), 2 * kMiB);
    QCOMPARE(pool->stats().livePieces, uint64_t{2});
    // Contiguous and writable end to end.
    for (size_t i = 0; i < whole.size(); ++i) whole.data()[i] = static_cast<uint8_t>(i * 7);
    for (size_t i = 0; i < whole.size(); i += 4093) QCOMPARE(whole.data()[i], static_cast<uint8_t>(i * 7));
  }

  void aLargerRunIsSplitAndTheRestStaysPooled() {
    auto pool = PagePool::create();
    { AlignedBuffer big = filled(*pool, 8 * kMiB, 0xc3); }
    const AlignedBuffer three = pool->allocate(3 * kMiB);
    QCOMPARE(countOf(three, 0xc3), 3 * kMiB);
    QCOMPARE(pool->pooledBytes(), uint64_t{5 * kMiB});
    const AlignedBuffer five = pool->allocate(5 * kMiB);  // the rest, exactly
    QCOMPARE(countOf(five, 0xc3), 5 * kMiB);
    QCOMPARE(pool->pooledBytes(), uint64_t{0});
    QCOMPARE(pool->stats().freshBytes, uint64_t{8 * kMiB});
  }

  void whatThePoolLacksIsFresh() {
    auto pool = PagePool::create();
    { AlignedBuffer one = filled(*pool, kMiB, 0xd4); }
    const AlignedBuffer three = pool->allocate(3 * kMiB);
    QCOMPARE(countOf(three, 0xd4), kMiB);
    QCOMPARE(countOf(three, 0), 2 * kMiB);  // fresh anonymous pages read as zero
    QCOMPARE(pool->stats().reusedBytes, uint64_t{kMiB});
    QCOMPARE(pool->stats().freshBytes, uint64_t{kMiB + 2 * kMiB});
  }

  // Reads land in physically contiguous 2 MiB pages where the kernel has them (io::kHugePageBytes):
  // buffers from 2 MiB up start on a 2 MiB boundary and are advised, whichever way they are made.
  void largeBuffersAskForHugePages() {
    if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage"))
      QSKIP("this kernel has no transparent huge pages");
    constexpr uintptr_t kHuge = zipmoe::io::kHugePageBytes;
    auto pool = PagePool::create();
    const AlignedBuffer fresh = filled(*pool, 3 * kMiB - 100, 1);
    QCOMPARE(reinterpret_cast<uintptr_t>(fresh.data()) % kHuge, uintptr_t{0});
    QVERIFY2(advisedHuge(fresh.data()), vmFlagsAt(fresh.data()).c_str());
    const PagePool::Run run = PagePool::faultIn(4 * kMiB);
    QCOMPARE(reinterpret_cast<uintptr_t>(run.addr) % kHuge, uintptr_t{0});
    QVERIFY2(advisedHuge(run.addr), vmFlagsAt(run.addr).c_str());
    QCOMPARE(static_cast<size_t>(std::count(run.addr, run.addr + run.bytes, 0)), run.bytes);  // still zeros
    PagePool::freeRun(run);
    const AlignedBuffer plain(5 * kMiB);  // not from a pool
    QCOMPARE(reinterpret_cast<uintptr_t>(plain.data()) % kHuge, uintptr_t{0});
    QVERIFY2(advisedHuge(plain.data()), vmFlagsAt(plain.data()).c_str());
    QCOMPARE(countOf(plain, 0), plain.size());
  }

  void noMoreThanMaxPiecesPerBuffer() {
    auto pool = PagePool::create();
    {
      std::vector<AlignedBuffer> pages;
      for (int i = 0; i < 10; ++i) pages.push_back(filled(*pool, kPage, 0xe5));
    }
    QCOMPARE(pool->pooledBytes(), uint64_t{10 * kPage});
    const AlignedBuffer ten = pool->allocate(10 * kPage);
    QCOMPARE(pool->stats().livePieces, uint64_t{PagePool::kMaxPieces});
    QCOMPARE(countOf(ten, 0xe5), (PagePool::kMaxPieces - 1) * kPage);
    QCOMPARE(pool->pooledBytes(), uint64_t{(10 - (PagePool::kMaxPieces - 1)) * kPage});
  }

  void trimReturnsPagesSmallestFirst() {
    auto pool = PagePool::create();
    {
      AlignedBuffer a = pool->allocate(kMiB), b = pool->allocate(2 * kMiB), c = pool->allocate(4 * kMiB);
    }
    QCOMPARE(pool->pooledBytes(), uint64_t{7 * kMiB});
    pool->trim(5 * kMiB);  // 1 MiB then 2 MiB go
    QCOMPARE(pool->pooledBytes(), uint64_t{4 * kMiB});
    QCOMPARE(pool->stats().trimmedBytes, uint64_t{3 * kMiB});
    pool->trim(4 * kMiB);  // already within: nothing
    QCOMPARE(pool->pooledBytes(), uint64_t{4 * kMiB});
    pool->trim(0);
    QCOMPARE(pool->pooledBytes(), uint64_t{0});
    QCOMPARE(pool->stats().trimmedBytes, uint64_t{7 * kMiB});
  }

  void aPoolBufferGrowsFromItsPool() {
    auto pool = PagePool::create();
    AlignedBuffer b = filled(*pool, kPage, 1);
    b.reserve(4 * kPage);
    QCOMPARE(b.size(), 4 * kPage);
    // The larger buffer came from the pool (fresh: the old page was still held), the old page went back.
    QCOMPARE(pool->stats().liveBuffers, uint64_t{1});
    QCOMPARE(pool->stats().freshBytes, uint64_t{5 * kPage});
    QCOMPARE(pool->pooledBytes(), uint64_t{kPage});
    b.reserve(2 * kPage);  // never shrinks
    QCOMPARE(b.size(), 4 * kPage);
    b = AlignedBuffer();
    QCOMPARE(pool->pooledBytes(), uint64_t{5 * kPage});
  }

  void buffersOutliveTheHandle() {
    auto pool = PagePool::create();
    AlignedBuffer b = filled(*pool, 2 * kPage, 9);
    std::weak_ptr<PagePool> watch = pool;
    pool.reset();
    QVERIFY(!watch.expired());  // the buffer keeps it
    QCOMPARE(countOf(b, 9), 2 * kPage);
    b = AlignedBuffer();
    QVERIFY(watch.expired());
  }

  // Label `threads`: also under TSan. Each thread fills its buffers with its own byte and checks it
  // before freeing them: a page handed to two buffers at once would show another thread's byte.
  void threadsAllocateAndFreeAtOnce() {
    auto pool = PagePool::create();
    std::atomic<int> corrupt{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t + 1));
        std::vector<AlignedBuffer> held;
        const auto mark = static_cast<uint8_t>(0x10 + t);
        for (int i = 0; i < 400; ++i) {
          if (held.size() > 6 || (!held.empty() && rng() % 3 == 0)) {
            const size_t k = rng() % held.size();
            if (countOf(held[k], mark) != held[k].size()) ++corrupt;
            held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
          } else {
            held.push_back(filled(*pool, (1 + rng() % 48) * kPage, mark));
          }
          if (i % 50 == 0) pool->trim(64 * kPage);
        }
        for (const AlignedBuffer& b : held)
          if (countOf(b, mark) != b.size()) ++corrupt;
      });
    for (auto& t : threads) t.join();
    QCOMPARE(corrupt.load(), 0);
    const auto s = pool->stats();
    QCOMPARE(s.liveBuffers, uint64_t{0});
    QCOMPARE(s.livePieces, uint64_t{0});
    QCOMPARE(s.freshBytes, s.pooledBytes + s.trimmedBytes);  // every page made is pooled or returned
    QVERIFY(s.reusedBytes > 0);
  }
  // A faulted-in run reads as zero pages, joins the free pages when adopted, and a buffer built from
  // it is all reused; adoption stops at half the pool's limit on runs and pieces.
  void adoptedRunsAreReusedAndBounded() {
    auto pool = PagePool::create();
    const PagePool::Run run = PagePool::faultIn(3 * kPage - 1);
    QCOMPARE(run.bytes, 3 * kPage);
    QCOMPARE(static_cast<size_t>(std::count(run.addr, run.addr + run.bytes, uint8_t{0})), run.bytes);
    QVERIFY(pool->adopt(run));
    QCOMPARE(pool->pooledBytes(), uint64_t{3 * kPage});
    QCOMPARE(pool->stats().reservedBytes, uint64_t{3 * kPage});
    {
      const AlignedBuffer b = pool->allocate(2 * kPage);  // split from the run
      QCOMPARE(pool->stats().freshBytes, uint64_t{0});
      QCOMPARE(pool->stats().reusedBytes, uint64_t{2 * kPage});
    }
    size_t adopted = 0;
    for (;;) {
      const PagePool::Run one = PagePool::faultIn(kPage);
      if (!pool->adopt(one)) {
        PagePool::freeRun(one);
        break;
      }
      ++adopted;
      QVERIFY(adopted <= PagePool::kMaxLivePieces);
    }
    QCOMPARE(pool->stats().livePieces + adopted + 2, PagePool::kMaxLivePieces / 2);  // + the split run's two
  }

  // The owner grants room for three runs; the reserve faults exactly those in, then sleeps until woken
  // with more room. Destroying it mid-run stops it.
  void theReserveFillsTheRoomItIsGiven() {
    auto pool = PagePool::create();
    std::mutex m;
    std::condition_variable changed;
    size_t room = 3;  // runs
    size_t claims = 0;
    auto claim = [&] {
      std::lock_guard lock(m);
      ++claims;
      changed.notify_all();
      return room > 0;
    };
    size_t commits = 0;  // one per run faulted in
    auto commit = [&](const PagePool::Run& run) {
      std::lock_guard lock(m);
      ++commits;
      if (room == 0) return false;
      --room;
      changed.notify_all();
      return pool->adopt(run);
    };
    auto waitFor = [&](auto done) {
      std::unique_lock lock(m);
      changed.wait(lock, done);
    };
    {
      PageReserve reserve(claim, commit);
      waitFor([&] { return room == 0 && claims >= 4; });  // the fourth claim found no room: asleep
      QCOMPARE(pool->pooledBytes(), uint64_t{3 * PageReserve::kRunBytes});
      {
        std::lock_guard lock(m);
        QCOMPARE(commits, size_t{3});  // no run is faulted in without room
      }
      {
        std::lock_guard lock(m);
        room = 2;
      }
      reserve.wake();
      waitFor([&] { return room == 0; });
      QCOMPARE(pool->pooledBytes(), uint64_t{5 * PageReserve::kRunBytes});
      std::lock_guard lock(m);
      room = 1000;  // still faulting when it is destroyed
    }
    const uint64_t pooled = pool->pooledBytes();
    QVERIFY(pooled >= 5 * PageReserve::kRunBytes);
    const AlignedBuffer b = pool->allocate(2 * PageReserve::kRunBytes + kPage);  // three pieces, all reserved
    QCOMPARE(pool->stats().freshBytes, uint64_t{0});
  }
};

QTEST_GUILESS_MAIN(TestPagePool)
#include "test_page_pool.moc"
