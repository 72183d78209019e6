// ByteLevelBpe: GPT-2 pre-tokenization, merge application and the tokenizer.json writer/reader.
// See byte_level_bpe.h. Thread-safety: one thread per object (encode() caches). Cost: linear.
#include "byte_level_bpe.h"

#include <algorithm>
#include <array>
#include <limits>

#include <nlohmann/json.hpp>

#include "hf/hf_directory.h"
#include "zipmoe/base/error.h"

namespace zipmoe::train {
namespace {

bool isSpace(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool isLetter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
bool isDigit(unsigned char c) { return c >= '0' && c <= '9'; }
bool isOther(unsigned char c) { return !isSpace(c) && !isLetter(c) && !isDigit(c); }

unsigned char at(std::string_view s, size_t i) { return static_cast<unsigned char>(s[i]); }

// Length of the run of characters of one class starting at i.
template <typename Pred>
size_t runLength(std::string_view s, size_t i, Pred pred) {
  size_t n = 0;
  while (i + n < s.size() && pred(at(s, i + n))) ++n;
  return n;
}

uint64_t pairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace

const std::string& byteToUnicode(uint8_t byte) { return hf::byteLevelSymbol(byte); }

std::vector<std::string_view> gpt2PreTokenize(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 0;
    // 's|'t|'re|'ve|'m|'ll|'d
    if (at(s, i) == '\'' && i + 1 < s.size()) {
      static constexpr std::array<std::string_view, 7> kContractions = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
      for (std::string_view c : kContractions)
        if (s.substr(i, c.size()) == c) {
          len = c.size();
          break;
        }
    }
    const size_t lead = (at(s, i) == ' ' && i + 1 < s.size()) ? 1 : 0;
    if (len == 0 && (lead == 0 ? isLetter(at(s, i)) : isLetter(at(s, i + 1))))
      len = lead + runLength(s, i + lead, isLetter);
    if (len == 0 && (lead == 0 ? isDigit(at(s, i)) : isDigit(at(s, i + 1))))
      len = lead + runLength(s, i + lead, isDigit);
    if (len == 0 && (lead == 0 ? isOther(at(s, i)) : isOther(at(s, i + 1))))
      len = lead + runLength(s, i + lead, isOther);
    if (len == 0) {
      // \s+(?!\S) then \s+: a whitespace run keeps its last character for the next token unless
      // the run ends the text.
      const size_t run = runLength(s, i, isSpace);
      len = (i + run == s.size() || run == 1) ? run : run - 1;
    }
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

ByteLevelBpe::ByteLevelBpe(std::vector<std::pair<int32_t, int32_t>> merges) : merges_(std::move(merges)) {
  bytes_.reserve(256 + merges_.size() + 1);
  for (int b = 0; b < 256; ++b) bytes_.emplace_back(1, static_cast<char>(b));
  for (size_t r = 0; r < merges_.size(); ++r) {
    const auto [a, b] = merges_[r];
    const int32_t next = static_cast<int32_t>(bytes_.size());
    if (a < 0 || b < 0 || a >= next || b >= next)
      throw Error("BPE merge " + std::to_string(r) + " refers to an unknown token id");
    bytes_.push_back(bytes_[static_cast<size_t>(a)] + bytes_[static_cast<size_t>(b)]);
    mergeRank_.emplace(pairKey(a, b), static_cast<int32_t>(r));
  }
  bytes_.emplace_back(kEndOfText);
}

std::string ByteLevelBpe::tokenString(int32_t id) const {
  if (id == endOfTextId()) return kEndOfText;
  std::string out;
  for (char c : tokenBytes(id)) out += byteToUnicode(static_cast<uint8_t>(c));
  return out;
}

std::vector<int32_t> ByteLevelBpe::encodeWord(std::string_view word) {
  const auto cached = cache_.find(std::string(word));
  if (cached != cache_.end()) return cached->second;
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  for (char c : word) ids.push_back(static_cast<int32_t>(static_cast<uint8_t>(c)));
  while (ids.size() > 1) {
    int32_t bestRank = std::numeric_limits<int32_t>::max();
    size_t bestAt = 0;
    for (size_t k = 0; k + 1 < ids.size(); ++k) {
      const auto it = mergeRank_.find(pairKey(ids[k], ids[k + 1]));
      if (it != mergeRank_.end() && it->second < bestRank) {
        bestRank = it->second;
        bestAt = k;
      }
    }
    if (bestRank == std::numeric_limits<int32_t>::max()) break;
    // Merge every occurrence of the best pair, left to right.
    const auto [a, b] = merges_[static_cast<size_t>(bestRank)];
    std::vector<int32_t> next;
    next.reserve(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      if (k >= bestAt && k + 1 < ids.size() && ids[k] == a && ids[k + 1] == b) {
        next.push_back(256 + bestRank);
        ++k;
      } else {
        next.push_back(ids[k]);
      }
    }
    ids.swap(next);
  }
  cache_.emplace(std::string(word), ids);
  return ids;
}

std::vector<int32_t> ByteLevelBpe::encode(std::string_view text) {
  std::vector<int32_t> out;
  const std::string_view special(kEndOfText);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t found = text.find(special, start);
    const std::string_view piece = text.substr(start, (found == std::string_view::npos ? text.size() : found) - start);
    for (std::string_view word : gpt2PreTokenize(piece)) {
      const std::vector<int32_t> ids = encodeWord(word);
      out.insert(out.end(), ids.begin(), ids.end());
    }
    if (found == std::string_view::npos) break;
    out.push_back(endOfTextId());
    start = found + special.size();
  }
  return out;
}

std::string ByteLevelBpe::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocabSize()) throw Error("BPE decode: token id " + std::to_string(id) + " out of range");
    out += tokenBytes(id);
  }
  return out;
}

nlohmann::json ByteLevelBpe::toJson() const {
  hf::ByteLevelBpeJson spec;
  for (int32_t id = 0; id < vocabSize(); ++id) spec.vocab[tokenString(id)] = id;
  for (const auto& [a, b] : merges_) spec.merges.push_back(tokenString(a) + " " + tokenString(b));
  spec.addedTokens.push_back(hf::addedToken(endOfTextId(), kEndOfText));
  return hf::byteLevelBpeTokenizer(spec);
}

ByteLevelBpe ByteLevelBpe::fromJson(const nlohmann::json& json, const std::string& what) {
  try {
    const nlohmann::json& model = json.at("model");
    if (model.at("type") != "BPE") throw Error(what + ": model.type is not BPE");
    std::unordered_map<std::string, int32_t> vocab;
    for (const auto& [token, id] : model.at("vocab").items()) vocab[token] = id.get<int32_t>();
    // The byte tokens must sit at ids 0..255 (the layout toJson() writes).
    for (int b = 0; b < 256; ++b) {
      const auto it = vocab.find(byteToUnicode(static_cast<uint8_t>(b)));
      if (it == vocab.end() || it->second != b)
        throw Error(what + ": model.vocab does not hold byte " + std::to_string(b) + " at id " + std::to_string(b));
    }
    std::vector<std::pair<int32_t, int32_t>> merges;
    for (const auto& m : model.at("merges")) {
      const std::string text = m.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos) throw Error(what + ": model.merges entry \"" + text + "\" has no space");
      const auto a = vocab.find(text.substr(0, space));
      const auto b = vocab.find(text.substr(space + 1));
      if (a == vocab.end() || b == vocab.end())
        throw Error(what + ": model.merges entry \"" + text + "\" names a token missing from model.vocab");
      merges.emplace_back(a->second, b->second);
    }
    return ByteLevelBpe(std::move(merges));
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + ": malformed tokenizer.json: " + e.what());
  }
}

}  // namespace zipmoe::train
