#include "local_server.h"

#include "zipmoe/engine.h"
#include "zipmoe/error.h"
#include "zipmoe/openai_server.h"

namespace zipmoe::app {

LocalServer::LocalServer(Engine& engine, int port, std::string modelId)
    : key_(generateApiKey()), modelId_(std::move(modelId)) {
  ServeOptions so;
  so.maxBatch = 4;
  scheduler_ = std::make_unique<ServeScheduler>(engine.model(), engine.tokenizer(), engine.chatTemplate(),
                                                engine.runtime(), so);
  ServerOptions ho;
  ho.host = "127.0.0.1";
  ho.apiKey = key_;
  ho.modelId = modelId_;
  ho.port = port;
  server_ = std::make_unique<OpenAiServer>(*scheduler_, ho);
  try {
    port_ = server_->start();
  } catch (const Error&) {
    if (port == 0) throw;
    ho.port = 0;  // the usual port is taken: any free one
    server_ = std::make_unique<OpenAiServer>(*scheduler_, ho);
    port_ = server_->start();
  }
}

LocalServer::~LocalServer() {
  server_->stop();
  scheduler_->stop();
}

std::string LocalServer::url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

FinishInfo LocalServer::reply(const std::vector<ChatMessage>& messages, const SamplingParams& params,
                              const std::function<bool(std::string_view)>& onText, const std::atomic<bool>& stop) {
  GenerationRequest r;
  r.endpoint = Endpoint::ChatCompletions;
  r.model = modelId_;
  r.messages = messages;
  r.sampling = params;
  r.maxTokensGiven = true;
  std::shared_ptr<RequestTicket> ticket;
  try {
    ticket = scheduler_->submit(std::move(r));
  } catch (const ApiError& e) {
    throw Error(e.message());
  }
  std::vector<RequestTicket::Event> events;
  FinishInfo info;
  info.finishReason = "stopped";
  for (bool more = true; more;) {
    events.clear();
    more = ticket->wait(events, std::chrono::milliseconds(50));
    for (auto& e : events) {
      if (e.kind == RequestTicket::Event::Kind::Text) {
        if (!onText(e.text)) ticket->cancel();
      } else if (e.kind == RequestTicket::Event::Kind::Finished) {
        info = std::move(e.finish);
      } else if (e.error->status() != 499) {  // 499: our own cancel (stopped)
        throw Error(e.error->message());
      }
    }
    if (stop.load()) ticket->cancel();
  }
  return info;
}

}  // namespace zipmoe::app
