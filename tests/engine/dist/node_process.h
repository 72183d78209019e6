// A `zipmoe node` process for the distributed suites: started with the test token, its bound address
// read from its first line of output; SIGCONT, SIGTERM and reaped on destruction.
#pragma once

#include <QProcess>

#include <csignal>

#include "dist_fixture.h"

namespace zipmoe::testing {

// A `zipmoe node` process holding one member's experts of a placement file.
class NodeProcess {
 public:
  NodeProcess(const std::filesystem::path& store, const std::filesystem::path& placement, const std::string& member) {
    start({"node", QString::fromStdString(store.string()), "--listen", "127.0.0.1:0", "--experts-of",
           QString::fromStdString(placement.string()), "--member", QString::fromStdString(member)});
  }
  explicit NodeProcess(const QStringList& arguments) { start(arguments); }
  void start(const QStringList& arguments) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("ZIPMOE_NODE_TOKEN", QString::fromStdString(kTestToken));
    process_.setProcessEnvironment(env);
    process_.setProcessChannelMode(QProcess::SeparateChannels);
    process_.start(ZIPMOE_CLI_PATH, arguments);
    QByteArray out;
    while (!out.contains('\n')) {
      // Waits for the condition "it printed its address" (or ended); the bound is only a way out.
      if (!process_.waitForReadyRead(120000)) break;
      out += process_.readAllStandardOutput();
    }
    const QString line = QString::fromUtf8(out).trimmed();
    if (!line.startsWith("listening "))
      qFatal("zipmoe node did not start: %s %s", qPrintable(line), qPrintable(QString::fromUtf8(process_.readAllStandardError())));
    address_ = line.mid(10).toStdString();
  }
  ~NodeProcess() {
    if (process_.state() != QProcess::NotRunning) {
      ::kill(static_cast<pid_t>(process_.processId()), SIGCONT);
      process_.terminate();
      if (!process_.waitForFinished(60000)) process_.kill();
      process_.waitForFinished();
    }
  }
  const std::string& address() const { return address_; }
  void signal(int sig) { ::kill(static_cast<pid_t>(process_.processId()), sig); }
  void killAndReap() {
    process_.kill();
    process_.waitForFinished();
  }

 private:
  QProcess process_;
  std::string address_;
};

}  // namespace zipmoe::testing
