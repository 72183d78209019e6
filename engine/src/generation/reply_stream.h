// ReplyStream — one reply, token by token: the only place where the stop rules live. Given the
// logits after the sequence's last token it samples the next id (the request's own Sampler, with
// the sequence's ids for the repetition penalty), decodes it to text (a StreamingDecoder: only
// complete UTF-8 comes out, special tokens are skipped, the EOS token is never decoded), cuts the
// text at the first stop string (holding back any tail that may still grow into one), and says
// whether the reply ends there and why. Checked in this order after each token: a stop string,
// EOS, the token limit, the context window, then the caller's stop request. On every end but a stop
// string the held-back text and the decoder's remainder are flushed, so that the streamed text
// equals decode(tokens without EOS, skip special) unless a stop string cut it.
// generate()/ChatSession and the serving scheduler both drive their replies through it, so a
// request's tokens and text do not depend on which door it came through or what it was batched with.
// Thread-safety: one thread. Cost: the sampler's O(vocab log k) and the stop strings' scan per token.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "generation/stop_string_filter.h"
#include "generation/token_constraint.h"
#include "generation/tool_call_stream.h"
#include "zipmoe/generation/reply.h"
#include "zipmoe/generation/sampler.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe {

// What a reply is held to (generation/token_constraint.h); empty: free text.
struct ReplyConstraint {
  std::shared_ptr<const constrain::ConstraintSpec> spec;
  std::shared_ptr<const constrain::TokenIndex> index;
};

class ReplyStream {
 public:
  // `history`: the ids the sequence holds before the reply (the prompt); `eos`: the model's EOS ids;
  // `context`: its context window in tokens (0 = unbounded). REQUIRES: `tokenizer` and `eos` outlive
  // the stream. Throws zipmoe::Error for invalid params (validate()).
  // With a constraint, each token is sampled from the constraint's mask (a token that would leave
  // the reply uncompletable is refused and the next one sampled), and a tool-call constraint's
  // calls are split off the text (Token::calls, toolCalls()); a reply that made calls ends with
  // StopReason::ToolCalls.
  ReplyStream(const Tokenizer& tokenizer, const SamplingParams& params, std::vector<int32_t> history,
              std::span<const int32_t> eos, int context, ReplyConstraint constraint = {});
  ReplyStream(const ReplyStream&) = delete;
  ReplyStream& operator=(const ReplyStream&) = delete;

  struct Token {
    int32_t id = -1;
    std::string text;                       // safe to show now (may be empty)
    StopReason end = StopReason::None;      // set when the reply ends with this token
    std::vector<ToolCallEvent> calls;       // tool calls this token began or continued
  };
  // Samples the next token from `logits` and streams it. `stopRequested`: the caller wants the reply
  // to end here (checked last, like a limit). REQUIRES: the reply has not ended.
  Token next(std::span<const float> logits, bool stopRequested = false);

  // Ends the reply before its next token, as the caller asked (StopReason::Stopped), and returns the
  // text held back so far: the decoder's remainder and what might have begun a stop string (unless
  // the remainder completes one: then the reply ends on it, and only the text before it comes out).
  // REQUIRES: the reply has not ended.
  std::string stop();

  bool ended() const { return end_ != StopReason::None; }
  StopReason stopReason() const { return end_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // The complete tool calls the reply made (none without a tool-call constraint).
  std::vector<ToolCall> toolCalls() const { return calls_ ? calls_->calls() : std::vector<ToolCall>{}; }
  // The sequence before the reply, then every generated token that the reply goes on from (all but
  // the final one once it has ended): what the repetition penalty and the context check look at.
  const std::vector<int32_t>& history() const { return history_; }

 private:
  std::string flush(std::vector<ToolCallEvent>* events);
  int32_t sampleConstrained(std::span<const float> logits);
  std::string splitCalls(std::string text, std::vector<ToolCallEvent>& events);
  SamplingParams params_;  // owns the stop strings `stops_` reads
  Sampler sampler_;
  StreamingDecoder decoder_;
  StopStringFilter stops_;
  std::vector<int32_t> history_, tokens_;
  std::span<const int32_t> eos_;
  size_t context_;
  StopReason end_ = StopReason::None;
  std::optional<constrain::OutputConstraint> constraint_;
  std::optional<ToolCallStream> calls_;
  std::vector<float> masked_;
  bool outOfRoom_ = false;  // the constraint could not be met within the token limit
};

}  // namespace zipmoe
