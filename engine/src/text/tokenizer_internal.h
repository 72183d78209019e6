// Internal pipeline types of the Tokenizer (tokenizer.h): the normalizer, pre-tokenizer, model,
// decoder and post-processor components built from a tokenizer.json, and their factories. Each
// component mirrors the `tokenizers` library's component of the same JSON "type". Factories throw
// zipmoe::Error with "<file>: <json path>: <problem>" for unsupported or malformed components.
// Thread-safety: components are immutable after construction, except the models' word caches,
// which are internally locked. Cost: see each component's file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace zipmoe::tok {

using nlohmann::json;

// The largest token id a tokenizer.json may use (real vocabularies stay below 2^18): ids size
// tables, so an unbounded id from an untrusted file would be an unbounded allocation.
constexpr int32_t kMaxTokenId = (1 << 24) - 1;

// Where an error is reported: the file and the JSON path of the component.
struct Where {
  std::string file;
  std::string path;
  [[noreturn]] void fail(const std::string& problem) const;
  Where at(const std::string& key) const { return {file, path + "." + key}; }
  Where at(size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }
};

// A piece of (normalized) text on its way through pre-tokenization. `atStart` is true when the piece
// begins at offset 0 of the original input (Metaspace's prepend_scheme "first" needs it).
struct Piece {
  std::string text;
  bool atStart = false;
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void split(std::vector<Piece>& pieces) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual void tokenize(const std::string& word, std::vector<int32_t>& out) const = 0;
  virtual std::optional<int32_t> tokenToId(std::string_view token) const = 0;
  virtual std::optional<std::string> idToToken(int32_t id) const = 0;
  virtual int32_t size() const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decodeChain(std::vector<std::string>& tokens) const = 0;
  // Byte-level decoders map each token's characters to bytes: then a token's own bytes are exact.
  virtual bool byteLevel() const { return false; }
};

// Adds special tokens around an encoded single sequence.
class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

// Resolves a token string to an id (added tokens included); used by post-processors.
using TokenLookup = std::optional<int32_t> (*)(const void* self, std::string_view token);

std::unique_ptr<Normalizer> makeNormalizer(const json& j, const Where& w);
std::unique_ptr<PreTokenizer> makePreTokenizer(const json& j, const Where& w);
std::unique_ptr<Model> makeModel(const json& j, const Where& w);
std::unique_ptr<Decoder> makeDecoder(const json& j, const Where& w);
std::unique_ptr<PostProcessor> makePostProcessor(const json& j, const Where& w);

// Shared helpers.
const std::string& jsonTypeOf(const json& j, const Where& w);
// GPT-2's byte → printable code point map and its inverse (-1 for code points that are no byte).
uint32_t byteToChar(uint8_t b);
int charToByte(uint32_t cp);
// The regex GPT-2's ByteLevel pre-tokenizer uses.
extern const char* const kGpt2Pattern;

// Split delimiter behaviours of the `tokenizers` library.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
SplitBehavior parseBehavior(const json& j, const Where& w);
// Splits `text` given the delimiter spans [begin,end) in byte offsets (sorted, non-overlapping).
std::vector<std::string> splitBySpans(const std::string& text, const std::vector<std::pair<size_t, size_t>>& spans,
                                      SplitBehavior behavior, bool invert);

}  // namespace zipmoe::tok
