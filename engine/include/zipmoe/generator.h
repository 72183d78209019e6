// Generator — the token loop: prompt → prefill → sample → decode …, streaming complete UTF-8 text,
// stopping on EOS, stop strings, max tokens or a stop flag, and timing it (TTFT, TPOT).
// Thread-safety: one generation at a time per model. Cost: the model's.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "zipmoe/model.h"
#include "zipmoe/sampler.h"
#include "zipmoe/tokenizer.h"

namespace zipmoe {

struct GenerationStats {
  int promptTokens = 0;
  int generatedTokens = 0;          // == tokens.size()
  double timeToFirstTokenMs = 0;    // from the call to the first token's text being available (prefill + sample)
  double timePerOutputTokenMs = 0;  // mean over the decode steps after the first token (0 with one token)
  uint64_t weightBytesPerToken = 0; // weight bytes the last decode step read (MoeModel::lastForwardWeightBytes)
  // "eos", "stop_string", "max_tokens", "context_window" (the sequence filled max_position_embeddings),
  // "stopped" (the stop flag, or the callback returned false)
  std::string stopReason;
  std::vector<int32_t> tokens;      // the generated ids, including the EOS or the stop string's tokens
  std::string text;                 // everything passed to the callback, concatenated
};

// Called with each new piece of text (never empty, always complete UTF-8); return false to stop.
using TextCallback = std::function<bool(std::string_view text)>;

// Generates a continuation of `promptIds` in a fresh sequence of `model` (removed afterwards, also when
// an exception escapes). The prompt is prefilled in one forward step, then one token per step. Text is
// streamed through a StreamingDecoder (special tokens skipped); the EOS token's text is never emitted;
// a stop string ends generation and is not emitted, and text that may be the start of a stop string is
// held back until it is known not to be. `stop` is checked before every forward step.
// Throws zipmoe::Error (before running the model) for invalid params, an empty prompt, or a prompt
// that leaves no room for a token in the context window (max_position_embeddings).
GenerationStats generate(MoeModel& model, const Tokenizer& tokenizer, const std::vector<int32_t>& promptIds,
                         const SamplingParams& params, const TextCallback& onText,
                         const std::atomic<bool>* stop = nullptr);

// The same loop on a sequence the caller keeps (a chat session's): `sequenceTokens` are the ids the
// sequence already holds, and `promptIds` must start with them; only the rest is prefilled (at
// least one token: REQUIRES sequenceTokens.size() < promptIds.size()). On return — also when an
// exception escapes — `sequenceTokens` holds exactly the ids in the sequence: the prompt, then every
// generated token that was fed back (all but the last one sampled). Throws like generate().
GenerationStats continueSequence(MoeModel& model, MoeModel::SequenceId seq, std::vector<int32_t>& sequenceTokens,
                                 const Tokenizer& tokenizer, const std::vector<int32_t>& promptIds,
                                 const SamplingParams& params, const TextCallback& onText,
                                 const std::atomic<bool>* stop = nullptr);

}  // namespace zipmoe
