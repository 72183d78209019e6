// `zipmoe serve` beside a web browser on a desktop (docs/SERVER.md, "Safety on a desktop"), spoken to
// by curl, Python's http.client (sse_client.py) and raw sockets (raw_client.py: what no polite client
// does). Checks: a foreign Host and a text/plain POST are refused (403, 415) and a declared body over
// the limit is refused without being sent (413); CORS is off (no headers, preflight refused) unless
// --cors names the origin, and then only that origin gets the headers; four slowloris connections
// with --max-connections 4 leave /health and a chat completion answered, and the read deadline cuts
// them (408); 48 non-streaming clients that close right after sending are cancelled and generate next
// to nothing; SIGTERM answers an open non-streaming request 503 shutting_down and ends an open stream
// with a shutting_down error event and [DONE]; a non-loopback --host without a key is refused, and
// with --allow-no-key prints a usable URL. Waits poll for conditions with generous bounds; nothing is
// timed. Skips when curl or python3 is missing.
#include <QProcess>
#include <QStandardPaths>
#include <QtTest>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve_process.h"

using namespace zipmoe::testing;
using nlohmann::json;

namespace {

constexpr int kBound = 300000;  // ms: only matters on a failure
const QString kAllowedOrigin = "http://app.example";

// The shared chat body, generating exactly max_tokens (ignore_eos).
json fullLengthChat(const std::string& user, int maxTokens, bool stream = false) {
  json b = zipmoe::testing::chatBody(user, maxTokens, stream);
  b["ignore_eos"] = true;
  return b;
}

json errorOf(const HttpReply& r) {
  const json j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"] : json();
}

}  // namespace

class TestServeSafety : public QObject {
  Q_OBJECT

 private:
  QProcess server_;  // keyless on loopback, --max-connections 4, --read-timeout 3, --cors kAllowedOrigin
  int port_ = 0;

  // `zipmoe serve` on the demo model in fp32 with `extra` options (serve_process.h).
  static int startServeFp32(QProcess& process, const QStringList& extra, QByteArray* firstLine = nullptr) {
    return startServer(process, QStringList{"--dtype", "fp32"} + extra, demoModel(), firstLine);
  }

  QString url(const QString& path, int port = 0) const {
    return QString("http://127.0.0.1:%1%2").arg(port ? port : port_).arg(path);
  }
  HttpReply postJson(const json& body, const QString& contentType = "application/json", int port = 0) {
    return curl({"-H", "Content-Type: " + contentType, "--data-binary", QString::fromStdString(body.dump()),
                      url("/v1/chat/completions", port)});
  }
  // Waits for a process to end (waitForFinished is false for one that already has).
  static bool finished(QProcess& p) { return p.state() == QProcess::NotRunning || p.waitForFinished(-1); }
  json health(int port = 0) { return json::parse(curl({url("/health", port)}).body, nullptr, false); }
  // Reads `process`'s stdout until a line starts with `prefix`; returns that line (empty when it
  // ended first, or after kBound).
  static QByteArray waitForLine(QProcess& process, const QByteArray& prefix, QByteArray& seen) {
    const QDeadlineTimer bound(kBound);
    for (;;) {
      for (const QByteArray& line : seen.split('\n'))
        if (line.startsWith(prefix)) return line;
      if (process.state() == QProcess::NotRunning || bound.hasExpired()) return {};
      process.waitForReadyRead(1000);
      seen += process.readAllStandardOutput();
    }
  }

 private Q_SLOTS:
  void initTestCase() {
    if (QStandardPaths::findExecutable("curl").isEmpty()) QSKIP("curl is not installed (scripts/deps.sh)");
    if (QStandardPaths::findExecutable("python3").isEmpty()) QSKIP("python3 is not installed (scripts/deps.sh)");
    if (!std::filesystem::exists(demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
    port_ = startServeFp32(server_, {"--max-connections", "4", "--read-timeout", "3", "--cors", kAllowedOrigin,
                                 "--max-body", "64K"});
    QVERIFY(port_ > 0);
  }

  void cleanupTestCase() {
    if (server_.state() == QProcess::Running) {
      server_.terminate();
      server_.waitForFinished(-1);
    }
  }

  // DNS rebinding: a page's own name resolved to 127.0.0.1 still sends that name as Host.
  void aForeignHostIsRefused() {
    const HttpReply r = curl({"-H", "Host: evil.example", url("/health")});
    QCOMPARE(r.code, 403);
    QCOMPARE(errorOf(r)["param"].get<std::string>(), std::string("Host"));
    QVERIFY2(errorOf(r)["message"].get<std::string>().find("evil.example") != std::string::npos, r.body.c_str());
    const HttpReply post = curl({"-H", "Host: evil.example:" + QString::number(port_), "-H",
                                      "Content-Type: application/json", "--data-binary",
                                      QString::fromStdString(fullLengthChat("hi", 2).dump()), url("/v1/chat/completions")});
    QCOMPARE(post.code, 403);
    for (const QString host : {"localhost", "LOCALHOST:1234", "127.0.0.1", "[::1]:8080"})
      QVERIFY2(curl({"-H", "Host: " + host, url("/health")}).code == 200, qPrintable(host));
  }

  // A page may POST text/plain or a form without a preflight, never JSON.
  void onlyJsonIsPosted() {
    const HttpReply r = postJson(fullLengthChat("hi", 2), "text/plain");
    QCOMPARE(r.code, 415);
    QCOMPARE(errorOf(r)["param"].get<std::string>(), std::string("Content-Type"));
    QVERIFY2(errorOf(r)["message"].get<std::string>().find("text/plain") != std::string::npos, r.body.c_str());
    QCOMPARE(postJson(fullLengthChat("hi", 2), "application/x-www-form-urlencoded").code, 415);
    const HttpReply ok = postJson(fullLengthChat("hi", 2), "Application/JSON; charset=utf-8");
    QVERIFY2(ok.code == 200, ok.body.c_str());
  }

  // The declared length is refused before a byte of the body: the client sends none and gets 413
  // (were the server reading, the read deadline would answer 408 instead).
  void anOversizedDeclaredBodyIsRefusedUnread() {
    QProcess p;
    p.start("python3", {serveScript("raw_client.py"), "declare", QString::number(port_), "100000000"});
    QVERIFY(finished(p));
    const json r = json::parse(p.readAllStandardOutput().toStdString(), nullptr, false);
    QVERIFY2(r.is_object(), p.readAllStandardError().constData());
    QCOMPARE(r["status"].get<int>(), 413);
    const json e = json::parse(r["body"].get<std::string>(), nullptr, false);
    QCOMPARE(e["error"]["code"].get<std::string>(), std::string("request_too_large"));
  }

  void corsOnlyForTheGivenOrigin() {
    const QStringList preflight = {"-X", "OPTIONS", "-H", "Access-Control-Request-Method: POST", "-H",
                                   "Access-Control-Request-Headers: content-type", url("/v1/chat/completions")};
    HttpReply r = curl(QStringList{"-H", "Origin: " + kAllowedOrigin} + preflight);
    QCOMPARE(r.code, 204);
    QVERIFY2(r.headers.find("access-control-allow-origin: http://app.example") != std::string::npos, r.headers.c_str());
    QVERIFY2(r.headers.find("access-control-allow-headers:") != std::string::npos, r.headers.c_str());
    r = curl(QStringList{"-H", "Origin: http://evil.example"} + preflight);
    QCOMPARE(r.code, 403);
    QVERIFY2(r.headers.find("access-control-") == std::string::npos, r.headers.c_str());
    r = curl({"-H", "Origin: " + kAllowedOrigin, url("/v1/models")});
    QCOMPARE(r.code, 200);
    QVERIFY2(r.headers.find("access-control-allow-origin: http://app.example") != std::string::npos, r.headers.c_str());
    r = curl({"-H", "Origin: http://evil.example", url("/v1/models")});
    QVERIFY2(r.headers.find("access-control-") == std::string::npos, r.headers.c_str());
  }

  // Four connections that send a byte every 2 s hold no worker: /health and a completion are
  // answered while they are open, and the read deadline (3 s here) cuts them with 408.
  void slowClientsBlockNobody() {
    QProcess slow;
    slow.start("python3", {serveScript("raw_client.py"), "slowloris", QString::number(port_), "4"});
    QByteArray seen;
    QVERIFY2(!waitForLine(slow, "OPEN 4", seen).isEmpty(), slow.readAllStandardError().constData());
    QCOMPARE(curl({url("/health")}).code, 200);
    const HttpReply r = postJson(fullLengthChat("ROMEO: what news?", 8));
    QVERIFY2(r.code == 200, r.body.c_str());
    QCOMPARE(json::parse(r.body)["usage"]["completion_tokens"].get<int>(), 8);
    QVERIFY2(!waitForLine(slow, "CUT 408", seen).isEmpty(), seen.constData());
    slow.kill();
    slow.waitForFinished(-1);
  }

  // 48 clients send a request and close at once: each is cancelled when its handler sees the socket
  // closed, before it generates much (48 × 200 tokens if nobody noticed).
  void disconnectedClientsGenerateNothing() {
    const json before = health();
    QProcess fire;
    fire.start("python3", {serveScript("raw_client.py"), "fire", QString::number(port_), "48",
                           QString::fromStdString(fullLengthChat("Tell me a long story.", 200).dump())});
    QVERIFY(finished(fire));
    QVERIFY2(fire.readAllStandardOutput().contains("SENT 48"), fire.readAllStandardError().constData());
    const auto ended = [&](const json& h) {
      return h["completed"].get<uint64_t>() + h["cancelled"].get<uint64_t>() + h["failed"].get<uint64_t>() -
             before["completed"].get<uint64_t>() - before["cancelled"].get<uint64_t>() - before["failed"].get<uint64_t>();
    };
    QTRY_VERIFY_WITH_TIMEOUT(ended(health()) == 48, kBound);
    const json after = health();
    QCOMPARE(after["cancelled"].get<uint64_t>() - before["cancelled"].get<uint64_t>(), uint64_t{48});
    const uint64_t tokens = after["generated_tokens"].get<uint64_t>() - before["generated_tokens"].get<uint64_t>();
    QVERIFY2(tokens < 48 * 200 / 10, qPrintable(QString("%1 tokens generated for clients that had gone").arg(tokens)));
    QCOMPARE(after["running"].get<int>(), 0);
  }

  // A server without --cors sends no Access-Control header and refuses every preflight; SIGTERM then
  // answers the requests it holds: 503 to a non-streaming one, an error event and [DONE] to a stream.
  void sigtermAnswersOpenRequests() {
    QProcess server;
    const int port = startServeFp32(server, {"--max-batch", "1"});
    QVERIFY(port > 0);
    HttpReply r = curl({"-X", "OPTIONS", "-H", "Origin: " + kAllowedOrigin, "-H",
                             "Access-Control-Request-Method: POST", url("/v1/chat/completions", port)});
    QCOMPARE(r.code, 403);
    QVERIFY2(r.headers.find("access-control-") == std::string::npos, r.headers.c_str());
    r = curl({"-H", "Origin: " + kAllowedOrigin, url("/v1/models", port)});
    QVERIFY2(r.headers.find("access-control-") == std::string::npos, r.headers.c_str());

    // One request decodes at a time: six of 200 tokens queue ahead of the two watched, which are
    // still open when the signal comes.
    std::vector<std::unique_ptr<QProcess>> clients;
    const auto post = [&](const json& body) {
      auto p = std::make_unique<QProcess>();
      p->start("curl", {"-sS", "--max-time", "600", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
                        "--data-binary", QString::fromStdString(body.dump()), url("/v1/chat/completions", port)});
      clients.push_back(std::move(p));
    };
    const auto submitted = [&] {
      const json h = health(port);
      return h["running"].get<int>() + h["waiting"].get<int>() + h["completed"].get<int>();
    };
    for (int i = 0; i < 6; ++i) post(fullLengthChat("Citizen " + std::to_string(i) + ", speak.", 200));
    QTRY_VERIFY_WITH_TIMEOUT(submitted() == 6, kBound);
    post(fullLengthChat("NURSE: what o'clock?", 200));
    QProcess stream;
    stream.start("python3", {serveScript("sse_client.py"), "stream", QString::number(port), "",
                             QString::fromStdString(fullLengthChat("JULIET: speak again.", 200, true).dump())});
    QTRY_VERIFY_WITH_TIMEOUT(submitted() == 8, kBound);
    server.terminate();  // SIGTERM

    QVERIFY(finished(*clients.back()));
    const QByteArray out = clients.back()->readAllStandardOutput();
    const int nl = static_cast<int>(out.lastIndexOf('\n'));
    QCOMPARE(out.mid(nl + 1).toInt(), 503);
    const json e = json::parse(out.left(nl).toStdString(), nullptr, false);
    QVERIFY2(e.contains("error"), out.constData());
    QCOMPARE(e["error"]["code"].get<std::string>(), std::string("shutting_down"));

    QVERIFY(finished(stream));
    const json s = json::parse(stream.readAllStandardOutput().toStdString(), nullptr, false);
    QVERIFY2(s.is_object(), stream.readAllStandardError().constData());
    QCOMPARE(s["status"].get<int>(), 200);
    QVERIFY2(s["error"].is_object() && s["error"]["code"] == "shutting_down", s.dump().c_str());
    QVERIFY2(s["done"].get<bool>(), s.dump().c_str());

    for (auto& c : clients) QVERIFY(finished(*c));
    QVERIFY(finished(server));
    const QByteArray err = server.readAllStandardError();
    QVERIFY2(server.exitStatus() == QProcess::NormalExit && server.exitCode() == 0, err.constData());
  }

  void aKeylessNonLoopbackHostIsRefused() {
    QProcess refused;
    QByteArray err;
    QCOMPARE(startServeFp32(refused, {"--host", "0.0.0.0"}, &err), 0);  // it ended: the refusal in `err`
    refused.waitForFinished(-1);
    QVERIFY(refused.exitCode() != 0);
    QVERIFY2(err.contains("'0.0.0.0' is not a loopback address") && err.contains("--api-key") &&
                 err.contains("--allow-no-key"),
             err.constData());

    QProcess open;
    QByteArray line;
    const int port = startServeFp32(open, {"--host", "0.0.0.0", "--allow-no-key"}, &line);
    QVERIFY2(port > 0, line.constData());
    QVERIFY2(line.startsWith("zipmoe: listening on http://0.0.0.0:" + QByteArray::number(port) + " "), line.constData());
    QCOMPARE(curl({url("/health", port)}).code, 200);
    QCOMPARE(curl({"-H", "Host: my-pc.lan", url("/health", port)}).code, 200);  // every interface: any name
    open.terminate();
    QVERIFY(finished(open));
    const QByteArray log = open.readAllStandardError();
    QVERIFY2(log.contains("listening on every interface (0.0.0.0)") && log.contains("http://127.0.0.1:"), log.constData());
    QCOMPARE(open.exitCode(), 0);
  }
};

QTEST_GUILESS_MAIN(TestServeSafety)
#include "test_serve_safety.moc"
