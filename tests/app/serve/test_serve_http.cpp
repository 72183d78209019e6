// `zipmoe serve` with real clients: the server runs as its own process on a free loopback port
// (--port 0; it prints the port), and is spoken to by curl and by Python's http.client
// (tests/app/serve/sse_client.py, which parses the server-sent events). Checks: /v1/models lists the
// model; a wrong or missing key gets 401; malformed JSON, an unknown model, an oversized body and a
// negative max_tokens get OpenAI-style 4xx errors naming the field; streaming and non-streaming
// replies equal the same request run alone on the engine in this process (greedy, fp32: tokens
// equal, so the texts are equal); 8 concurrent streaming clients all complete with their lone
// answers; a client killed mid-stream leaves no sequence behind; SIGTERM shuts the server down
// cleanly (exit status 0, every thread joined); a conversation twice the context is shortened as
// the CLI and the app shorten it, or refused naming the limit with --context-overflow error. Skips when curl or python3 is missing.
#include <QProcess>
#include <QStandardPaths>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/serve/serve_process.h"
#include "test_support.h"
#include "zipmoe/chat_session.h"
#include "zipmoe/engine.h"
#include "zipmoe/model/generator.h"

using namespace zipmoe;
using nlohmann::json;

namespace {

const QString kKey = "test-key-123";
using zipmoe::testing::demoModel;
QString clientScript() { return QString(ZIPMOE_SOURCE_DIR) + "/tests/app/serve/sse_client.py"; }
using Reply = zipmoe::testing::HttpReply;

}  // namespace

class TestServeHttp : public QObject {
  Q_OBJECT

 private:
  QProcess server_;
  int port_ = 0;
  std::unique_ptr<Engine> engine_;

  static Reply curl(const QStringList& args) { return zipmoe::testing::curl(args); }
  QString url(const QString& path) const { return QString("http://127.0.0.1:%1%2").arg(port_).arg(path); }
  Reply post(const QString& path, const std::string& body, const QString& key = kKey) {
    QStringList a = {"-H", "Content-Type: application/json", "--data-binary", QString::fromStdString(body), url(path)};
    if (!key.isEmpty()) a = QStringList{"-H", "Authorization: Bearer " + key} + a;
    return curl(a);
  }
  json python(const QStringList& args) {
    QProcess p;
    p.start("python3", QStringList{clientScript()} + args);
    if (!p.waitForFinished(-1)) return json();
    const QByteArray out = p.readAllStandardOutput();
    if (p.exitCode() != 0) qWarning("sse_client.py: %s", p.readAllStandardError().constData());
    return json::parse(out.toStdString(), nullptr, false);
  }
  json health() { return json::parse(curl({url("/health")}).body, nullptr, false); }

  // Starts `zipmoe serve` on the demo model (fp32, the test key, a free loopback port) with `extra`
  // options, and returns the port it printed once it listens (0 on a failure, with a test failure).
  static int startServer(QProcess& process, const QStringList& extra) {
    return zipmoe::testing::startServer(process, QStringList{"--api-key", kKey, "--dtype", "fp32"} + extra);
  }

  // The reply this process's engine gives to the conversation alone (greedy).
  std::string alone(const std::vector<ChatMessage>& messages, int maxTokens) {
    const auto ids = engine_->tokenizer().encode(engine_->chatTemplate()->render(messages, true), false);
    SamplingParams p;
    p.temperature = 0;
    p.maxTokens = maxTokens;
    return generate(engine_->model(), engine_->tokenizer(), ids, p, {}).text;
  }
  static json chatBody(const std::string& user, int maxTokens, bool stream) {
    return zipmoe::testing::chatBody(user, maxTokens, stream);
  }

 private Q_SLOTS:
  void initTestCase() {
    if (QStandardPaths::findExecutable("curl").isEmpty()) QSKIP("curl is not installed (scripts/deps.sh)");
    if (QStandardPaths::findExecutable("python3").isEmpty()) QSKIP("python3 is not installed (scripts/deps.sh)");
    if (!std::filesystem::exists(demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
    EngineOptions o;
    o.model.dtype = ComputeDtype::Float32;
    engine_ = Engine::open(demoModel(), o);
    port_ = startServer(server_, {"--max-batch", "8", "--prefill-chunk", "16", "--max-body", "64K"});
    QVERIFY(port_ > 0);
  }

  void cleanupTestCase() {
    if (server_.state() == QProcess::Running) {
      server_.kill();
      server_.waitForFinished(-1);
    }
  }

  // The server's socket takes SO_REUSEADDR, not httplib's SO_REUSEPORT: a second server on a port
  // in use is refused with an error naming the address, and the first one goes on answering.
  void aSecondServerOnThePortIsRefused() {
    QProcess second;
    second.start(ZIPMOE_CLI_PATH, {"serve", QString::fromStdString(demoModel().string()), "--port",
                                   QString::number(port_), "--dtype", "fp32"});
    QVERIFY(second.waitForStarted(-1));
    if (!second.waitForFinished(300000)) {  // it should end by itself; kill it only if it listens
      second.kill();
      second.waitForFinished(-1);
      QFAIL("a second server started on a port in use");
    }
    const QString err = QString::fromUtf8(second.readAllStandardError());
    QVERIFY2(second.exitCode() != 0, qPrintable(err));
    QVERIFY2(err.contains("127.0.0.1:" + QString::number(port_)) && err.contains("in use"), qPrintable(err));
    QCOMPARE(curl({url("/health")}).code, 200);
  }

  void modelsAndHealth() {
    const Reply r = curl({"-H", "Authorization: Bearer " + kKey, url("/v1/models")});
    QCOMPARE(r.code, 200);
    const json j = json::parse(r.body);
    QCOMPARE(j["object"], "list");
    QCOMPARE(j["data"][0]["id"], "demo-model");
    QCOMPARE(curl({url("/health")}).code, 200);  // no key needed
  }

  void keysAreChecked() {
    Reply r = curl({url("/v1/models")});
    QCOMPARE(r.code, 401);
    QCOMPARE(json::parse(r.body)["error"]["code"], "invalid_api_key");
    r = curl({"-H", "Authorization: Bearer wrong", url("/v1/models")});
    QCOMPARE(r.code, 401);
    r = post("/v1/chat/completions", chatBody("hi", 4, false).dump(), "wrong");
    QCOMPARE(r.code, 401);
  }

  void badRequestsNameTheField_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<int>("status");
    QTest::addColumn<QString>("param");
    QTest::newRow("malformed JSON") << "{\"model\": \"demo-model\", " << 400 << "body";
    QTest::newRow("unknown model")
        << R"({"model":"gpt-4","messages":[{"role":"user","content":"hi"}]})" << 404 << "model";
    QTest::newRow("negative max_tokens")
        << R"({"model":"demo-model","messages":[{"role":"user","content":"hi"}],"max_tokens":-3})" << 400 << "max_tokens";
    QTest::newRow("oversized body")
        << QString(R"({"model":"demo-model","messages":[{"role":"user","content":"%1"}]})").arg(QString(70000, 'a'))
        << 413 << "body";
  }
  void badRequestsNameTheField() {
    QFETCH(QString, body);
    QFETCH(int, status);
    QFETCH(QString, param);
    const Reply r = post("/v1/chat/completions", body.toStdString());
    QCOMPARE(r.code, status);
    const json e = json::parse(r.body, nullptr, false);
    QVERIFY2(e.contains("error"), r.body.c_str());
    QCOMPARE(QString::fromStdString(e["error"]["param"].get<std::string>()), param);
    QVERIFY(e["error"]["message"].is_string());
    QVERIFY(e["error"]["type"].is_string());
  }

  void repliesEqualTheLoneRun() {
    const std::string question = "ROMEO: what news from Mantua?";
    const std::string expected = alone({{"user", question}}, 30);
    // Non-streaming (curl).
    const Reply r = post("/v1/chat/completions", chatBody(question, 30, false).dump());
    QCOMPARE(r.code, 200);
    const json j = json::parse(r.body);
    QCOMPARE(j["object"], "chat.completion");
    QCOMPARE(j["choices"][0]["message"]["content"].get<std::string>(), expected);
    QCOMPARE(j["usage"]["completion_tokens"].get<int>() + j["usage"]["prompt_tokens"].get<int>(),
             j["usage"]["total_tokens"].get<int>());
    // Streaming (Python's http.client, SSE ending in [DONE], usage in the last chunk).
    const json s = python({"stream", QString::number(port_), kKey, QString::fromStdString(chatBody(question, 30, true).dump())});
    QCOMPARE(s["status"], 200);
    QVERIFY(s["done"].get<bool>());
    QCOMPARE(s["content"].get<std::string>(), expected);
    QVERIFY(s["usage"].is_object());
    QCOMPARE(s["usage"]["completion_tokens"], j["usage"]["completion_tokens"]);
    // The same prompt again: its prefix is found in the cache.
    QVERIFY(s["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() > 0);
    // /v1/completions too.
    const Reply c = post("/v1/completions", R"({"model":"demo-model","prompt":"JULIET:","max_tokens":12,"temperature":0})");
    QCOMPARE(c.code, 200);
    SamplingParams p;
    p.temperature = 0;
    p.maxTokens = 12;
    QCOMPARE(json::parse(c.body)["choices"][0]["text"].get<std::string>(),
             generate(engine_->model(), engine_->tokenizer(), engine_->tokenizer().encode("JULIET:", true), p, {}).text);
  }

  // A conversation twice as long as the demo's 256-token context: the server leaves out the oldest
  // turns, as the CLI and the app do, says how many in usage.dropped_messages, and replies as a
  // ChatSession given the same conversation does; a server started with --context-overflow error
  // refuses it with 400 context_length_exceeded naming the limit.
  void aConversationTwiceTheContextDropsItsOldestTurns() {
    const int context = engine_->model().config().maxPositionEmbeddings;
    json messages = json::array({json{{"role", "system"}, {"content", "You are a herald of Verona."}}});
    std::vector<ChatMessage> turns;
    std::vector<ChatMessage> all = {{"system", "You are a herald of Verona."}};
    for (int turn = 0; static_cast<int>(engine_->tokenizer().encode(engine_->chatTemplate()->render(all, true)).size()) < 2 * context; ++turn) {
      for (const ChatMessage& m : {ChatMessage{"user", "What news from Mantua? Turn " + std::to_string(turn) + "."},
                                   ChatMessage{"assistant", "My lord, word of Juliet, of the tomb and of the friar."}}) {
        all.push_back(m);
        turns.push_back(m);
        messages.push_back({{"role", m.role}, {"content", m.content}});
      }
    }
    turns.push_back({"user", "And what of Romeo?"});
    messages.push_back({{"role", "user"}, {"content", "And what of Romeo?"}});
    const json body = {{"model", "demo-model"}, {"messages", messages}, {"max_tokens", 20}, {"temperature", 0}};

    ChatSession session(*engine_);
    session.setSystemPrompt("You are a herald of Verona.");
    session.setMessages(turns);
    SamplingParams p;
    p.temperature = 0;
    p.maxTokens = 20;
    const GenerationStats expected = session.reply(p, {});
    QVERIFY(expected.droppedMessages > 0);

    const Reply r = post("/v1/chat/completions", body.dump());
    QCOMPARE(r.code, 200);
    const json j = json::parse(r.body);
    QCOMPARE(j["choices"][0]["message"]["content"].get<std::string>(), expected.text);
    QCOMPARE(j["usage"]["dropped_messages"].get<int>(), expected.droppedMessages);
    QCOMPARE(j["usage"]["prompt_tokens"].get<int>(), expected.promptTokens);

    QProcess strict;
    int port = startServer(strict, {"--context-overflow", "error"});
    QVERIFY(port > 0);
    std::swap(port, port_);  // url() speaks to the strict server
    const Reply refused = post("/v1/chat/completions", body.dump());
    std::swap(port, port_);
    strict.terminate();
    QVERIFY(strict.waitForFinished(-1));
    QCOMPARE(refused.code, 400);
    const json e = json::parse(refused.body, nullptr, false);
    QVERIFY2(e.contains("error"), refused.body.c_str());
    QCOMPARE(e["error"]["code"].get<std::string>(), std::string("context_length_exceeded"));
    QCOMPARE(e["error"]["param"].get<std::string>(), std::string("messages"));
    QVERIFY2(e["error"]["message"].get<std::string>().find("context holds " + std::to_string(context) + " tokens") !=
                 std::string::npos,
             refused.body.c_str());
  }

  void eightConcurrentStreams() {
    json bodies = json::array();
    std::vector<std::string> expected;
    for (int i = 0; i < 8; ++i) {
      const std::string q = "Citizen " + std::to_string(i) + ": speak, speak.";
      bodies.push_back(chatBody(q, 20, true));
      expected.push_back(alone({{"user", q}}, 20));
    }
    const uint64_t stepsBefore = health()["steps"].get<uint64_t>();
    const json results = python({"concurrent", QString::number(port_), kKey, QString::fromStdString(bodies.dump())});
    QVERIFY2(results.is_array() && results.size() == 8, results.dump().c_str());
    for (size_t i = 0; i < 8; ++i) {
      QVERIFY2(results[i]["status"] == 200 && results[i]["done"].get<bool>(), results[i].dump().c_str());
      QCOMPARE(results[i]["content"].get<std::string>(), expected[i]);
    }
    // Batched: far fewer forward steps than the 8 × 20 tokens one at a time.
    const uint64_t steps = health()["steps"].get<uint64_t>() - stepsBefore;
    QVERIFY2(steps < 8 * 20, qPrintable(QString("%1 steps for 8 × 20 tokens").arg(steps)));
  }

  void killedClientLeavesNoSequence() {
    const uint64_t cancelledBefore = health()["cancelled"].get<uint64_t>();
    QProcess client;
    client.start("python3", {clientScript(), "hang", QString::number(port_), kKey,
                             QString::fromStdString(chatBody("Tell me a long story.", 240, true).dump())});
    QVERIFY(client.waitForStarted(-1));
    QByteArray out;
    while (!out.contains("STREAMING")) {
      QVERIFY2(client.state() == QProcess::Running, client.readAllStandardError().constData());
      client.waitForReadyRead(1000);
      out += client.readAllStandardOutput();
    }
    client.kill();  // SIGKILL mid-stream: the socket closes under the server
    client.waitForFinished(-1);
    // The server notices at its next write and the scheduler frees the sequence at its next step.
    QTRY_VERIFY_WITH_TIMEOUT(health()["cancelled"].get<uint64_t>() == cancelledBefore + 1, 600000);
    const json h = health();
    QCOMPARE(h["running"].get<int>(), 0);
    QCOMPARE(h["live_sequences"].get<int>(), h["cached_sequences"].get<int>());
  }

  // bench serve's trace workloads over the real server: --replay-trace routes each request from its
  // own trace prompt (the routing itself is checked in test_serve_scheduler); --trace-prompt, which
  // would pin one prompt for every request, is refused naming the option.
  void traceRoutedServer() {
    zipmoe::testing::TempDir dir;
    const auto trace = dir / "two-prompts.tsv";
    {
      std::ofstream f(trace);
      f << "# expert-activation trace: model=test top_k=2 experts=8 layers=1; prompt 0 uses experts 0-3, prompt 1 4-7\n"
        << "prompt\tlayer\te0\te1\te2\te3\te4\te5\te6\te7\n"
        << "0\t0\t5\t5\t5\t5\t0\t0\t0\t0\n"
        << "1\t0\t0\t0\t0\t0\t5\t5\t5\t5\n";
    }
    const QString model = QString::fromStdString(demoModel().string());
    const QString tracePath = QString::fromStdString(trace.string());
    {
      QProcess refused;
      refused.start(ZIPMOE_CLI_PATH, {"serve", model, "--port", "0", "--replay-trace", tracePath, "--trace-prompt", "1"});
      QVERIFY(refused.waitForFinished(-1));
      QVERIFY(refused.exitCode() != 0);
      QVERIFY2(refused.readAllStandardError().contains("--trace-prompt"), "the refusal names --trace-prompt");
    }
    QProcess traced;
    traced.setProcessChannelMode(QProcess::SeparateChannels);
    traced.start(ZIPMOE_CLI_PATH, {"serve", model, "--port", "0", "--dtype", "fp32", "--replay-trace", tracePath});
    QVERIFY(traced.waitForStarted(-1));
    QByteArray out;
    while (!out.contains('\n')) {
      QVERIFY2(traced.state() == QProcess::Running, traced.readAllStandardError().constData());
      traced.waitForReadyRead(1000);
      out += traced.readAllStandardOutput();
    }
    const qsizetype colon = out.lastIndexOf(':', out.indexOf(" (model"));
    const int port = out.mid(colon + 1, out.indexOf(' ', colon) - colon - 1).toInt();
    QVERIFY2(port > 0, out.constData());
    for (const char* user : {"ROMEO:", "JULIET:"}) {
      const json body = chatBody(user, 6, false);
      const Reply r = curl({"-H", "Content-Type: application/json", "--data-binary", QString::fromStdString(body.dump()),
                            QString("http://127.0.0.1:%1/v1/chat/completions").arg(port)});
      QVERIFY2(r.code == 200, r.body.c_str());
      QVERIFY(json::parse(r.body)["usage"]["completion_tokens"].get<int>() > 0);
    }
    traced.terminate();
    QVERIFY(traced.waitForFinished(-1));
    const QByteArray err = traced.readAllStandardError();
    QVERIFY2(traced.exitCode() == 0, err.constData());
    QVERIFY2(err.contains("routing replayed from two-prompts.tsv, one of its 2 prompts per request"), err.constData());
    QVERIFY2(err.contains("served 2 requests (0 cancelled, 0 failed)"), err.constData());
  }

  void sigtermShutsDownCleanly() {
    server_.terminate();  // SIGTERM
    QVERIFY(server_.waitForFinished(-1));
    QCOMPARE(server_.exitStatus(), QProcess::NormalExit);
    const QByteArray err = server_.readAllStandardError();
    QVERIFY2(server_.exitCode() == 0, err.constData());
    QVERIFY2(err.contains("SIGTERM received, shutting down"), err.constData());
  }
};

QTEST_GUILESS_MAIN(TestServeHttp)
#include "test_serve_http.moc"
