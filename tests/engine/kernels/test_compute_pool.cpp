// ComputePool: every item computed exactly once whatever the threads do, helpers that do take part,
// nested runs computed inline, the item limit of the job word, and changing the thread count. Labelled
// `threads` (runs under ThreadSanitizer in CI); nothing here waits on a clock.
#include <QtTest>

#include <atomic>
#include <thread>
#include <vector>

#include "kernels/compute_pool.h"

using zipmoe::kernels::ComputePool;

class TestComputePool : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void everyItemOnceAtEveryThreadCount() {
    for (int threads : {1, 2, 3, 5}) {
      ComputePool pool(threads);
      QCOMPARE(pool.threads(), threads);
      for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{64}, int64_t{1000}}) {
        for (int round = 0; round < 20; ++round) {
          std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
          pool.run(count, [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
          for (int64_t i = 0; i < count; ++i) QCOMPARE(hits[static_cast<size_t>(i)].load(), 1);
        }
      }
    }
  }

  // The caller's first item waits until another thread has computed one: a helper must join the
  // job (woken from its sleep if need be) for the run to end at all.
  void helpersTakePart() {
    ComputePool pool(2);
    for (int round = 0; round < 50; ++round) {
      const std::thread::id caller = std::this_thread::get_id();
      std::atomic<bool> helped{false};
      std::vector<std::atomic<int>> hits(16);
      pool.run(16, [&](int64_t i) {
        if (std::this_thread::get_id() != caller) helped.store(true);
        else if (i == 0)
          while (!helped.load()) std::this_thread::yield();
        hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (auto& h : hits) QCOMPARE(h.load(), 1);
      QVERIFY(helped.load());
    }
    QVERIFY(pool.helperItems() >= 50);
  }

  void aNestedRunComputesInline() {
    ComputePool pool(3);
    std::vector<std::atomic<int>> hits(8 * 8);
    pool.run(8, [&](int64_t outer) {
      pool.run(8, [&](int64_t inner) { hits[static_cast<size_t>(outer * 8 + inner)].fetch_add(1); });
    });
    for (auto& h : hits) QCOMPARE(h.load(), 1);
  }

  // More items than the job word's 20 bits hold: grouped, still each once.
  void moreItemsThanTheWordHolds() {
    ComputePool pool(2);
    const int64_t count = (int64_t{1} << 20) + 12345;
    std::vector<uint8_t> hits(static_cast<size_t>(count), 0);
    std::atomic<int64_t> total{0};
    pool.run(count, [&](int64_t i) {
      hits[static_cast<size_t>(i)] = 1;  // distinct items: no two threads write one byte
      total.fetch_add(1, std::memory_order_relaxed);
    });
    QCOMPARE(total.load(), count);
    for (int64_t i = 0; i < count; ++i) QVERIFY(hits[static_cast<size_t>(i)] == 1);
  }

  // Several threads call run() at once (an in-process expert node computes while the model does):
  // one holds the pool, the others compute alone; every product is still complete and exact.
  void concurrentCallersEachGetTheirWholeProduct() {
    ComputePool pool(2);
    std::vector<std::thread> callers;
    std::atomic<int> wrong{0};
    for (int c = 0; c < 4; ++c)
      callers.emplace_back([&, c] {
        for (int round = 0; round < 200; ++round) {
          const int64_t count = 17 + c + round % 5;
          std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
          pool.run(count, [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
          for (auto& h : hits)
            if (h.load() != 1) wrong.fetch_add(1);
        }
      });
    for (auto& t : callers) t.join();
    QCOMPARE(wrong.load(), 0);
  }

  void threadCountChangesBetweenRuns() {
    ComputePool pool(1);
    for (int threads : {4, 1, 2, 2, 3}) {
      pool.setThreads(threads);
      QCOMPARE(pool.threads(), threads);
      std::atomic<int64_t> sum{0};
      pool.run(100, [&](int64_t i) { sum.fetch_add(i); });
      QCOMPARE(sum.load(), int64_t{4950});
    }
    pool.setThreads(0);
    QCOMPARE(pool.threads(), 1);
  }
};

QTEST_APPLESS_MAIN(TestComputePool)
#include "test_compute_pool.moc"
