// ByteLevelBpe — the byte-level BPE tokenizer that the demo-model trainer produces and uses.
//
// It holds the merge list learned by trainBpe() (bpe_trainer.h) and does three things with it:
// pre-tokenizes text exactly like GPT-2's regex (contractions, ` ?letters`, ` ?digits`,
// ` ?other`, whitespace runs; ASCII classes, with every byte >= 0x80 treated as a letter, which
// matches the regex on ASCII text such as the Shakespeare corpus), encodes text to ids by applying
// merges in rank order, and writes a standard Hugging Face `tokenizer.json` (model BPE, ByteLevel
// pre-tokenizer with use_regex true, ByteLevel decoder and post-processor, `<|endoftext|>` as a
// special added token that is also in the vocab). Ids: 0..255 are the bytes, 256.. the merges in
// order, then the special token last.
// Thread-safety: encode() and toJson() are const but encode() fills a per-object cache, so an object
// must be used from one thread at a time. Cost: encoding is linear in text length, merges per
// distinct pre-token are cached.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zipmoe::train {

inline constexpr const char* kEndOfText = "<|endoftext|>";

// GPT-2 regex pre-tokenization (see the file comment for the character classes).
std::vector<std::string_view> gpt2PreTokenize(std::string_view text);

// GPT-2's printable mapping of bytes to code points, as UTF-8 ("Ġ" for a space, "Ċ" for '\n').
const std::string& byteToUnicode(uint8_t byte);

class ByteLevelBpe {
 public:
  // `merges` are pairs of token ids; merge i creates id 256 + i.
  explicit ByteLevelBpe(std::vector<std::pair<int32_t, int32_t>> merges);

  int32_t vocabSize() const { return static_cast<int32_t>(256 + merges_.size() + 1); }
  int32_t endOfTextId() const { return static_cast<int32_t>(256 + merges_.size()); }
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }
  // The raw bytes a token stands for (the special token: its literal text).
  const std::string& tokenBytes(int32_t id) const { return bytes_.at(static_cast<size_t>(id)); }
  // The vocabulary spelling (bytes mapped through byteToUnicode).
  std::string tokenString(int32_t id) const;

  std::vector<int32_t> encode(std::string_view text);
  std::string decode(const std::vector<int32_t>& ids) const;

  // tokenizer.json as Hugging Face `tokenizers` writes it.
  nlohmann::json toJson() const;
  // Reads back a tokenizer.json written by toJson(); throws zipmoe::Error naming `what`.
  static ByteLevelBpe fromJson(const nlohmann::json& json, const std::string& what);

 private:
  std::vector<int32_t> encodeWord(std::string_view word);

  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::vector<std::string> bytes_;  // per id
  std::unordered_map<uint64_t, int32_t> mergeRank_;  // (a << 32 | b) -> rank
  std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace zipmoe::train
