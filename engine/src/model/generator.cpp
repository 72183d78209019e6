// generate(): the token loop around MoeModel::forward, with streaming text and stop conditions.
//
// Prefill runs the whole prompt as one forward step; each later step feeds the one sampled token.
// Every token goes through a ReplyStream (generation/reply_stream.h): sampling, streaming decoding,
// stop strings and the stop rules, shared with the serving scheduler. A callback that refuses
// ends the reply as "stopped" at once; the stop flag is checked before the prefill and after every
// token. The sequence is removed from the model by a guard, so also when forward() or the callback
// throws.
#include "zipmoe/model/generator.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "generation/reply_stream.h"
#include "zipmoe/base/error.h"

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
  const auto start = Clock::now();
  const auto contextWindow = static_cast<size_t>(std::max(0, model.config().maxPositionEmbeddings));
  if (contextWindow > 0 && promptIds.size() >= contextWindow)
    throw Error("generate: the prompt has " + std::to_string(promptIds.size()) +
                " tokens but the context window (max_position_embeddings) is " + std::to_string(contextWindow) +
                " tokens; the prompt must be shorter than " + std::to_string(contextWindow) +
                " tokens to leave room for a reply");
  SequenceGuard seq(model);

  GenerationStats stats;
  stats.promptTokens = static_cast<int>(promptIds.size());
  stats.prefilledTokens = stats.promptTokens;
  const auto stopRequested = [stop] { return stop != nullptr && stop->load(); };
  if (stopRequested()) {
    stats.stopReason = StopReason::Stopped;
    return stats;
  }

  ReplyStream reply(tokenizer, params, promptIds, model.config().eosTokenIds, static_cast<int>(contextWindow));
  std::vector<float> logits = std::move(model.forward({MoeModel::Step{seq.id(), promptIds}}).at(0));
  Clock::time_point firstAt{}, lastAt{};
  for (;;) {
    const ReplyStream::Token t = reply.next(logits, stopRequested());
    lastAt = Clock::now();
    if (reply.tokens().size() == 1) {
      firstAt = lastAt;
      stats.timeToFirstTokenMs = msBetween(start, firstAt);
    }
    if (!t.text.empty()) {
      stats.text += t.text;
      if (onText && !onText(t.text)) {
        stats.stopReason = StopReason::Stopped;
        break;
      }
    }
    if (t.end != StopReason::None) {
      stats.stopReason = t.end;
      break;
    }
    logits = std::move(model.forward({MoeModel::Step{seq.id(), {t.id}}}).at(0));
    stats.weightBytesPerToken = model.lastForwardWeightBytes();
  }
  stats.tokens = reply.tokens();
  stats.generatedTokens = static_cast<int>(stats.tokens.size());
  if (stats.tokens.size() > 1)
    stats.timePerOutputTokenMs = msBetween(firstAt, lastAt) / static_cast<double>(stats.tokens.size() - 1);
  return stats;
}

}  // namespace zipmoe
