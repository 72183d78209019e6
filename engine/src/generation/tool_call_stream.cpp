// ToolCallStream (see tool_call_stream.h).
#include "generation/tool_call_stream.h"

#include <random>

#include "generation/token_constraint.h"

namespace zipmoe {
namespace {

constexpr std::string_view kTrigger = constrain::kToolCallTrigger;
constexpr std::string_view kNameOpen = "\n{\"name\": \"";
constexpr std::string_view kArgsOpen = "\", \"arguments\": ";

// The length of the longest suffix of `text` that is a proper prefix of `word`.
size_t heldBack(std::string_view text, std::string_view word) {
  for (size_t n = std::min(text.size(), word.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == word.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::string newToolCallId() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return id;
}

std::string ToolCallStream::push(std::string_view text, std::vector<ToolCallEvent>& events) {
  pending_.append(text);
  std::string shown = state_ == State::Text ? consumeText(events) : std::string();
  if (state_ != State::Text) consumeCalls(events);
  return shown;
}

std::string ToolCallStream::consumeText(std::vector<ToolCallEvent>& events) {
  const size_t at = pending_.find(kTrigger);
  if (at == std::string::npos) {
    const size_t keep = heldBack(pending_, kTrigger);
    std::string shown = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return shown;
  }
  std::string shown = pending_.substr(0, at);
  pending_.erase(0, at + kTrigger.size());
  state_ = State::Header;
  consumeCalls(events);
  return shown;
}

void ToolCallStream::consumeCalls(std::vector<ToolCallEvent>& events) {
  for (bool progress = true; progress;) {
    progress = false;
    switch (state_) {
      case State::Text: return;
      case State::Header: {
        const size_t end = pending_.find(kArgsOpen);
        if (end == std::string::npos) return;
        const size_t nameAt = pending_.rfind(kNameOpen, end);
        const size_t from = nameAt == std::string::npos ? 0 : nameAt + kNameOpen.size();
        ToolCall call;
        call.id = newToolCallId();
        call.name = pending_.substr(from, end - from);
        calls_.push_back(call);
        events.push_back({static_cast<int>(calls_.size()) - 1, true, call.id, call.name, {}});
        pending_.erase(0, end + kArgsOpen.size());
        state_ = State::Arguments;
        depth_ = 0;
        inString_ = escaped_ = argsStarted_ = false;
        progress = true;
        break;
      }
      case State::Arguments: {
        size_t i = 0;
        bool closed = false;
        for (; i < pending_.size() && !closed; ++i) {
          const char c = pending_[i];
          if (inString_) {
            if (escaped_) escaped_ = false;
            else if (c == '\\') escaped_ = true;
            else if (c == '"') inString_ = false;
          } else if (c == '"') {
            inString_ = true;
          } else if (c == '{' || c == '[') {
            ++depth_;
          } else if (c == '}' || c == ']') {
            --depth_;
          }
          argsStarted_ = argsStarted_ || c != ' ';
          closed = argsStarted_ && depth_ == 0 && !inString_ && (c == '}' || c == ']' || c == '"');
        }
        if (i > 0) {
          const std::string piece = pending_.substr(0, i);
          calls_.back().argumentsJson += piece;
          events.push_back({static_cast<int>(calls_.size()) - 1, false, {}, {}, piece});
          pending_.erase(0, i);
        }
        if (!closed) return;
        state_ = State::Between;
        progress = true;
        break;
      }
      case State::Between: {
        const size_t at = pending_.find(kTrigger);
        if (at == std::string::npos) {
          pending_.erase(0, pending_.size() - heldBack(pending_, kTrigger));
          return;
        }
        pending_.erase(0, at + kTrigger.size());
        state_ = State::Header;
        progress = true;
        break;
      }
    }
  }
}

std::string ToolCallStream::finish() {
  if (state_ == State::Text) {
    std::string rest = std::move(pending_);
    pending_.clear();
    return rest;
  }
  // A call cut short (the token limit) is not a call.
  if (state_ == State::Arguments && !calls_.empty()) calls_.pop_back();
  pending_.clear();
  return {};
}

}  // namespace zipmoe
