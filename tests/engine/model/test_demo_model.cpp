// Tests of the committed demo model (resources/demo-model, made by `zipmoe train-demo`): config fields
// (mixtral, 8 experts, top-2), every HF Mixtral tensor present with the right shape and BF16 dtype and
// nothing else, tokenizer.json loads with zipmoe::Tokenizer and round-trips text, its ids agree with the
// trainer's own BPE, the chat template and generation config name the special token, size <= 50 MB.
#include <nlohmann/json.hpp>

#include "test_support.h"
#include "train/byte_level_bpe.h"
#include "train/hf_export.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/safetensors.h"
#include "zipmoe/text/tokenizer.h"

using namespace zipmoe;
using nlohmann::json;

namespace {

const std::filesystem::path kDir = ZIPMOE_FIXTURES_DIR "/../../resources/demo-model";

json readJson(const std::string& name) { return json::parse(zipmoe::testing::readText(kDir / name)); }

train::MixtralHyper hyperFromConfig(const json& c) {
  train::MixtralHyper h;
  h.vocab = c.at("vocab_size");
  h.hidden = c.at("hidden_size");
  h.intermediate = c.at("intermediate_size");
  h.layers = c.at("num_hidden_layers");
  h.heads = c.at("num_attention_heads");
  h.kvHeads = c.at("num_key_value_heads");
  h.experts = c.at("num_local_experts");
  h.topK = c.at("num_experts_per_tok");
  return h;
}

const char* kSample =
    "KING RICHARD II:\nNow, by my sceptre's awe, I make a vow,\nSuch neighbour nearness to our sacred blood\n";

}  // namespace

class TestDemoModel : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void configIsMixtral() {
    const json c = readJson("config.json");
    QCOMPARE(c["model_type"].get<std::string>(), std::string("mixtral"));
    QCOMPARE(c["architectures"][0].get<std::string>(), std::string("MixtralForCausalLM"));
    QCOMPARE(c["num_local_experts"].get<int64_t>(), int64_t{8});
    QCOMPARE(c["num_experts_per_tok"].get<int64_t>(), int64_t{2});
    QCOMPARE(c["tie_word_embeddings"].get<bool>(), false);
    QCOMPARE(c["hidden_act"].get<std::string>(), std::string("silu"));
    QCOMPARE(c["torch_dtype"].get<std::string>(), std::string("bfloat16"));
    QVERIFY(c["rms_norm_eps"].get<double>() > 0);
    QVERIFY(c["rope_theta"].get<double>() > 1);
    QCOMPARE(c["hidden_size"].get<int64_t>() % c["num_attention_heads"].get<int64_t>(), int64_t{0});
    const json g = readJson("generation_config.json");
    QCOMPARE(g["eos_token_id"].get<int32_t>(), c["eos_token_id"].get<int32_t>());
  }

  void everyTensorPresentBf16() {
    const json c = readJson("config.json");
    const train::MixtralHyper h = hyperFromConfig(c);
    HfCheckpoint checkpoint(kDir);
    QCOMPARE(checkpoint.modelType(), std::string("mixtral"));
    const auto table = train::mixtralTensorTable(h);
    QCOMPARE(checkpoint.tensors().size(), table.size());
    int64_t params = 0;
    for (const auto& [name, shape] : table) {
      const HfCheckpoint::Entry* e = checkpoint.find(name);
      QVERIFY2(e != nullptr, name.c_str());
      QCOMPARE(e->info->dtype, DType::BF16);
      QCOMPARE(e->info->shape, shape);
      params += static_cast<int64_t>(e->info->numel());
    }
    QVERIFY2(params >= 10'000'000 && params <= 40'000'000, qPrintable(QString::number(params)));
  }

  void sizeWithinBudget() {
    uint64_t total = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kDir))
      if (entry.is_regular_file()) total += entry.file_size();
    QVERIFY2(total <= 50ull * 1000 * 1000, qPrintable(QString::number(total)));
  }

  void tokenizerLoadsAndRoundTrips() {
    const auto tokenizer = Tokenizer::fromFile(kDir / "tokenizer.json");
    const json c = readJson("config.json");
    QCOMPARE(tokenizer->vocabSize(), c["vocab_size"].get<int32_t>());
    const auto eot = tokenizer->tokenToId("<|endoftext|>");
    QVERIFY(eot.has_value());
    QCOMPARE(*eot, c["eos_token_id"].get<int32_t>());
    QVERIFY(tokenizer->isSpecial(*eot));
    const std::vector<int32_t> ids = tokenizer->encode(kSample);
    QVERIFY(ids.size() < std::string(kSample).size() / 2);  // merges compress the text
    QCOMPARE(tokenizer->decode(ids), std::string(kSample));
    // The engine's reader and the trainer's own BPE produce the same ids.
    train::ByteLevelBpe bpe = train::ByteLevelBpe::fromJson(readJson("tokenizer.json"), "demo tokenizer.json");
    QCOMPARE(bpe.encode(kSample), ids);
    const std::vector<int32_t> withSpecial = tokenizer->encode(std::string("<|endoftext|>") + kSample);
    QCOMPARE(withSpecial.front(), *eot);
  }

  void tokenizerJsonStructure() {
    const json t = readJson("tokenizer.json");
    QCOMPARE(t["model"]["type"].get<std::string>(), std::string("BPE"));
    QCOMPARE(t["pre_tokenizer"]["type"].get<std::string>(), std::string("ByteLevel"));
    QCOMPARE(t["pre_tokenizer"]["use_regex"].get<bool>(), true);
    QCOMPARE(t["decoder"]["type"].get<std::string>(), std::string("ByteLevel"));
    QCOMPARE(t["added_tokens"][0]["content"].get<std::string>(), std::string("<|endoftext|>"));
    const json tc = readJson("tokenizer_config.json");
    QCOMPARE(tc["bos_token"].get<std::string>(), std::string("<|endoftext|>"));
    QCOMPARE(tc["eos_token"].get<std::string>(), std::string("<|endoftext|>"));
    QVERIFY(tc["chat_template"].is_string());
  }
};

QTEST_APPLESS_MAIN(TestDemoModel)
#include "test_demo_model.moc"
