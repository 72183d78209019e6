// generate() — the reference token loop: one sequence, alone, on the calling thread: prompt →
// prefill → sample → decode …, streaming complete UTF-8 text through a ReplyStream (the stop rules
// every door shares), stopping on EOS, stop strings, max tokens, the context window or a stop flag,
// and timing it (TTFT, TPOT). The product's doors go through the engine's generation core
// (Engine::scheduler(), ChatSession); tests compare what they give with this lone run.
// Thread-safety: one generation at a time per model, and none while the engine's core is busy with
// it. Cost: the model's.
#pragma once

#include <atomic>
#include <vector>

#include "zipmoe/model/model.h"
#include "zipmoe/generation/reply.h"
#include "zipmoe/generation/sampler.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe {

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

}  // namespace zipmoe
