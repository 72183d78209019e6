// Tests of the demo-model training code (tools/train): the byte-level BPE trainer on a toy text,
// GPT-2 pre-tokenization, tokenizer.json structure, that a few optimisation steps on a tiny random
// MoE reduce the loss, that export -> HF directory -> re-read is bit-exact BF16, checkpoints, and that
// bad options give errors naming the option and the value. Small and fast (a few seconds on 2 cores).
#include <nlohmann/json.hpp>

#include "test_support.h"
#include "train/bpe_trainer.h"
#include "tools/train/demo_trainer.h"
#include "train/hf_export.h"
#include "zipmoe/base/error.h"

using namespace zipmoe;
using namespace zipmoe::train;
using nlohmann::json;

namespace {

std::string toyCorpus() {
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += "ROMEO:\nBut soft, what light through yonder window breaks?\n\nJULIET:\nO Romeo, Romeo, wherefore art thou?\n\n";
  return text;
}

DemoTrainOptions tinyOptions() {
  DemoTrainOptions o;
  o.steps = 40;
  o.layers = 1;
  o.hidden = 32;
  o.heads = 2;
  o.kvHeads = 1;
  o.experts = 4;
  o.topK = 2;
  o.vocab = 300;
  o.context = 32;
  o.batch = 8;
  o.lr = 1e-2;
  o.warmup = 5;
  o.threads = 1;
  return o;
}

}  // namespace

class TestTrain : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void preTokenizerFollowsGpt2Regex() {
    const auto pieces = gpt2PreTokenize("Hello  world's 42!\n\nX ");
    const std::vector<std::string_view> expected = {"Hello", " ", " world", "'s", " 42", "!", "\n", "\n", "X", " "};
    QCOMPARE(pieces.size(), expected.size());
    for (size_t i = 0; i < pieces.size(); ++i) QCOMPARE(std::string(pieces[i]), std::string(expected[i]));
  }

  void bpeLearnsMergesOnToyText() {
    const ByteLevelBpe bpe = trainBpe("aaab aaab aaab", 300);
    // (a,a) 6×, then the tie (a,b)/(aa,a) at 3× goes to the smaller pair, then aa+ab, then " "+aaab.
    const std::vector<std::pair<int32_t, int32_t>> expected = {{'a', 'a'}, {'a', 'b'}, {256, 257}, {' ', 258}};
    QCOMPARE(bpe.merges(), expected);
    QCOMPARE(bpe.vocabSize(), 256 + 4 + 1);  // stops when no pair occurs twice
    QCOMPARE(bpe.endOfTextId(), 260);
    ByteLevelBpe copy = bpe;
    QCOMPARE(copy.encode("aaab aaab"), (std::vector<int32_t>{258, 259}));
    QCOMPARE(copy.encode("ab<|endoftext|>b"), (std::vector<int32_t>{257, 260, 'b'}));
    QCOMPARE(copy.decode({258, 259, 'x'}), std::string("aaab aaabx"));
    QCOMPARE(bpe.tokenString(259), std::string("\xC4\xA0" "aaab"));  // "Ġaaab"
  }

  void tokenizerJsonIsHuggingFaceByteLevelBpe() {
    const ByteLevelBpe bpe = trainBpe(toyCorpus(), 300);
    const json j = bpe.toJson();
    QCOMPARE(j["model"]["type"].get<std::string>(), std::string("BPE"));
    QCOMPARE(j["pre_tokenizer"]["type"].get<std::string>(), std::string("ByteLevel"));
    QCOMPARE(j["pre_tokenizer"]["use_regex"].get<bool>(), true);
    QCOMPARE(j["decoder"]["type"].get<std::string>(), std::string("ByteLevel"));
    QCOMPARE(j["added_tokens"].size(), size_t{1});
    QCOMPARE(j["added_tokens"][0]["content"].get<std::string>(), std::string("<|endoftext|>"));
    QCOMPARE(j["added_tokens"][0]["special"].get<bool>(), true);
    QCOMPARE(j["model"]["vocab"]["<|endoftext|>"].get<int32_t>(), bpe.endOfTextId());
    QCOMPARE(j["model"]["vocab"].size(), static_cast<size_t>(bpe.vocabSize()));
    QCOMPARE(j["model"]["merges"].size(), bpe.merges().size());
    ByteLevelBpe back = ByteLevelBpe::fromJson(j, "toy");
    QCOMPARE(back.merges(), bpe.merges());
    const std::string line = "JULIET:\nO Romeo, wherefore art thou?\n";
    QCOMPARE(back.decode(back.encode(line)), line);
  }

  void fewStepsReduceTheLoss() {
    DemoTrainer trainer(tinyOptions(), toyCorpus());
    const double before = trainer.validationLoss();
    double first = 0, last = 0;
    for (int i = 0; i < 40; ++i) {
      const StepStats s = trainer.trainStep();
      if (i == 0) first = s.loss;
      last = s.loss;
      QVERIFY(std::isfinite(s.loss));
    }
    const double after = trainer.validationLoss();
    QVERIFY2(last < first - 1.0, qPrintable(QString("train loss %1 -> %2").arg(first).arg(last)));
    QVERIFY2(after < before - 1.0, qPrintable(QString("val loss %1 -> %2").arg(before).arg(after)));
    QCOMPARE(trainer.step(), int64_t{40});
    const RoutingStats routing = trainer.routingStats();
    QCOMPARE(routing.entropyBits.size(), size_t{1});
    QVERIFY(routing.entropyBits[0] > 0.0 && routing.entropyBits[0] <= 2.0 + 1e-9);
  }

  void exportReadsBackBitExact() {
    zipmoe::testing::TempDir dir;
    DemoTrainer trainer(tinyOptions(), toyCorpus());
    trainer.trainStep();
    trainer.exportHf(dir.path());
    const std::vector<Bf16Tensor> expected = trainer.bf16Weights();
    const std::vector<Bf16Tensor> read = readBf16Tensors(dir / "model.safetensors");
    QCOMPARE(read.size(), expected.size());
    std::map<std::string, const Bf16Tensor*> byName;
    for (const Bf16Tensor& t : read) byName[t.name] = &t;
    for (const Bf16Tensor& t : expected) {
      QVERIFY2(byName.count(t.name) == 1, t.name.c_str());
      QCOMPARE(byName[t.name]->shape, t.shape);
      QVERIFY2(byName[t.name]->bits == t.bits, t.name.c_str());
    }
    // A second trainer importing the directory holds exactly the same BF16 weights.
    DemoTrainer other(tinyOptions(), toyCorpus());
    other.importHf(dir.path());
    const std::vector<Bf16Tensor> again = other.bf16Weights();
    for (size_t i = 0; i < again.size(); ++i) QVERIFY2(again[i].bits == expected[i].bits, again[i].name.c_str());

    const json config = json::parse(zipmoe::testing::readText(dir / "config.json"));
    QCOMPARE(config["model_type"].get<std::string>(), std::string("mixtral"));
    QCOMPARE(config["num_local_experts"].get<int64_t>(), int64_t{4});
    QCOMPARE(config["num_experts_per_tok"].get<int64_t>(), int64_t{2});
    QCOMPARE(config["vocab_size"].get<int64_t>(), int64_t{300});
    QCOMPARE(config["tie_word_embeddings"].get<bool>(), false);
    const json tokConfig = json::parse(zipmoe::testing::readText(dir / "tokenizer_config.json"));
    QCOMPARE(tokConfig["eos_token"].get<std::string>(), std::string("<|endoftext|>"));
    QVERIFY(tokConfig["chat_template"].get<std::string>().find("JULIET") != std::string::npos);
    QVERIFY(std::filesystem::exists(dir / "generation_config.json"));
    QVERIFY(std::filesystem::exists(dir / "tokenizer.json"));
  }

  void checkpointResumes() {
    zipmoe::testing::TempDir dir;
    DemoTrainer trainer(tinyOptions(), toyCorpus());
    for (int i = 0; i < 3; ++i) trainer.trainStep();
    trainer.saveCheckpoint(dir / "c.ckpt");
    DemoTrainer resumed(tinyOptions(), toyCorpus());
    resumed.loadCheckpoint(dir / "c.ckpt");
    QCOMPARE(resumed.step(), int64_t{3});
    const auto a = trainer.bf16Weights(), b = resumed.bf16Weights();
    for (size_t i = 0; i < a.size(); ++i) QVERIFY(a[i].bits == b[i].bits);
    DemoTrainOptions wider = tinyOptions();
    wider.hidden = 64;
    DemoTrainer mismatched(wider, toyCorpus());
    ZIPMOE_EXPECT_ERROR(mismatched.loadCheckpoint(dir / "c.ckpt"), "another architecture");
    ZIPMOE_EXPECT_ERROR(resumed.loadCheckpoint(dir / "missing.ckpt"), "missing.ckpt");
  }

  void badOptionsNameTheOption() {
    DemoTrainOptions o = tinyOptions();
    o.hidden = 30;
    o.heads = 4;
    ZIPMOE_EXPECT_ERROR(validateOptions(o), "--hidden", "30");
    o = tinyOptions();
    o.kvHeads = 3;
    o.heads = 4;
    o.hidden = 64;
    ZIPMOE_EXPECT_ERROR(validateOptions(o), "--kv-heads", "3");
    o = tinyOptions();
    o.topK = 9;
    ZIPMOE_EXPECT_ERROR(validateOptions(o), "--top-k", "9");
    o = tinyOptions();
    o.vocab = 100;
    ZIPMOE_EXPECT_ERROR(validateOptions(o), "--vocab", "100");
    o = tinyOptions();
    o.lr = -1;
    ZIPMOE_EXPECT_ERROR(validateOptions(o), "--lr", "-1");
    o = tinyOptions();
    o.steps = 0;
    ZIPMOE_EXPECT_ERROR(validateOptions(o), "--steps", "0");
    ZIPMOE_EXPECT_ERROR(trainBpe("abc", 10), "vocabulary size 10");
    o = tinyOptions();
    ZIPMOE_EXPECT_ERROR([&] { DemoTrainer t(o, "tiny text"); }(), "--vocab 300", "supports only 257");
    o.context = 4096;
    ZIPMOE_EXPECT_ERROR([&] { DemoTrainer t(o, toyCorpus()); }(), "too short");
  }
};

QTEST_APPLESS_MAIN(TestTrain)
#include "test_train.moc"
