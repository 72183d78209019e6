// Tokenizer — a faithful reader of Hugging Face `tokenizer.json` files.
//
// Supported: BPE with the ByteLevel pre-tokenizer/decoder and the Split-regex pre-tokenizers of
// GPT-2/Qwen/DeepSeek/OLMoE style models; BPE with byte_fallback and Metaspace (or the Llama
// Prepend/Replace normalizer form) as in Mixtral; Unigram (T5/Switch); normalizers NFC, NFKC,
// Lowercase, Prepend, Replace, Strip and Sequence; added tokens (special or not) matched before
// pre-tokenization. Encoding agrees with the `tokenizers` library (tests compare against fixtures it
// produced). Any unsupported component is rejected when loading, naming the file and the JSON path.
// Thread-safety: encode/decode are const and may run concurrently. Cost: linear in text length
// (BPE merges are cached per pre-token).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zipmoe {

class Tokenizer {
 public:
  // Throws zipmoe::Error naming the file and the unsupported or malformed field.
  static std::unique_ptr<Tokenizer> fromFile(const std::filesystem::path& tokenizerJson);
  // The same from the file's text; `name` stands for the file in error messages.
  static std::unique_ptr<Tokenizer> fromJson(std::string_view text, const std::string& name);
  virtual ~Tokenizer() = default;

  // Encodes text. Added/special tokens written literally in `text` are recognised. The
  // post-processor's bos (if any) is added only when addSpecialTokens is set.
  virtual std::vector<int32_t> encode(std::string_view text, bool addSpecialTokens = false) const = 0;
  // Decodes ids to UTF-8 (invalid sequences become U+FFFD, as the reference does).
  virtual std::string decode(const std::vector<int32_t>& ids, bool skipSpecialTokens = false) const = 0;
  virtual std::optional<int32_t> tokenToId(std::string_view token) const = 0;
  virtual std::string idToToken(int32_t id) const = 0;
  // The bytes a token adds to decoded text in the middle of a sequence (constrained decoding builds
  // its token masks from them), or nothing for a special token or an id outside the vocabulary.
  // Exact for byte-level BPE; for other decoders the token decoded alone, with a Metaspace token's
  // leading space kept.
  virtual std::optional<std::string> tokenBytes(int32_t id) const = 0;
  virtual bool isSpecial(int32_t id) const = 0;
  // One past the largest id (model vocabulary plus added tokens).
  virtual int32_t vocabSize() const = 0;
};

// Streaming decoder: push ids one by one and get back only complete UTF-8 text, so that a reply can be
// printed as it is generated without ever splitting a character. The concatenation of everything
// push() and finish() return equals tokenizer.decode(all ids).
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skipSpecialTokens = true);
  std::string push(int32_t id);
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool skipSpecial_;
  std::vector<int32_t> ids_;
  size_t emittedBytes_ = 0;
};

}  // namespace zipmoe
