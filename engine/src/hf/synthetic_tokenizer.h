// Internal: the tokenizer files of a synthetic model.
//
// makeSyntheticTokenizer builds, from a model config, a small but valid Hugging Face `tokenizers` JSON in
// the family's real style (byte-level BPE for qwen2_moe/qwen3_moe/olmoe/deepseek_v2, SentencePiece
// BPE with byte fallback for mixtral, T5 Unigram for switch_transformers), the tokenizer_config.json
// (special tokens, chat template) and generation_config.json. Special tokens sit at the ids the config
// names (bos/eos/pad), so the real-size presets keep the real checkpoints' ids; ordinary tokens take
// the remaining ids from 0 up, and every id stays below the config's vocab_size.
#pragma once

#include <nlohmann/json.hpp>

#include "zipmoe/model_family.h"

namespace zipmoe::hf {

struct SyntheticTokenizerFiles {
  nlohmann::json tokenizer;        // tokenizer.json
  nlohmann::json tokenizerConfig;  // tokenizer_config.json
  nlohmann::json generationConfig; // generation_config.json
};

SyntheticTokenizerFiles makeSyntheticTokenizer(ModelFamily family, const nlohmann::json& config);

}  // namespace zipmoe::hf
