// generate(): the token loop around MoeModel::forward, with streaming text and stop conditions.
//
// Prefill runs the whole prompt as one forward step; each later step feeds the one sampled token.
// After every sample the token goes through a StreamingDecoder (only complete UTF-8 comes out; the
// EOS token is not decoded) and then through StopStringFilter, which holds back any tail of the text
// that could still grow into a stop string and cuts the text at the first stop string. Checks, in
// order, after each token: callback refused → "stopped"; stop string → "stop_string"; EOS → "eos";
// max tokens → "max_tokens"; no room left in the context window → "context_window"; stop flag →
// "stopped" (the flag is also checked before the prefill). On every normal end the held-back text and
// the decoder's remainder are flushed, so the text equals decode(tokens without EOS, skip special)
// unless a stop string or the callback cut it. The sequence is removed from the model by a guard, so
// also when forward() or the callback throws.
#include "zipmoe/generator.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "text/stop_string_filter.h"
#include "zipmoe/error.h"

namespace zipmoe {
namespace {

using Clock = std::chrono::steady_clock;

double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class SequenceGuard {
 public:
  explicit SequenceGuard(MoeModel& model) : model_(model), seq_(model.addSequence()) {}
  ~SequenceGuard() {
    try {
      model_.removeSequence(seq_);
    } catch (...) {  // a destructor must not throw; the sequence is gone with the model anyway
    }
  }
  SequenceGuard(const SequenceGuard&) = delete;
  SequenceGuard& operator=(const SequenceGuard&) = delete;
  MoeModel::SequenceId id() const { return seq_; }

 private:
  MoeModel& model_;
  MoeModel::SequenceId seq_;
};

}  // namespace

GenerationStats generate(MoeModel& model, const Tokenizer& tokenizer, const std::vector<int32_t>& promptIds,
                         const SamplingParams& params, const TextCallback& onText, const std::atomic<bool>* stop) {
  validate(params);
  if (promptIds.empty()) throw Error("generate: the prompt is empty (0 tokens); at least 1 token is needed");
  SequenceGuard seq(model);
  std::vector<int32_t> sequenceTokens;
  return continueSequence(model, seq.id(), sequenceTokens, tokenizer, promptIds, params, onText, stop);
}

GenerationStats continueSequence(MoeModel& model, MoeModel::SequenceId seq, std::vector<int32_t>& sequenceTokens,
                                 const Tokenizer& tokenizer, const std::vector<int32_t>& promptIds,
                                 const SamplingParams& params, const TextCallback& onText, const std::atomic<bool>* stop) {
  const auto start = Clock::now();
  validate(params);
  const auto contextWindow = static_cast<size_t>(std::max(0, model.config().maxPositionEmbeddings));
  if (promptIds.empty()) throw Error("generate: the prompt is empty (0 tokens); at least 1 token is needed");
  if (contextWindow > 0 && promptIds.size() >= contextWindow)
    throw Error("generate: the prompt has " + std::to_string(promptIds.size()) +
                " tokens but the context window (max_position_embeddings) is " + std::to_string(contextWindow) +
                " tokens; the prompt must be shorter than " + std::to_string(contextWindow) +
                " tokens to leave room for a reply");
  if (sequenceTokens.size() >= promptIds.size() ||
      !std::equal(sequenceTokens.begin(), sequenceTokens.end(), promptIds.begin()) ||
      model.sequenceLength(seq) != static_cast<int64_t>(sequenceTokens.size()))
    throw Error("generate: the sequence's " + std::to_string(sequenceTokens.size()) +
                " cached tokens are not a proper prefix of the " + std::to_string(promptIds.size()) + "-token prompt");

  GenerationStats stats;
  stats.promptTokens = static_cast<int>(promptIds.size());
  const auto stopRequested = [stop] { return stop != nullptr && stop->load(); };
  if (stopRequested()) {
    stats.stopReason = "stopped";
    return stats;
  }

  Sampler sampler(params);
  StreamingDecoder decoder(tokenizer, /*skipSpecialTokens=*/true);
  StopStringFilter stops(params.stopStrings);
  const auto& eos = model.config().eosTokenIds;
  std::vector<int32_t> history = promptIds;

  bool callbackOpen = true;
  const auto emit = [&](const std::string& text) {
    if (text.empty() || !callbackOpen) return;
    stats.text += text;
    if (onText && !onText(text)) callbackOpen = false;
  };

  const std::vector<int32_t> prefill(promptIds.begin() + static_cast<std::ptrdiff_t>(sequenceTokens.size()), promptIds.end());
  std::vector<float> logits = std::move(model.forward({MoeModel::Step{seq, prefill}}).at(0));
  sequenceTokens = promptIds;
  Clock::time_point firstAt{}, lastAt{};
  bool hit = false;
  for (;;) {
    const int32_t token = sampler.sample(logits, history);
    stats.tokens.push_back(token);
    const bool isEos = std::find(eos.begin(), eos.end(), token) != eos.end();
    const std::string text = stops.push(isEos ? std::string() : decoder.push(token), hit);
    lastAt = Clock::now();
    if (stats.tokens.size() == 1) {
      firstAt = lastAt;
      stats.timeToFirstTokenMs = msBetween(start, firstAt);
    }
    emit(text);
    if (!callbackOpen) {
      stats.stopReason = "stopped";
      break;
    }
    if (hit) {
      stats.stopReason = "stop_string";
      break;
    }
    if (isEos) {
      stats.stopReason = "eos";
    } else if (static_cast<int>(stats.tokens.size()) >= params.maxTokens) {
      stats.stopReason = "max_tokens";
    } else if (contextWindow > 0 && history.size() + 1 > contextWindow) {
      stats.stopReason = "context_window";
    } else if (stopRequested()) {
      stats.stopReason = "stopped";
    }
    if (!stats.stopReason.empty()) {
      // Flush: the decoder's remainder, then whatever was held back for a stop string.
      const std::string rest = stops.push(decoder.finish(), hit);
      emit(rest);
      if (hit) {
        stats.stopReason = "stop_string";
      } else {
        emit(stops.release());
      }
      break;
    }
    history.push_back(token);
    logits = std::move(model.forward({MoeModel::Step{seq, {token}}}).at(0));
    stats.weightBytesPerToken = model.lastForwardWeightBytes();
    sequenceTokens.push_back(token);
  }
  stats.generatedTokens = static_cast<int>(stats.tokens.size());
  if (stats.tokens.size() > 1)
    stats.timePerOutputTokenMs = msBetween(firstAt, lastAt) / static_cast<double>(stats.tokens.size() - 1);
  return stats;
}

}  // namespace zipmoe
