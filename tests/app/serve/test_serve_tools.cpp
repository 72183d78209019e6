// Tool calls and structured output through `zipmoe serve` on the demo model — a small model trained on
// Shakespeare, which knows nothing of JSON: every valid call it makes is the constraint's doing.
// Checks, with real clients (curl; Python's http.client in sse_client.py, which assembles streamed
// tool-call deltas): a forced call (tool_choice required, and a named function) returns
// finish_reason "tool_calls" and arguments that parse and follow the tool's schema, streamed and not,
// and greedy streamed arguments equal the non-streamed ones; 200 sampled tool-call requests in a
// row (8 at a time) never produce invalid JSON; response_format json_schema and json_object give
// content that parses (and follows the schema); a conversation holding an earlier call and its tool
// result is answered; a schema feature the core cannot enforce is refused with 400 naming it.
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryFile>
#include <QtTest>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "app/serve/serve_process.h"
#include "json_schema_check.h"

using zipmoe::testing::follows;
using json = nlohmann::ordered_json;

namespace {


const json kWeather = json::parse(R"({"type":"object","properties":{
    "city":{"type":"string","minLength":1,"maxLength":16},
    "unit":{"enum":["celsius","fahrenheit"]},
    "days":{"type":"integer"}},"required":["city","unit"]})");
const json kAdd = json::parse(R"({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]})");

json tools() {
  return json::array({json{{"type", "function"}, {"function", {{"name", "get_weather"}, {"description", "Weather of a city"}, {"parameters", kWeather}}}},
                      json{{"type", "function"}, {"function", {{"name", "add"}, {"description", "Adds two numbers"}, {"parameters", kAdd}}}}});
}

json body(const std::string& user, json extra) {
  json b = {{"model", "demo-model"}, {"messages", json::array({json{{"role", "user"}, {"content", user}}})}, {"max_tokens", 96}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

const json& schemaOf(const std::string& tool) { return tool == "add" ? kAdd : kWeather; }

}  // namespace

class TestServeTools : public QObject {
  Q_OBJECT

  QProcess server_;
  int port_ = 0;

  struct Reply {
    int code = 0;
    json body;
  };
  Reply post(const json& b) {
    const zipmoe::testing::HttpReply r =
        zipmoe::testing::curl({"-H", "Content-Type: application/json", "--data-binary", QString::fromStdString(b.dump()),
                               QString("http://127.0.0.1:%1/v1/chat/completions").arg(port_)});
    return {r.code, json::parse(r.body, nullptr, false)};
  }
  static json python(const QStringList& args) {
    return json::parse(zipmoe::testing::runClientScript("sse_client.py", args), nullptr, false);
  }
  json stream(const json& b) {
    json s = b;
    s["stream"] = true;
    return python({"stream", QString::number(port_), "", QString::fromStdString(s.dump())});
  }

  // Each call names an offered tool and its arguments parse and follow that tool's schema.
  static bool validCalls(const json& calls, std::string* why) {
    if (!calls.is_array() || calls.empty()) {
      *why = "no calls: " + calls.dump();
      return false;
    }
    for (const json& c : calls) {
      const json f = c.contains("function") ? c.at("function") : c;
      const std::string name = f.value("name", std::string());
      if (name != "add" && name != "get_weather") {
        *why = "unknown tool: " + c.dump();
        return false;
      }
      const json args = json::parse(f.value("arguments", std::string()), nullptr, false);
      if (args.is_discarded() || !follows(schemaOf(name), args)) {
        *why = "arguments: " + c.dump();
        return false;
      }
    }
    return true;
  }

 private Q_SLOTS:
  void initTestCase() {
    if (QStandardPaths::findExecutable("curl").isEmpty()) QSKIP("curl is not installed (scripts/deps.sh)");
    if (QStandardPaths::findExecutable("python3").isEmpty()) QSKIP("python3 is not installed (scripts/deps.sh)");
    port_ = zipmoe::testing::startServer(server_, {"--dtype", "fp32", "--max-batch", "8"});
    QVERIFY(port_ > 0);
  }

  void cleanupTestCase() {
    if (server_.state() == QProcess::Running) {
      server_.terminate();
      server_.waitForFinished(-1);
    }
  }

  void forcedCallsFollowTheSchema() {
    for (const json& choice : {json("required"), json{{"type", "function"}, {"function", {{"name", "add"}}}}}) {
      const json b = body("What is the weather in Verona?", {{"tools", tools()}, {"tool_choice", choice}, {"temperature", 0}});
      const Reply r = post(b);
      QCOMPARE(r.code, 200);
      const json& choice0 = r.body["choices"][0];
      QCOMPARE(choice0["finish_reason"].get<std::string>(), std::string("tool_calls"));
      QVERIFY(choice0["message"]["content"].is_null());
      std::string why;
      QVERIFY2(validCalls(choice0["message"]["tool_calls"], &why), why.c_str());
      if (choice.is_object()) QCOMPARE(choice0["message"]["tool_calls"][0]["function"]["name"].get<std::string>(), std::string("add"));
      for (const json& c : choice0["message"]["tool_calls"]) {
        QCOMPARE(c["type"].get<std::string>(), std::string("function"));
        QVERIFY(c["id"].get<std::string>().rfind("call_", 0) == 0);
      }
      // Streamed: the deltas put together give the same calls (greedy), then [DONE].
      const json s = stream(b);
      QCOMPARE(s["status"].get<int>(), 200);
      QVERIFY(s["done"].get<bool>());
      QCOMPARE(s["finish_reason"].get<std::string>(), std::string("tool_calls"));
      QVERIFY2(validCalls(s["tool_calls"], &why), why.c_str());
      QCOMPARE(s["tool_calls"].size(), choice0["message"]["tool_calls"].size());
      for (size_t i = 0; i < s["tool_calls"].size(); ++i)
        QCOMPARE(s["tool_calls"][i]["arguments"].get<std::string>(),
                 choice0["message"]["tool_calls"][i]["function"]["arguments"].get<std::string>());
    }
  }

  void twoHundredSampledCallsAreAllValid() {
    // The sanitizer build checks memory safety, not the statistics: 50 requests there.
#if defined(__SANITIZE_ADDRESS__)
    constexpr int kRequests = 50;
#else
    constexpr int kRequests = 200;
#endif
    json bodies = json::array();
    for (int i = 0; i < kRequests; ++i)
      bodies.push_back(body(i % 2 ? "Add three and four." : "Is it raining in Mantua?",
                            {{"tools", tools()}, {"tool_choice", "required"}, {"parallel_tool_calls", i % 3 == 0},
                             {"temperature", 1.0}, {"seed", i}, {"max_tokens", 80 + (i % 4) * 16}, {"stream", true}}));
    QTemporaryFile file;  // 200 bodies are more than one command-line argument may hold
    QVERIFY(file.open());
    file.write(QByteArray::fromStdString(bodies.dump()));
    file.flush();
    const json results = python({"pool", QString::number(port_), "", "@" + file.fileName(), "8"});
    QVERIFY2(results.is_array() && results.size() == static_cast<size_t>(kRequests), results.dump().substr(0, 400).c_str());
    int calls = 0;
    for (size_t i = 0; i < results.size(); ++i) {
      const json& r = results[i];
      QVERIFY2(r["status"] == 200 && r["done"] == true, r.dump().c_str());
      if (r["finish_reason"] == "length") {  // the limit came first: any call it shows must still be whole
        QVERIFY2(!r.contains("tool_calls") || r["tool_calls"].empty() || validCallsWhole(r["tool_calls"]), r.dump().c_str());
        continue;
      }
      std::string why;
      QVERIFY2(r["finish_reason"] == "tool_calls", r.dump().c_str());
      QVERIFY2(validCalls(r["tool_calls"], &why), (std::to_string(i) + ": " + why).c_str());
      calls += static_cast<int>(r["tool_calls"].size());
    }
    QVERIFY2(calls >= kRequests * 3 / 4, std::to_string(calls).c_str());
  }

  void structuredOutputParses() {
    const json schema = json::parse(R"({"type":"object","properties":{"speaker":{"type":"string","maxLength":20},
        "mood":{"enum":["glad","sad"]},"lines":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":3}},
        "required":["speaker","mood","lines"],"additionalProperties":false})");
    for (int seed = 0; seed < 4; ++seed) {
      const json b = body("Who speaks?", {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "who"}, {"strict", true}, {"schema", schema}}}}},
                                          {"temperature", 1.0}, {"seed", seed}, {"max_tokens", 120}});
      const Reply r = post(b);
      QCOMPARE(r.code, 200);
      const json content = json::parse(r.body["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
      QVERIFY2(!content.is_discarded() && follows(schema, content), r.body.dump().c_str());
      QCOMPARE(r.body["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
    }
    const Reply any = post(body("Say something.", {{"response_format", {{"type", "json_object"}}}, {"temperature", 0}, {"max_tokens", 60}}));
    QCOMPARE(any.code, 200);
    const json object = json::parse(any.body["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
    QVERIFY2(object.is_object(), any.body.dump().c_str());
  }

  void toolResultsAreAnswered() {
    // One small tool: the demo's 256-token context holds it, the conversation and a short reply.
    const json weather = {{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters",
        json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})")}}}};
    json b = body("", {{"tools", json::array({weather})}, {"temperature", 0}, {"max_tokens", 24}});
    b["messages"] = json::array({json{{"role", "user"}, {"content", "Weather in Verona?"}},
                                 json{{"role", "assistant"}, {"content", nullptr},
                                      {"tool_calls", json::array({json{{"id", "call_1"}, {"type", "function"},
                                                                       {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Verona","unit":"celsius"})"}}}}})}},
                                 json{{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "Sunny, 21 degrees."}}});
    const Reply r = post(b);
    QVERIFY2(r.code == 200, r.body.dump().c_str());
    const std::string finish = r.body["choices"][0]["finish_reason"].get<std::string>();
    QVERIFY2(finish == "stop" || finish == "length" || finish == "tool_calls", r.body.dump().c_str());
  }

  void unsupportedSchemaIsRefused() {
    const Reply r = post(body("x", {{"response_format", {{"type", "json_schema"},
                                                         {"json_schema", {{"name", "n"}, {"schema", json::parse(R"({"type":"string","pattern":"a+"})")}}}}}}));
    QCOMPARE(r.code, 400);
    QCOMPARE(r.body["error"]["param"].get<std::string>(), std::string("response_format"));
    QVERIFY2(r.body["error"]["message"].get<std::string>().find("/pattern") != std::string::npos, r.body.dump().c_str());
  }

 private:
  static bool validCallsWhole(const json& calls) {
    std::string why;
    return validCalls(calls, &why);
  }
};

QTEST_GUILESS_MAIN(TestServeTools)
#include "test_serve_tools.moc"
