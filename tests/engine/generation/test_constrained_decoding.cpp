// Constrained decoding: the schema compiler refuses what it cannot hold a reply to (naming the schema
// path); the byte matcher accepts exactly the JSON a schema allows, and its minRemaining is the
// shortest completion; the token mask on the demo model's byte-level BPE vocabulary equals trying
// every token's bytes on the matcher (fast paths included); random walks through the mask — any
// logits, any seed, tight token limits — always end in JSON that parses and follows the schema, and
// tool calls in the generic format whose arguments follow their tool's schema; ToolCallStream
// splits text and calls the same way however the text is chunked.
// (JSON holding '#' or a backslash is written as plain string literals: moc misreads them in raw strings.)
#include <QtTest>

#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_schema_check.h"
#include "generation/json_grammar.h"
#include "generation/json_matcher.h"
#include "generation/reply_stream.h"
#include "generation/token_constraint.h"
#include "generation/tool_call_stream.h"
#include "zipmoe/base/error.h"
#include "zipmoe/text/tokenizer.h"

using namespace zipmoe;
using namespace zipmoe::constrain;
using zipmoe::testing::follows;
using json = nlohmann::ordered_json;

namespace {

std::filesystem::path demoModel() { return std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model"; }

const json kWeather = json::parse(R"({
  "type": "object",
  "properties": {
    "city": {"type": "string", "minLength": 1, "maxLength": 12},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer"},
    "detail": {"type": ["boolean", "null"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
    "where": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
              "required": ["lat", "lon"], "additionalProperties": false}
  },
  "required": ["city", "unit"],
  "additionalProperties": false
})");

bool matches(const Grammar& g, const std::string& text) {
  JsonMatcher m(g);
  return m.feed(text) && m.complete();
}

// minRemaining is the shortest completion exactly when it is 0 just for complete values, no byte
// lowers it by more than one, and some byte lowers it by one (induction on its value).
void checkMinRemaining(const JsonMatcher& m, const std::string& where) {
  const int k = m.minRemaining();
  QVERIFY2((k == 0) == m.complete(), where.c_str());
  bool someStep = k == 0;
  std::vector<std::string> bytes;
  for (int b = 0x20; b < 0x7F; ++b) bytes.emplace_back(1, static_cast<char>(b));
  bytes.emplace_back("\xC3\xA9");
  for (const std::string& b : bytes) {
    JsonMatcher next = m;
    if (!next.feed(b)) continue;
    const int after = next.minRemaining();
    QVERIFY2(after >= k - static_cast<int>(b.size()), (where + " + '" + b + "': " + std::to_string(k) + " -> " + std::to_string(after)).c_str());
    someStep = someStep || after == k - 1;
  }
  QVERIFY2(someStep, (where + ": no byte brings " + std::to_string(k) + " closer").c_str());
}

std::vector<int32_t> eosOf(const Tokenizer& tok) { return {*tok.tokenToId("<|endoftext|>")}; }

// Random logits through the mask until the reply ends; returns the reply's bytes.
std::string randomWalk(const OutputConstraint& start, const TokenIndex& index, std::span<const int32_t> eos, int maxTokens,
                       uint64_t seed, bool* ended) {
  OutputConstraint c = start;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 3.0f);
  std::string out;
  *ended = false;
  for (int left = maxTokens; left > 0; --left) {
    std::vector<float> logits(static_cast<size_t>(index.vocab));
    for (float& l : logits) l = noise(rng);
    c.mask(logits, left);
    int32_t best = -1;
    for (int tries = 0; tries < 64; ++tries) {
      best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (logits[static_cast<size_t>(best)] == -std::numeric_limits<float>::infinity()) return out;  // nothing fits
      if (c.allows(best, left)) break;
      logits[static_cast<size_t>(best)] = -std::numeric_limits<float>::infinity();
      if (tries == 16) c.mask(logits, left, true);
    }
    if (std::find(eos.begin(), eos.end(), best) != eos.end()) {
      *ended = true;
      return out;
    }
    out += index.bytes[static_cast<size_t>(best)];
    c.accept(best);
  }
  return out;
}

}  // namespace

class TestConstrainedDecoding : public QObject {
  Q_OBJECT

  std::unique_ptr<Tokenizer> tok_;
  std::shared_ptr<TokenIndex> index_;

 private Q_SLOTS:
  void initTestCase() {
    tok_ = Tokenizer::fromFile(demoModel() / "tokenizer.json");
    index_ = std::make_shared<TokenIndex>(*tok_);
  }

  void refusesWhatItCannotHold() {
    auto refused = [](const char* schema, const char* needle) {
      try {
        compileSchema(json::parse(schema));
      } catch (const Error& e) {
        if (std::string(e.what()).find(needle) != std::string::npos) return true;
        qWarning() << e.what();
        return false;
      }
      return false;
    };
    QVERIFY(refused(R"({"type":"object","properties":{"a":{"type":"string","pattern":"x+"}}})", "/properties/a/pattern"));
    QVERIFY(refused(R"({"type":"integer","minimum":3})", "/minimum"));
    QVERIFY(refused(R"({"anyOf":[{"type":"string"},{"enum":["a"]}]})", "/anyOf: two alternatives can both start with"));
    QVERIFY(refused(R"({"type":"object","required":["b"],"properties":{"a":{}}})", "/required: 'b'"));
    QVERIFY(refused("{\"$ref\":\"#/$defs/missing\"}", "/$ref: cannot resolve"));
    QVERIFY(refused(R"({"type":"strin"})", "/type: unknown type 'strin'"));
    QVERIFY(refused(R"({"type":"array","minItems":-1})", "/minItems"));
    OutputSpec spec;
    spec.responseFormat.kind = ResponseFormatKind::JsonSchema;
    spec.responseFormat.schemaJson = R"({"type":"object","properties":{"x":{"not":{}}}})";
    try {
      ConstraintSpec::compile(spec);
      QFAIL("compiled an unsupported keyword");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).rfind("response_format.json_schema.schema/properties/x/not:", 0) == 0, e.what());
    }
  }

  void matcherAcceptsExactlyTheSchema() {
    const Grammar g = compileSchema(kWeather);
    QVERIFY(matches(g, R"({"city":"Paris","unit":"celsius"})"));
    QVERIFY(matches(g, R"({"city": "Paris", "unit": "celsius", "days": -12, "detail": null, "tags": ["a", "bc"]})"));
    QVERIFY(matches(g, "{\"city\":\"P\\u00e9\\\"s\",\"unit\":\"fahrenheit\",\"where\":{\"lat\":1.5e-3,\"lon\":-0.25}}"));
    QVERIFY(matches(g, "{\"city\":\"\xC3\xA9t\xC3\xA9\",\"unit\":\"celsius\"}"));
    QVERIFY(!matches(g, R"({"unit":"celsius","city":"Paris"})"));        // order
    QVERIFY(!matches(g, R"({"city":"Paris"})"));                          // required unit
    QVERIFY(!matches(g, R"({"city":"","unit":"celsius"})"));              // minLength
    QVERIFY(!matches(g, R"({"city":"Paris-Paris-Paris","unit":"celsius"})"));  // maxLength
    QVERIFY(!matches(g, R"({"city":"Paris","unit":"kelvin"})"));          // enum
    QVERIFY(!matches(g, R"({"city":"Paris","unit":"celsius","days":1.5})"));  // integer
    QVERIFY(!matches(g, R"({"city":"Paris","unit":"celsius","days":01})"));   // leading zero
    QVERIFY(!matches(g, R"({"city":"Paris","unit":"celsius","extra":1})"));
    QVERIFY(!matches(g, R"({"city":"Paris","unit":"celsius","tags":["a","b","c","d"]})"));  // maxItems
    QVERIFY(!matches(g, R"({ "city":"Paris","unit":"celsius"})"));        // no space after '{'
    QVERIFY(!matches(g, R"({"city":  "Paris","unit":"celsius"})"));       // at most one space
    QVERIFY(!matches(g, "{\"city\":\"a\x01\",\"unit\":\"celsius\"}"));    // control byte
    QVERIFY(!matches(g, "{\"city\":\"\xC3\x28\",\"unit\":\"celsius\"}"));  // bad UTF-8
    QVERIFY(!matches(g, "{\"city\":\"\xED\xA0\x80\",\"unit\":\"celsius\"}"));  // a surrogate in UTF-8
    QVERIFY(matches(g, "{\"city\":\"\\ud83d\\ude00\",\"unit\":\"celsius\"}"));  // an escaped pair
    QVERIFY(!matches(g, "{\"city\":\"\\ud83dx\",\"unit\":\"celsius\"}"));   // a lone high half
    QVERIFY(!matches(g, "{\"city\":\"\\ude00\",\"unit\":\"celsius\"}"));    // a lone low half
    // Recursion through $defs; any JSON under json_object.
    const Grammar tree = compileSchema(json::parse(
        "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
        "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}},\"required\":[\"v\"]}},"
        "\"$ref\":\"#/$defs/n\"}"));
    QVERIFY(matches(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
    QVERIFY(!matches(tree, R"({"v":1,"kids":[{}]})"));
    const Grammar any = anyObjectGrammar();
    QVERIFY(matches(any, R"({"a":[1,{"b":null}],"c":"d","e":true,"f":-0.5E+2})"));
    QVERIFY(!matches(any, R"([1])"));
    QVERIFY(!matches(any, R"({"a":tru})"));
  }

  void minRemainingIsTheShortestCompletion() {
    const json schema = json::parse(R"({"type":"object","properties":{"a":{"type":"string","minLength":2},
        "b":{"enum":[10,1]},"c":{"type":"array","items":{"type":"integer"},"minItems":2},
        "d":{"type":"object","properties":{"e":{"type":["string","null"]}},"required":["e"]}},"required":["a","c"]})");
    const Grammar g = compileSchema(schema);
    for (const std::string doc : {R"({"a":"xyz","b":10,"c":[1,2]})", "{\"a\": \"x\\u00e9y\", \"b\": 1, \"c\": [-15, 0, 7], \"d\": {\"e\": null}}"}) {
      for (size_t n = 0; n <= doc.size(); ++n) {
        JsonMatcher m(g);
        QVERIFY(m.feed(doc.substr(0, n)));
        checkMinRemaining(m, doc.substr(0, n));
      }
    }
    const Grammar any = anyObjectGrammar();
    const std::string doc = R"({"k":[{"x":[]},"s",-0.5,true,null],"e":{}})";
    for (size_t n = 0; n <= doc.size(); ++n) {
      JsonMatcher m(any);
      QVERIFY(m.feed(doc.substr(0, n)));
      checkMinRemaining(m, doc.substr(0, n));
    }
  }

  void maskEqualsTryingEveryToken() {
    OutputSpec spec;
    spec.responseFormat.kind = ResponseFormatKind::JsonSchema;
    spec.responseFormat.schemaJson = kWeather.dump();
    const auto compiled = ConstraintSpec::compile(spec);
    const std::vector<int32_t> eos = eosOf(*tok_);
    // Prefixes that reach each kind of state: structure, keys, free strings, bounded strings, numbers.
    for (const std::string prefix : {"", "{", "{\"ci", "{\"city\":\"Pa", "{\"city\":\"Paris\",\"unit\":\"cel",
                                     "{\"city\":\"P\",\"unit\":\"celsius\",\"days\":1",
                                     "{\"city\":\"P\",\"unit\":\"celsius\",\"tags\":[\"ab"}) {
      OutputConstraint c(compiled, index_, eos);
      const std::vector<int32_t> ids = tok_->encode(prefix);
      for (int32_t id : ids) {
        QVERIFY(c.allows(id, 1000));
        c.accept(id);
      }
      std::vector<float> logits(static_cast<size_t>(index_->vocab), 0.0f);
      c.mask(logits, 1000);
      for (int32_t t = 0; t < index_->vocab; ++t) {
        const bool masked = logits[static_cast<size_t>(t)] != 0.0f;
        QVERIFY2(masked == !c.allows(t, 1000), (prefix + " token " + std::to_string(t)).c_str());
      }
    }
  }

  void randomWalksEndInValidJson() {
    OutputSpec spec;
    spec.responseFormat.kind = ResponseFormatKind::JsonSchema;
    spec.responseFormat.schemaJson = kWeather.dump();
    const auto compiled = ConstraintSpec::compile(spec);
    const std::vector<int32_t> eos = eosOf(*tok_);
    const OutputConstraint start(compiled, index_, eos);
    for (uint64_t seed = 1; seed <= 60; ++seed) {
      const int limit = 40 + static_cast<int>(seed % 5) * 30;
      bool ended = false;
      const std::string out = randomWalk(start, *index_, eos, limit, seed, &ended);
      json v;
      try {
        v = json::parse(out);
      } catch (const json::exception& e) {
        QFAIL(("seed " + std::to_string(seed) + ": not JSON: " + out).c_str());
      }
      QVERIFY2(follows(kWeather, v), out.c_str());
    }
  }

  void randomToolCallsFollowTheirTools() {
    OutputSpec spec;
    spec.tools = {{"get_weather", "", kWeather.dump(), false},
                  {"add", "", R"({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]})", false}};
    spec.toolChoice.mode = ToolChoiceMode::Required;
    const auto compiled = ConstraintSpec::compile(spec);
    const std::vector<int32_t> eos = eosOf(*tok_);
    const OutputConstraint start(compiled, index_, eos);
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      bool ended = false;
      const std::string out = randomWalk(start, *index_, eos, 110 + static_cast<int>(seed % 4) * 40, seed, &ended);
      ToolCallStream stream;
      std::vector<ToolCallEvent> events;
      QVERIFY2(stream.push(out, events).empty(), out.c_str());
      stream.finish();
      QVERIFY2(!stream.calls().empty(), out.c_str());
      for (const ToolCall& call : stream.calls()) {
        const json args = json::parse(call.argumentsJson);
        const json& schema = call.name == "add" ? json::parse(spec.tools[1].parametersJson) : kWeather;
        QVERIFY2(call.name == "add" || call.name == "get_weather", out.c_str());
        QVERIFY2(follows(schema, args), out.c_str());
      }
    }
  }

  void autoToolChoiceAllowsTextThenCalls() {
    OutputSpec spec;
    spec.tools = {{"ping", "", R"({"type":"object","properties":{"host":{"type":"string"}},"required":["host"]})", false}};
    const auto compiled = ConstraintSpec::compile(spec);
    QVERIFY(compiled->freeText);
    const std::vector<int32_t> eos = eosOf(*tok_);
    OutputConstraint c(compiled, index_, eos);
    std::string text = "Let me check.<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"host\": \"a\"}}\n</tool_call>";
    for (int32_t id : tok_->encode(text)) {
      QVERIFY2(c.allows(id, 1000), tok_->decode({id}).c_str());
      c.accept(id);
    }
    QVERIFY(c.allows(eos[0], 1000));
    QVERIFY(c.completedCalls() == 1);
    // A call to a tool that does not exist is refused at its first wrong byte.
    OutputConstraint d(compiled, index_, eos);
    bool refused = false;
    for (int32_t id : tok_->encode("<tool_call>\n{\"name\": \"pong\"")) {
      if (!d.allows(id, 1000)) { refused = true; break; }
      d.accept(id);
    }
    QVERIFY(refused);
  }

  void streamSplitsTextAndCallsAnyChunking() {
    const std::string text = "Sure.<tool_c <tool_call>\n{\"name\": \"a\", \"arguments\": {\"s\": \"}\\\"{\", \"n\": [1]}}\n"
                             "</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>";
    std::mt19937 rng(7);
    for (int round = 0; round < 50; ++round) {
      ToolCallStream s;
      std::vector<ToolCallEvent> events;
      std::string shown;
      for (size_t at = 0; at < text.size();) {
        const size_t n = 1 + rng() % 7;
        shown += s.push(text.substr(at, n), events);
        at += n;
      }
      shown += s.finish();
      QCOMPARE(shown, std::string("Sure.<tool_c "));
      QCOMPARE(s.calls().size(), size_t{2});
      QCOMPARE(s.calls()[0].name, std::string("a"));
      QCOMPARE(s.calls()[0].argumentsJson, std::string("{\"s\": \"}\\\"{\", \"n\": [1]}"));
      QCOMPARE(s.calls()[1].argumentsJson, std::string("{}"));
      std::string args0;
      int begins = 0;
      for (const auto& e : events) {
        begins += e.begin ? 1 : 0;
        if (!e.begin && e.index == 0) args0 += e.arguments;
      }
      QCOMPARE(begins, 2);
      QCOMPARE(args0, s.calls()[0].argumentsJson);
    }
  }

  void replyStreamEndsWithToolCalls() {
    OutputSpec spec;
    spec.tools = {{"ping", "", R"({"type":"object","properties":{"host":{"type":"string","maxLength":8}},"required":["host"]})", false}};
    spec.toolChoice.mode = ToolChoiceMode::Required;
    spec.parallelToolCalls = false;
    const std::vector<int32_t> eos = eosOf(*tok_);
    SamplingParams params;
    params.temperature = 1.0;
    params.seed = 3;
    params.maxTokens = 80;
    ReplyStream reply(*tok_, params, {1, 2, 3}, eos, 0, {ConstraintSpec::compile(spec), index_});
    std::mt19937_64 rng(5);
    std::normal_distribution<float> noise(0.0f, 2.0f);
    std::string shown;
    std::vector<ToolCallEvent> events;
    while (!reply.ended()) {
      std::vector<float> logits(static_cast<size_t>(index_->vocab));
      for (float& l : logits) l = noise(rng);
      auto t = reply.next(logits);
      shown += t.text;
      events.insert(events.end(), t.calls.begin(), t.calls.end());
    }
    QCOMPARE(reply.stopReason(), StopReason::ToolCalls);
    QVERIFY(shown.empty());
    QCOMPARE(reply.toolCalls().size(), size_t{1});
    QVERIFY(json::parse(reply.toolCalls()[0].argumentsJson).contains("host"));
    QVERIFY(!events.empty() && events.front().begin);
  }
};

QTEST_GUILESS_MAIN(TestConstrainedDecoding)
#include "test_constrained_decoding.moc"
