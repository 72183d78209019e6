// Greedy generation requests for the scheduler's suites (the demo model, replies compared token for
// token): a completion of `prompt`, or a chat of `messages`, each of exactly `maxTokens` at most.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "zipmoe/serve/openai_request.h"

namespace zipmoe::testing {

inline GenerationRequest greedyRequest(Endpoint endpoint, int maxTokens) {
  GenerationRequest r;
  r.endpoint = endpoint;
  r.sampling.temperature = 0;
  r.sampling.maxTokens = maxTokens;
  r.maxTokensGiven = true;
  return r;
}

inline GenerationRequest completion(const std::string& prompt, int maxTokens) {
  GenerationRequest r = greedyRequest(Endpoint::Completions, maxTokens);
  r.prompt = prompt;
  return r;
}

inline GenerationRequest chat(std::vector<ChatMessage> messages, int maxTokens) {
  GenerationRequest r = greedyRequest(Endpoint::ChatCompletions, maxTokens);
  r.messages = std::move(messages);
  return r;
}

}  // namespace zipmoe::testing
