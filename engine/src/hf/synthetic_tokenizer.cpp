// The tokenizer files of synthetic models: small, valid tokenizers in each family's real style.
//
// Every family gets the same hand-picked set of ~80 English merges (" t"+"h", " th"+"e", ...), so
// ordinary text encodes into a mix of merged and single-byte tokens and exercises a BPE
// implementation's merge ranking; the vocabularies stay a few hundred tokens so that "tiny" models
// keep a 512-entry embedding. Styles:
//  * byte-level BPE (qwen2_moe, qwen3_moe, olmoe, deepseek_v2): GPT-2's 256 byte symbols, ByteLevel
//    pre-tokenizer (GPT-2 regex) and decoder, special tokens as added_tokens at the config's ids.
//  * SentencePiece BPE (mixtral): <unk> <s> </s>, <0x00>..<0xFF>, byte_fallback, the Llama
//    normalizer (prepend ▁, spaces → ▁) and decoder, <s> prepended by the post-processor.
//  * Unigram (switch_transformers): T5's <pad> </s> <unk> layout, Metaspace, </s> appended, and
//    <extra_id_N> sentinels at the top of the vocabulary.
// The special tokens, chat templates (from each model's published prompt format) and generation
// defaults are each family's, in its description (hf/families/).
#include "hf/synthetic_tokenizer.h"

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hf/family_description.h"
#include "hf/hf_directory.h"
#include "zipmoe/base/error.h"

namespace zipmoe::hf {
namespace {

using nlohmann::json;

// Merges in rank order, spelled with a plain space; both halves exist by the time each is used.
const std::vector<std::pair<std::string, std::string>>& englishMerges() {
  static const std::vector<std::pair<std::string, std::string>> kMerges{
      {"t", "h"},   {"h", "e"},    {"i", "n"},   {"e", "r"},   {"a", "n"},   {" ", "t"},    {" ", "a"},
      {"o", "n"},   {"r", "e"},    {" t", "h"},  {" th", "e"}, {"o", "u"},   {"a", "t"},    {"e", "n"},
      {"n", "d"},   {" ", "s"},    {" ", "w"},   {"i", "s"},   {"e", "d"},   {"i", "t"},    {"o", "r"},
      {"e", "s"},   {" ", "o"},    {" ", "c"},   {" ", "b"},   {" ", "f"},   {" ", "m"},    {" ", "p"},
      {" ", "in"},  {" a", "nd"},  {"in", "g"},  {" ", "h"},   {"l", "l"},   {" o", "f"},   {" t", "o"},
      {" ", "I"},   {"a", "r"},    {"a", "l"},   {" ", "d"},   {" ", "l"},   {" ", "n"},    {" ", "y"},
      {" y", "ou"}, {" ", "g"},    {"l", "e"},   {"s", "t"},   {"v", "e"},   {"o", "m"},    {" b", "e"},
      {" ", "is"},  {" ", "it"},   {" w", "h"},  {" th", "at"}, {"e", "a"},  {"c", "h"},    {"o", "w"},
      {"l", "y"},   {"i", "on"},   {"t", "ion"}, {" ", "e"},   {" ", "r"},   {" ", "re"},   {"e", "t"},
      {"a", "s"},   {" ", "T"},    {" T", "he"}, {" ", "S"},   {" ", "A"},   {"o", "t"},    {" n", "ot"},
      {" m", "y"},  {" ", "u"},    {"u", "s"},   {" w", "it"}, {" wit", "h"}, {" th", "is"}, {" f", "or"},
      {" ", "he"},  {" h", "is"},  {"a", "ve"},  {" h", "ave"}, {" w", "e"}, {" ", "k"},    {"in", "d"},
  };
  return kMerges;
}

// GPT-2's 256 byte symbols, in byte order.
const std::vector<std::string>& byteSymbols() {
  static const std::vector<std::string> kSymbols = [] {
    std::vector<std::string> out;
    for (int b = 0; b < 256; ++b) out.push_back(hf::byteLevelSymbol(static_cast<uint8_t>(b)));
    return out;
  }();
  return kSymbols;
}

const std::string kSpaceByteLevel = byteSymbols()[' '];  // "Ġ"
const std::string kMetaspace = "\xE2\x96\x81";           // "▁"

std::string respell(const std::string& text, const std::string& space) {
  std::string out;
  for (char c : text) out += (c == ' ') ? space : std::string(1, c);
  return out;
}

// Hands out ids to ordinary tokens around the ids reserved for special tokens, and stops (returning
// false) where the config's vocab_size would be exceeded.
class IdAllocator {
 public:
  IdAllocator(std::set<int64_t> reserved, int64_t vocabSize) : reserved_(std::move(reserved)), limit_(vocabSize) {}
  bool next(int64_t& id) {
    while (reserved_.count(next_)) ++next_;
    if (next_ >= limit_) return false;
    id = next_++;
    return true;
  }

 private:
  std::set<int64_t> reserved_;
  int64_t limit_, next_ = 0;
};

// Ordinary BPE vocabulary: `base` symbols (all required), then merges while ids remain.
struct BpeVocab {
  json vocab = json::object();
  json merges = json::array();
};

BpeVocab buildBpe(const std::vector<std::string>& base, const std::string& space, IdAllocator& ids,
                  const std::string& what) {
  BpeVocab out;
  std::set<std::string> known;
  for (const auto& symbol : base) {
    int64_t id = 0;
    if (!ids.next(id)) throw Error(what + ": vocab_size is too small for the tokenizer's base symbols");
    out.vocab[symbol] = id;
    known.insert(symbol);
  }
  for (const auto& [left, right] : englishMerges()) {
    const std::string a = respell(left, space), b = respell(right, space), merged = a + b;
    if (!known.count(a) || !known.count(b)) throw std::logic_error("synthetic tokenizer merge out of order: " + merged);
    if (known.count(merged)) continue;
    int64_t id = 0;
    if (!ids.next(id)) break;  // a small vocab keeps the highest-ranked merges
    out.vocab[merged] = id;
    out.merges.push_back(a + " " + b);
    known.insert(merged);
  }
  return out;
}

json specialTemplate(const std::string& token, bool prefix) {
  const json special = {{"SpecialToken", {{"id", token}, {"type_id", 0}}}};
  const json a = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const json b = {{"Sequence", {{"id", "B"}, {"type_id", 1}}}};
  return prefix ? json{{"single", {special, a}}, {"pair", {special, a, special, b}}}
                : json{{"single", {a, special}}, {"pair", {a, special, b, special}}};
}

json addedTokensDecoder(const json& tokenizer) {
  json out = json::object();
  for (const auto& token : tokenizer["added_tokens"]) {
    json entry = token;
    entry.erase("id");
    out[std::to_string(token["id"].get<int64_t>())] = entry;
  }
  return out;
}

}  // namespace

int64_t configTokenId(const json& config, const char* key, int64_t fallback) {
  if (config.contains(key) && config[key].is_number_integer()) return config[key].get<int64_t>();
  if (config.contains(key) && config[key].is_array() && !config[key].empty() &&
      config[key][0].is_number_integer())
    return config[key][0].get<int64_t>();
  return fallback;
}

json byteLevelTokenizer(const std::vector<std::pair<std::string, int64_t>>& specials, int64_t vocabSize,
                        const std::string& what) {
  std::set<int64_t> reserved;
  hf::ByteLevelBpeJson spec;
  for (const auto& [content, id] : specials) {
    reserved.insert(id);
    spec.addedTokens.push_back(hf::addedToken(id, content));
  }
  IdAllocator ids(reserved, vocabSize);
  BpeVocab bpe = buildBpe(byteSymbols(), kSpaceByteLevel, ids, what);
  // The specials also go into the model's vocab: `tokenizers` keeps an added token's id only when the
  // model knows the token, and otherwise renumbers it right after the model vocab.
  for (const auto& [content, id] : specials) bpe.vocab[content] = id;
  spec.vocab = std::move(bpe.vocab);
  spec.merges = std::move(bpe.merges);
  spec.nfcNormalizer = true;
  spec.trimOffsets = false;
  return hf::byteLevelBpeTokenizer(spec);
}

json sentencePieceBpeTokenizer(int64_t bosId, int64_t eosId, int64_t vocabSize, const std::string& what) {
  const int64_t unkId = 0;
  IdAllocator ids({unkId, bosId, eosId}, vocabSize);
  std::vector<std::string> base;
  for (int b = 0; b < 256; ++b) {
    static const char* kHex = "0123456789ABCDEF";
    base.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
  }
  base.push_back(kMetaspace);
  for (char c = '!'; c <= '~'; ++c) base.emplace_back(1, c);
  BpeVocab bpe = buildBpe(base, kMetaspace, ids, what);
  bpe.vocab["<unk>"] = unkId;
  bpe.vocab["<s>"] = bosId;
  bpe.vocab["</s>"] = eosId;
  json post = specialTemplate("<s>", true);
  post["type"] = "TemplateProcessing";
  post["special_tokens"] = {{"<s>", {{"id", "<s>"}, {"ids", {bosId}}, {"tokens", {"<s>"}}}}};
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", {hf::addedToken(unkId, "<unk>"), hf::addedToken(bosId, "<s>"), hf::addedToken(eosId, "</s>")}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", kMetaspace}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor", post},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"ignore_merges", false},
        {"vocab", bpe.vocab},
        {"merges", bpe.merges}}},
  };
}

// T5's layout: <pad>=0, </s>=1, <unk>=2, the pieces, then <extra_id_99>..<extra_id_0>.
json t5UnigramTokenizer(int64_t vocabSize, int& extraIds, const std::string& what) {
  json pieces = json::array({json::array({"<pad>", 0.0}), json::array({"</s>", 0.0}), json::array({"<unk>", 0.0})});
  pieces.push_back(json::array({kMetaspace, -2.0}));
  for (char c = '!'; c <= '~'; ++c) pieces.push_back(json::array({std::string(1, c), -6.0}));
  std::set<std::string> seen;
  double score = -3.0;
  for (const auto& [left, right] : englishMerges()) {
    const std::string piece = respell(left + right, kMetaspace);
    if (piece.size() > 1 && seen.insert(piece).second) pieces.push_back(json::array({piece, score}));
    score -= 0.02;  // earlier merges are the more frequent pieces
  }
  const auto ordinary = static_cast<int64_t>(pieces.size());
  if (ordinary > vocabSize) throw Error(what + ": vocab_size is too small for the tokenizer's pieces");
  extraIds = static_cast<int>(std::min<int64_t>(100, vocabSize - ordinary));
  json added = json::array({hf::addedToken(0, "<pad>"), hf::addedToken(1, "</s>"), hf::addedToken(2, "<unk>")});
  for (int n = extraIds - 1; n >= 0; --n) {
    const std::string token = "<extra_id_" + std::to_string(n) + ">";
    added.push_back(hf::addedToken(static_cast<int64_t>(pieces.size()), token));
    pieces.push_back(json::array({token, 0.0}));
  }
  json post = specialTemplate("</s>", false);
  post["type"] = "TemplateProcessing";
  post["special_tokens"] = {{"</s>", {{"id", "</s>"}, {"ids", {1}}, {"tokens", {"</s>"}}}}};
  const json metaspace = {{"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", "always"}, {"split", true}};
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {{{"type", "WhitespaceSplit"}}, metaspace}}}},
      {"post_processor", post},
      {"decoder", metaspace},
      {"model", {{"type", "Unigram"}, {"unk_id", 2}, {"vocab", pieces}, {"byte_fallback", false}}},
  };
}

SyntheticTokenizerFiles makeSyntheticTokenizer(ModelFamily family, const json& config) {
  const std::string what = std::string("synthetic tokenizer for ") + familyName(family);
  if (!config.contains("vocab_size") || !config["vocab_size"].is_number_integer())
    throw Error(what + ": config has no integer vocab_size");
  const int64_t vocabSize = config["vocab_size"].get<int64_t>();
  const int64_t maxLength = configTokenId(config, "max_position_embeddings", 2048);
  SyntheticTokenizerFiles out = describe(family).synthetic.tokenizer(config, vocabSize, what);
  out.tokenizerConfig["model_max_length"] = maxLength;
  out.tokenizerConfig["added_tokens_decoder"] = addedTokensDecoder(out.tokenizer);
  return out;
}

}  // namespace zipmoe::hf
