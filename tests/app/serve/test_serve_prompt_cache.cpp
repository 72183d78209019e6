// `zipmoe serve --prompt-cache DIR` across a restart, with curl on the demo model (fp32): a
// conversation's first turn, the server stopped with SIGTERM and started again on the same
// directory, then the next turn: usage.prompt_tokens_details.cached_tokens counts the tokens reused
// from the file, and the reply equals that of a server without the cache. A damaged file is skipped
// with a warning on stderr naming it; a directory that cannot be written stops the server at start
// with an error naming it.
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "serve_process.h"

using json = nlohmann::json;
using zipmoe::testing::curl;
using zipmoe::testing::HttpReply;

namespace {

json chatBody(const json& messages) {
  return {{"model", "demo-model"}, {"messages", messages}, {"max_tokens", 16}, {"temperature", 0}};
}

// POSTs the conversation; returns the response body (null on a failure, with a warning).
json post(int port, const json& messages) {
  const HttpReply r = curl({"-H", "Content-Type: application/json", "--data-binary",
                            QString::fromStdString(chatBody(messages).dump()),
                            QString("http://127.0.0.1:%1/v1/chat/completions").arg(port)});
  if (r.code != 200) {
    qWarning("HTTP %d: %s", r.code, r.body.c_str());
    return json();
  }
  return json::parse(r.body, nullptr, false);
}

// SIGTERM, then its exit; returns its stderr.
QString stop(QProcess& server) {
  server.terminate();
  if (!server.waitForFinished(600000)) {
    server.kill();
    server.waitForFinished(-1);
  }
  return QString::fromUtf8(server.readAllStandardError());
}

}  // namespace

class TestServePromptCache : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    if (QStandardPaths::findExecutable("curl").isEmpty()) QSKIP("curl is not installed (scripts/deps.sh)");
    if (!std::filesystem::exists(zipmoe::testing::demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
  }

  void theNextTurnAfterARestartReusesTheConversation() {
    QTemporaryDir tmp;
    const QString dir = tmp.path() + "/cache";
    const QStringList cached = {"--dtype", "fp32", "--prompt-cache", dir, "--prompt-cache-size", "64M"};
    json messages = json::array({json{{"role", "system"}, {"content", "You are a herald of Verona."}},
                                 json{{"role", "user"}, {"content", "What news from Mantua?"}}});
    {
      QProcess server;
      const int port = zipmoe::testing::startServer(server, cached);
      QVERIFY(port > 0);
      const json first = post(port, messages);
      QVERIFY(first.is_object());
      QCOMPARE(first["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
      messages.push_back({{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
      messages.push_back({{"role", "user"}, {"content", "And of my lady?"}});
      const QString err = stop(server);
      QVERIFY2(server.exitStatus() == QProcess::NormalExit && server.exitCode() == 0, qPrintable(err));
    }
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.toStdString())) files += e.path().extension() == ".kv";
    QCOMPARE(files, 1);

    json second;
    {
      QProcess server;
      const int port = zipmoe::testing::startServer(server, cached);
      QVERIFY(port > 0);
      second = post(port, messages);
      // The file's hit shows in /metrics.
      const std::string scrape = zipmoe::testing::curl({QString("http://127.0.0.1:%1/metrics").arg(port)}).body;
      QVERIFY2(scrape.find("\nzipmoe_prompt_cache_hits_total 1\n") != std::string::npos, scrape.c_str());
      stop(server);
    }
    QVERIFY(second.is_object());
    const int reused = second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    QVERIFY2(reused > 0, second.dump().c_str());
    QVERIFY(reused < second["usage"]["prompt_tokens"].get<int>());

    json plain;
    {
      QProcess server;
      const int port = zipmoe::testing::startServer(server, {"--dtype", "fp32"});
      QVERIFY(port > 0);
      plain = post(port, messages);
      stop(server);
    }
    QVERIFY(plain.is_object());
    QCOMPARE(plain["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
    QCOMPARE(second["choices"][0]["message"]["content"].get<std::string>(),
             plain["choices"][0]["message"]["content"].get<std::string>());
    QCOMPARE(second["usage"]["completion_tokens"].get<int>(), plain["usage"]["completion_tokens"].get<int>());
  }

  // A file that is not a cache file is skipped with a warning naming it; the server serves.
  void aDamagedFileIsSkippedWithAWarning() {
    QTemporaryDir tmp;
    const std::filesystem::path dir = tmp.path().toStdString() + "/cache";
    std::filesystem::create_directories(dir);
    const std::filesystem::path bad = dir / "0123456789abcdef.kv";
    std::ofstream(bad, std::ios::binary) << "ZIPMOEKV but cut short";
    QProcess server;
    const int port = zipmoe::testing::startServer(server, {"--dtype", "fp32", "--prompt-cache", QString::fromStdString(dir.string())});
    QVERIFY(port > 0);
    QVERIFY(post(port, json::array({json{{"role", "user"}, {"content", "Hail!"}}})).is_object());
    const QString err = stop(server);
    QVERIFY2(err.contains(QString::fromStdString(bad.string())) && err.contains("skipped"), qPrintable(err));
    QVERIFY(std::filesystem::exists(bad));
  }

  void aDirectoryThatCannotBeWrittenStopsTheStart() {
    QTemporaryDir tmp;
    const QString file = tmp.path() + "/file";
    std::ofstream(file.toStdString()) << "x";
    const QString dir = file + "/cache";
    QProcess server;
    QByteArray out;
    QCOMPARE(zipmoe::testing::startServer(server, {"--prompt-cache", dir}, zipmoe::testing::demoModel(), &out), 0);
    server.waitForFinished(-1);
    QVERIFY(server.exitCode() != 0);
    QVERIFY2(out.contains(dir.toUtf8()), out.constData());
  }
};

QTEST_GUILESS_MAIN(TestServePromptCache)
#include "test_serve_prompt_cache.moc"
