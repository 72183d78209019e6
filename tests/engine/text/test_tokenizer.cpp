// Tokenizer against the Hugging Face `tokenizers` library: every fixture in tests/fixtures/tokenizers
// (written by scripts/dev/make_tokenizer_fixtures.py) lists strings with the reference ids, the ids
// with special tokens and the decodings; this suite re-encodes and re-decodes each and also checks
// streaming decode, load errors and encode speed. Real vocabularies (Qwen1.5, switch-large-128) are
// read from ZIPMOE_SHARED_DIR at run time; the generated tokenizers come from generateSyntheticModel.
#include <QtTest>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/model_family.h"
#include "tools/synthetic/synthetic_model.h"
#include "zipmoe/text/tokenizer.h"

using nlohmann::json;
using zipmoe::Tokenizer;
namespace fs = std::filesystem;

namespace {

json loadFixture(const std::string& name) {
  return json::parse(zipmoe::testing::readText(fs::path(ZIPMOE_FIXTURES_DIR) / "tokenizers" / (name + ".json")));
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

// Builds the Qwen1.5 tokenizer.json from the fixture's pipeline and shared vocab.json + merges.txt.
fs::path writeQwenTokenizer(const json& fixture, const fs::path& dir) {
  const fs::path src = zipmoe::testing::sharedDir() / "data" / "models" / "qwen1.5-moe";
  json j = fixture["pipeline"];
  j["model"]["vocab"] = json::parse(zipmoe::testing::readText(src / "vocab.json"));
  json merges = json::array();
  std::ifstream in(src / "merges.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    merges.push_back(line);
  }
  j["model"]["merges"] = merges;
  const fs::path out = dir / "tokenizer.json";
  std::ofstream(out) << j.dump();
  return out;
}

// Compares one tokenizer with a fixture; returns the number of failing strings.
int compareWithFixture(const Tokenizer& tok, const json& fixture, const std::string& name) {
  int failures = 0, checked = 0;
  for (const auto& c : fixture["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const auto idsSpecial = c.contains("ids_special") ? c["ids_special"].get<std::vector<int32_t>>() : ids;
    const std::string decoded = c.contains("decoded") ? c["decoded"].get<std::string>() : text;
    const std::string decodedSkip = c.contains("decoded_skip") ? c["decoded_skip"].get<std::string>() : decoded;
    std::string problem;
    const auto got = tok.encode(text);
    if (got != ids) problem += " encode " + show(got) + " != " + show(ids);
    const auto gotSpecial = tok.encode(text, true);
    if (gotSpecial != idsSpecial) problem += " encode(special) " + show(gotSpecial) + " != " + show(idsSpecial);
    const std::string dec = tok.decode(ids), decSkip = tok.decode(ids, true);
    if (dec != decoded) problem += " decode '" + dec + "' != '" + decoded + "'";
    if (decSkip != decodedSkip) problem += " decode(skip) '" + decSkip + "' != '" + decodedSkip + "'";
    for (bool skip : {true, false}) {
      zipmoe::StreamingDecoder stream(tok, skip);
      std::string all;
      for (int32_t id : ids) all += stream.push(id);
      all += stream.finish();
      if (all != (skip ? decodedSkip : decoded)) problem += " streaming '" + all + "'";
    }
    ++checked;
    if (!problem.empty()) {
      if (++failures <= 8) qWarning("%s: text '%s':%s", name.c_str(), text.c_str(), problem.c_str());
    }
  }
  qInfo("%s: %d strings, %d differ", name.c_str(), checked, failures);
  return failures;
}

std::unique_ptr<Tokenizer> generatedTokenizer(const std::string& family, const fs::path& dir) {
  zipmoe::SyntheticModelOptions options;
  options.family = *zipmoe::familyFromName(family);
  options.preset = "tiny";
  zipmoe::generateSyntheticModel(dir, options);
  return Tokenizer::fromFile(dir / "tokenizer.json");
}

void writeJson(const fs::path& p, const json& j) { std::ofstream(p) << j.dump(); }

}  // namespace

class TestTokenizer : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void generatedFamilies_data() {
    QTest::addColumn<QString>("family");
    for (const char* f : {"mixtral", "qwen2_moe", "deepseek_v2", "olmoe", "switch_transformers"}) QTest::newRow(f) << f;
  }
  void generatedFamilies() {
    QFETCH(QString, family);
    const std::string f = family.toStdString();
    zipmoe::testing::TempDir dir;
    auto tok = generatedTokenizer(f, dir.path() / "model");
    const json fixture = loadFixture("generated_" + f);
    QVERIFY(fixture["cases"].size() >= 200);
    QCOMPARE(compareWithFixture(*tok, fixture, "generated_" + f), 0);
  }

  void qwenReal_data() {
    QTest::addColumn<QString>("fixture");
    QTest::newRow("qwen15_real") << "qwen15_real";
    QTest::newRow("qwen15_deepseek_split") << "qwen15_deepseek_split";
  }
  void qwenReal() {
    QFETCH(QString, fixture);
    if (zipmoe::testing::sharedDir().empty()) QSKIP("shared/ data not available");
    const json fx = loadFixture(fixture.toStdString());
    zipmoe::testing::TempDir dir;
    auto tok = Tokenizer::fromFile(writeQwenTokenizer(fx, dir.path()));
    QCOMPARE(tok->vocabSize(), 151646);
    QVERIFY(tok->isSpecial(151645));
    QCOMPARE(tok->idToToken(151644), std::string("<|im_start|>"));
    QCOMPARE(compareWithFixture(*tok, fx, fixture.toStdString()), 0);
  }

  void switchReal() {
    if (zipmoe::testing::sharedDir().empty()) QSKIP("shared/ data not available");
    auto tok = Tokenizer::fromFile(zipmoe::testing::sharedDir() / "data" / "models" / "switch-large-128" / "tokenizer.json");
    QCOMPARE(compareWithFixture(*tok, loadFixture("switch_real"), "switch_real"), 0);
  }

  void streamingSplitsCharacters() {
    zipmoe::testing::TempDir dir;
    auto tok = generatedTokenizer("mixtral", dir.path() / "m");
    // "中" has no token in the tiny vocab: it becomes three <0xXX> byte tokens.
    const auto ids = tok->encode("a中b");
    zipmoe::StreamingDecoder stream(*tok, true);
    std::vector<std::string> parts;
    for (int32_t id : ids) parts.push_back(stream.push(id));
    parts.push_back(stream.finish());
    std::string all;
    for (const auto& p : parts) {
      QVERIFY(p.find("\xEF\xBF\xBD") == std::string::npos);  // never a split character
      all += p;
    }
    QCOMPARE(all, tok->decode(ids, true));
  }

  void loadErrors() {
    zipmoe::testing::TempDir dir;
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(dir / "missing.json"), "missing.json", "cannot open");
    std::ofstream(dir / "bad.json") << "{ not json";
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(dir / "bad.json"), "bad.json", "invalid JSON");
    auto tok = generatedTokenizer("qwen2_moe", dir.path() / "q");
    const json base = json::parse(zipmoe::testing::readText(dir.path() / "q" / "tokenizer.json"));
    json j = base;
    j["model"] = {{"type", "WordPiece"}, {"vocab", json::object()}};
    writeJson(dir / "wp.json", j);
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(dir / "wp.json"), "wp.json", "$.model.type", "WordPiece");
    j = base;
    j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
    writeJson(dir / "pre.json", j);
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(dir / "pre.json"), "pre.json", "$.pre_tokenizer", "BertPreTokenizer");
    j = base;
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(?<=a)b"}}}, {"behavior", "Isolated"}, {"invert", false}};
    writeJson(dir / "re.json", j);
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(dir / "re.json"), "re.json", "unsupported regex pattern", "(?<=a)b");
    j = base;
    j["model"]["merges"].push_back("nospace");
    writeJson(dir / "merge.json", j);
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(dir / "merge.json"), "merge.json", "$.model.merges[", "malformed merge");
    j = base;
    j["model"]["merges"].push_back("x \xE2\x98\x83");
    writeJson(dir / "merge2.json", j);
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(dir / "merge2.json"), "missing from the vocab");
    j = base;
    j["model"]["dropout"] = 0.1;
    writeJson(dir / "drop.json", j);
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(dir / "drop.json"), "$.model.dropout", "not supported");
    j = base;
    j["model"]["continuing_subword_prefix"] = "##";
    writeJson(dir / "csp.json", j);
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(dir / "csp.json"), "continuing_subword_prefix");
  }

  // A tokenizer.json is untrusted: a Split pattern that nests too deep or counts too high is refused
  // at load, and one that backtracks without end fails encode with an error naming the pattern —
  // in time linear in the text, not exponential, and without overflowing the stack.
  void regexPatternsAreBounded() {
    zipmoe::testing::TempDir dir;
    auto tok = generatedTokenizer("qwen2_moe", dir.path() / "q");
    const json base = json::parse(zipmoe::testing::readText(dir.path() / "q" / "tokenizer.json"));
    auto withSplit = [&](const std::string& name, const std::string& pattern) {
      json j = base;
      j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
      writeJson(dir / name, j);
      return dir / name;
    };
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(withSplit("deep.json", std::string(65, '(') + "a" + std::string(65, ')'))),
                        "deep.json", "nested deeper than 64");
    QVERIFY(Tokenizer::fromFile(withSplit("ok-depth.json", std::string(64, '(') + "a" + std::string(64, ')'))));
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(withSplit("count.json", "a{2,99999999999}")), "count.json", "repeat count above");
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(withSplit("stacked.json", "a" + std::string(70, '*'))), "stacked.json",
                        "quantifiers in a row");
    ZIPMOE_EXPECT_ERROR(Tokenizer::fromFile(withSplit("reversed.json", "a{5,2}")), "reversed.json", "n < m");

    // Catastrophic backtracking: (a*)*b on a run of a's is exponential in a naive matcher.
    auto exponential = Tokenizer::fromFile(withSplit("exp.json", "(?:a*)*b"));
    ZIPMOE_EXPECT_ERROR(exponential->encode(std::string(40, 'a')), "tokenizer regex", "(?:a*)*b", "steps");
    // A general repeat that recurses once per iteration: refused at its depth limit.
    auto deep = Tokenizer::fromFile(withSplit("rec.json", "(?:ab)+"));
    QVERIFY(!deep->encode("abababab").empty());
    std::string pairs;
    for (int i = 0; i < 5000; ++i) pairs += "ab";
    ZIPMOE_EXPECT_ERROR(deep->encode(pairs), "(?:ab)+", "levels of backtracking");
    // The patterns real tokenizers use stay far inside the limits, also on long runs.
    const std::string longRun = std::string(200000, 'x') + " " + std::string(100000, ' ') + "y" + std::string(50000, '7');
    QCOMPARE(tok->decode(tok->encode(longRun)), longRun);
  }

  // The whole Tiny Shakespeare corpus (1.1 MB) through the real Qwen1.5 tokenizer and back, byte for
  // byte. Its speed is a benchmark, not a test: `zipmoe bench tokenizer` (docs/MODEL.md).
  void encodesAndDecodesTheWholeCorpus() {
    if (zipmoe::testing::sharedDir().empty()) QSKIP("shared/ data not available");
    zipmoe::testing::TempDir dir;
    auto tok = Tokenizer::fromFile(writeQwenTokenizer(loadFixture("qwen15_real"), dir.path()));
    const std::string text = zipmoe::testing::readText(zipmoe::testing::sharedDir() / "data" / "corpus" / "tinyshakespeare.txt");
    QVERIFY(text.size() > 1000000);
    const auto ids = tok->encode(text);
    QVERIFY(ids.size() > text.size() / 8);  // a real BPE: a few bytes per token, not one token per line
    QVERIFY(ids.size() < text.size());
    QCOMPARE(tok->decode(ids), text);
  }
};

QTEST_APPLESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
