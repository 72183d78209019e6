// Helpers for tests that run `zipmoe serve` as its own process on the demo model and speak to it with
// real clients: start it on a free loopback port (--port 0; it prints the URL, the port is read from
// it), and curl with the status, the body and the response headers. Thread-safety: test thread only.
// Cost: a process per call.
#pragma once

#include <QProcess>
#include <QStringList>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace zipmoe::testing {

inline std::filesystem::path demoModelDir() { return std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model"; }
inline QString serveScript(const QString& name) { return QString(ZIPMOE_SOURCE_DIR) + "/tests/app/serve/" + name; }

struct HttpReply {
  int code = 0;         // HTTP status (0: no reply)
  std::string body;
  std::string headers;  // the response's header lines, lower case
};

// curl ARGS… → status, body and headers (curl -D - writes the headers before the body; the status
// comes last, after a newline).
inline HttpReply curlReply(QStringList args) {
  QProcess p;
  p.start("curl", QStringList{"-sS", "--max-time", "600", "-D", "-", "-w", "\n%{http_code}"} + args);
  if (!p.waitForFinished(-1)) return {};
  const std::string out = p.readAllStandardOutput().toStdString();
  const size_t nl = out.rfind('\n');
  if (nl == std::string::npos) return {};
  HttpReply r;
  r.code = std::atoi(out.substr(nl + 1).c_str());
  const std::string all = out.substr(0, nl);
  const size_t end = all.find("\r\n\r\n");
  r.headers = all.substr(0, end);
  for (char& c : r.headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  r.body = end == std::string::npos ? std::string() : all.substr(end + 4);
  return r;
}

// Starts `zipmoe serve` on the demo model (fp32, a free port) with `extra` options and returns the
// port it printed once it listens, 0 when it ended first (its stderr then in `firstLine`).
inline int startServe(QProcess& process, const QStringList& extra, QByteArray* firstLine = nullptr) {
  process.setProcessChannelMode(QProcess::SeparateChannels);
  process.start(ZIPMOE_CLI_PATH, QStringList{"serve", QString::fromStdString(demoModelDir().string()), "--port", "0",
                                             "--dtype", "fp32"} + extra);
  if (!process.waitForStarted(-1)) return 0;
  QByteArray out;
  while (!out.contains('\n')) {
    if (process.state() != QProcess::Running) {
      if (firstLine) *firstLine = process.readAllStandardError();
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
