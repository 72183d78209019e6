// What every door gets from the engine by default, on the trained demo model converted to a real
// store: the activation statistics kept across runs (planned from at open, added to at every save,
// merged with another process's saves, bad files set aside, never lost), and the budget that
// follows free memory (`--budget auto`) driven through the engine with a scripted memory source.
// Replies are the same tokens with and without the history and the follower.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "experts/activation_history.h"
#include "io/file_io.h"
#include "engine/greedy_sampling.h"
#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/chat_session.h"
#include "zipmoe/engine.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/format/store.h"
#include "zipmoe/profile/cost_profile.h"

using namespace zipmoe;
using zipmoe::testing::greedy;
using zipmoe::testing::TempDir;

namespace {

class ScriptedMemory : public MemorySource {
 public:
  void set(uint64_t available, uint64_t total) {
    std::lock_guard lock(mutex_);
    reading_ = {available, total, std::nullopt};
  }
  MemoryReading read() override {
    std::lock_guard lock(mutex_);
    return reading_;
  }

 private:
  std::mutex mutex_;
  MemoryReading reading_;
};

uint64_t sum(const std::vector<uint64_t>& v) {
  uint64_t s = 0;
  for (uint64_t x : v) s += x;
  return s;
}

}  // namespace

class TestEngineDefaults : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;
  std::filesystem::path store_;

  EngineOptions options(const std::filesystem::path& history) const {
    EngineOptions o;
    RuntimeOptions r;
    r.budget = MemoryBudget::shareOfExperts(0.5);
    o.runtime = r;
    o.historyPath = history;
    o.profileSamples = 4;
    return o;
  }
  // The statistics kept at `path` for the store.
  std::optional<ActivationCounts> kept(const std::filesystem::path& path) const {
    const auto store = Store::open(store_);
    return history::load(path, storeIdentity(*store), store->manifest().numLayers(), store->manifest().numExperts).counts;
  }
  static std::string reply(Engine& engine, const std::string& prompt, int tokens) {
    ChatSession chat(engine);
    return chat.send(prompt, greedy(tokens), {}).text;
  }

 private Q_SLOTS:
  void initTestCase() {
    if (!std::filesystem::exists(zipmoe::testing::demoModelDir() / "config.json")) QSKIP("resources/demo-model is absent");
    store_ = dir_.path() / "store";
    ConvertOptions c;
    convertCheckpoint(zipmoe::testing::demoModelDir(), store_, c);
  }

  void theHistoryFileRoundTripsAndRefusesBadFields() {
    ActivationCounts c;
    c.layers = 2;
    c.experts = 3;
    c.counts = {1, 2, 3, 4, 5, 6};
    c.steps = {7, 8};
    std::string identity;
    const ActivationCounts back = history::fromJson(history::toJson("crc32c:1 size:2", c), "h.json", &identity);
    QCOMPARE(identity, std::string("crc32c:1 size:2"));
    QCOMPARE(back.counts, c.counts);
    QCOMPARE(back.steps, c.steps);
    ZIPMOE_EXPECT_ERROR(history::fromJson("[1]", "h.json", nullptr), "h.json", "not a JSON object");
    ZIPMOE_EXPECT_ERROR(history::fromJson(R"({"format":"other"})", "h.json", nullptr), "h.json", "'format'");
    nlohmann::json j = nlohmann::json::parse(history::toJson("s", c));
    j["counts"] = {1, 2};
    ZIPMOE_EXPECT_ERROR(history::fromJson(j.dump(), "h.json", nullptr), "h.json", "'counts'", "6 counts");
    j = nlohmann::json::parse(history::toJson("s", c));
    j["steps"] = {1, -2};
    ZIPMOE_EXPECT_ERROR(history::fromJson(j.dump(), "h.json", nullptr), "'steps'", "-2");
    j = nlohmann::json::parse(history::toJson("s", c));
    j["layers"] = 0;
    ZIPMOE_EXPECT_ERROR(history::fromJson(j.dump(), "h.json", nullptr), "'layers'", "0");
    j = nlohmann::json::parse(history::toJson("s", c));
    j["version"] = 99;
    ZIPMOE_EXPECT_ERROR(history::fromJson(j.dump(), "h.json", nullptr), "'version'", "99");

    // Loading: another store's file and another shape are not used; an unreadable one is set aside.
    const auto path = dir_.path() / "h.json";
    io::writeFileAtomically(path, history::toJson("crc32c:1 size:2", c));
    QVERIFY(history::load(path, "crc32c:1 size:2", 2, 3).counts);
    QVERIFY(history::load(path, "crc32c:9 size:9", 2, 3).note.find("another store") != std::string::npos);
    QVERIFY(history::load(path, "crc32c:1 size:2", 2, 4).note.find("the model 2 × 4") != std::string::npos);
    io::writeFileAtomically(path, "{ not json");
    const history::Loaded bad = history::load(path, "crc32c:1 size:2", 2, 3);
    QVERIFY(!bad.counts);
    QVERIFY2(bad.note.find("set aside") != std::string::npos, bad.note.c_str());
    QVERIFY(!std::filesystem::exists(path));
    QCOMPARE(io::readTextFile(path.string() + ".unreadable"), std::string("{ not json"));

    // Saving adds a run's own counts to what another run saved meanwhile.
    ActivationCounts atOpen = c, mine = c;
    mine.counts[0] += 10;
    mine.steps[0] += 5;
    io::writeFileAtomically(path, history::toJson("id", c));
    ActivationCounts other = c;
    other.counts[1] += 100;
    other.steps[1] += 50;
    history::save(path, "id", other, c);  // the other process saved first
    history::save(path, "id", mine, atOpen);
    const ActivationCounts merged = history::load(path, "id", 2, 3).counts.value();
    QCOMPARE(merged.counts[0], c.counts[0] + 10);
    QCOMPARE(merged.counts[1], c.counts[1] + 100);
    QCOMPARE(merged.steps[0], c.steps[0] + 5);
    QCOMPARE(merged.steps[1], c.steps[1] + 50);
    // No file yet: the counts as they are (a seed included).
    const auto fresh = dir_.path() / "sub" / "dir" / "fresh.json";
    history::save(fresh, "id", mine, atOpen);
    QCOMPARE(history::load(fresh, "id", 2, 3).counts.value().counts, mine.counts);
  }

  // Every run plans from the counts of the runs before it and adds its own when it closes; saving
  // after every reply adds each step once. The reply's tokens do not depend on it.
  void runsShareTheirStatistics() {
    const auto path = dir_.path() / "state" / "history.json";
    std::string first;
    uint64_t firstSteps = 0;
    {
      auto engine = Engine::open(store_, options(path));
      QCOMPARE(engine->historyPath(), path);
      QVERIFY(!engine->runtime()->options().history);  // nothing kept yet
      first = reply(*engine, "ROMEO: what news?", 12);
      engine->saveActivationHistory();
      engine->saveActivationHistory();  // twice: nothing counted twice
      firstSteps = kept(path).value().steps[0];
      QCOMPARE(firstSteps, engine->runtime()->activationCounts().steps[0]);
    }
    QCOMPARE(kept(path).value().steps[0], firstSteps);
    {
      auto engine = Engine::open(store_, options(path));
      const auto seeded = engine->runtime()->options().history;
      QVERIFY(seeded);
      QCOMPARE(seeded->steps[0], firstSteps);
      QCOMPARE(reply(*engine, "ROMEO: what news?", 12), first);
      QVERIFY(engine->runtime()->activationCounts().steps[0] > firstSteps);
    }
    const ActivationCounts after = kept(path).value();
    QVERIFY(after.steps[0] > firstSteps);
    QVERIFY(sum(after.counts) > 0);
    // Off: neither read nor written.
    {
      EngineOptions o = options(path);
      o.persistHistory = false;
      auto engine = Engine::open(store_, o);
      QVERIFY(engine->historyPath().empty());
      QVERIFY(!engine->runtime()->options().history);
      QCOMPARE(reply(*engine, "ROMEO: what news?", 12), first);
    }
    QCOMPARE(kept(path).value().steps, after.steps);
    // A file this build cannot read is set aside and the engine opens without it.
    io::writeFileAtomically(path, "{\"format\": 3}");
    std::string status;
    EngineOptions o = options(path);
    o.onStatus = [&](const std::string& s) { status += s + "\n"; };
    {
      auto engine = Engine::open(store_, o);
      QVERIFY(!engine->runtime()->options().history);
    }
    QVERIFY2(status.find("activation history not used") != std::string::npos, status.c_str());
    QVERIFY(std::filesystem::exists(path.string() + ".unreadable"));
    QVERIFY(kept(path));  // this run's, saved anew
  }

  // `--budget auto` through the engine: it opens at what the machine has free above the margin,
  // follows a shortfall down and free memory back up (polled here, as the thread does), and can be
  // switched off (the budget stays) and on again. The reply is the same tokens.
  void theBudgetFollowsFreeMemory() {
    auto memory = std::make_shared<ScriptedMemory>();
    const uint64_t total = 16ull << 30;
    FollowPolicy policy;
    policy.marginBytes = 1ull << 30;
    policy.growAfterReadings = 1;
    policy.minMoveBytes = 1;  // the demo's experts are a few MiB
    memory->set(policy.marginBytes + (1ull << 30), total);  // a GiB free above the margin: all experts fit
    EngineOptions o = options(dir_.path() / "follow-history.json");
    o.followFreeMemory = policy;
    o.memorySource = memory;
    o.followInterval = std::chrono::hours(1);  // the test polls
    auto engine = Engine::open(store_, o);
    ExpertRuntime& rt = *engine->runtime();
    BudgetFollower* f = engine->budgetFollower();
    QVERIFY(f);
    const uint64_t all = rt.minimumBudget() + rt.expertBytes();
    QCOMPARE(f->budget(), all);
    QCOMPARE(rt.stats().budgetBytes, all);
    const std::string resident = reply(*engine, "JULIET: come, night", 10);
    // Another program leaves the runtime room for a quarter of its experts.
    const uint64_t quarter = rt.minimumBudget() + rt.expertBytes() / 4;
    const uint64_t held = rt.stats().heldBytes;
    QVERIFY(held > quarter && held - quarter < policy.marginBytes);
    memory->set(policy.marginBytes - (held - quarter), total);  // what it holds above a quarter is missing
    QVERIFY(f->poll());
    rt.waitForPlan();
    QCOMPARE(rt.stats().budgetBytes, std::max(quarter, rt.minimumBudget()));
    QCOMPARE(reply(*engine, "JULIET: come, night", 10), resident);
    QVERIFY(rt.stats().heldBytes <= rt.stats().budgetBytes);
    // Off: the budget stays where it is whatever memory does; the user's own moves are followed from.
    engine->followFreeMemory(false);
    memory->set(8ull << 30, total);
    QVERIFY(!f->poll());
    QCOMPARE(rt.stats().budgetBytes, std::max(quarter, rt.minimumBudget()));
    engine->followFreeMemory(true);
    QVERIFY(f->poll());
    rt.waitForPlan();
    QCOMPARE(rt.stats().budgetBytes, all);
    QVERIFY(f->moves().size() >= 2);
  }
};

QTEST_GUILESS_MAIN(TestEngineDefaults)
#include "test_engine_defaults.moc"
