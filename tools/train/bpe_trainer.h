// trainBpe — learns a byte-level BPE merge list from a text (the demo model's tokenizer).
//
// The text is pre-tokenized with the GPT-2 rules (gpt2PreTokenize), distinct pre-tokens are counted,
// and merges are learned greedily: at each step the most frequent adjacent pair of tokens (ties: the
// pair with the smaller ids) becomes a new token. A pair whose bytes already form a token is skipped,
// so every vocabulary string is unique. Training stops at `vocabSize` (256 bytes + merges + 1
// special token) or when no pair occurs at least twice.
// Thread-safety: pure function. Cost: O(merges × distinct pre-tokens × their length); about a second
// for 1 MB of English with vocab 1536.
#pragma once

#include <cstdint>
#include <string_view>

#include "byte_level_bpe.h"

namespace zipmoe::train {

// Throws zipmoe::Error when vocabSize < 257 (the bytes and the special token).
ByteLevelBpe trainBpe(std::string_view text, int32_t vocabSize);

}  // namespace zipmoe::train
