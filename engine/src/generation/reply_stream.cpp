// ReplyStream (see reply_stream.h).
#include "generation/reply_stream.h"

#include <algorithm>

namespace zipmoe {

ReplyStream::ReplyStream(const Tokenizer& tokenizer, const SamplingParams& params, std::vector<int32_t> history,
                         std::span<const int32_t> eos, int context)
    : params_(params), sampler_(params_), decoder_(tokenizer, /*skipSpecialTokens=*/true), stops_(params_.stopStrings),
      history_(std::move(history)), eos_(eos), context_(static_cast<size_t>(std::max(0, context))) {}

ReplyStream::Token ReplyStream::next(std::span<const float> logits, bool stopRequested) {
  Token out;
  out.id = sampler_.sample(logits, history_);
  tokens_.push_back(out.id);
  const bool isEos = std::find(eos_.begin(), eos_.end(), out.id) != eos_.end();
  bool hit = false;
  out.text = stops_.push(isEos ? std::string() : decoder_.push(out.id), hit);
  if (hit) {
    end_ = StopReason::StopString;
  } else if (isEos) {
    end_ = StopReason::Eos;
  } else if (static_cast<int>(tokens_.size()) >= params_.maxTokens) {
    end_ = StopReason::MaxTokens;
  } else if (context_ > 0 && history_.size() + 1 > context_) {
    end_ = StopReason::ContextWindow;
  } else if (stopRequested) {
    end_ = StopReason::Stopped;
  }
  if (end_ == StopReason::None) {
    history_.push_back(out.id);
  } else if (end_ != StopReason::StopString) {
    out.text += flush();
  }
  out.end = end_;
  return out;
}

std::string ReplyStream::stop() {
  end_ = StopReason::Stopped;
  return flush();
}

// The decoder's remainder, then whatever was held back for a stop string (which the remainder may
// still complete: the reply then ends on it).
std::string ReplyStream::flush() {
  bool hit = false;
  std::string text = stops_.push(decoder_.finish(), hit);
  if (hit) {
    end_ = StopReason::StopString;
  } else {
    text += stops_.release();
  }
  return text;
}

}  // namespace zipmoe
