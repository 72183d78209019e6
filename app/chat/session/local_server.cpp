#include "local_server.h"

#include "zipmoe/engine.h"
#include "zipmoe/base/error.h"
#include "zipmoe/serve/openai_server.h"

namespace zipmoe::app {

LocalServer::LocalServer(Engine& engine, int port, std::string modelId)
    : engine_(engine), key_(generateApiKey()), modelId_(std::move(modelId)) {
  ServerOptions ho;
  ho.host = "127.0.0.1";
  ho.apiKey = key_;
  ho.modelId = modelId_;
  ho.port = port;
  ServeScheduler& core = engine.scheduler();
  // What the clients' requests hold (KV caches, activations) counts in the app's budget from now on.
  engine.serveWithinBudget(true);
  try {
    server_ = std::make_unique<OpenAiServer>(core, ho);
    try {
      port_ = server_->start();
    } catch (const Error&) {
      if (port == 0) throw;
      ho.port = 0;  // the usual port is taken: any free one
      server_ = std::make_unique<OpenAiServer>(core, ho);
      port_ = server_->start();
    }
  } catch (...) {
    engine.serveWithinBudget(false);
    throw;
  }
}

LocalServer::~LocalServer() {
  server_->stop();
  try {
    engine_.serveWithinBudget(false);  // the experts get the whole budget back
  } catch (const std::exception&) {
    // Going back to no split cannot fail for the budget; a stopped core has nothing to give back.
  }
}

std::string LocalServer::url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

}  // namespace zipmoe::app
