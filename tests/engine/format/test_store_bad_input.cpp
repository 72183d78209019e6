// Bad input to the converter and the store reader: every case gets an error that names the file and
// what was wrong, and no case leaves a half-written store that later opens.
#include <QtTest>

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
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

void writeText(const std::filesystem::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

void flipByte(const std::filesystem::path& p, uint64_t offset) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5A);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

std::filesystem::path tinyModel(const std::filesystem::path& dir, ModelFamily family = ModelFamily::Mixtral) {
  SyntheticModelOptions o;
  o.family = family;
  generateSyntheticModel(dir, o);
  return dir;
}

// Root ignores file permissions. To test a read-only directory as root, drop the capabilities that
// bypass them from this thread's effective set for the scope, and restore them afterwards.
class WithoutDacOverride {
 public:
  WithoutDacOverride() {
    header_.version = _LINUX_CAPABILITY_VERSION_3;
    header_.pid = 0;
    if (syscall(SYS_capget, &header_, saved_) != 0) return;
    __user_cap_data_struct reduced[2] = {saved_[0], saved_[1]};
    reduced[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH) | (1u << CAP_FOWNER));
    active_ = syscall(SYS_capset, &header_, reduced) == 0;
  }
  ~WithoutDacOverride() {
    if (active_) syscall(SYS_capset, &header_, saved_);
  }

 private:
  __user_cap_header_struct header_{};
  __user_cap_data_struct saved_[2]{};
  bool active_ = false;
};

}  // namespace

class TestStoreBadInput : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void unknownFamilyListsTheSupportedOnes() {
    TempDir tmp;
    const auto hf = tinyModel(tmp / "hf");
    auto config = nlohmann::json::parse(zipmoe::testing::readText(hf / "config.json"));
    config["model_type"] = "gpt_oss";
    writeText(hf / "config.json", config.dump());
    ZIPMOE_EXPECT_ERROR(convertCheckpoint(hf, tmp / "out", {}), "config.json", "gpt_oss", "mixtral", "qwen2_moe",
                        "deepseek_v2", "switch_transformers");
    QVERIFY(!std::filesystem::exists(tmp / "out" / "manifest.json"));
  }

  void wrongDtypeOfAnExpertTensor() {
    TempDir tmp;
    const auto hf = tmp / "hf";
    std::filesystem::create_directories(hf);
    writeText(hf / "config.json", R"({"model_type": "mixtral"})");
    SafetensorsWriter w(hf / "model.safetensors", {{"model.layers.0.block_sparse_moe.experts.0.w1.weight", DType::F32, {2, 2}}});
    const float v[4] = {1, 2, 3, 4};
    w.append(v, sizeof v);
    w.finish();
    ZIPMOE_EXPECT_ERROR(convertCheckpoint(hf, tmp / "out", {}), "model.safetensors",
                        "model.layers.0.block_sparse_moe.experts.0.w1.weight", "dtype F32", "BF16");
  }

  void truncatedAndCorruptedSafetensors() {
    TempDir tmp;
    const auto hf = tinyModel(tmp / "hf");
    const auto st = hf / "model.safetensors";
    std::filesystem::resize_file(st, std::filesystem::file_size(st) - 100);
    ZIPMOE_EXPECT_ERROR(convertCheckpoint(hf, tmp / "out", {}), st.string().c_str(), "truncated");
    flipByte(st, 3);  // the header length
    ZIPMOE_EXPECT_ERROR(convertCheckpoint(hf, tmp / "out", {}), st.string().c_str());
    QVERIFY(!std::filesystem::exists(tmp / "out" / "manifest.json"));
  }

  void missingShard() {
    TempDir tmp;
    SyntheticModelOptions o;
    o.maxShardBytes = 32 * 1024;
    generateSyntheticModel(tmp / "hf", o);
    std::filesystem::path victim;
    for (const auto& e : std::filesystem::directory_iterator(tmp / "hf"))
      if (e.path().filename().string().rfind("model-00002", 0) == 0) victim = e.path();
    QVERIFY(!victim.empty());
    std::filesystem::remove(victim);
    ZIPMOE_EXPECT_ERROR(convertCheckpoint(tmp / "hf", tmp / "out", {}), "missing shard", victim.filename().string().c_str());
  }

  void incompleteExpertSet() {
    TempDir tmp;
    const auto hf = tmp / "hf";
    std::filesystem::create_directories(hf);
    writeText(hf / "config.json", R"({"model_type": "mixtral"})");
    SafetensorsWriter w(hf / "model.safetensors", {{"model.layers.0.block_sparse_moe.experts.0.w1.weight", DType::BF16, {2}}});
    w.append("abcd", 4);
    w.finish();
    ZIPMOE_EXPECT_ERROR(convertCheckpoint(hf, tmp / "out", {}), "block 0", "no 'w3' tensor for expert 0");
  }

  void corruptedChunkFailsItsChecksum() {
    TempDir tmp;
    const auto hf = tinyModel(tmp / "hf");
    convertCheckpoint(hf, tmp / "store", {});
    const auto store = Store::open(tmp / "store");
    const auto& e = store->manifest().expert(0, 1, 2);
    flipByte(tmp / "store" / "experts.bin", e.eChunks[0].offset + 5);
    std::vector<uint16_t> out(e.numel);
    ZIPMOE_EXPECT_ERROR(store->readExpertTensor(0, 1, 2, out.data(), ReadMode::Buffered), "E-chunk 0",
                        e.name.c_str(), "experts.bin", "checksum mismatch");
    flipByte(tmp / "store" / "experts.bin", e.smChunk.offset + 7);
    io::AlignedBuffer buf(e.smChunk.paddedSize);
    ZIPMOE_EXPECT_ERROR(store->readChunk({0, 1, 2, kSmShard}, {buf.data(), buf.size()}, ReadMode::Direct), "SM-chunk",
                        "checksum mismatch");
    // The same corruption through one request into separate E and SM buffers (a kept miss).
    io::AlignedBuffer eBuf(e.paddedEBytes());
    flipByte(tmp / "store" / "experts.bin", e.eChunks[0].offset + 5);  // the E-chunk back as it was
    ZIPMOE_EXPECT_ERROR(store->readTensorChunks(0, 1, 2, {eBuf.data(), eBuf.size()}, {buf.data(), buf.size()}, ReadMode::Direct),
                        "SM-chunk of", e.name.c_str(), "checksum mismatch");
    // A read that leaves the check to its caller (the executor's verify thread) returns the bytes;
    // the check then names the chunk, and passes the parts that are intact.
    store->readTensorChunks(0, 1, 2, {eBuf.data(), eBuf.size()}, {buf.data(), buf.size()}, ReadMode::Direct,
                            Store::Verify::Later);
    store->verifyTensorChunks(0, 1, 2, eBuf.data(), nullptr);
    ZIPMOE_EXPECT_ERROR(store->verifyTensorChunks(0, 1, 2, eBuf.data(), buf.data()), "SM-chunk of", e.name.c_str(),
                        "experts.bin", "checksum mismatch");
    store->readChunk({0, 1, 2, kSmShard}, {buf.data(), buf.size()}, ReadMode::Direct, Store::Verify::Later);
    ZIPMOE_EXPECT_ERROR(store->verifyChunk({0, 1, 2, kSmShard}, buf.data()), "SM-chunk of", "checksum mismatch");
    store->verifyChunk({0, 1, 2, 0}, eBuf.data());
    const auto& d = store->manifest().dense.front();
    flipByte(tmp / "store" / "dense.bin", d.offset);
    std::vector<uint8_t> dense(d.size);
    ZIPMOE_EXPECT_ERROR(store->readDenseTensor(d, dense.data()), d.name.c_str(), "dense.bin", "checksum mismatch");
    ZIPMOE_EXPECT_ERROR(verifyStore(tmp / "store", hf), "checksum mismatch");
  }

  void truncatedStore() {
    TempDir tmp;
    convertCheckpoint(tinyModel(tmp / "hf"), tmp / "store", {});
    const auto p = tmp / "store" / "experts.bin";
    std::filesystem::resize_file(p, std::filesystem::file_size(p) - 4096);
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "experts.bin is", "the manifest says", "(truncated)");
    convertCheckpoint(tmp / "hf", tmp / "store", {});
    std::filesystem::remove(tmp / "store" / "dense.bin");
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "dense.bin is missing");
  }

  void wrongFormatVersionAndBrokenManifest() {
    TempDir tmp;
    convertCheckpoint(tinyModel(tmp / "hf"), tmp / "store", {});
    const auto mp = tmp / "store" / "manifest.json";
    auto m = nlohmann::json::parse(zipmoe::testing::readText(mp));
    const auto good = m;
    m["version"] = 99;
    writeText(mp, m.dump());
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "manifest.json", "format version 99 is not supported", "version 1");
    m = good;
    m["format"] = "something-else";
    writeText(mp, m.dump());
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "not a ZipMoE store manifest");
    m = good;
    m["experts"][0]["e"][0][0] = 4097;  // misaligned offset
    writeText(mp, m.dump());
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "not 4 KiB-aligned");
    m = good;
    m["experts"][0]["e"][0][0] = m["experts"][1]["e"][0][0];
    writeText(mp, m.dump());
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "overlap");
    m = good;
    m["experts"][0]["shape"][0] = 3;
    writeText(mp, m.dump());
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "experts[0]", "E-chunks hold");
    m = good;
    m["experts"].erase(m["experts"].size() - 1);
    writeText(mp, m.dump());
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "field 'experts' has", "expected");
    m = good;
    m["codec"]["name"] = "zip";
    writeText(mp, m.dump());
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "unknown codec 'zip'");
    m = good;
    m.erase("shards");
    writeText(mp, m.dump());
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "missing field 'shards'");
    writeText(mp, good.dump().substr(0, 100));
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "manifest.json", "not valid JSON");
    std::filesystem::remove(mp);
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "store"), "not a complete ZipMoE store", "interrupted");
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "nothing"), "is not a ZipMoE store");
  }

  void readOnlyOutputDirectory() {
    TempDir tmp;
    const auto hf = tinyModel(tmp / "hf");
    const auto out = tmp / "ro";
    std::filesystem::create_directories(out);
    std::filesystem::permissions(out, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    {
      WithoutDacOverride asUser;
      ZIPMOE_EXPECT_ERROR(convertCheckpoint(hf, out, {}), (out / "experts.bin.partial").string().c_str(),
                          "Permission denied");
      ZIPMOE_EXPECT_ERROR(convertCheckpoint(hf, out / "sub", {}), "cannot create output directory",
                          (out / "sub").string().c_str());
    }
    std::filesystem::permissions(out, std::filesystem::perms::owner_all);
    QVERIFY(!std::filesystem::exists(out / "manifest.json"));
  }

  void fullOutputDevice() {
    // A file-size limit makes write(2) fail mid-conversion exactly like a full disk does.
    TempDir tmp;
    SyntheticModelOptions o;
    o.preset = "small";
    generateSyntheticModel(tmp / "hf", o);
    struct rlimit saved {};
    getrlimit(RLIMIT_FSIZE, &saved);
    struct sigaction ignore {}, old {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGXFSZ, &ignore, &old);
    struct rlimit small = saved;
    small.rlim_cur = 256 * 1024;
    setrlimit(RLIMIT_FSIZE, &small);
    // Once with a given codec (the converter's own writes fail), once measuring the codec (the disk
    // probe's scratch file is the first to fail): either way nothing is left behind.
    std::string messages[2];
    ConvertOptions given;
    given.codec = CodecSpec{CodecId::Huffman8, 0};
    for (int i = 0; i < 2; ++i) {
      try {
        convertCheckpoint(tmp / "hf", tmp / "out", i == 0 ? given : ConvertOptions{});
      } catch (const Error& e) {
        messages[i] = e.what();
      }
    }
    setrlimit(RLIMIT_FSIZE, &saved);
    sigaction(SIGXFSZ, &old, nullptr);
    for (const std::string& message : messages) {
      QVERIFY2(message.find("writing " + (tmp / "out").string()) != std::string::npos, message.c_str());
      QVERIFY2(message.find("File too large") != std::string::npos, message.c_str());
    }
    QVERIFY2(messages[1].find("scratch file that measures the disk") != std::string::npos, messages[1].c_str());
    QVERIFY(!std::filesystem::exists(tmp / "out" / "manifest.json"));
    QVERIFY(!std::filesystem::exists(tmp / "out" / "experts.bin.partial"));
    for (const auto& f : std::filesystem::directory_iterator(tmp / "out"))
      QVERIFY2(f.path().filename().string().find("disk-probe") == std::string::npos, f.path().c_str());
    ZIPMOE_EXPECT_ERROR(Store::open(tmp / "out"), "is not a ZipMoE store");
  }

  void badConvertOptions() {
    TempDir tmp;
    const auto hf = tinyModel(tmp / "hf");
    ConvertOptions o;
    o.shards = 0;
    ZIPMOE_EXPECT_ERROR(convertCheckpoint(hf, tmp / "out", o), "--shards 0 is out of range");
    o.shards = 4;
    o.codec = {CodecId::Zstd, 40};
    ZIPMOE_EXPECT_ERROR(convertCheckpoint(hf, tmp / "out", o), "level 40 is out of range");
  }
};

QTEST_APPLESS_MAIN(TestStoreBadInput)
#include "test_store_bad_input.moc"
