// What the HTTP server's suites share (test_serve_http.cpp, test_serve_anthropic.cpp): `zipmoe serve`
// started on the built-in demo model as its own process on a free loopback port, and curl run
// against it. Thread-safety: test thread only. Cost: a process start (the model loads in seconds).
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>
#include <QtGlobal>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace zipmoe::testing {

inline std::filesystem::path demoModel() { return std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model"; }

struct HttpReply {
  int code = 0;  // HTTP status (0: curl failed)
  std::string body;
};

// curl ARGS… → status and body (the status comes last on stdout, after a newline).
inline HttpReply runCurl(QStringList args) {
  QProcess p;
  args = QStringList{"-sS", "--max-time", "600", "-w", "\n%{http_code}"} + args;
  p.start("curl", args);
  if (!p.waitForFinished(-1)) return {};
  const std::string out = p.readAllStandardOutput().toStdString();
  const size_t nl = out.rfind('\n');
  HttpReply r;
  r.body = nl == std::string::npos ? std::string() : out.substr(0, nl);
  r.code = std::atoi(out.substr(nl == std::string::npos ? 0 : nl + 1).c_str());
  return r;
}

// Starts `zipmoe serve` on the demo model (fp32, a free loopback port) with `extra` options, and
// returns the port it printed once it listens (0 on a failure, with a warning saying why).
inline int startServe(QProcess& process, const QStringList& extra) {
  process.setProcessChannelMode(QProcess::SeparateChannels);
  process.start(ZIPMOE_CLI_PATH, QStringList{"serve", QString::fromStdString(demoModel().string()), "--port", "0",
                                             "--dtype", "fp32"} + extra);
  if (!process.waitForStarted(-1)) return 0;
  // The port comes on stdout once the server listens.
  QByteArray out;
  while (!out.contains('\n')) {
    if (process.state() != QProcess::Running) {
      qWarning("zipmoe serve ended: %s", process.readAllStandardError().constData());
      return 0;
    }
    process.waitForReadyRead(1000);
    out += process.readAllStandardOutput();
  }
  const qsizetype colon = out.lastIndexOf(':', out.indexOf(" (model"));
  if (!out.contains("http://127.0.0.1:")) qWarning("does not bind loopback by default: %s", out.constData());
  return out.contains("http://127.0.0.1:") ? out.mid(colon + 1, out.indexOf(' ', colon) - colon - 1).toInt() : 0;
}

}  // namespace zipmoe::testing
