// LocalServerController — the settings page's "Local server" switch (App.localServer in QML).
//
// setEnabled(true) asks the engine worker to serve the loaded model on loopback (LocalServer); the
// worker answers with serverChanged, which this object turns into its properties: whether it runs,
// the URL clients point at, the key generated for this run, or why it could not start. Closing or
// replacing the model stops the server (the worker reports it). Thread-safety: GUI thread only.
// Cost: none here.
#pragma once

#include <QObject>
#include <QString>
#include <QtQml/qqmlregistration.h>

namespace zipmoe::app {

class LocalServerController : public QObject {
  Q_OBJECT
  QML_ELEMENT
  QML_UNCREATABLE("App.localServer")
  Q_PROPERTY(bool running READ running NOTIFY changed FINAL)
  Q_PROPERTY(bool busy READ busy NOTIFY changed FINAL)  // a start or stop is on its way
  Q_PROPERTY(QString url READ url NOTIFY changed FINAL)
  Q_PROPERTY(QString apiKey READ apiKey NOTIFY changed FINAL)
  Q_PROPERTY(QString error READ error NOTIFY changed FINAL)

 public:
  explicit LocalServerController(QObject* parent = nullptr) : QObject(parent) {}
  static constexpr int kPort = 8080;  // tried first; any free port when it is taken

  bool running() const { return running_; }
  bool busy() const { return busy_; }
  QString url() const { return url_; }
  QString apiKey() const { return apiKey_; }
  QString error() const { return error_; }

  Q_INVOKABLE void setEnabled(bool on);
  // From the worker (queued): the server's state after a start, a stop or a model change.
  void onServerChanged(bool running, const QString& url, const QString& key, const QString& error);

 Q_SIGNALS:
  void changed();
  void startRequested(int port);
  void stopRequested();

 private:
  bool running_ = false, busy_ = false;
  QString url_, apiKey_, error_;
};

}  // namespace zipmoe::app
