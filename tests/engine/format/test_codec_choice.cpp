// The converter's codec choice: the decision on constructed measurements (which codec each kind of
// machine gets, and why), the measurement on real exponents and a real scratch file, and the choice
// as the manifest records it — measured, named by --codec, absent (older stores) or malformed.
// No test here asserts a duration: measured speeds only have to be positive and finite.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "test_support.h"
#include "tools/synthetic/synthetic_model.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/format/codec_choice.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/format/store.h"

using namespace zipmoe;
using zipmoe::testing::TempDir;

namespace {

// Figures of the kind `zipmoe bench codec` reports (BF16 bytes per second per core, stored / BF16).
CodecMeasurements machine(int cores, double diskBytesPerSecond) {
  CodecMeasurements m;
  m.cores = cores;
  m.diskReadBytesPerSecond = diskBytesPerSecond;
  m.sampleWeights = 1 << 20;
  m.codecs = {{{CodecId::Huffman8, 0}, 8e9, 0.662}, {{CodecId::Nibble, 0}, 30e9, 0.750}, {{CodecId::Zstd, 0}, 2e9, 0.708}};
  return m;
}

void writeText(const std::filesystem::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::filesystem::path tinyModel(const std::filesystem::path& dir) {
  SyntheticModelOptions o;
  o.family = ModelFamily::Mixtral;
  generateSyntheticModel(dir, o);
  return dir;
}

}  // namespace

class TestCodecChoice : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void fewCoresAndAFastDiskChooseNibble() {
    // Decoding is the long pole on 2 cores, and a nibble C-pool hit is not decoded at all.
    const CodecChoice c = chooseExponentCodec(machine(2, 3e9));
    QCOMPARE(c.chosen, (CodecSpec{CodecId::Nibble, 0}));
    QCOMPARE(c.by, CodecChosenBy::Measured);
    QVERIFY(c.measurements.has_value());
    for (const char* s : {"nibble", "huffman8", "zstd:3", "2 cores", "3.00 GB/s O_DIRECT", "75.0 %"})
      QVERIFY2(c.reason.find(s) != std::string::npos, c.reason.c_str());
    // The choice first, then the others' costs.
    const std::string start = "nibble: a miss plus a C-pool hit costs 0.25 s per GB of BF16 experts, huffman8 0.28, zstd:3 0.50 (";
    QCOMPARE(c.reason.rfind(start, 0), size_t{0});
  }

  void nibbleHitsCostNoDecoding() {
    // Here nibble wins only because its C-pool hits are not decoded: counted like huffman8's
    // (0.25 + 0.017 ns against 0.221 + 0.042), huffman8 would be cheaper.
    CodecMeasurements m = machine(2, 3e9);
    m.codecs[0].decodeBytesPerSecondPerCore = 12e9;
    QCOMPARE(chooseExponentCodec(m).chosen, (CodecSpec{CodecId::Nibble, 0}));
    QVERIFY(codecCost(m.codecs[1], 3e9, 2).missSecondsPerByte + 1 / (30e9 * 2) > codecCost(m.codecs[0], 3e9, 2).total());
  }

  void manyCoresOrASlowDiskChooseHuffman8() {
    // Reading is the long pole: the fewest stored bytes win.
    QCOMPARE(chooseExponentCodec(machine(64, 0.2e9)).chosen, (CodecSpec{CodecId::Huffman8, 0}));
    QCOMPARE(chooseExponentCodec(machine(64, 10e9)).chosen, (CodecSpec{CodecId::Huffman8, 0}));
    QCOMPARE(chooseExponentCodec(machine(1, 0.2e9)).chosen, (CodecSpec{CodecId::Huffman8, 0}));
    // One core and a fast disk: decoding dominates again.
    QCOMPARE(chooseExponentCodec(machine(1, 3e9)).chosen, (CodecSpec{CodecId::Nibble, 0}));
  }

  void theNumbersDecideNotTheNames() {
    CodecMeasurements m = machine(8, 1e9);
    m.codecs[2].storedRatio = 0.55;  // a zstd that both stores less and decodes fast enough
    m.codecs[2].decodeBytesPerSecondPerCore = 20e9;
    QCOMPARE(chooseExponentCodec(m).chosen, (CodecSpec{CodecId::Zstd, 0}));
    m.codecs = {m.codecs[1]};  // a single candidate is chosen
    QCOMPARE(chooseExponentCodec(m).chosen, (CodecSpec{CodecId::Nibble, 0}));
  }

  void theCostModelIsTheDocumentedRule() {
    // miss = max(ratio / disk, 1 / (decode × cores)); hit = 1 / (decode × cores), 0 for nibble.
    const CodecCost h = codecCost({{CodecId::Huffman8, 0}, 1e9, 0.5}, 1e9, 1);
    QCOMPARE(h.missSecondsPerByte, 1e-9);
    QCOMPARE(h.hitSecondsPerByte, 1e-9);
    const CodecCost n = codecCost({{CodecId::Nibble, 0}, 1e9, 0.75}, 0.5e9, 4);
    QCOMPARE(n.missSecondsPerByte, 1.5e-9);
    QCOMPARE(n.hitSecondsPerByte, 0.0);
  }

  void withinOnePercentTheSmallerStoreWins() {
    CodecMeasurements m;
    m.cores = 1;
    m.diskReadBytesPerSecond = 1e9;
    m.codecs = {{{CodecId::Nibble, 0}, 0.502e9, 0.75}, {{CodecId::Huffman8, 0}, 1e9, 0.5}};  // 1.992 vs 2.000 ns
    QCOMPARE(chooseExponentCodec(m).chosen, (CodecSpec{CodecId::Huffman8, 0}));
    m.codecs[0].decodeBytesPerSecondPerCore = 0.52e9;  // 1.923 ns: beyond the tie
    QCOMPARE(chooseExponentCodec(m).chosen, (CodecSpec{CodecId::Nibble, 0}));
  }

  void badMeasurementsAreRefused() {
    CodecMeasurements m = machine(2, 3e9);
    m.codecs.clear();
    ZIPMOE_EXPECT_ERROR(chooseExponentCodec(m), "no candidate codec");
    m = machine(2, 0);
    ZIPMOE_EXPECT_ERROR(chooseExponentCodec(m), "disk read speed");
    m = machine(0, 3e9);
    ZIPMOE_EXPECT_ERROR(chooseExponentCodec(m), "cores = 0");
    m = machine(2, 3e9);
    m.codecs[1].decodeBytesPerSecondPerCore = std::nan("");
    ZIPMOE_EXPECT_ERROR(chooseExponentCodec(m), "nibble decode speed");
    m = machine(2, 3e9);
    m.codecs[0].storedRatio = -1;
    ZIPMOE_EXPECT_ERROR(chooseExponentCodec(m), "huffman8 stored ratio");
  }

  void measuringRealExponentsAndARealFile() {
    // Weights of N(0, 0.02²) in BF16 (their exponents are as compressible as a real model's).
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<uint16_t> words(1 << 18);
    for (auto& w : words) {
      const float f = normal(rng);
      uint32_t bits = 0;
      std::memcpy(&bits, &f, sizeof bits);
      w = static_cast<uint16_t>(bits >> 16);
    }
    std::vector<uint8_t> exps(words.size()), sm(words.size());
    bf16::split(words.data(), words.size(), exps.data(), sm.data());
    TempDir tmp;
    const CodecMeasurements m = measureCodecs({exps, std::vector<uint8_t>(exps.begin(), exps.begin() + 1000)}, tmp.path(), 0);
    QCOMPARE(m.sampleWeights, uint64_t{words.size() + 1000});
    QVERIFY(m.cores >= 1);
    QCOMPARE(m.cores, usableCores());
    QVERIFY(std::isfinite(m.diskReadBytesPerSecond) && m.diskReadBytesPerSecond > 0);
    QCOMPARE(m.codecs.size(), codecChoiceCandidates().size());
    for (size_t i = 0; i < m.codecs.size(); ++i) {
      const auto& c = m.codecs[i];
      QCOMPARE(c.codec, codecChoiceCandidates()[i]);
      QVERIFY2(std::isfinite(c.decodeBytesPerSecondPerCore) && c.decodeBytesPerSecondPerCore > 0, describe(c.codec).c_str());
      QVERIFY2(c.storedRatio > 0.5 && c.storedRatio < 1.0, describe(c.codec).c_str());  // SM raw, E compressed
    }
    QVERIFY(std::filesystem::is_empty(tmp.path()));  // the scratch file is gone
    QCOMPARE(measureCodecs({exps}, tmp.path(), 3).cores, 3);
    const CodecChoice c = chooseExponentCodec(m);
    QVERIFY(!c.reason.empty());
    ZIPMOE_EXPECT_ERROR(measureCodecs({}, tmp.path()), "sample", "empty");
    ZIPMOE_EXPECT_ERROR(measureCodecs({exps}, tmp / "missing"), (tmp / "missing").string().c_str());
  }

  void aConversionWithoutACodecRecordsTheMeasuredChoice() {
    TempDir tmp;
    const auto hf = tinyModel(tmp / "hf");
    int calls = 0;
    ConvertOptions o;
    o.onCodecChosen = [&](const CodecChoice& c) {
      ++calls;
      QCOMPARE(c.by, CodecChosenBy::Measured);
    };
    const ConvertReport r = convertCheckpoint(hf, tmp / "store", o);
    QCOMPARE(calls, 1);
    QCOMPARE(r.codecChoice.by, CodecChosenBy::Measured);
    const auto j = nlohmann::json::parse(zipmoe::testing::readText(tmp / "store" / "manifest.json"));
    QVERIFY(j.contains("codec_choice"));
    const auto& cj = j["codec_choice"];
    QCOMPARE(cj["by"].get<std::string>(), std::string("measured"));
    QCOMPARE(cj["chosen"].get<std::string>(), describe(r.codecChoice.chosen));
    QCOMPARE(cj["reason"].get<std::string>(), r.codecChoice.reason);
    QCOMPARE(cj["measurements"]["codecs"].size(), codecChoiceCandidates().size());
    bool candidate = false;
    for (const CodecSpec& s : codecChoiceCandidates()) candidate |= s == r.codecChoice.chosen;
    QVERIFY(candidate);

    const auto store = Store::open(tmp / "store");
    const Manifest& m = store->manifest();
    QCOMPARE(m.codec, r.codecChoice.chosen);
    QVERIFY(m.codecChoice.has_value());
    QCOMPARE(m.codecChoice->reason, r.codecChoice.reason);
    QVERIFY(m.codecChoice->measurements.has_value());
    QCOMPARE(m.codecChoice->measurements->cores, r.codecChoice.measurements->cores);
    QCOMPARE(chooseExponentCodec(*m.codecChoice->measurements).chosen, m.codec);  // the record explains the choice
    QVERIFY(verifyStore(tmp / "store", hf).bytesCompared > 0);
    const std::string report = describeStore(tmp / "store");
    QVERIFY2(report.find("codec choice measured: " + r.codecChoice.reason) != std::string::npos, report.c_str());
    QVERIFY(std::filesystem::exists(tmp / "store" / "experts.bin"));
    for (const auto& f : std::filesystem::directory_iterator(tmp / "store"))
      QVERIFY2(f.path().filename().string().find("disk-probe") == std::string::npos, f.path().c_str());
  }

  void aGivenCodecIsRecordedAsGiven() {
    TempDir tmp;
    const auto hf = tinyModel(tmp / "hf");
    ConvertOptions o;
    o.codec = CodecSpec{CodecId::Zstd, 5};
    const ConvertReport r = convertCheckpoint(hf, tmp / "store", o);
    QCOMPARE(r.codecChoice.chosen, (CodecSpec{CodecId::Zstd, 5}));
    const auto j = nlohmann::json::parse(zipmoe::testing::readText(tmp / "store" / "manifest.json"));
    QCOMPARE(j["codec_choice"]["by"].get<std::string>(), std::string("--codec"));
    QCOMPARE(j["codec_choice"]["chosen"].get<std::string>(), std::string("zstd:5"));
    QVERIFY(!j["codec_choice"].contains("measurements"));
    const auto store = Store::open(tmp / "store");
    QCOMPARE(store->manifest().codecChoice->by, CodecChosenBy::Option);
    QVERIFY(!store->manifest().codecChoice->measurements);
    QVERIFY(describeStore(tmp / "store").find("codec choice --codec: zstd:5") != std::string::npos);
  }

  void aManifestWithoutTheChoiceStillOpens() {
    TempDir tmp;
    ConvertOptions o;
    o.codec = CodecSpec{CodecId::Huffman8, 0};
    convertCheckpoint(tinyModel(tmp / "hf"), tmp / "store", o);
    const auto mp = tmp / "store" / "manifest.json";
    auto j = nlohmann::json::parse(zipmoe::testing::readText(mp));
    j.erase("codec_choice");
    writeText(mp, j.dump());
    const auto store = Store::open(tmp / "store");
    QVERIFY(!store->manifest().codecChoice.has_value());
    QCOMPARE(store->manifest().codec, (CodecSpec{CodecId::Huffman8, 0}));
    QVERIFY(describeStore(tmp / "store").find("codec choice not recorded") != std::string::npos);
    QVERIFY(serializeManifest(store->manifest()).find("codec_choice") == std::string::npos);
  }

  void aMalformedChoiceIsAnErrorNamingTheField() {
    TempDir tmp;
    convertCheckpoint(tinyModel(tmp / "hf"), tmp / "store", {});
    const auto mp = tmp / "store" / "manifest.json";
    const auto good = nlohmann::json::parse(zipmoe::testing::readText(mp));
    const std::string other = good["codec"]["name"].get<std::string>() == "nibble" ? "huffman8" : "nibble";
    const auto expect = [&](const std::function<void(nlohmann::json&)>& edit, std::initializer_list<std::string> fragments) {
      auto j = good;
      edit(j);
      writeText(mp, j.dump());
      bool threw = false;
      try {
        Store::open(tmp / "store");
      } catch (const Error& e) {
        threw = true;
        for (const auto& f : fragments) QVERIFY2(std::string(e.what()).find(f) != std::string::npos, e.what());
        QVERIFY2(std::string(e.what()).find("manifest.json") != std::string::npos, e.what());
      }
      QVERIFY(threw);
    };
    expect([](auto& j) { j["codec_choice"] = "nibble"; }, {"codec_choice", "not an object"});
    expect([](auto& j) { j["codec_choice"].erase("chosen"); }, {"missing field 'codec_choice.chosen'"});
    expect([&](auto& j) { j["codec_choice"]["chosen"] = other; }, {"codec_choice.chosen", other, "is not the store's codec"});
    expect([](auto& j) { j["codec_choice"]["chosen"] = "brotli"; }, {"codec_choice.chosen", "brotli"});
    expect([](auto& j) { j["codec_choice"]["by"] = "guess"; }, {"codec_choice.by", "guess"});
    expect([](auto& j) { j["codec_choice"]["reason"] = 7; }, {"codec_choice.reason", "not a string"});
    expect([](auto& j) { j["codec_choice"]["measurements"]["cores"] = "two"; }, {"codec_choice.measurements.cores"});
    expect([](auto& j) { j["codec_choice"]["measurements"]["disk_read_bytes_per_s"] = -1; },
           {"codec_choice.measurements.disk_read_bytes_per_s", "not a positive number"});
    expect([](auto& j) { j["codec_choice"]["measurements"]["codecs"][0]["stored_ratio"] = nullptr; },
           {"codec_choice.measurements.codecs[].stored_ratio"});
    expect([](auto& j) { j["codec_choice"]["measurements"]["codecs"] = 3; },
           {"codec_choice.measurements.codecs", "not an array"});
    writeText(mp, good.dump());
    QVERIFY(Store::open(tmp / "store") != nullptr);
  }
};

QTEST_GUILESS_MAIN(TestCodecChoice)
#include "test_codec_choice.moc"
