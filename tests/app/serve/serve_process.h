// The server tests' shared pieces: `zipmoe serve` started as its own process on a free loopback port
// (--port 0; it prints the URL, the port is read from it) and spoken to with curl. startServer waits
// for the "listening on" line and returns the port it names; curl returns the status, the response
// headers, the content type and the body.
// Thread-safety: the test's thread. Cost: a process per call.
#pragma once

#include <QProcess>
#include <QStringList>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace zipmoe::testing {

inline std::filesystem::path demoModel() { return std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model"; }
inline QString serveScript(const QString& name) { return QString(ZIPMOE_SOURCE_DIR) + "/tests/app/serve/" + name; }

struct HttpReply {
  int code = 0;             // HTTP status (0: curl could not run, or no reply)
  std::string contentType;  // as sent (its case kept)
  std::string headers;      // the response's header lines, lower case
  std::string body;
};

// curl ARGS… (-sS with a generous timeout is added; curl -D - writes the headers before the body and
// -w the content type and the status after it).
inline HttpReply curl(QStringList args) {
  QProcess p;
  p.start("curl", QStringList{"-sS", "--max-time", "600", "-D", "-", "-w", "\n%{content_type}\n%{http_code}"} + args);
  if (!p.waitForFinished(-1)) return {};
  const std::string out = p.readAllStandardOutput().toStdString();
  const size_t codeLine = out.rfind('\n');
  if (codeLine == std::string::npos || codeLine == 0) return {};
  const size_t typeLine = out.rfind('\n', codeLine - 1);
  if (typeLine == std::string::npos) return {};
  HttpReply r;
  r.code = std::atoi(out.substr(codeLine + 1).c_str());
  r.contentType = out.substr(typeLine + 1, codeLine - typeLine - 1);
  const std::string all = out.substr(0, typeLine);
  const size_t end = all.find("\r\n\r\n");
  r.headers = all.substr(0, end);
  for (char& c : r.headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  r.body = end == std::string::npos ? std::string() : all.substr(end + 4);
  return r;
}

// A chat request to the demo model: one user message, greedy; streamed with include_usage.
inline nlohmann::json chatBody(const std::string& user, int maxTokens, bool stream) {
  nlohmann::json b = {{"model", "demo-model"},
                      {"messages", nlohmann::json::array({nlohmann::json{{"role", "user"}, {"content", user}}})},
                      {"max_tokens", maxTokens},
                      {"temperature", 0},
                      {"stream", stream}};
  if (stream) b["stream_options"] = {{"include_usage", true}};
  return b;
}

// python3 tests/app/serve/SCRIPT ARGS… (sse_client.py, anthropic_client.py, …) → its stdout (its
// stderr is shown when it fails).
inline std::string runClientScript(const QString& script, const QStringList& args) {
  QProcess p;
  p.start("python3", QStringList{serveScript(script)} + args);
  if (!p.waitForFinished(-1)) return {};
  if (p.exitCode() != 0) qWarning("%s: %s", qPrintable(script), p.readAllStandardError().constData());
  return p.readAllStandardOutput().toStdString();
}

// Starts `zipmoe serve MODEL --port 0 ARGS…` and returns the port it printed once it listens, 0 when
// it ended first. `firstLine` (optional) gets the line it printed, or its stderr when it ended.
inline int startServer(QProcess& process, const QStringList& args, const std::filesystem::path& model = demoModel(),
                       QByteArray* firstLine = nullptr) {
  process.setProcessChannelMode(QProcess::SeparateChannels);
  process.start(ZIPMOE_CLI_PATH, QStringList{"serve", QString::fromStdString(model.string()), "--port", "0"} + args);
  if (!process.waitForStarted(-1)) return 0;
  QByteArray out;
  while (!out.contains('\n')) {
    if (process.state() != QProcess::Running) {
      const QByteArray err = process.readAllStandardError();
      if (firstLine) *firstLine = err;
      else qWarning("zipmoe serve ended: %s", err.constData());
      return 0;
    }
    process.waitForReadyRead(1000);
    out += process.readAllStandardOutput();
  }
  if (firstLine) *firstLine = out.left(out.indexOf('\n'));
  const qsizetype colon = out.lastIndexOf(':', out.indexOf(" (model"));
  return out.mid(colon + 1, out.indexOf(' ', colon) - colon - 1).toInt();
}

}  // namespace zipmoe::testing
