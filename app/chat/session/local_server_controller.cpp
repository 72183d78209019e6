#include "local_server_controller.h"

namespace zipmoe::app {

void LocalServerController::setEnabled(bool on) {
  if (busy_ || on == running_) return;
  busy_ = true;
  error_.clear();
  Q_EMIT changed();
  if (on) {
    Q_EMIT startRequested(kPort);
  } else {
    Q_EMIT stopRequested();
  }
}

void LocalServerController::onServerChanged(bool running, const QString& url, const QString& key, const QString& error) {
  running_ = running;
  busy_ = false;
  url_ = url;
  apiKey_ = key;
  error_ = error;
  Q_EMIT changed();
}

}  // namespace zipmoe::app
