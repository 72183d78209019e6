// The server tests' shared pieces: `zipmoe serve` started as its own process on the demo model and
// spoken to with curl. startServer waits for the "listening on" line and returns the port it names;
// curl returns the status, the content type and the body.
// Thread-safety: the test's thread. Cost: a process per call.
#pragma once

#include <QProcess>
#include <QStringList>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace zipmoe::testing {

inline std::filesystem::path demoModel() { return std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model"; }

struct HttpReply {
  int code = 0;  // HTTP status (0: curl could not run)
  std::string contentType;
  std::string body;
};

// curl ARGS… (-sS with a generous timeout is added).
inline HttpReply curl(QStringList args) {
  QProcess p;
  args = QStringList{"-sS", "--max-time", "600", "-w", "\n%{content_type}\n%{http_code}"} + args;
  p.start("curl", args);
  if (!p.waitForFinished(-1)) return {};
  const std::string out = p.readAllStandardOutput().toStdString();
  const size_t codeLine = out.rfind('\n');
  if (codeLine == std::string::npos || codeLine == 0) return {};
  const size_t typeLine = out.rfind('\n', codeLine - 1);
  if (typeLine == std::string::npos) return {};
  HttpReply r;
  r.body = out.substr(0, typeLine);
  r.contentType = out.substr(typeLine + 1, codeLine - typeLine - 1);
  r.code = std::atoi(out.substr(codeLine + 1).c_str());
  return r;
}

// Starts `zipmoe serve MODEL --port 0 ARGS…` (MODEL: the demo model unless given) and returns the port it printed once it listens (0 when
// it ended first, or bound another address than loopback's: a warning says why).
inline int startServer(QProcess& process, const QStringList& args, const std::filesystem::path& model = demoModel()) {
  process.setProcessChannelMode(QProcess::SeparateChannels);
  process.start(ZIPMOE_CLI_PATH, QStringList{"serve", QString::fromStdString(model.string()), "--port", "0"} + args);
  if (!process.waitForStarted(-1)) return 0;
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
  if (!out.contains("http://127.0.0.1:")) {
    qWarning("does not bind loopback by default: %s", out.constData());
    return 0;
  }
  return out.mid(colon + 1, out.indexOf(' ', colon) - colon - 1).toInt();
}

}  // namespace zipmoe::testing
