// Tests of generator.h on real tiny generated models (mixtral and qwen2_moe) with the real MoeModel
// and Tokenizer: greedy generation against step-by-step argmax of MoeModel::forward, determinism,
// max tokens, stop strings, the stop flag and a refusing callback, streamed text against
// Tokenizer::decode, and the errors for empty and too-long prompts.
#include <algorithm>
#include <atomic>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/model/generator.h"
#include "zipmoe/model/model.h"
#include "tools/synthetic/synthetic_model.h"
#include "zipmoe/text/tokenizer.h"

using namespace zipmoe;

namespace {

struct Loaded {
  zipmoe::testing::TempDir dir;
  std::unique_ptr<MoeModel> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

std::unique_ptr<Loaded> load(const QString& family) {
  auto out = std::make_unique<Loaded>();
  SyntheticModelOptions options;
  options.family = *familyFromName(family.toStdString());
  generateSyntheticModel(out->dir.path(), options);
  out->model = MoeModel::load(out->dir.path());
  out->tokenizer = Tokenizer::fromFile(out->dir / "tokenizer.json");
  return out;
}

SamplingParams greedy(int maxTokens) {
  SamplingParams p;
  p.temperature = 0.0;
  p.maxTokens = maxTokens;
  return p;
}

int32_t argmax(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());  // first maximum
}

bool isEos(const MoeModel& model, int32_t id) {
  const auto& eos = model.config().eosTokenIds;
  return std::find(eos.begin(), eos.end(), id) != eos.end();
}

std::vector<int32_t> prompt(const Tokenizer& tokenizer) { return tokenizer.encode("The cat and the hat went to the", true); }

}  // namespace

class TestGenerator : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void greedyEqualsStepwiseArgmax_data() { addFamilies(); }
  void greedyEqualsStepwiseArgmax() {
    QFETCH(QString, family);
    auto m = load(family);
    const auto ids = prompt(*m->tokenizer);
    const int maxTokens = 16;

    // Reference: prefill, then argmax and feed back one token at a time.
    std::vector<int32_t> expected;
    const auto seq = m->model->addSequence();
    std::vector<float> logits = m->model->forward({MoeModel::Step{seq, ids}}).at(0);
    for (;;) {
      const int32_t next = argmax(logits);
      expected.push_back(next);
      if (isEos(*m->model, next) || static_cast<int>(expected.size()) == maxTokens) break;
      logits = m->model->forward({MoeModel::Step{seq, {next}}}).at(0);
    }
    m->model->removeSequence(seq);

    const GenerationStats a = generate(*m->model, *m->tokenizer, ids, greedy(maxTokens), nullptr);
    QCOMPARE(a.tokens, expected);
    QCOMPARE(a.generatedTokens, static_cast<int>(expected.size()));
    QCOMPARE(a.promptTokens, static_cast<int>(ids.size()));
    QCOMPARE(QString::fromLatin1(stopReasonName(a.stopReason)), QString(isEos(*m->model, expected.back()) ? "eos" : "max_tokens"));
    QVERIFY(a.timeToFirstTokenMs > 0);
    QVERIFY(a.tokens.size() < 2 || a.timePerOutputTokenMs > 0);
    // Deterministic: the same again (a fresh sequence each time).
    const GenerationStats b = generate(*m->model, *m->tokenizer, ids, greedy(maxTokens), nullptr);
    QCOMPARE(b.tokens, a.tokens);
    QCOMPARE(b.text, a.text);
  }

  void maxTokensRespected_data() { addFamilies(); }
  void maxTokensRespected() {
    QFETCH(QString, family);
    auto m = load(family);
    for (int maxTokens : {1, 3, 7}) {
      SamplingParams p;
      p.temperature = 1.0;
      p.seed = 5;
      p.maxTokens = maxTokens;
      const auto stats = generate(*m->model, *m->tokenizer, prompt(*m->tokenizer), p, nullptr);
      QVERIFY(static_cast<int>(stats.tokens.size()) <= maxTokens);
      if (stats.stopReason == StopReason::MaxTokens) {
        QCOMPARE(static_cast<int>(stats.tokens.size()), maxTokens);
      } else {
        QCOMPARE(QString::fromLatin1(stopReasonName(stats.stopReason)), QString("eos"));
        QVERIFY(isEos(*m->model, stats.tokens.back()));
      }
    }
  }

  void streamedTextEqualsDecode_data() { addFamilies(); }
  void streamedTextEqualsDecode() {
    QFETCH(QString, family);
    auto m = load(family);
    for (uint64_t seed : {1, 2, 3}) {
      SamplingParams p;
      p.temperature = 1.2;
      p.seed = seed;
      p.maxTokens = 30;
      std::string streamed;
      int calls = 0, empty = 0;
      const auto stats = generate(*m->model, *m->tokenizer, prompt(*m->tokenizer), p, [&](std::string_view piece) {
        empty += piece.empty() ? 1 : 0;
        streamed += piece;
        ++calls;
        return true;
      });
      QCOMPARE(empty, 0);
      std::vector<int32_t> ids = stats.tokens;
      if (!ids.empty() && isEos(*m->model, ids.back())) ids.pop_back();
      QCOMPARE(QString::fromStdString(streamed), QString::fromStdString(m->tokenizer->decode(ids, true)));
      QCOMPARE(stats.text, streamed);
      QVERIFY(calls <= static_cast<int>(stats.tokens.size()) + 1);
    }
  }

  void stopStringCutsTheOutput_data() { addFamilies(); }
  void stopStringCutsTheOutput() {
    QFETCH(QString, family);
    auto m = load(family);
    const auto ids = prompt(*m->tokenizer);
    const auto full = generate(*m->model, *m->tokenizer, ids, greedy(40), nullptr);
    // A two-character ASCII stop string from the middle of the greedy text.
    const std::string& text = full.text;
    std::string stop;
    for (size_t k = text.size() / 3; k + 1 < text.size() && stop.empty(); ++k)
      if (static_cast<unsigned char>(text[k]) < 0x80 && static_cast<unsigned char>(text[k + 1]) < 0x80 && k > 0 &&
          (static_cast<unsigned char>(text[k - 1]) < 0x80))
        stop = text.substr(k, 2);
    if (stop.empty()) QSKIP("the greedy text has no ASCII pair to use as a stop string");
    SamplingParams p = greedy(40);
    p.stopStrings = {"\x01never\x02", stop};
    std::string streamed;
    const auto cut = generate(*m->model, *m->tokenizer, ids, p, [&](std::string_view piece) {
      streamed += piece;
      return true;
    });
    QCOMPARE(QString::fromLatin1(stopReasonName(cut.stopReason)), QString("stop_string"));
    QCOMPARE(streamed, text.substr(0, text.find(stop)));
    QCOMPARE(cut.text, streamed);
    QVERIFY(cut.tokens.size() <= full.tokens.size());
    QVERIFY(std::equal(cut.tokens.begin(), cut.tokens.end(), full.tokens.begin()));
  }

  void stopFlagAndRefusingCallback_data() { addFamilies(); }
  void stopFlagAndRefusingCallback() {
    QFETCH(QString, family);
    auto m = load(family);
    const auto ids = prompt(*m->tokenizer);
    const auto full = generate(*m->model, *m->tokenizer, ids, greedy(30), nullptr);
    if (full.stopReason != StopReason::MaxTokens || full.text.empty()) QSKIP("greedy output ends too early for this check");

    // The flag, set from the callback: generation ends after the token that produced the text.
    std::atomic<bool> flag{false};
    const auto flagged = generate(*m->model, *m->tokenizer, ids, greedy(30), [&](std::string_view) {
      flag = true;
      return true;
    }, &flag);
    QCOMPARE(QString::fromLatin1(stopReasonName(flagged.stopReason)), QString("stopped"));
    QVERIFY(flagged.tokens.size() < full.tokens.size());
    QVERIFY(std::equal(flagged.tokens.begin(), flagged.tokens.end(), full.tokens.begin()));

    // Already set: nothing runs.
    const auto none = generate(*m->model, *m->tokenizer, ids, greedy(30), nullptr, &flag);
    QCOMPARE(QString::fromLatin1(stopReasonName(none.stopReason)), QString("stopped"));
    QCOMPARE(none.generatedTokens, 0);

    // A callback returning false is called once and ends generation.
    int calls = 0;
    const auto refused = generate(*m->model, *m->tokenizer, ids, greedy(30), [&](std::string_view) {
      ++calls;
      return false;
    });
    QCOMPARE(calls, 1);
    QCOMPARE(QString::fromLatin1(stopReasonName(refused.stopReason)), QString("stopped"));
    QVERIFY(refused.tokens.size() < full.tokens.size());

    // The model is still usable afterwards (the sequences were removed) and gives the same result.
    QCOMPARE(generate(*m->model, *m->tokenizer, ids, greedy(30), nullptr).tokens, full.tokens);
  }

  void promptErrors_data() { addFamilies(); }
  void promptErrors() {
    QFETCH(QString, family);
    auto m = load(family);
    ZIPMOE_EXPECT_ERROR(generate(*m->model, *m->tokenizer, {}, greedy(4), nullptr), "prompt is empty", "0 tokens");
    const int window = m->model->config().maxPositionEmbeddings;
    QVERIFY(window > 0);
    const std::vector<int32_t> tooLong(static_cast<size_t>(window), 1);
    ZIPMOE_EXPECT_ERROR(generate(*m->model, *m->tokenizer, tooLong, greedy(4), nullptr), std::to_string(window) + " tokens",
                        "context window", "max_position_embeddings");
    std::vector<int32_t> longer(static_cast<size_t>(window) + 5, 1);
    ZIPMOE_EXPECT_ERROR(generate(*m->model, *m->tokenizer, longer, greedy(4), nullptr), std::to_string(window + 5));
    SamplingParams bad = greedy(4);
    bad.topP = 0;
    ZIPMOE_EXPECT_ERROR(generate(*m->model, *m->tokenizer, prompt(*m->tokenizer), bad, nullptr), "top_p");
    // A failing forward pass (an id outside the vocabulary) propagates, and the model stays usable.
    const std::vector<int32_t> badIds{m->model->config().vocabSize + 100};
    QVERIFY_THROWS_EXCEPTION(Error, generate(*m->model, *m->tokenizer, badIds, greedy(2), nullptr));
    QVERIFY(generate(*m->model, *m->tokenizer, prompt(*m->tokenizer), greedy(2), nullptr).generatedTokens >= 1);
  }

 private:
  static void addFamilies() {
    QTest::addColumn<QString>("family");
    QTest::newRow("mixtral") << QString("mixtral");
    QTest::newRow("qwen2_moe") << QString("qwen2_moe");
  }
};

QTEST_APPLESS_MAIN(TestGenerator)
#include "test_generator.moc"
