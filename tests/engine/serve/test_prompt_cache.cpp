// The prompt cache on disk (serve/prompt_cache.h) and the KV export it stands on
// (MoeModel::saveSequence/loadSequence): every family's sequence saved and loaded decodes bit for bit
// as the uninterrupted one, and another checkpoint of the same config has another KV identity;
// under a memory budget a request started from a file keeps experts + KV + activations within it; a scheduler restarted on the same directory reuses the conversation's
// KV and gives the same greedy reply as one without the cache (demo model, fp32); a corrupt,
// truncated or foreign file is skipped with a warning naming it and the reason, and left alone;
// the size bound deletes the least recently used files, and a file made redundant by a longer one
// goes; a directory that cannot be written, or that another server holds, or a model that cannot
// export its KV, is a clear error.
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/serve/greedy_requests.h"
#include "engine/serve/toy_model.h"
#include "serve/memory_split.h"
#include "serve/prompt_cache.h"
#include "test_support.h"
#include "tools/synthetic/synthetic_model.h"
#include "zipmoe/base/error.h"
#include "zipmoe/engine.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/serve/serve_scheduler.h"

using namespace zipmoe;
using zipmoe::serve::PromptCache;
using zipmoe::testing::TempDir;
namespace fs = std::filesystem;

using zipmoe::testing::chat;
using zipmoe::testing::completion;

namespace {

fs::path demoModel() { return fs::path(ZIPMOE_FIXTURES_DIR) / "../../resources/demo-model"; }

std::unique_ptr<MoeModel> loadModel(const fs::path& dir, ComputeDtype dtype = ComputeDtype::Float32) {
  ModelOptions options;
  options.dtype = dtype;
  return MoeModel::load(dir, options);
}

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back((i * 37 + salt * 101 + 3) % 250);
  return out;
}

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The warnings a cache printed, kept for the test to read.
struct Warnings {
  std::vector<std::string> lines;
  PromptCache::Warn sink() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
  bool has(const std::string& a, const std::string& b) const {
    for (const auto& l : lines)
      if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) return true;
    return false;
  }
  std::string all() const {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

// Prefills `ids` into a new sequence and saves it into `cache`.
void saveConversation(PromptCache& cache, MoeModel& model, const std::vector<int32_t>& ids) {
  const auto seq = model.addSequence();
  model.forward({{seq, ids}});
  cache.save(model, seq, ids);
  model.removeSequence(seq);
}

void writeBytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Outcome {
  bool finished = false;
  GenerationStats info;
};

Outcome drain(RequestTicket& t) {
  Outcome o;
  std::vector<RequestTicket::Event> events;
  for (bool more = true; more;) {
    events.clear();
    more = t.wait(events, std::chrono::milliseconds(100));
    for (auto& e : events)
      if (e.kind == RequestTicket::Event::Kind::Finished) {
        o.finished = true;
        o.info = e.finish;
      }
  }
  return o;
}

}  // namespace

class TestPromptCache : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void eachFamilyDecodesTheSameAfterSaveAndLoad_data() {
    QTest::addColumn<int>("family");
    for (const ModelFamily f : {ModelFamily::Mixtral, ModelFamily::Qwen2Moe, ModelFamily::Qwen3Moe, ModelFamily::Olmoe,
                                ModelFamily::DeepseekV2})
      QTest::newRow(familyName(f)) << static_cast<int>(f);
  }
  // The loaded KV is the saved bytes, so the decode after it is the uninterrupted decode, bit for bit.
  void eachFamilyDecodesTheSameAfterSaveAndLoad() {
    QFETCH(int, family);
    TempDir tmp;
    SyntheticModelOptions options;
    options.family = static_cast<ModelFamily>(family);
    const fs::path dir = tmp / "model";
    generateSyntheticModel(dir, syntheticModelConfig(options), options);
    const auto model = loadModel(dir);
    QVERIFY(!model->kvIdentity().empty());
    // Another checkpoint of the same config (other weights) is another identity, and so is bf16.
    options.seed = 99;
    generateSyntheticModel(tmp / "other", syntheticModelConfig(options), options);
    QVERIFY(loadModel(tmp / "other")->kvIdentity() != model->kvIdentity());
    QVERIFY(loadModel(dir, ComputeDtype::BFloat16)->kvIdentity() != model->kvIdentity());
    const std::vector<int32_t> prompt = tokens(12, family);

    const auto a = model->addSequence(), b = model->addSequence();
    const auto first = model->forward({{a, prompt}, {b, prompt}});
    std::stringstream bytes;
    model->saveSequence(b, 12, bytes);
    QCOMPARE(bytes.str().size(), static_cast<size_t>(12 * model->kvBytesPerToken()));
    model->removeSequence(b);
    const auto c = model->addSequence();
    model->reserveSequence(c, 20);
    model->loadSequence(c, bytes, 12, 12);
    QCOMPARE(model->sequenceLength(c), int64_t{12});
    int32_t next = argmax(first[0]);
    for (int i = 0; i < 4; ++i) {
      const auto out = model->forward({{a, {next}}, {c, {next}}});
      QVERIFY2(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0,
               qPrintable(QString("decode %1 differs after the load").arg(i)));
      next = argmax(out[0]);
    }

    // Keeping a prefix: the sequence holds it, and prefilling the rest again gives the same token.
    bytes.seekg(0);
    const auto d = model->addSequence();
    model->loadSequence(d, bytes, 12, 8);
    QCOMPARE(model->sequenceLength(d), int64_t{8});
    const auto rest = model->forward({{d, std::vector<int32_t>(prompt.begin() + 8, prompt.end())}});
    QCOMPARE(argmax(rest[0]), argmax(first[0]));

    // A stream that ends early is an error, and the sequence is left empty.
    std::stringstream shortBytes(bytes.str().substr(0, bytes.str().size() / 2));
    QVERIFY_THROWS_EXCEPTION(Error, model->loadSequence(d, shortBytes, 12, 12));
    QCOMPARE(model->sequenceLength(d), int64_t{0});
  }

  // Two schedulers one after the other on the same directory, as a server restarted: the next turn
  // of the conversation starts from the file, and its greedy reply is the one without any cache.
  void aRestartedSchedulerReusesTheConversation() {
    if (!fs::exists(demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
    TempDir tmp;
    EngineOptions eo;
    eo.model.dtype = ComputeDtype::Float32;
    auto engine = Engine::open(demoModel(), eo);
    ServeOptions o;
    o.promptCacheDir = tmp / "cache";
    const std::vector<ChatMessage> first = {{"system", "You are a herald of Verona."}, {"user", "What news from Mantua?"}};
    Outcome a;
    {
      ServeScheduler s(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, o);
      a = drain(*s.submit(chat(first, 16)));
    }
    QVERIFY(a.finished);
    QCOMPARE(a.info.reusedTokens, 0);
    QCOMPARE(engine->model().kvCacheBytes(), uint64_t{0});  // the first scheduler freed every sequence

    std::vector<ChatMessage> second = first;
    second.push_back({"assistant", a.info.text});
    second.push_back({"user", "And of my lady?"});
    Outcome b;
    {
      ServeScheduler s(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, o);
      b = drain(*s.submit(chat(second, 16)));
      QCOMPARE(s.counters().reusedPromptTokens, static_cast<uint64_t>(b.info.reusedTokens));
    }
    QVERIFY(b.finished);
    QVERIFY2(b.info.reusedTokens > a.info.promptTokens / 2,
             qPrintable(QString("reused %1 of %2").arg(b.info.reusedTokens).arg(b.info.promptTokens)));
    QCOMPARE(b.info.prefilledTokens, b.info.promptTokens - b.info.reusedTokens);

    ServeOptions none;
    none.cachedSequences = 0;
    ServeScheduler scratch(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, none);
    const Outcome c = drain(*scratch.submit(chat(second, 16)));
    QCOMPARE(c.info.reusedTokens, 0);
    QCOMPARE(b.info.tokens, c.info.tokens);
    QCOMPARE(b.info.text, c.info.text);
  }

  // Under a memory budget (a ZipMoE store with its runtime), a request started from a file reserves
  // its KV like any other: experts + KV capacity + activations stay within the budget at every step,
  // and the KV held never exceeds what the split reserved.
  void aRequestFromAFileStaysWithinTheBudget() {
    if (!fs::exists(demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
    TempDir tmp;
    const fs::path store = tmp / "store";
    convertCheckpoint(demoModel(), store, ConvertOptions{});
    EngineOptions eo;
    eo.runtime = RuntimeOptions{};
    eo.runtime->budget = MemoryBudget::bytes(64ull << 20);
    eo.profileSamples = 4;
    auto engine = Engine::open(store, eo);
    ExpertRuntime& rt = *engine->runtime();
    ServeOptions o;
    o.maxBatch = 4;
    o.maxStepTokens = 32;
    o.expertFloorShare = 0;
    o.promptCacheDir = tmp / "cache";
    const ModelConfig& c = engine->model().config();
    const uint64_t act = serve::activationBytes(c, o.maxStepTokens, 2 * o.maxBatch, c.maxPositionEmbeddings);
    const uint64_t total = act + rt.minimumBudget() + 3 * 80 * engine->model().kvBytesPerToken();
    QCOMPARE(serve::servingActivationBytes(c, o.maxStepTokens, o.maxBatch, c.maxPositionEmbeddings, total, 0), act);
    o.memoryBudget = MemoryBudget::bytes(total);
    int violations = 0, kvOverReserved = 0;
    o.onStep = [&](const StepReport& r) {
      violations += r.expertHeldBytes + r.kvCapacityBytes + r.activationBytes > r.totalBudgetBytes ? 1 : 0;
      kvOverReserved += r.kvCapacityBytes > r.kvReservedBytes ? 1 : 0;
    };
    const std::vector<std::string> prompts = {"ROMEO:\nBut soft", "JULIET:\nO Romeo", "NURSE:\nFaith"};
    std::vector<std::string> next;
    {
      ServeScheduler s(engine->model(), engine->tokenizer(), engine->chatTemplate(), &rt, o);
      for (const auto& p : prompts) {
        const Outcome out = drain(*s.submit(completion(p, 24)));
        QVERIFY(out.finished);
        next.push_back(p + out.info.text + "\nROMEO:");
      }
    }
    ServeScheduler s(engine->model(), engine->tokenizer(), engine->chatTemplate(), &rt, o);
    std::vector<std::shared_ptr<RequestTicket>> tickets;
    for (const auto& p : next) tickets.push_back(s.submit(completion(p, 24)));
    for (auto& t : tickets) {
      const Outcome out = drain(*t);
      QVERIFY(out.finished);
      QVERIFY2(out.info.reusedTokens > 0, qPrintable(QString("reused %1").arg(out.info.reusedTokens)));
    }
    s.stop();
    QCOMPARE(violations, 0);
    QCOMPARE(kvOverReserved, 0);
    QCOMPARE(s.counters().overBudgetSteps, uint64_t{0});
  }

  void aBadFileIsSkippedWithAWarning_data() {
    QTest::addColumn<QString>("damage");
    QTest::addColumn<QString>("reason");
    QTest::newRow("a flipped KV byte") << "flip" << "checksum mismatch";
    QTest::newRow("truncated") << "truncate" << "truncated";
    QTest::newRow("another model") << "identity" << "another model";
    QTest::newRow("another dtype") << "dtype" << "another model, dtype";
    QTest::newRow("another format version") << "version" << "format version 7";
    QTest::newRow("not a cache file") << "garbage" << "no ZIPMOEKV magic";
  }
  void aBadFileIsSkippedWithAWarning() {
    QFETCH(QString, damage);
    QFETCH(QString, reason);
    if (!fs::exists(demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
    TempDir tmp;
    const auto model = loadModel(demoModel());
    const std::vector<int32_t> ids = tokens(20, 1);
    fs::path file;
    {
      PromptCache cache(tmp / "cache", uint64_t{1} << 30, *model);
      saveConversation(cache, *model, ids);
      QCOMPARE(cache.files(), size_t{1});
      file = tmp / "cache" / PromptCache::fileName(ids);
    }
    std::string bytes = testing::readText(file);
    const size_t identityAt = 8 + 4 + 4;
    if (damage == "flip") bytes[bytes.size() - 100] = static_cast<char>(bytes[bytes.size() - 100] ^ 0x10);
    if (damage == "truncate") bytes.resize(bytes.size() - 10);
    if (damage == "identity") bytes[identityAt + 8] = bytes[identityAt + 8] == '0' ? '1' : '0';  // config:XXXXXXXX
    if (damage == "version") bytes[8] = 7;
    if (damage == "garbage") bytes = "{\"not\": \"a cache file\"}";
    writeBytes(file, bytes);

    const auto reader = damage == "dtype" ? loadModel(demoModel(), ComputeDtype::BFloat16) : loadModel(demoModel());
    Warnings warnings;
    PromptCache cache(tmp / "cache", uint64_t{1} << 30, *reader, warnings.sink());
    if (damage == "flip") {  // the header is sound: the checksum is checked when the KV is read
      QCOMPARE(cache.files(), size_t{1});
      std::vector<int32_t> prompt = ids;
      prompt.push_back(5);
      const auto hit = cache.find(prompt, 0);
      QVERIFY(hit);
      const auto seq = reader->addSequence();
      reader->reserveSequence(seq, 32);
      QVERIFY(!cache.load(*hit, *reader, seq));
      QCOMPARE(reader->sequenceLength(seq), int64_t{0});
      QVERIFY(!cache.find(prompt, 0));  // skipped from then on
    }
    QCOMPARE(cache.files(), size_t{0});
    QVERIFY2(warnings.has(file.string(), reason.toStdString()), warnings.all().c_str());
    QVERIFY2(warnings.has(file.string(), "skipped"), warnings.all().c_str());
    QVERIFY(fs::exists(file));  // left alone
  }

  // A bound that holds two files: the third save deletes the least recently used one (a load
  // counts as a use), and the order survives reopening; a file whose tokens a newer one extends goes.
  void theLeastRecentlyUsedFilesGoFirst() {
    if (!fs::exists(demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
    TempDir tmp;
    const auto model = loadModel(demoModel());
    const std::vector<int32_t> x = tokens(16, 1), y = tokens(16, 2), z = tokens(16, 3);
    const fs::path dir = tmp / "cache";
    uint64_t one = 0;
    {
      PromptCache probe(tmp / "probe", uint64_t{1} << 30, *model);
      saveConversation(probe, *model, x);
      one = probe.bytes();
    }
    {
      Warnings warnings;
      PromptCache cache(dir, 2 * one + one / 2, *model, warnings.sink());
      saveConversation(cache, *model, x);
      saveConversation(cache, *model, y);
      QCOMPARE(cache.files(), size_t{2});
      std::vector<int32_t> prompt = x;
      prompt.push_back(7);
      const auto hit = cache.find(prompt, 0);
      QVERIFY(hit);
      QCOMPARE(hit->keep, int64_t{16});
      const auto seq = model->addSequence();
      QVERIFY(cache.load(*hit, *model, seq));
      model->removeSequence(seq);
      saveConversation(cache, *model, z);
      QCOMPARE(cache.files(), size_t{2});
      QVERIFY(fs::exists(dir / PromptCache::fileName(x)));
      QVERIFY(!fs::exists(dir / PromptCache::fileName(y)));
      QVERIFY(fs::exists(dir / PromptCache::fileName(z)));
      QVERIFY2(warnings.lines.empty(), warnings.all().c_str());
    }
    {
      PromptCache cache(dir, one + one / 2, *model);  // reopened with room for one: z was used last
      QCOMPARE(cache.files(), size_t{1});
      QVERIFY(!fs::exists(dir / PromptCache::fileName(x)));
      QVERIFY(fs::exists(dir / PromptCache::fileName(z)));
      std::vector<int32_t> longer = z;
      longer.insert(longer.end(), {9, 10, 11});
      saveConversation(cache, *model, longer);
      QCOMPARE(cache.files(), size_t{1});
      QVERIFY(!fs::exists(dir / PromptCache::fileName(z)));
      QVERIFY(fs::exists(dir / PromptCache::fileName(longer)));
    }
  }

  void aDirectoryThatCannotBeUsedIsAClearError() {
    if (!fs::exists(demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
    TempDir tmp;
    const auto model = loadModel(demoModel());
    writeBytes(tmp / "file", "x");
    const fs::path under = tmp / "file" / "cache";
    try {
      PromptCache cache(under, 1 << 20, *model);
      QFAIL("a directory under a file was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find(under.string()) != std::string::npos, e.what());
    }
    // A model without a KV cache to export (MoeModel's defaults, the threaded tests' ToyModel).
    const testing::ToyModel toy(64);
    try {
      PromptCache cache(tmp / "toy", 1 << 20, toy);
      QFAIL("a model that cannot save its KV was accepted");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("cannot save its KV cache") != std::string::npos, e.what());
    }
    PromptCache first(tmp / "cache", 1 << 20, *model);
    try {
      PromptCache second(tmp / "cache", 1 << 20, *model);
      QFAIL("two caches held one directory");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("in use") != std::string::npos, e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestPromptCache)
#include "test_prompt_cache.moc"
