// Safetensors writing and strict reading, and HF checkpoint directories (single file and sharded).
#include <QtTest>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/safetensors.h"

using namespace zipmoe;
using zipmoe::testing::TempDir;

namespace {

void writeBytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file from a raw header text and data size.
std::string rawFile(const std::string& header, size_t dataBytes) {
  std::string s(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return s + header + std::string(dataBytes, '\x01');
}

void writeSmallCheckpoint(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  writeBytes(dir / "config.json", R"({"model_type": "mixtral"})");
  SafetensorsWriter w(dir / "model.safetensors",
                      {{"a", DType::BF16, {2, 3}}, {"b", DType::F32, {4}}, {"c", DType::I64, {}}}, {{"format", "pt"}});
  const uint16_t a[6] = {1, 2, 3, 4, 5, 6};
  const float b[4] = {1.f, 2.f, 3.f, 4.f};
  const int64_t c = -7;
  w.append(a, sizeof a);
  w.append(b, sizeof b);
  w.append(&c, sizeof c);
  w.finish();
}

}  // namespace

class TestSafetensors : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void writtenFileReadsBack() {
    TempDir tmp;
    writeSmallCheckpoint(tmp.path());
    SafetensorsFile f(tmp / "model.safetensors");
    QCOMPARE(f.tensors().size(), size_t{3});
    QCOMPARE(f.metadata().at("format"), std::string("pt"));
    const TensorInfo* a = f.find("a");
    QVERIFY(a);
    QCOMPARE(a->dtype, DType::BF16);
    QVERIFY((a->shape == std::vector<int64_t>{2, 3}));
    QCOMPARE(a->offset % 8, uint64_t{0});  // data section 8-byte aligned, like the reference writer
    uint16_t back[6];
    f.read(*a, 0, sizeof back, back);
    QCOMPARE(back[5], uint16_t{6});
    uint16_t part[2];
    f.read(*a, 4, 4, part);
    QCOMPARE(part[0], uint16_t{3});
    const TensorInfo* c = f.find("c");
    QCOMPARE(c->numel(), uint64_t{1});
    ZIPMOE_EXPECT_ERROR(f.read(*a, 10, 4, part), "read past the end of tensor 'a'");
    QVERIFY(!std::filesystem::exists(tmp.path() / "model.safetensors.partial"));
  }

  void unfinishedWriterLeavesNoFile() {
    TempDir tmp;
    {
      SafetensorsWriter w(tmp / "x.safetensors", {{"a", DType::BF16, {4}}});
      w.append("ab", 2);
      ZIPMOE_EXPECT_ERROR(w.finish(), "wrote 2 data bytes, declared 8");
    }
    QVERIFY(!std::filesystem::exists(tmp / "x.safetensors"));
    QVERIFY(!std::filesystem::exists(tmp / "x.safetensors.partial"));
  }

  void malformedHeadersAreRejectedWithTheField() {
    const std::string what = "m.safetensors";
    auto parse = [&](const std::string& bytes) {
      std::vector<uint8_t> v(bytes.begin(), bytes.end());
      return parseSafetensorsHeader(v, v.size(), what);
    };
    ZIPMOE_EXPECT_ERROR(parse("abc"), "m.safetensors", "shorter than the 8-byte header length");
    ZIPMOE_EXPECT_ERROR(parse(std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8)), "exceeds the 100 MiB limit");
    ZIPMOE_EXPECT_ERROR(parse(std::string("\x40\x00\x00\x00\x00\x00\x00\x00{}", 10)), "truncated");
    ZIPMOE_EXPECT_ERROR(parse(rawFile("{not json", 0)), "not valid JSON");
    ZIPMOE_EXPECT_ERROR(parse(rawFile("[1,2]", 0)), "not a JSON object");
    ZIPMOE_EXPECT_ERROR(parse(rawFile(R"({"t":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", 1)),
                        "tensor 't'", "unknown dtype 'Q7'");
    ZIPMOE_EXPECT_ERROR(parse(rawFile(R"({"t":{"shape":[1],"data_offsets":[0,2]}})", 2)), "missing or non-string 'dtype'");
    ZIPMOE_EXPECT_ERROR(parse(rawFile(R"({"t":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", 4)),
                        "tensor 't'", "4 bytes of data", "need 6");
    ZIPMOE_EXPECT_ERROR(parse(rawFile(R"({"t":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", 2)),
                        "data section holds only 2 bytes", "truncated");
    ZIPMOE_EXPECT_ERROR(parse(rawFile(R"({"t":{"dtype":"BF16","shape":[-2],"data_offsets":[0,4]}})", 4)),
                        "non-negative integers");
    ZIPMOE_EXPECT_ERROR(parse(rawFile(R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[2,0]}})", 2)), "reversed");
    ZIPMOE_EXPECT_ERROR(
        parse(rawFile(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", 3)),
        "overlaps");
    ZIPMOE_EXPECT_ERROR(parse(rawFile(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", 3)), "unindexed bytes");
    ZIPMOE_EXPECT_ERROR(parse(rawFile(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 5)),
                        "3 bytes after the last tensor");
    ZIPMOE_EXPECT_ERROR(parse(rawFile(R"({"__metadata__":{"k":1}})", 0)), "__metadata__ value of 'k'");
  }

  void truncatedFileOnDiskNamesTheFile() {
    TempDir tmp;
    writeSmallCheckpoint(tmp.path());
    const auto p = tmp / "model.safetensors";
    std::filesystem::resize_file(p, std::filesystem::file_size(p) - 3);
    ZIPMOE_EXPECT_ERROR(SafetensorsFile{p}, p.string().c_str(), "tensor 'c'", "truncated");
  }

  void checkpointDirectories() {
    TempDir tmp;
    writeSmallCheckpoint(tmp.path());
    HfCheckpoint ck(tmp.path());
    QCOMPARE(ck.modelType(), std::string("mixtral"));
    QCOMPARE(ck.tensors().size(), size_t{3});
    QVERIFY(ck.find("b"));
    QVERIFY(!ck.find("zz"));

    std::filesystem::remove(tmp / "config.json");
    ZIPMOE_EXPECT_ERROR(HfCheckpoint{tmp.path()}, "config.json is missing");
    writeBytes(tmp / "config.json", "{oops");
    ZIPMOE_EXPECT_ERROR(HfCheckpoint{tmp.path()}, "config.json is not valid JSON");
    ZIPMOE_EXPECT_ERROR(HfCheckpoint{tmp / "nowhere"}, "is not a directory");
  }

  void shardedCheckpointAndMissingShard() {
    TempDir tmp;
    const auto dir = tmp.path();
    writeBytes(dir / "config.json", R"({"model_type": "olmoe"})");
    {
      SafetensorsWriter w1(dir / "model-00001-of-00002.safetensors", {{"x", DType::BF16, {2}}});
      w1.append("abcd", 4);
      w1.finish();
      SafetensorsWriter w2(dir / "model-00002-of-00002.safetensors", {{"y", DType::BF16, {1}}});
      w2.append("ef", 2);
      w2.finish();
    }
    nlohmann::json index = {{"metadata", {{"total_size", 6}}},
                            {"weight_map", {{"x", "model-00001-of-00002.safetensors"}, {"y", "model-00002-of-00002.safetensors"}}}};
    writeBytes(dir / "model.safetensors.index.json", index.dump());
    HfCheckpoint ck(dir);
    QCOMPARE(ck.tensors().size(), size_t{2});
    QCOMPARE(ck.find("y")->file->path().filename().string(), std::string("model-00002-of-00002.safetensors"));

    index["weight_map"]["z"] = "model-00002-of-00002.safetensors";
    writeBytes(dir / "model.safetensors.index.json", index.dump());
    ZIPMOE_EXPECT_ERROR(HfCheckpoint{dir}, "tensor 'z' listed in the index is not in the file");

    std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
    ZIPMOE_EXPECT_ERROR(HfCheckpoint{dir}, "missing shard", "model-00002-of-00002.safetensors",
                        "model.safetensors.index.json");

    std::filesystem::remove(dir / "model.safetensors.index.json");
    ZIPMOE_EXPECT_ERROR(HfCheckpoint{dir}, "has neither model.safetensors nor model.safetensors.index.json");
  }
};

QTEST_APPLESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
