// The Anthropic Messages API of `zipmoe serve` with real clients: the server runs as its own process
// on the demo model (tests/app/serve/serve_process.h) and is spoken to by curl and by Python's
// http.client (tests/app/serve/anthropic_client.py, which parses the server-sent events and checks
// their documented order). Checks: a message object, and the same conversation streamed — events in
// order, text deltas concatenating to the non-streaming reply (greedy), which equals the OpenAI
// endpoint's; count_tokens equal to the prompt the reply's usage reports; the stop sequence that
// matched, named; a tool round trip (tool_use and tool_result blocks) accepted; the key as x-api-key
// or a bearer token; every error in Anthropic's shape naming the field, while the OpenAI endpoints
// keep theirs. Skips when curl or python3 is missing.
#include <QProcess>
#include <QStandardPaths>
#include <QtTest>

#include <nlohmann/json.hpp>
#include <string>

#include "app/serve/serve_process.h"

using namespace zipmoe;
using nlohmann::json;

namespace {

const QString kKey = "anthropic-test-key";
QString clientScript() { return QString(ZIPMOE_SOURCE_DIR) + "/tests/app/serve/anthropic_client.py"; }

json conversation(int maxTokens, bool stream) {
  return {{"model", "demo-model"},
          {"max_tokens", maxTokens},
          {"temperature", 0},
          {"stream", stream},
          {"system", json::array({json{{"type", "text"}, {"text", "A street in Verona."}}})},
          {"messages", json::array({json{{"role", "user"}, {"content", "What news from Mantua?"}}})}};
}

}  // namespace

class TestServeAnthropic : public QObject {
  Q_OBJECT

 private:
  QProcess server_;
  int port_ = 0;

  QString url(const QString& path) const { return QString("http://127.0.0.1:%1%2").arg(port_).arg(path); }
  // POST with the key in `header` ("x-api-key: …", "Authorization: Bearer …", or none when empty).
  testing::HttpReply post(const QString& path, const std::string& body, const QString& header = "x-api-key: " + kKey) {
    QStringList a = {"-H", "Content-Type: application/json", "-H", "anthropic-version: 2023-06-01", "--data-binary",
                     QString::fromStdString(body), url(path)};
    if (!header.isEmpty()) a = QStringList{"-H", header} + a;
    return testing::curl(a);
  }
  json message(const json& body) {
    const testing::HttpReply r = post("/v1/messages", body.dump());
    if (r.code != 200) qWarning("/v1/messages answered %d: %s", r.code, r.body.c_str());
    return json::parse(r.body, nullptr, false);
  }
  int countTokens(json body) {
    body.erase("stream");
    const testing::HttpReply r = post("/v1/messages/count_tokens", body.dump());
    if (r.code != 200) qWarning("count_tokens answered %d: %s", r.code, r.body.c_str());
    return json::parse(r.body, nullptr, false).value("input_tokens", -1);
  }
  json streamed(const json& body) {
    QProcess p;
    p.start("python3", {clientScript(), "stream", QString::number(port_), kKey, QString::fromStdString(body.dump())});
    if (!p.waitForFinished(-1)) return json();
    if (p.exitCode() != 0) qWarning("anthropic_client.py: %s", p.readAllStandardError().constData());
    return json::parse(p.readAllStandardOutput().toStdString(), nullptr, false);
  }
  // The error an Anthropic client gets: {"type": "error", "error": {"type", "message"}}.
  static void checkError(const testing::HttpReply& r, int status, const std::string& type, const std::string& field) {
    QCOMPARE(r.code, status);
    const json e = json::parse(r.body, nullptr, false);
    QVERIFY2(e.is_object() && e.value("type", "") == "error" && e["error"].is_object(), r.body.c_str());
    QCOMPARE(e["error"]["type"].get<std::string>(), type);
    QVERIFY2(e["error"]["message"].get<std::string>().rfind(field, 0) == 0, r.body.c_str());  // names the field first
  }

 private Q_SLOTS:
  void initTestCase() {
    if (QStandardPaths::findExecutable("curl").isEmpty()) QSKIP("curl is not installed (scripts/deps.sh)");
    if (QStandardPaths::findExecutable("python3").isEmpty()) QSKIP("python3 is not installed (scripts/deps.sh)");
    if (!std::filesystem::exists(testing::demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
    port_ = testing::startServer(server_, {"--dtype", "fp32", "--api-key", kKey, "--max-body", "64K"});
    QVERIFY(port_ > 0);
  }

  void cleanupTestCase() {
    if (server_.state() == QProcess::Running) {
      server_.terminate();
      server_.waitForFinished(-1);
    }
  }

  // A whole message, then the same conversation streamed: the documented events in order, text
  // deltas adding up to the same reply, which is also the OpenAI endpoint's; count_tokens says the
  // prompt the usage reports (prefilled + read from the cache).
  void messageAndItsStream() {
    const json m = message(conversation(30, false));
    QVERIFY2(m.is_object() && m.value("type", "") == "message", m.dump().c_str());
    QVERIFY(m["id"].get<std::string>().rfind("msg_", 0) == 0);
    QCOMPARE(m["role"], "assistant");
    QCOMPARE(m["model"], "demo-model");
    QVERIFY2(m["content"].size() == 1 && m["content"][0]["type"] == "text", m.dump().c_str());
    const std::string text = m["content"][0]["text"];
    QVERIFY(!text.empty());
    const std::string stop = m["stop_reason"];
    QVERIFY2(stop == "end_turn" || stop == "max_tokens", stop.c_str());
    QVERIFY(m["stop_sequence"].is_null());
    const json& usage = m["usage"];
    QVERIFY(usage["output_tokens"].get<int>() > 0);
    const int prompt = usage["input_tokens"].get<int>() + usage["cache_read_input_tokens"].get<int>();
    QCOMPARE(countTokens(conversation(30, false)), prompt);

    // The OpenAI endpoint renders the same conversation the same way.
    const json chat = {{"model", "demo-model"},
                       {"max_tokens", 30},
                       {"temperature", 0},
                       {"messages", json::array({json{{"role", "system"}, {"content", "A street in Verona."}},
                                                 json{{"role", "user"}, {"content", "What news from Mantua?"}}})}};
    const testing::HttpReply o = post("/v1/chat/completions", chat.dump(), "Authorization: Bearer " + kKey);
    QCOMPARE(o.code, 200);
    QCOMPARE(json::parse(o.body)["choices"][0]["message"]["content"].get<std::string>(), text);

    const json s = streamed(conversation(30, true));
    QVERIFY2(s.is_object(), "anthropic_client.py printed no summary");
    QCOMPARE(s["status"], 200);
    QVERIFY(s["content_type"].get<std::string>().rfind("text/event-stream", 0) == 0);
    QVERIFY2(s["grammar"].is_null(), s.dump().c_str());
    // One text block: message_start, content_block_start, its deltas, content_block_stop,
    // message_delta, message_stop (pings left out).
    json expected = json::array({"message_start", "content_block_start"});
    for (size_t i = 0; i + 6 <= s["events"].size(); ++i) expected.push_back("content_block_delta");
    for (const char* e : {"content_block_stop", "message_delta", "message_stop"}) expected.push_back(e);
    QCOMPARE(s["events"], expected);
    QCOMPARE(s["text"].get<std::string>(), text);
    QCOMPARE(s["stop_reason"], m["stop_reason"]);
    QCOMPARE(s["usage"]["output_tokens"], usage["output_tokens"]);
    QCOMPARE(s["message"]["usage"]["input_tokens"].get<int>(), prompt);  // message_start: the whole prompt
    QCOMPARE(s["usage"]["input_tokens"].get<int>() + s["usage"]["cache_read_input_tokens"].get<int>(), prompt);
    QVERIFY(s["usage"]["cache_read_input_tokens"].get<int>() > 0);  // the same prompt again: found in the cache
  }

  // Two stop sequences, one of which the greedy reply reaches: the reply ends before it and names it,
  // whole and streamed.
  void stopSequenceIsNamed() {
    const std::string text = message(conversation(30, false))["content"][0]["text"];
    QVERIFY2(text.size() >= 8, text.c_str());
    std::string stop = text.substr(text.size() / 2, 2);
    const std::string before = text.substr(0, text.find(stop));
    json body = conversation(30, false);
    body["stop_sequences"] = {"never-said-by-it", stop};
    const json m = message(body);
    QCOMPARE(m["stop_reason"], "stop_sequence");
    QCOMPARE(m["stop_sequence"].get<std::string>(), stop);
    QCOMPARE(m["content"].size() == 0 ? std::string() : m["content"][0]["text"].get<std::string>(), before);
    body["stream"] = true;
    const json s = streamed(body);
    QVERIFY2(s["grammar"].is_null(), s.dump().c_str());
    QCOMPARE(s["stop_reason"], "stop_sequence");
    QCOMPARE(s["stop_sequence"].get<std::string>(), stop);
    QCOMPARE(s["text"].get<std::string>(), before);
  }

  // A conversation that went through a tool: the assistant's tool_use and the user's tool_result are
  // taken (tool_choice none: the reply is text whatever the model), and count_tokens counts them.
  void toolRoundTripIsAccepted() {
    const json body = json::parse(R"({
      "model":"demo-model","max_tokens":8,"temperature":0,
      "tools":[{"name":"get_weather","description":"The weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
      "tool_choice":{"type":"none"},
      "messages":[{"role":"user","content":"Weather in Mantua?"},
                  {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Mantua"}}]},
                  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"Rain."},{"type":"text","text":"So?"}]}]})");
    const json m = message(body);
    QVERIFY2(m.value("type", "") == "message", m.dump().c_str());
    QCOMPARE(countTokens(body), m["usage"]["input_tokens"].get<int>() + m["usage"]["cache_read_input_tokens"].get<int>());
  }

  // tool_choice any: the reply is a tool_use whose input follows the tool's input_schema (constrained
  // decoding), whole and streamed as input_json_deltas (greedy: the same input both ways).
  void forcedToolUseFollowsTheSchema() {
    json body = json::parse(R"({"model":"demo-model","max_tokens":120,"temperature":0,
      "tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object",
                "properties":{"city":{"type":"string","maxLength":16},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"]}}],
      "tool_choice":{"type":"any"},"messages":[{"role":"user","content":"Weather in Verona?"}]})");
    const json m = message(body);
    QVERIFY2(m.value("stop_reason", "") == "tool_use", m.dump().c_str());
    QVERIFY2(m["content"].size() == 1 && m["content"][0]["type"] == "tool_use", m.dump().c_str());
    const json& use = m["content"][0];
    QVERIFY(use["id"].get<std::string>().rfind("toolu_", 0) == 0);
    QCOMPARE(use["name"], "get_weather");
    QVERIFY2(use["input"]["city"].is_string() && use["input"]["city"].get<std::string>().size() <= 64, m.dump().c_str());
    const std::string unit = use["input"]["unit"];
    QVERIFY(unit == "celsius" || unit == "fahrenheit");
    body["stream"] = true;
    const json s = streamed(body);
    QVERIFY2(s.is_object() && s["grammar"].is_null(), s.dump().c_str());
    QCOMPARE(s["stop_reason"], "tool_use");
    QVERIFY2(s.contains("tool_uses") && s["tool_uses"].size() == 1, s.dump().c_str());
    QCOMPARE(json::parse(s["tool_uses"][0]["input_json"].get<std::string>()), use["input"]);
  }

  // /metrics counts these requests as the OpenAI endpoints' (earlier tests completed some; a wrong
  // model is refused with its status).
  void metricsCountMessages() {
    QCOMPARE(post("/v1/messages", R"({"model":"nope","max_tokens":4,"messages":[{"role":"user","content":"hi"}]})").code, 404);
    const testing::HttpReply m = testing::curl({"-H", "Authorization: Bearer " + kKey, QString("http://127.0.0.1:%1/metrics").arg(port_)});
    QCOMPARE(m.code, 200);
    QVERIFY2(m.body.find(R"(zipmoe_requests_total{endpoint="/v1/messages",outcome="completed",code="200"})") != std::string::npos,
             m.body.c_str());
    QVERIFY2(m.body.find(R"(zipmoe_requests_total{endpoint="/v1/messages",outcome="refused",code="404"} 1)") != std::string::npos,
             m.body.c_str());
  }

  void keysAreChecked() {
    const std::string body = conversation(4, false).dump();
    checkError(post("/v1/messages", body, ""), 401, "authentication_error", "");
    checkError(post("/v1/messages", body, "x-api-key: wrong"), 401, "authentication_error", "");
    checkError(post("/v1/messages/count_tokens", body, "Authorization: Bearer wrong"), 401, "authentication_error", "");
    QCOMPARE(post("/v1/messages/count_tokens", body, "Authorization: Bearer " + kKey).code, 200);
    QCOMPARE(post("/v1/messages/count_tokens", body).code, 200);
  }

  void errorsTakeAnthropicsShape_data() {
    QTest::addColumn<QString>("path");
    QTest::addColumn<QString>("body");
    QTest::addColumn<int>("status");
    QTest::addColumn<QString>("type");
    QTest::addColumn<QString>("field");
    const QString user = R"("messages":[{"role":"user","content":"hi"}])";
    QTest::newRow("malformed JSON") << "/v1/messages" << R"({"model": "demo-model", )" << 400 << "invalid_request_error"
                                    << "body";
    QTest::newRow("no max_tokens") << "/v1/messages" << R"({"model":"demo-model",)" + user + "}" << 400
                                   << "invalid_request_error" << "max_tokens";
    QTest::newRow("image") << "/v1/messages"
                           << R"({"model":"demo-model","max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})"
                           << 400 << "invalid_request_error" << "messages[0].content[0].type";
    QTest::newRow("thinking") << "/v1/messages/count_tokens"
                              << R"({"model":"demo-model","thinking":{"type":"enabled","budget_tokens":64},)" + user + "}"
                              << 400 << "invalid_request_error" << "thinking";
    QTest::newRow("unknown model") << "/v1/messages" << R"({"model":"claude-x","max_tokens":4,)" + user + "}" << 404
                                   << "not_found_error" << "model";
    QTest::newRow("unknown path") << "/v1/messages/batches" << "{}" << 404 << "not_found_error" << "Unknown request URL";
    QTest::newRow("oversized body")
        << "/v1/messages" << QString(R"({"model":"demo-model","max_tokens":4,"messages":[{"role":"user","content":"%1"}]})").arg(QString(70000, 'a'))
        << 413 << "request_too_large" << "body";
  }
  void errorsTakeAnthropicsShape() {
    QFETCH(QString, path);
    QFETCH(QString, body);
    QFETCH(int, status);
    QFETCH(QString, type);
    QFETCH(QString, field);
    checkError(post(path, body.toStdString()), status, type.toStdString(), field.toStdString());
  }

  // The OpenAI endpoints keep OpenAI's shape.
  void openAiErrorsKeepTheirShape() {
    const testing::HttpReply r = post("/v1/chat/completions", R"({"model":"demo-model","messages":[],"max_tokens":4})",
                                      "Authorization: Bearer " + kKey);
    QCOMPARE(r.code, 400);
    const json e = json::parse(r.body);
    QCOMPARE(e["error"]["param"], "messages");
    QVERIFY(!e.contains("type"));
  }
};

QTEST_GUILESS_MAIN(TestServeAnthropic)
#include "test_serve_anthropic.moc"
