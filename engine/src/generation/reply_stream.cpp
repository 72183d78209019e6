// ReplyStream (see reply_stream.h).
#include "generation/reply_stream.h"

#include <algorithm>
#include <limits>

namespace zipmoe {

ReplyStream::ReplyStream(const Tokenizer& tokenizer, const SamplingParams& params, std::vector<int32_t> history,
                         std::span<const int32_t> eos, int context, ReplyConstraint constraint)
    : params_(params), sampler_(params_), decoder_(tokenizer, /*skipSpecialTokens=*/true), stops_(params_.stopStrings),
      history_(std::move(history)), eos_(eos), context_(static_cast<size_t>(std::max(0, context))) {
  if (constraint.spec) {
    constraint_.emplace(constraint.spec, constraint.index, eos_);
    if (constraint.spec->toolCalls) calls_.emplace();
  }
}

// Samples from the constraint's mask; a token the exact check refuses (it would leave the reply
// unable to finish within its limit) is taken out and the next one sampled.
int32_t ReplyStream::sampleConstrained(std::span<const float> logits) {
  constexpr float kOff = -std::numeric_limits<float>::infinity();
  size_t remaining = static_cast<size_t>(params_.maxTokens) - std::min(tokens_.size(), static_cast<size_t>(params_.maxTokens));
  if (context_ > 0) remaining = std::min(remaining, context_ - std::min(context_, history_.size()));
  const int left = static_cast<int>(std::min<size_t>(remaining, 1u << 30));
  masked_.assign(logits.begin(), logits.end());
  constraint_->mask(masked_, left);
  for (int tries = 0;; ++tries) {
    const int32_t id = sampler_.sample(masked_, history_);
    if (constraint_->allows(id, left)) return id;
    const bool exhausted = id < 0 || static_cast<size_t>(id) >= masked_.size() || masked_[static_cast<size_t>(id)] == kOff;
    if (exhausted) {  // nothing fits in what the limit leaves: the reply ends as at its limit
      outOfRoom_ = true;
      return eos_.empty() ? id : eos_.front();
    }
    masked_[static_cast<size_t>(id)] = kOff;
    if (tries == 16) constraint_->mask(masked_, left, /*exactEnd=*/true);
  }
}

std::string ReplyStream::splitCalls(std::string text, std::vector<ToolCallEvent>& events) {
  return calls_ ? calls_->push(text, events) : text;
}

ReplyStream::Token ReplyStream::next(std::span<const float> logits, bool stopRequested) {
  Token out;
  out.id = constraint_ ? sampleConstrained(logits) : sampler_.sample(logits, history_);
  if (constraint_) constraint_->accept(out.id);
  tokens_.push_back(out.id);
  const bool isEos = std::find(eos_.begin(), eos_.end(), out.id) != eos_.end();
  bool hit = false;
  out.text = stops_.push(isEos ? std::string() : splitCalls(decoder_.push(out.id), out.calls), hit);
  if (hit) {
    end_ = StopReason::StopString;
  } else if (outOfRoom_) {
    end_ = StopReason::MaxTokens;
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
    out.text += flush(&out.calls);
  }
  if (end_ != StopReason::None && end_ != StopReason::Stopped && calls_ && !calls_->calls().empty())
    end_ = StopReason::ToolCalls;
  out.end = end_;
  return out;
}

std::string ReplyStream::stop() {
  end_ = StopReason::Stopped;
  return flush(nullptr);
}

// The decoder's remainder, then whatever was held back for a stop string (which the remainder may
// still complete: the reply then ends on it).
std::string ReplyStream::flush(std::vector<ToolCallEvent>* events) {
  bool hit = false;
  std::vector<ToolCallEvent> dropped;
  std::string rest = splitCalls(decoder_.finish(), events ? *events : dropped);
  if (calls_) rest += calls_->finish();
  std::string text = stops_.push(rest, hit);
  if (hit) {
    end_ = StopReason::StopString;
  } else {
    text += stops_.release();
  }
  return text;
}

}  // namespace zipmoe
