// Internal: the tokenizer files of a synthetic model.
//
// makeSyntheticTokenizer builds, from a model config, a small but valid Hugging Face `tokenizers` JSON in
// the family's real style, the tokenizer_config.json (special tokens, chat template) and
// generation_config.json; each family's description (hf/families/) picks its style from the builders
// below and writes its own special tokens, chat template and generation defaults. Special tokens sit at
// the ids the config names (bos/eos/pad), so the real-size presets keep the real checkpoints' ids;
// ordinary tokens take the remaining ids from 0 up, and every id stays below the config's vocab_size.
// Thread-safety: free functions. Cost: a few hundred tokens' JSON.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "zipmoe/hf/model_family.h"

namespace zipmoe::hf {

struct SyntheticTokenizerFiles {
  nlohmann::json tokenizer;        // tokenizer.json
  nlohmann::json tokenizerConfig;  // tokenizer_config.json
  nlohmann::json generationConfig; // generation_config.json
};

SyntheticTokenizerFiles makeSyntheticTokenizer(ModelFamily family, const nlohmann::json& config);

// The styles (tokenizer.json). `what` names the tokenizer in errors (a vocab_size too small for the
// style's base symbols).
// GPT-2-style byte-level BPE (qwen2_moe, qwen3_moe, olmoe, deepseek_v2): 256 byte symbols, ByteLevel
// pre-tokenizer and decoder, NFC; `specials` (content, id) as added tokens.
nlohmann::json byteLevelTokenizer(const std::vector<std::pair<std::string, int64_t>>& specials, int64_t vocabSize,
                                  const std::string& what);
// SentencePiece BPE (mixtral): <unk>=0, <s>, </s>, <0x00>..<0xFF>, byte_fallback, the Llama normalizer
// (prepend ▁, spaces → ▁) and decoder, <s> prepended by the post-processor.
nlohmann::json sentencePieceBpeTokenizer(int64_t bosId, int64_t eosId, int64_t vocabSize, const std::string& what);
// T5's Unigram (switch_transformers): <pad>=0, </s>=1, <unk>=2, the pieces, Metaspace, </s> appended,
// and `extraIds` (set here, at most 100) <extra_id_N> sentinels at the top of the vocabulary.
nlohmann::json t5UnigramTokenizer(int64_t vocabSize, int& extraIds, const std::string& what);

// config[key] when it is an integer, or the first element of a list of integers; `fallback` otherwise.
int64_t configTokenId(const nlohmann::json& config, const char* key, int64_t fallback);

}  // namespace zipmoe::hf
