// LocalServer — the app's "Local server": the loaded model served over the OpenAI-compatible API on
// loopback (zipmoe/serve/openai_server.h) with a key generated for this run, while the app keeps chatting.
//
// The HTTP requests go to the engine's generation core (Engine::scheduler()), the same one the
// app's own chat posts its turns to: they are batched together, rendered, fitted to the context and
// stopped by the same code, and every request — the app's and the clients' — runs on the same
// expert runtime, whose trace the schedule page (Gantt chart) drains. While it serves, the app's
// budget is the whole memory of serving (Engine::serveWithinBudget): the KV caches and activations
// of every request, the clients' and the app's, count in it and the experts get the rest, so no
// client can take memory beyond what the user chose; stopping gives the experts the whole budget
// back. Owned by the EngineWorker, on its thread. Thread-safety: one thread (the worker's). Cost: the HTTP server's threads.
#pragma once

#include <memory>
#include <string>

namespace zipmoe {
class Engine;
class OpenAiServer;
}  // namespace zipmoe

namespace zipmoe::app {

class LocalServer {
 public:
  // Serves `engine` on 127.0.0.1:`port`, or on a free port when that one is taken (port 0: always a
  // free one). Throws zipmoe::Error when it cannot listen or the budget cannot hold serving's
  // activations beside the experts' minimum. REQUIRES: the engine outlives the server
  // and no one else drives its model while the server runs.
  LocalServer(Engine& engine, int port, std::string modelId);
  ~LocalServer();  // stops serving (the core goes on with the app's chat)
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  std::string url() const;  // "http://127.0.0.1:PORT/v1"
  const std::string& apiKey() const { return key_; }
  const std::string& modelId() const { return modelId_; }

 private:
  Engine& engine_;
  std::string key_, modelId_;
  std::unique_ptr<OpenAiServer> server_;
  int port_ = 0;
};

}  // namespace zipmoe::app
