// The store end to end: generate a model of every family, convert it with every codec and several
// K, and check that every tensor comes back bit-exact (buffered and O_DIRECT reads), that chunks
// are aligned and checksummed, and that an interrupted conversion never leaves a store that opens.
#include <QtTest>

#include <cstring>
#include <tuple>

#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "test_support.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/store.h"
#include "tools/synthetic/synthetic_model.h"

using namespace zipmoe;
using zipmoe::testing::TempDir;

namespace {

std::filesystem::path makeModel(const std::filesystem::path& dir, ModelFamily family, uint64_t shardBytes = 0) {
  SyntheticModelOptions o;
  o.family = family;
  o.preset = "tiny";
  o.maxShardBytes = shardBytes;
  generateSyntheticModel(dir, o);
  return dir;
}

// Reads every expert tensor with both read modes and compares it with the checkpoint's bytes.
void compareEveryExpertTensor(const Store& store, const HfCheckpoint& ck) {
  const Manifest& m = store.manifest();
  for (int l = 0; l < m.numLayers(); ++l)
    for (int x = 0; x < m.numExperts; ++x)
      for (int k = 0; k < m.numKinds(); ++k) {
        const auto& e = m.expert(l, x, k);
        const auto* src = ck.find(e.name);
        QVERIFY2(src, e.name.c_str());
        std::vector<uint16_t> expected(e.numel), buffered(e.numel), direct(e.numel);
        src->file->read(*src->info, 0, src->info->size, expected.data());
        store.readExpertTensor(l, x, k, buffered.data(), ReadMode::Buffered);
        QVERIFY2(buffered == expected, e.name.c_str());
        store.readExpertTensor(l, x, k, direct.data(), ReadMode::Direct);
        QVERIFY2(direct == expected, e.name.c_str());
      }
}

}  // namespace

class TestStore : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void everyFamilyAndCodecRoundTripsBitExact_data() {
    QTest::addColumn<int>("family");
    QTest::addColumn<QString>("codec");
    QTest::addColumn<int>("shards");
    for (ModelFamily f : allFamilies())
      for (const char* codec : {"huffman", "zstd:3", "zstd:19", "lz4", "lz4hc:9", "raw"}) {
        const int k = f == ModelFamily::Mixtral ? 1 : (f == ModelFamily::Olmoe ? 5 : 4);
        QTest::newRow((std::string(familyName(f)) + "/" + codec).c_str()) << static_cast<int>(f) << QString(codec) << k;
      }
  }
  void everyFamilyAndCodecRoundTripsBitExact() {
    QFETCH(int, family);
    QFETCH(QString, codec);
    QFETCH(int, shards);
    TempDir tmp;
    const auto hf = makeModel(tmp / "hf", static_cast<ModelFamily>(family));
    ConvertOptions o;
    o.codec = parseCodecSpec(codec.toStdString());
    o.shards = shards;
    const ConvertReport r = convertCheckpoint(hf, tmp / "store", o);
    QVERIFY(r.expertWeights > 0);
    QCOMPARE(r.expertBytesBf16, 2 * r.expertWeights);

    const VerifyReport v = verifyStore(tmp / "store", hf);
    QVERIFY(v.expertTensors > 0);
    QVERIFY(v.denseTensors > 0);

    const auto store = Store::open(tmp / "store");
    const Manifest& m = store->manifest();
    QCOMPARE(m.codec, o.codec);
    QCOMPARE(m.shards, shards);
    QCOMPARE(m.family, static_cast<ModelFamily>(family));
    HfCheckpoint ck(hf);
    compareEveryExpertTensor(*store, ck);
    for (const auto& e : m.experts) {
      QCOMPARE(e.eChunks.size(), static_cast<size_t>(shards));
      for (const auto& c : e.eChunks) QCOMPARE(c.offset % kChunkAlignment, uint64_t{0});
      QCOMPARE(e.smChunk.offset % kChunkAlignment, uint64_t{0});
    }
    // Dense tensors come back byte for byte too.
    for (const auto& d : m.dense) {
      std::vector<uint8_t> a(d.size), b(d.size);
      store->readDenseTensor(d, a.data());
      const auto* src = ck.find(d.name);
      QVERIFY(src);
      src->file->read(*src->info, 0, src->info->size, b.data());
      QVERIFY(a == b);
    }
    // Companion files travel with the store.
    QVERIFY(std::filesystem::exists(tmp / "store" / "tokenizer.json"));
    QVERIFY(std::filesystem::exists(tmp / "store" / "tokenizer_config.json"));
  }

  void sharedExpertsAndDenseLayersStayDense() {
    TempDir tmp;
    for (ModelFamily f : {ModelFamily::Qwen2Moe, ModelFamily::DeepseekV2}) {
      const auto hf = makeModel(tmp / familyName(f), f);
      convertCheckpoint(hf, tmp / (std::string(familyName(f)) + ".store"), {});
      const auto store = Store::open(tmp / (std::string(familyName(f)) + ".store"));
      bool sawShared = false;
      for (const auto& d : store->manifest().dense) sawShared |= d.name.find("shared_expert") != std::string::npos;
      QVERIFY2(sawShared, familyName(f));
      for (const auto& e : store->manifest().experts) QVERIFY(e.name.find("shared_expert") == std::string::npos);
    }
  }

  void shardedCheckpointConverts() {
    TempDir tmp;
    const auto hf = makeModel(tmp / "hf", ModelFamily::Qwen3Moe, 64 * 1024);
    QVERIFY(std::filesystem::exists(hf / "model.safetensors.index.json"));
    convertCheckpoint(hf, tmp / "store", {});
    QCOMPARE(verifyStore(tmp / "store", hf).bytesCompared > 0, true);
  }

  void readChunkChecksAndServesEveryChunk() {
    TempDir tmp;
    const auto hf = makeModel(tmp / "hf", ModelFamily::Mixtral);
    convertCheckpoint(hf, tmp / "store", {});
    const auto store = Store::open(tmp / "store");
    const Manifest& m = store->manifest();
    io::AlignedBuffer buf(1 << 20);
    for (int s = kSmShard; s < m.shards; ++s) {
      const ChunkKey key{m.numLayers() - 1, m.numExperts - 1, m.numKinds() - 1, s};
      const size_t n = store->readChunk(key, {buf.data(), buf.size()}, ReadMode::Direct);
      QCOMPARE(static_cast<uint64_t>(n), store->chunk(key).size);
    }
    ZIPMOE_EXPECT_ERROR(store->chunk({m.numLayers(), 0, 0, 0}), "no chunk (layer");
    ZIPMOE_EXPECT_ERROR(store->chunk({0, 0, 0, m.shards}), "no chunk");
    ZIPMOE_EXPECT_ERROR(store->readChunk({0, 0, 0, 0}, {buf.data() + 1, 100000}, ReadMode::Direct), "4 KiB-aligned");
  }

  void tensorChunksReadInOneRequestIntoOneOrTwoBuffers() {
    // readTensorChunks gives the same bytes as chunk-by-chunk reads: E-chunks alone, E and SM in one
    // range, and E and SM into two separate buffers (a pool that keeps the parts), both read modes.
    TempDir tmp;
    const auto hf = makeModel(tmp / "hf", ModelFamily::Mixtral);
    ConvertOptions options;
    options.shards = 3;
    convertCheckpoint(hf, tmp / "store", options);
    const auto store = Store::open(tmp / "store");
    const Manifest& m = store->manifest();
    for (const ReadMode mode : {ReadMode::Direct, ReadMode::Buffered})
      for (const auto& [layer, expert, kind] : {std::tuple{0, 0, 0}, std::tuple{m.numLayers() - 1, m.numExperts - 1, m.numKinds() - 1}}) {
        const ExpertTensorEntry& e = m.expert(layer, expert, kind);
        QCOMPARE(static_cast<int>(e.eChunks.size()), 3);
        const uint64_t eBytes = e.paddedEBytes();
        const uint64_t smBytes = e.smChunk.paddedSize;
        // The reference: each chunk on its own.
        io::AlignedBuffer ref(static_cast<size_t>(eBytes + smBytes));
        uint64_t at = 0;
        for (int s = 0; s < 3; ++s) {
          store->readChunk({layer, expert, kind, s}, {ref.data() + at, static_cast<size_t>(e.eChunks[static_cast<size_t>(s)].paddedSize)}, mode);
          at += e.eChunks[static_cast<size_t>(s)].paddedSize;
        }
        store->readChunk({layer, expert, kind, kSmShard}, {ref.data() + eBytes, static_cast<size_t>(smBytes)}, mode);
        const auto same = [&](const uint8_t* got, uint64_t from, const ChunkRef& c) {
          return std::memcmp(got, ref.data() + from, static_cast<size_t>(c.size)) == 0;
        };
        const auto sameE = [&](const uint8_t* got) {
          uint64_t pos = 0;
          for (const ChunkRef& c : e.eChunks) {
            if (!same(got + pos, pos, c)) return false;
            pos += c.paddedSize;
          }
          return true;
        };
        io::AlignedBuffer eOnly(static_cast<size_t>(eBytes));
        store->readTensorChunks(layer, expert, kind, {eOnly.data(), eOnly.size()}, {}, mode);
        QVERIFY(sameE(eOnly.data()));
        io::AlignedBuffer whole(static_cast<size_t>(eBytes + smBytes));
        const uint64_t n = store->readTensorChunks(layer, expert, kind, {whole.data(), static_cast<size_t>(eBytes)},
                                                   {whole.data() + eBytes, static_cast<size_t>(smBytes)}, mode);
        QCOMPARE(n, mode == ReadMode::Direct ? eBytes + smBytes : eBytes + e.smChunk.size);
        QVERIFY(sameE(whole.data()) && same(whole.data() + eBytes, eBytes, e.smChunk));
        io::AlignedBuffer eApart(static_cast<size_t>(eBytes)), smApart(static_cast<size_t>(smBytes));
        std::memset(eApart.data(), 0xa5, eApart.size());
        std::memset(smApart.data(), 0x5a, smApart.size());
        QCOMPARE(store->readTensorChunks(layer, expert, kind, {eApart.data(), eApart.size()}, {smApart.data(), smApart.size()}, mode), n);
        QVERIFY(sameE(eApart.data()) && same(smApart.data(), eBytes, e.smChunk));
      }
    const ExpertTensorEntry& e = m.expert(0, 0, 0);
    io::AlignedBuffer buf(1 << 20);
    ZIPMOE_EXPECT_ERROR(store->readTensorChunks(0, 0, 0, {buf.data(), 4096}, {}, ReadMode::Direct), e.name.c_str(),
                        "E destination buffer too small");
    ZIPMOE_EXPECT_ERROR(store->readTensorChunks(0, 0, 0, {buf.data(), buf.size() / 2}, {buf.data() + buf.size() / 2, 16}, ReadMode::Direct),
                        "SM destination buffer too small");
    ZIPMOE_EXPECT_ERROR(store->readTensorChunks(0, 0, 0, {buf.data(), buf.size() / 2}, {buf.data() + buf.size() / 2 + 512, 256 * 1024},
                                                ReadMode::Direct),
                        "4 KiB-aligned");
  }

  void interruptedConversionLeavesNoStore() {
    TempDir tmp;
    const auto hf = makeModel(tmp / "hf", ModelFamily::Olmoe);
    // First a complete store, then an interrupted re-conversion over it: the old store must not
    // survive half-overwritten, and the new one must not look valid.
    convertCheckpoint(hf, tmp / "store", {});
    std::atomic<bool> cancel{false};
    ConvertOptions o;
    o.cancel = &cancel;
    size_t calls = 0;
    o.onProgress = [&](const ConvertProgress& p) {
      if (++calls == p.tensorsTotal / 2) cancel = true;
    };
    bool cancelled = false;
    try {
      convertCheckpoint(hf, tmp / "store", o);
    } catch (const Cancelled&) {
      cancelled = true;
    }
    QVERIFY(cancelled);
    QVERIFY(!std::filesystem::exists(tmp / "store" / "manifest.json"));
    QVERIFY(!std::filesystem::exists(tmp / "store" / "experts.bin.partial"));
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "manifest.json is missing");
    // And converting again succeeds.
    convertCheckpoint(hf, tmp / "store", {});
    verifyStore(tmp / "store", hf);
  }

  void inspectReportsRatiosAndEntropy() {
    TempDir tmp;
    SyntheticModelOptions o;
    o.family = ModelFamily::Qwen2Moe;
    o.preset = "small";
    generateSyntheticModel(tmp / "hf", o);
    convertCheckpoint(tmp / "hf", tmp / "store", {});
    const std::string report = describeStore(tmp / "store");
    for (const char* s : {"qwen2_moe", "huffman", "gate_proj", "up_proj", "down_proj", "all experts", "entropy", "bound",
                          "dense"})
      QVERIFY2(report.find(s) != std::string::npos, s);
    const auto store = Store::open(tmp / "store");
    const auto& h = store->manifest().exponentHistograms;
    QCOMPARE(h.size(), size_t{3});
    const double entropy = entropyBits(h[0].data());
    QVERIFY2(entropy > 2.4 && entropy < 2.7, std::to_string(entropy).c_str());  // Gaussian BF16 weights
  }

  void manifestSerialisationRoundTrips() {
    TempDir tmp;
    const auto hf = makeModel(tmp / "hf", ModelFamily::DeepseekV2);
    convertCheckpoint(hf, tmp / "store", {});
    const std::string text = io::readTextFile(tmp / "store" / "manifest.json");
    const Manifest a = parseManifest(text, "m");
    const Manifest b = parseManifest(serializeManifest(a), "m");
    QCOMPARE(serializeManifest(a), serializeManifest(b));
    QCOMPARE(a.experts.size(), b.experts.size());
  }
};

QTEST_APPLESS_MAIN(TestStore)
#include "test_store.moc"
