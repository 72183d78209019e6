// LocalServer — the app's "Local server": the loaded model served over the OpenAI-compatible API on
// loopback (zipmoe/openai_server.h) with a key generated for this run, while the app keeps chatting.
//
// While it runs, the model belongs to the server's scheduler thread (the model is not re-entrant),
// so the app's own replies go through the same scheduler (reply()): they are batched with the
// server's requests, and every request — the app's and the clients' — runs on the same expert
// runtime, whose trace the schedule page (Gantt chart) drains. Owned by the EngineWorker, on its
// thread. Thread-safety: one thread (the worker's). Cost: the scheduler's and the server's threads.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zipmoe/chat_template.h"
#include "zipmoe/sampler.h"
#include "zipmoe/serve_scheduler.h"

namespace zipmoe {
class Engine;
class OpenAiServer;
}  // namespace zipmoe

namespace zipmoe::app {

class LocalServer {
 public:
  // Serves `engine` on 127.0.0.1:`port`, or on a free port when that one is taken (port 0: always a
  // free one). Throws zipmoe::Error when it cannot listen. REQUIRES: the engine outlives the server
  // and no one else drives its model while the server runs.
  LocalServer(Engine& engine, int port, std::string modelId);
  ~LocalServer();  // stops serving: open requests end with 503, their sequences are freed
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  std::string url() const;  // "http://127.0.0.1:PORT/v1"
  const std::string& apiKey() const { return key_; }
  const std::string& modelId() const { return modelId_; }

  // The app's own reply, through the scheduler: `onText` gets each piece (return false to stop);
  // `stop` is polled between pieces. Throws zipmoe::Error with the server's message on a failure.
  FinishInfo reply(const std::vector<ChatMessage>& messages, const SamplingParams& params,
                   const std::function<bool(std::string_view)>& onText, const std::atomic<bool>& stop);

 private:
  std::string key_, modelId_;
  std::unique_ptr<ServeScheduler> scheduler_;
  std::unique_ptr<OpenAiServer> server_;
  int port_ = 0;
};

}  // namespace zipmoe::app
