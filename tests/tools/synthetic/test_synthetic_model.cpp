// Tests of synthetic_model.h: tensor tables against the real checkpoints' indexes, generated directories,
// determinism, sharding, and the statistics of the exact BF16 Gaussian sampler.
//
// The real-config tests read ../shared/data/models at run time (never copied into the project) and
// skip when it is absent.
#include <bit>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/safetensors.h"
#include "hf/checkpoint_tensors.h"
#include "tools/synthetic/synthetic_model.h"

using namespace zipmoe;
using nlohmann::json;
using Shape = std::vector<int64_t>;

namespace {

json readJson(const std::filesystem::path& path) { return json::parse(zipmoe::testing::readText(path)); }

std::map<std::string, Shape> shapesByName(const std::vector<SafetensorsWriter::Declared>& tensors) {
  std::map<std::string, Shape> out;
  for (const auto& t : tensors) out[t.name] = t.shape;
  return out;
}

uint64_t totalBytes(const std::vector<SafetensorsWriter::Declared>& tensors) {
  uint64_t total = 0;
  for (const auto& t : tensors) {
    uint64_t n = dtypeSize(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    total += n;
  }
  return total;
}

// Checks one safetensors file of a generated model against the expected tensor table.
void checkFile(const std::filesystem::path& path, const std::map<std::string, Shape>& expected, size_t& seen) {
  const std::string bytes = zipmoe::testing::readText(path);
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const SafetensorsHeader header = parseSafetensorsHeader({data, bytes.size()}, bytes.size(), path.string());
  uint64_t end = header.dataStart;
  for (const auto& tensor : header.tensors) {
    QVERIFY2(expected.count(tensor.name), tensor.name.c_str());
    QCOMPARE(tensor.shape, expected.at(tensor.name));
    QCOMPARE(tensor.dtype, DType::BF16);
    QCOMPARE(tensor.size, tensor.numel() * 2);
    end = std::max(end, tensor.offset + tensor.size);
    ++seen;
  }
  QCOMPARE(end, static_cast<uint64_t>(bytes.size()));  // the file ends with the last tensor
}

}  // namespace

class TestSyntheticModel : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void realCheckpointTables_data() {
    QTest::addColumn<QString>("dir");
    QTest::addColumn<int>("family");
    QTest::newRow("qwen1.5-moe") << "qwen1.5-moe" << static_cast<int>(ModelFamily::Qwen2Moe);
    QTest::newRow("deepseek-v2-lite") << "deepseek-v2-lite" << static_cast<int>(ModelFamily::DeepseekV2);
    QTest::newRow("switch-large-128") << "switch-large-128" << static_cast<int>(ModelFamily::SwitchTransformers);
  }
  // The names must equal the real index's weight_map keys exactly, and since every real tensor is BF16
  // the bytes of our shapes must add up to the index's total_size.
  void realCheckpointTables() {
    QFETCH(QString, dir);
    QFETCH(int, family);
    const auto shared = zipmoe::testing::sharedDir();
    if (shared.empty()) QSKIP("../shared/data is absent");
    const auto modelDir = shared / "data/models" / dir.toStdString();
    const json config = readJson(modelDir / "config.json");
    const json index = readJson(modelDir / "model.safetensors.index.json");
    QCOMPARE(familyFromConfig(config, "config.json"), static_cast<ModelFamily>(family));
    const auto tensors = checkpointTensors(static_cast<ModelFamily>(family), config);
    std::set<std::string> ours, real;
    for (const auto& t : tensors) QVERIFY2(ours.insert(t.name).second, ("duplicate " + t.name).c_str());
    for (const auto& [name, file] : index["weight_map"].items()) real.insert(name);
    for (const auto& name : real) QVERIFY2(ours.count(name), ("missing " + name).c_str());
    for (const auto& name : ours) QVERIFY2(real.count(name), ("extra " + name).c_str());
    QCOMPARE(totalBytes(tensors), index["metadata"]["total_size"].get<uint64_t>());

    // Every expert weight classifies, and nothing else does.
    size_t experts = 0;
    for (const auto& t : tensors)
      if (classifyTensor(static_cast<ModelFamily>(family), t.name)) ++experts;
    const auto shapes = shapesByName(tensors);
    if (dir == "qwen1.5-moe") {
      QCOMPARE(experts, size_t{24 * 60 * 3});
      QCOMPARE(shapes.at("model.layers.0.mlp.experts.0.gate_proj.weight"), (Shape{1408, 2048}));
      QCOMPARE(shapes.at("model.layers.23.mlp.experts.59.down_proj.weight"), (Shape{2048, 1408}));
      QCOMPARE(shapes.at("model.layers.0.mlp.shared_expert.up_proj.weight"), (Shape{5632, 2048}));
      QCOMPARE(shapes.at("model.layers.0.mlp.shared_expert_gate.weight"), (Shape{1, 2048}));
      QCOMPARE(shapes.at("model.layers.0.mlp.gate.weight"), (Shape{60, 2048}));
      QCOMPARE(shapes.at("model.layers.0.self_attn.q_proj.weight"), (Shape{2048, 2048}));
      QCOMPARE(shapes.at("model.layers.0.self_attn.k_proj.bias"), (Shape{2048}));
      QCOMPARE(shapes.at("lm_head.weight"), (Shape{151936, 2048}));
    } else if (dir == "deepseek-v2-lite") {
      QCOMPARE(experts, size_t{26 * 64 * 3});
      QCOMPARE(shapes.at("model.layers.1.mlp.experts.0.gate_proj.weight"), (Shape{1408, 2048}));
      QCOMPARE(shapes.at("model.layers.26.mlp.experts.63.down_proj.weight"), (Shape{2048, 1408}));
      QCOMPARE(shapes.at("model.layers.1.mlp.shared_experts.gate_proj.weight"), (Shape{2816, 2048}));
      QCOMPARE(shapes.at("model.layers.0.mlp.gate_proj.weight"), (Shape{10944, 2048}));
      QCOMPARE(shapes.at("model.layers.0.self_attn.q_proj.weight"), (Shape{16 * 192, 2048}));
      QCOMPARE(shapes.at("model.layers.0.self_attn.kv_a_proj_with_mqa.weight"), (Shape{576, 2048}));
      QCOMPARE(shapes.at("model.layers.0.self_attn.kv_a_layernorm.weight"), (Shape{512}));
      QCOMPARE(shapes.at("model.layers.0.self_attn.kv_b_proj.weight"), (Shape{16 * 256, 512}));
      QCOMPARE(shapes.at("model.layers.0.self_attn.o_proj.weight"), (Shape{2048, 16 * 128}));
    } else {
      QCOMPARE(experts, size_t{2 * 12 * 128 * 2});
      QCOMPARE(shapes.at("encoder.block.1.layer.1.mlp.experts.expert_0.wi.weight"), (Shape{4096, 1024}));
      QCOMPARE(shapes.at("decoder.block.23.layer.2.mlp.experts.expert_127.wo.weight"), (Shape{1024, 4096}));
      QCOMPARE(shapes.at("encoder.block.1.layer.1.mlp.router.classifier.weight"), (Shape{128, 1024}));
      QCOMPARE(shapes.at("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"), (Shape{32, 16}));
      QCOMPARE(shapes.at("decoder.block.0.layer.1.EncDecAttention.q.weight"), (Shape{1024, 1024}));
      QCOMPARE(shapes.at("shared.weight"), (Shape{32128, 1024}));
    }
  }

  // The real-shape presets give the real configs' tensor tables.
  void realPresets() {
    SyntheticModelOptions qwen;
    qwen.family = ModelFamily::Qwen2Moe;
    qwen.preset = "qwen1.5-moe-a2.7b";
    const auto qwenShapes = shapesByName(checkpointTensors(qwen.family, syntheticModelConfig(qwen)));
    QCOMPARE(qwenShapes.at("model.layers.23.mlp.experts.59.up_proj.weight"), (Shape{1408, 2048}));
    QCOMPARE(qwenShapes.at("model.layers.23.mlp.experts.59.down_proj.weight"), (Shape{2048, 1408}));
    SyntheticModelOptions lite;
    lite.family = ModelFamily::DeepseekV2;
    lite.preset = "deepseek-v2-lite";
    const json liteConfig = syntheticModelConfig(lite);
    const auto liteShapes = shapesByName(checkpointTensors(lite.family, liteConfig));
    QCOMPARE(liteShapes.at("model.layers.26.mlp.experts.63.gate_proj.weight"), (Shape{1408, 2048}));
    QCOMPARE(liteShapes.at("model.layers.26.mlp.experts.63.down_proj.weight"), (Shape{2048, 1408}));
    QVERIFY(!liteShapes.count("model.layers.0.mlp.experts.0.gate_proj.weight"));
    QVERIFY(liteConfig["q_lora_rank"].is_null());
    QCOMPARE(liteConfig["kv_lora_rank"].get<int>(), 512);

    const auto shared = zipmoe::testing::sharedDir();
    if (shared.empty()) QSKIP("../shared/data is absent");
    // With the real configs' shapes, the presets' tensor tables equal the real checkpoints'.
    for (const auto& [options, dir] : {std::pair{qwen, "qwen1.5-moe"}, std::pair{lite, "deepseek-v2-lite"}}) {
      const json real = readJson(shared / "data/models" / dir / "config.json");
      const auto ours = checkpointTensors(options.family, syntheticModelConfig(options));
      const auto theirs = checkpointTensors(options.family, real);
      QCOMPARE(shapesByName(ours), shapesByName(theirs));
      for (const char* key : {"hidden_size", "moe_intermediate_size", "num_experts_per_tok", "num_hidden_layers",
                              "vocab_size", "num_attention_heads", "bos_token_id", "eos_token_id", "rope_theta"})
        QCOMPARE(syntheticModelConfig(options)[key].dump(), real[key].dump());
    }
    // Fewer layers keep the config consistent.
    lite.layers = 3;
    const json three = syntheticModelConfig(lite);
    QCOMPARE(three["num_hidden_layers"].get<int>(), 3);
    QCOMPARE(three["first_k_dense_replace"].get<int>(), 1);
    lite.layers = 1;
    QCOMPARE(syntheticModelConfig(lite)["first_k_dense_replace"].get<int>(), 0);
    lite.layers = 0;
    ZIPMOE_EXPECT_ERROR(syntheticModelConfig(lite), "layers", "0");
  }

  void everyTinyPresetGenerates() {
    zipmoe::testing::TempDir tmp;
    for (ModelFamily family : allFamilies()) {
      const std::string name = familyName(family);
      QVERIFY(!syntheticModelPresets(family).empty());
      QCOMPARE(syntheticModelPresets(family).front(), std::string("tiny"));
      SyntheticModelOptions options;
      options.family = family;
      uint64_t lastDone = 0, lastTotal = 0;
      options.onProgress = [&](uint64_t done, uint64_t total) {
        QVERIFY(done >= lastDone && done <= total);
        lastDone = done;
        lastTotal = total;
      };
      const auto dir = tmp / name;
      const uint64_t bytes = generateSyntheticModel(dir, options);
      QCOMPARE(lastDone, bytes);
      QCOMPARE(lastTotal, bytes);
      QVERIFY2(bytes < 4u << 20, name.c_str());

      const json config = readJson(dir / "config.json");
      QCOMPARE(config, syntheticModelConfig(options));
      QCOMPARE(familyFromConfig(config, name), family);
      QCOMPARE(config["torch_dtype"].get<std::string>(), std::string("bfloat16"));
      const auto tensors = checkpointTensors(family, config);
      QCOMPARE(totalBytes(tensors), bytes);
      size_t seen = 0;
      checkFile(dir / "model.safetensors", shapesByName(tensors), seen);
      QCOMPARE(seen, tensors.size());
      QVERIFY(!std::filesystem::exists(dir / "model.safetensors.index.json"));

      size_t experts = 0;
      for (const auto& t : tensors) experts += classifyTensor(family, t.name).has_value();
      QVERIFY2(experts > 0, name.c_str());

      // Tokenizer files: valid JSON, specials at the config's ids, all ids below vocab_size.
      const json tokenizer = readJson(dir / "tokenizer.json");
      const json tokenizerConfig = readJson(dir / "tokenizer_config.json");
      QVERIFY(readJson(dir / "generation_config.json").is_object());
      const int64_t vocab = config["vocab_size"].get<int64_t>();
      std::map<int64_t, std::string> specials;
      for (const auto& token : tokenizer["added_tokens"]) {
        QVERIFY(token["id"].get<int64_t>() < vocab);
        specials[token["id"].get<int64_t>()] = token["content"].get<std::string>();
      }
      for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
        if (config.contains(key) && config[key].is_number_integer()) QVERIFY2(specials.count(config[key].get<int64_t>()), key);
      const json& model = tokenizer["model"];
      if (model["type"] == "BPE") {
        for (const auto& [token, id] : model["vocab"].items()) QVERIFY(id.get<int64_t>() < vocab);
        QVERIFY(model["merges"].size() > 50);
      } else {
        QCOMPARE(model["type"].get<std::string>(), std::string("Unigram"));
        QVERIFY(static_cast<int64_t>(model["vocab"].size()) <= vocab);
      }
      if (family != ModelFamily::SwitchTransformers) QVERIFY(tokenizerConfig["chat_template"].is_string());
    }
  }

  void deterministicForASeed() {
    zipmoe::testing::TempDir tmp;
    SyntheticModelOptions options;
    options.family = ModelFamily::Qwen2Moe;
    generateSyntheticModel(tmp / "a", options);
    generateSyntheticModel(tmp / "b", options);
    options.seed = 2;
    generateSyntheticModel(tmp / "c", options);
    const std::string a = zipmoe::testing::readText(tmp / "a" / "model.safetensors");
    QVERIFY(a.size() > 100000);
    QVERIFY(a == zipmoe::testing::readText(tmp / "b" / "model.safetensors"));
    const std::string c = zipmoe::testing::readText(tmp / "c" / "model.safetensors");
    QCOMPARE(c.size(), a.size());
    QVERIFY(a != c);
  }

  // Shards split the same tensors, with the same bytes, as one file would hold them.
  void shardedOutputWritesIndex() {
    zipmoe::testing::TempDir tmp;
    SyntheticModelOptions options;
    options.family = ModelFamily::Mixtral;
    options.preset = "small";
    options.maxShardBytes = 2u << 20;
    const auto dir = tmp / "sharded";
    const uint64_t bytes = generateSyntheticModel(dir, options);
    const json index = readJson(dir / "model.safetensors.index.json");
    QCOMPARE(index["metadata"]["total_size"].get<uint64_t>(), bytes);
    const auto tensors = checkpointTensors(options.family, syntheticModelConfig(options));
    QCOMPARE(index["weight_map"].size(), tensors.size());
    std::set<std::string> files;
    for (const auto& [name, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
    QVERIFY(files.size() >= 3);
    const auto expected = shapesByName(tensors);
    size_t seen = 0;
    for (const auto& file : files) {
      QVERIFY2(file.starts_with("model-0000") && file.ends_with("-of-0000" + std::to_string(files.size()) + ".safetensors"),
               file.c_str());
      QVERIFY(std::filesystem::file_size(dir / file) <= options.maxShardBytes + (1u << 20));
      const std::string text = zipmoe::testing::readText(dir / file);
      const auto* data = reinterpret_cast<const uint8_t*>(text.data());
      for (const auto& t : parseSafetensorsHeader({data, text.size()}, text.size(), file).tensors)
        QCOMPARE(index["weight_map"][t.name].get<std::string>(), file);
      checkFile(dir / file, expected, seen);
    }
    QCOMPARE(seen, tensors.size());
    QVERIFY(!std::filesystem::exists(dir / "model.safetensors"));

    // Same seed unsharded: every tensor has identical bytes.
    options.maxShardBytes = 0;
    generateSyntheticModel(tmp / "single", options);
    SafetensorsFile single(tmp / "single" / "model.safetensors");
    for (const auto& file : files) {
      SafetensorsFile shard(dir / file);
      for (const auto& t : shard.tensors()) {
        std::string x(t.size, '\0'), y(t.size, '\0');
        shard.read(t, 0, t.size, x.data());
        const TensorInfo* other = single.find(t.name);
        QVERIFY(other);
        single.read(*other, 0, other->size, y.data());
        QVERIFY2(x == y, t.name.c_str());
      }
    }
  }

  void normWeightsAreNearOne() {
    zipmoe::testing::TempDir tmp;
    SyntheticModelOptions options;
    options.family = ModelFamily::Olmoe;
    generateSyntheticModel(tmp / "m", options);
    SafetensorsFile file(tmp / "m" / "model.safetensors");
    const TensorInfo* norm = file.find("model.layers.0.self_attn.q_norm.weight");
    QVERIFY(norm);
    std::vector<uint16_t> values(norm->numel());
    file.read(*norm, 0, norm->size, values.data());
    for (uint16_t v : values) {
      const float x = std::bit_cast<float>(static_cast<uint32_t>(v) << 16);
      QVERIFY2(x > 0.8f && x < 1.2f, qPrintable(QString::number(static_cast<double>(x))));
    }
  }

  // Moments and exponent entropy of 2^24 samples. With n = 2^24 the standard error of the mean is
  // σ/4096 and that of the standard deviation σ/5793, so 6-sigma tolerances are σ·1.5e-3 and σ·1e-3.
  void gaussianStatistics() {
    const double sigma = 0.02;
    const size_t n = size_t{1} << 24;
    std::vector<uint16_t> v(n);
    fillGaussianBf16(v.data(), n, sigma, 7, 3);
    double sum = 0, squares = 0;
    std::vector<double> exponentCounts(256, 0.0);
    size_t negative = 0;
    for (uint16_t bits : v) {
      const double x = static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
      QVERIFY(std::isfinite(x));
      sum += x;
      squares += x * x;
      exponentCounts[(bits >> 7) & 0xFF] += 1;
      negative += bits >> 15;
    }
    const double mean = sum / static_cast<double>(n);
    const double sd = std::sqrt(squares / static_cast<double>(n) - mean * mean);
    QVERIFY2(std::abs(mean) < sigma * 1.5e-3, qPrintable(QString::number(mean)));
    // BF16 rounding adds variance of about (ulp²/12) per value, ~1e-5 relative here: below tolerance.
    QVERIFY2(std::abs(sd - sigma) < sigma * 1e-3, qPrintable(QString::number(sd)));
    QVERIFY(std::abs(static_cast<double>(negative) / static_cast<double>(n) - 0.5) < 6 * 0.5 / 4096.0);
    double entropy = 0;
    for (double count : exponentCounts)
      if (count > 0) entropy -= count / static_cast<double>(n) * std::log2(count / static_cast<double>(n));
    QVERIFY2(std::abs(entropy - 2.55) < 0.05, qPrintable(QString::number(entropy)));

    // Exact distribution: the share of |x| < σ (BF16 boundary rounding aside) is erf(1/√2) = 0.6827.
    size_t within = 0;
    for (uint16_t bits : v) within += std::abs(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16)) < 0.02f;
    const double p = std::erf(1.0 / std::sqrt(2.0));
    const double tolerance = 6 * std::sqrt(p * (1 - p) / static_cast<double>(n)) + 2e-3;  // + rounding at the edge
    QVERIFY2(std::abs(static_cast<double>(within) / static_cast<double>(n) - p) < tolerance, qPrintable(QString::number(within)));
  }

  void gaussianStreamsAreDeterministicAndDistinct() {
    std::vector<uint16_t> a(4096), b(4096), c(4096), d(4096);
    fillGaussianBf16(a.data(), a.size(), 0.02, 1, 0);
    fillGaussianBf16(b.data(), b.size(), 0.02, 1, 0);
    fillGaussianBf16(c.data(), c.size(), 0.02, 1, 1);
    fillGaussianBf16(d.data(), d.size(), 0.02, 2, 0);
    QVERIFY(a == b);
    QVERIFY(a != c);
    QVERIFY(a != d);
    ZIPMOE_EXPECT_ERROR(fillGaussianBf16(a.data(), 1, 0.0, 1, 0), "sigma");
  }

  void unknownPresetAndFamilyErrors() {
    SyntheticModelOptions options;
    options.family = ModelFamily::Qwen3Moe;
    options.preset = "huge";
    ZIPMOE_EXPECT_ERROR(syntheticModelConfig(options), "\"huge\"", "qwen3_moe", "tiny", "small");
    zipmoe::testing::TempDir tmp;
    ZIPMOE_EXPECT_ERROR(generateSyntheticModel(tmp / "x", options), "huge");
    QVERIFY(!std::filesystem::exists(tmp / "x"));
    ZIPMOE_EXPECT_ERROR(familyFromConfig(json{{"model_type", "gpt2"}}, "config.json"), "gpt2", "supported");
    // A config lacking a field the family needs names the field.
    ZIPMOE_EXPECT_ERROR(checkpointTensors(ModelFamily::Mixtral, json{{"hidden_size", 8}}), "mixtral", "num_hidden_layers");
    // An output path that cannot be a directory is named.
    std::ofstream(tmp / "file") << "x";
    options.preset = "tiny";
    ZIPMOE_EXPECT_ERROR(generateSyntheticModel(tmp / "file" / "sub", options), (tmp / "file" / "sub").string().c_str());
  }
};

QTEST_APPLESS_MAIN(TestSyntheticModel)
#include "test_synthetic_model.moc"
