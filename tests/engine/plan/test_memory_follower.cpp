// The budget that follows free memory (`--budget auto`): the kernel files' parsers, every rule of the
// decision on scripted readings, and the same mechanism moving a real expert runtime (real store,
// threads, O_DIRECT reads) while another "program" takes memory in steps down to leaving 25 % of the
// experts and gives it back — the budget follows each step and the runtime stays within it. The
// polling thread is waited on by condition, never by a clock. Runs under ThreadSanitizer in CI.
#include <QtTest>

#include <fstream>
#include <mutex>
#include <thread>

#include "engine/experts/runtime_fixture.h"
#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/plan/memory_follower.h"

using namespace zipmoe;
using zipmoe::testing::TempDir;

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

// The reading a test scripts: every read() returns the last one set.
class ScriptedMemory : public MemorySource {
 public:
  void push(uint64_t available, uint64_t total, std::optional<double> pressure = std::nullopt) {
    std::lock_guard lock(mutex_);
    reading_ = MemoryReading{available, total, pressure};
  }
  void fail(bool f) {
    std::lock_guard lock(mutex_);
    fail_ = f;
  }
  MemoryReading read() override {
    std::lock_guard lock(mutex_);
    if (fail_) throw Error("scripted: /proc/meminfo cannot be read");
    if (!reading_) throw Error("scripted: no reading");
    return *reading_;
  }

 private:
  std::mutex mutex_;
  std::optional<MemoryReading> reading_;
  bool fail_ = false;
};

FollowPolicy policy() {
  FollowPolicy p;
  p.marginBytes = 1 * GiB;
  p.floorBytes = 100 * MiB;
  p.ceilingBytes = 8 * GiB;
  p.minMoveBytes = 16 * MiB;
  return p;
}

}  // namespace

class TestMemoryFollower : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void parsesTheKernelsFiles() {
    const std::string meminfo =
        "MemTotal:       24576000 kB\nMemFree:          100000 kB\nMemAvailable:   12288000 kB\nBuffers: 1 kB\n";
    const MemoryReading r = parseMeminfo(meminfo, "/proc/meminfo");
    QCOMPARE(r.totalBytes, 24576000ull * 1024);
    QCOMPARE(r.availableBytes, 12288000ull * 1024);
    ZIPMOE_EXPECT_ERROR(parseMeminfo("MemTotal: 100 kB\nMemFree: 5 kB\n", "/x/meminfo"), "/x/meminfo", "MemAvailable");
    ZIPMOE_EXPECT_ERROR(parseMeminfo("MemAvailable: 100 kB\n", "/x/meminfo"), "/x/meminfo", "MemTotal");
    ZIPMOE_EXPECT_ERROR(parseMeminfo("MemTotal: lots\nMemAvailable: 1 kB\n", "/x/meminfo"), "MemTotal", "no number");
    QCOMPARE(parsePressureSome10("some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=1.00 avg60=0 avg300=0 total=1\n")
                 .value_or(-1),
             12.5);
    QVERIFY(!parsePressureSome10("full avg10=1.00\n"));
    QVERIFY(!parsePressureSome10("some avg10=banana\n"));
    QVERIFY(!parsePressureSome10(""));

    // The real files of this machine, and files in a directory of the test's own.
    const MemoryReading here = ProcMemorySource().read();
    QVERIFY(here.totalBytes > 0);
    QVERIFY(here.availableBytes > 0 && here.availableBytes <= here.totalBytes);
    TempDir dir;
    std::ofstream(dir.path() / "meminfo") << meminfo;
    std::ofstream(dir.path() / "pressure") << "some avg10=3.25 avg60=0 avg300=0 total=0\n";
    const MemoryReading scripted = ProcMemorySource(dir.path() / "meminfo", dir.path() / "pressure").read();
    QCOMPARE(scripted.availableBytes, 12288000ull * 1024);
    QCOMPARE(scripted.pressureSome10.value_or(-1), 3.25);
    // No PSI (older kernels, some containers): no pressure figure, not an error.
    QVERIFY(!ProcMemorySource(dir.path() / "meminfo", dir.path() / "none").read().pressureSome10);
    ZIPMOE_EXPECT_ERROR(ProcMemorySource(dir.path() / "absent").read(), (dir.path() / "absent").string(), "cannot be read");
  }

  void resolvesItsDefaults() {
    FollowPolicy p;
    QCOMPARE(p.margin(4 * GiB), 512 * MiB);    // small machines: 512 MiB
    QCOMPARE(p.margin(64 * GiB), 4 * GiB);     // large ones: 1/16
    p.floorBytes = 0;
    p.ceilingBytes = 10 * GiB;
    QCOMPARE(p.minMove(), 10 * GiB / 100);
    p.ceilingBytes = 100 * MiB;
    QCOMPARE(p.minMove(), 16 * MiB);
    // The start: what is available above the margin, within the range.
    const FollowPolicy q = policy();
    QCOMPARE(BudgetFollower::initialBudget({5 * GiB, 16 * GiB, {}}, q), 4 * GiB);
    QCOMPARE(BudgetFollower::initialBudget({20 * GiB, 32 * GiB, {}}, q), 8 * GiB);
    QCOMPARE(BudgetFollower::initialBudget({512 * MiB, 16 * GiB, {}}, q), 100 * MiB);
  }

  void followsEachReading() {
    auto memory = std::make_shared<ScriptedMemory>();
    std::vector<uint64_t> applied;
    uint64_t held = 4 * GiB;
    BudgetFollower f(memory, policy(), 4 * GiB,
                     [&](uint64_t b) {
                       applied.push_back(b);
                       return b;
                     },
                     [&] { return held; });
    // 3 GiB available: 2 GiB above the margin. One reading is not enough to grow...
    memory->push(3 * GiB, 16 * GiB);
    QVERIFY(!f.poll());
    // ... the second in a row grows by half the room.
    auto m = f.poll();
    QVERIFY(m);
    QCOMPARE(m->fromBytes, 4 * GiB);
    QCOMPARE(m->toBytes, 5 * GiB);
    QVERIFY2(m->reason.find("free above the margin") != std::string::npos, m->reason.c_str());
    QCOMPARE(f.budget(), 5 * GiB);
    held = 5 * GiB;

    // Another program takes memory: 512 MiB available, half a GiB below the margin. Down at once,
    // by the shortfall, from what the runtime holds.
    memory->push(512 * MiB, 16 * GiB);
    m = f.poll();
    QVERIFY(m);
    QCOMPARE(m->toBytes, 5 * GiB - 512 * MiB);
    QVERIFY2(m->reason.find("another program needs 512 MiB") != std::string::npos, m->reason.c_str());

    // The caches have not filled their budget (held 2 GiB) and only 200 MiB are free above the
    // margin: the budget comes down to what can be held, so they do not grow into the margin.
    held = 2 * GiB;
    memory->push(1 * GiB + 200 * MiB, 16 * GiB);
    m = f.poll();
    QVERIFY(m);
    QCOMPARE(m->toBytes, 2 * GiB + 200 * MiB);

    // A shortfall larger than all the runtime holds: the floor, never below.
    held = 500 * MiB;
    memory->push(10 * MiB, 16 * GiB);
    m = f.poll();
    QVERIFY(m);
    QCOMPARE(m->toBytes, 100 * MiB);
    QVERIFY(!f.poll());  // and it stays there

    // Memory comes back: up again in steps of half the room, to the ceiling at most.
    held = 100 * MiB;
    memory->push(20 * GiB, 32 * GiB);
    int grows = 0;
    while (f.budget() < 8 * GiB && grows < 64) {
      held = f.budget();
      if (f.poll()) ++grows;
    }
    QCOMPARE(f.budget(), 8 * GiB);
    QVERIFY(grows >= 1);
    QVERIFY(!f.poll());
    QVERIFY(!f.poll());

    const std::vector<BudgetMove> log = f.moves();
    QCOMPARE(log.size(), applied.size());
    QCOMPARE(f.lastMove().value().toBytes, log.back().toBytes);
    for (size_t i = 0; i < log.size(); ++i) {
      QCOMPARE(log[i].toBytes, applied[i]);
      if (i > 0) QCOMPARE(log[i].fromBytes, log[i - 1].toBytes);
      QVERIFY(log[i].reading.totalBytes > 0);
    }
  }

  void shrinksUnderPressureOnceAWhile() {
    auto memory = std::make_shared<ScriptedMemory>();
    BudgetFollower f(memory, policy(), 4 * GiB, [](uint64_t b) { return b; }, [] { return 4 * GiB; });
    // 1.5 GiB available (above the margin, below twice it) while tasks stall on memory 30 % of the time.
    memory->push(1 * GiB + 512 * MiB, 16 * GiB, 30.0);
    auto m = f.poll();
    QVERIFY(m);
    QCOMPARE(m->toBytes, 4 * GiB - 512 * MiB);  // 1/8 of the budget
    QVERIFY2(m->reason.find("memory pressure 30.0 %") != std::string::npos, m->reason.c_str());
    // avg10 stays high for a while after: no second shrink, and no growth, until the cooldown ends.
    for (int i = 0; i < policy().pressureCooldownReadings - 1; ++i) QVERIFY(!f.poll());
    QVERIFY(f.poll());
    // Pressure with plenty available (page-cache reclaim) does not shrink.
    BudgetFollower g(memory, policy(), 4 * GiB, [](uint64_t b) { return b; }, [] { return 4 * GiB; });
    memory->push(3 * GiB, 16 * GiB, 30.0);
    for (int i = 0; i < 4; ++i) QVERIFY(!g.poll());  // nor grows while pressure is over half the limit
  }

  void offFailuresAndTheUsersOwnMoves() {
    auto memory = std::make_shared<ScriptedMemory>();
    bool refuse = false;
    BudgetFollower f(memory, policy(), 4 * GiB,
                     [&](uint64_t b) {
                       if (refuse) throw Error("expert runtime: budget below the minimum");
                       return b;
                     },
                     {});
    memory->push(512 * MiB, 16 * GiB);
    f.setEnabled(false);
    QVERIFY(!f.enabled());
    QVERIFY(!f.poll());
    QCOMPARE(f.budget(), 4 * GiB);
    QVERIFY(f.lastReading());  // readings go on
    // The user moved the budget meanwhile; following again starts from there.
    f.budgetMovedTo(3 * GiB);
    f.setEnabled(true);
    auto m = f.poll();
    QVERIFY(m);
    QCOMPARE(m->fromBytes, 3 * GiB);
    QCOMPARE(m->toBytes, 3 * GiB - 512 * MiB);
    // A reading that fails, or a move the runtime refuses, changes nothing and is reported.
    memory->fail(true);
    QVERIFY(!f.poll());
    QVERIFY2(f.lastError().find("cannot be read") != std::string::npos, f.lastError().c_str());
    memory->fail(false);
    refuse = true;
    memory->push(256 * MiB, 16 * GiB);
    QVERIFY(!f.poll());
    QVERIFY2(f.lastError().find("below the minimum") != std::string::npos, f.lastError().c_str());
    QCOMPARE(f.budget(), 3 * GiB - 512 * MiB);
    ZIPMOE_EXPECT_ERROR(BudgetFollower(memory, [] {
                          FollowPolicy p = policy();
                          p.ceilingBytes = 1;
                          return p;
                        }(), 1, [](uint64_t b) { return b; }, {}),
                        "ceiling", "below the floor");
  }

  // The mechanism of `--budget auto` on a real runtime: another program takes memory in steps down
  // to leaving 25 % of the experts, then gives it back. After each step the runtime's budget is the
  // follower's, what it holds stays within it while a request stream runs, and every tensor it
  // hands out is still the store's.
  void movesARealRuntime() {
    TempDir dir;
    zipmoe::testing::Fixture fx;
    zipmoe::testing::makeFixture(fx, dir.path(), CodecSpec{}, 2);
    RuntimeOptions o;
    o.budget = MemoryBudget::bytes(1).clamped();
    std::shared_ptr<ExpertRuntime> rt = ExpertRuntime::open(fx.opened, o, fx.directProfile);
    const Manifest& m = fx.opened->manifest();
    const uint64_t floor = rt->minimumBudget(), experts = rt->expertBytes();
    FollowPolicy p;
    p.floorBytes = floor;
    p.ceilingBytes = floor + experts;
    p.marginBytes = 1 * GiB;
    p.growAfterReadings = 1;
    p.minMoveBytes = std::max<uint64_t>(1, experts / 64);
    auto memory = std::make_shared<ScriptedMemory>();
    const uint64_t total = 16 * GiB;
    // The machine: the runtime's ceiling free above the margin at first.
    memory->push(p.margin(total) + p.ceilingBytes, total);
    const uint64_t start = BudgetFollower::initialBudget(memory->read(), p);
    QCOMPARE(start, p.ceilingBytes);
    BudgetFollower f(memory, p, rt->setBudget(MemoryBudget::bytes(start)),
                     [rt](uint64_t b) { return rt->setBudget(MemoryBudget::bytes(b).clamped()); },
                     [rt] { return rt->stats().heldBytes; });
    uint64_t seed = 1;
    auto runAndCheck = [&] {
      rt->waitForPlan();
      QCOMPARE(rt->stats().budgetBytes, f.budget());
      zipmoe::testing::runStream(fx, *rt, zipmoe::testing::requestStream(6, m.numLayers(), m.numExperts, 2, seed++));
      QVERIFY(rt->stats().heldBytes <= f.budget());
    };
    runAndCheck();
    // The other program takes memory in four steps, to leaving the runtime 25 % of the experts.
    std::vector<uint64_t> budgets;
    for (const double left : {0.75, 0.5, 0.35, 0.25}) {
      const uint64_t wanted = floor + static_cast<uint64_t>(left * static_cast<double>(experts));
      const uint64_t held = rt->stats().heldBytes;
      // What the kernel reports: the margin plus what the runtime may keep beyond what it holds
      // (negative: the other program's shortfall).
      const uint64_t available = p.margin(total) + wanted > held ? p.margin(total) + wanted - held : 0;
      memory->push(available, total);
      const auto move = f.poll();
      QVERIFY(move);
      QVERIFY(move->toBytes < move->fromBytes);
      QCOMPARE(move->toBytes, std::max(wanted, floor));
      budgets.push_back(move->toBytes);
      runAndCheck();
    }
    // And gives it back: the budget climbs again, one poll at a time, to the ceiling.
    for (int i = 0; i < 64 && f.budget() < p.ceilingBytes; ++i) {
      const uint64_t held = rt->stats().heldBytes;
      memory->push(p.margin(total) + p.ceilingBytes - std::min(held, p.ceilingBytes) + 4 * GiB, total);
      f.poll();
      runAndCheck();
    }
    QCOMPARE(f.budget(), p.ceilingBytes);
    QVERIFY(f.moves().size() >= budgets.size() + 1);

    // The same through the follower's thread: a shortfall is followed without a caller polling.
    f.start(std::chrono::milliseconds(1));
    memory->push(p.margin(total) / 2, total);
    while (f.budget() > floor + experts / 2) std::this_thread::yield();  // CTest's timeout guards a hang
    f.stop();
    rt->waitForPlan();
    QCOMPARE(rt->stats().budgetBytes, f.budget());
  }
};

QTEST_GUILESS_MAIN(TestMemoryFollower)
#include "test_memory_follower.moc"
