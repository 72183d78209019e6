// Tokenizer::fromFile and the pipeline of a Hugging Face tokenizer.json: added tokens (matched
// leftmost-longest in the raw text, with single_word/lstrip/rstrip; `normalized` ones in the
// normalized text), normalizer, pre-tokenizer, model, post-processor on encode; id → token, special
// skipping and the decoder chain on decode. The components live in tokenizer_*.cpp.
#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <sstream>

#include "text/tokenizer_internal.h"
#include "text/unicode_tables.h"
#include "zipmoe/base/error.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe {
namespace tok {

void Where::fail(const std::string& problem) const { throw Error(file + ": " + path + ": " + problem); }

const std::string& jsonTypeOf(const json& j, const Where& w) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) w.fail("expected an object with a string \"type\"");
  return j["type"].get_ref<const std::string&>();
}

namespace {

struct AddedToken {
  int32_t id = 0;
  std::string content;  // as matched (normalized when `normalized`)
  bool singleWord = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// Leftmost-longest matcher over a set of added tokens.
class AddedMatcher {
 public:
  void add(const AddedToken* t) {
    if (t->content.empty()) return;
    auto& bucket = byFirst_[static_cast<unsigned char>(t->content[0])];
    bucket.push_back(t);
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const AddedToken* a, const AddedToken* b) { return a->content.size() > b->content.size(); });
    empty_ = false;
  }
  bool empty() const { return empty_; }

  struct Segment {
    size_t begin, end;
    const AddedToken* token;  // null for plain text
  };
  // Splits `text` into plain segments and added-token segments, as the library's find_matches does.
  std::vector<Segment> split(const std::string& text) const {
    std::vector<Segment> out;
    size_t startOffset = 0, pos = 0;
    while (pos < text.size()) {
      const AddedToken* hit = nullptr;
      const auto& bucket = byFirst_[static_cast<unsigned char>(text[pos])];
      for (const AddedToken* t : bucket)
        if (text.compare(pos, t->content.size(), t->content) == 0) { hit = t; break; }
      if (!hit) { ++pos; continue; }
      size_t start = pos, stop = pos + hit->content.size();
      pos = stop;
      if (hit->singleWord) {
        const bool startSpace = start == 0 || !isWordByte(text, start, true);
        const bool stopSpace = stop == text.size() || !isWordByte(text, stop, false);
        if (!startSpace || !stopSpace) continue;
      }
      if (hit->lstrip) {
        size_t s = start;
        while (s > startOffset) {
          size_t b = s - 1;
          while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
          const uint32_t cp = unicode::decodeUtf8(std::string_view(text).substr(b, s - b)).front();
          if (!unicode::isWhitespace(cp)) break;
          s = b;
        }
        start = std::max(s, startOffset);
      }
      if (hit->rstrip) {
        while (stop < text.size()) {
          const size_t n = std::min(unicode::utf8Length(static_cast<unsigned char>(text[stop])), text.size() - stop);
          const uint32_t cp = unicode::decodeUtf8(std::string_view(text).substr(stop, n)).front();
          if (!unicode::isWhitespace(cp)) break;
          stop += n;
        }
        pos = stop;
      }
      if (startOffset < start) out.push_back({startOffset, start, nullptr});
      out.push_back({start, stop, hit});
      startOffset = stop;
    }
    if (startOffset < text.size()) out.push_back({startOffset, text.size(), nullptr});
    return out;
  }

 private:
  // Whether the character ending before (before=true) or starting at `at` is a word character.
  static bool isWordByte(const std::string& text, size_t at, bool before) {
    size_t b = at, e = at;
    if (before) {
      b = at - 1;
      while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
    } else {
      e = at + std::min(unicode::utf8Length(static_cast<unsigned char>(text[at])), text.size() - at);
    }
    const uint32_t cp = unicode::decodeUtf8(std::string_view(text).substr(b, before ? at - b : e - at)).front();
    return cp == '_' || unicode::isLetter(cp) || unicode::isNumber(cp);
  }
  std::array<std::vector<const AddedToken*>, 256> byFirst_;
  bool empty_ = true;
};

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(const json& j, const std::string& file) {
    const Where root{file, "$"};
    if (!j.is_object()) root.fail("expected a JSON object");
    if (!j.contains("model")) root.at("model").fail("missing");
    model_ = makeModel(j["model"], root.at("model"));
    normalizer_ = makeNormalizer(j.value("normalizer", json()), root.at("normalizer"));
    preTokenizer_ = makePreTokenizer(j.value("pre_tokenizer", json()), root.at("pre_tokenizer"));
    decoder_ = makeDecoder(j.value("decoder", json()), root.at("decoder"));
    postProcessor_ = makePostProcessor(j.value("post_processor", json()), root.at("post_processor"));
    const json& added = j.value("added_tokens", json::array());
    if (!added.is_array()) root.at("added_tokens").fail("expected an array");
    added_.reserve(added.size());
    for (size_t i = 0; i < added.size(); ++i) {
      const json& a = added[i];
      const Where w = root.at("added_tokens").at(i);
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        w.fail("expected an object with integer \"id\" and string \"content\"");
      if (a["id"].get<int64_t>() < 0 || a["id"].get<int64_t>() > kMaxTokenId)
        w.at("id").fail("id " + a["id"].dump() + " is outside 0.." + std::to_string(kMaxTokenId));
      AddedToken t;
      t.id = a["id"].get<int32_t>();
      t.content = a["content"].get<std::string>();
      t.singleWord = a.value("single_word", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.normalized = a.value("normalized", !a.value("special", false));
      t.special = a.value("special", false);
      added_.push_back(t);
    }
    for (const auto& t : added_) {
      byId_[t.id] = &t;
      byContent_[t.content] = &t;
    }
    for (auto& t : added_) {
      if (t.normalized && normalizer_) {
        normalizedContent_.push_back(t);
        normalizedContent_.back().content = normalizer_->normalize(t.content);
      }
    }
    for (const auto& t : added_)
      if (!t.normalized) raw_.add(&t);
    for (const auto& t : normalizedContent_) normalizedMatcher_.add(&t);
    if (!normalizer_)
      for (const auto& t : added_)
        if (t.normalized) raw_.add(&t);
    vocabSize_ = model_->size();
    for (const auto& t : added_) vocabSize_ = std::max(vocabSize_, t.id + 1);
  }

  std::vector<int32_t> encode(std::string_view text, bool addSpecialTokens) const override {
    std::vector<int32_t> ids;
    const std::string s(text);
    for (const auto& seg : raw_.split(s)) {
      if (seg.token) {
        ids.push_back(seg.token->id);
        continue;
      }
      std::string piece = s.substr(seg.begin, seg.end - seg.begin);
      if (normalizer_) piece = normalizer_->normalize(std::move(piece));
      const bool atStart = seg.begin == 0;
      for (const auto& sub : normalizedMatcher_.split(piece)) {
        if (sub.token) {
          ids.push_back(sub.token->id);
          continue;
        }
        std::vector<Piece> pieces{{piece.substr(sub.begin, sub.end - sub.begin), atStart && sub.begin == 0}};
        if (preTokenizer_) preTokenizer_->split(pieces);
        for (const auto& p : pieces) model_->tokenize(p.text, ids);
      }
    }
    if (addSpecialTokens && postProcessor_) postProcessor_->process(ids);
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids, bool skipSpecialTokens) const override {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
      const auto it = byId_.find(id);
      if (it != byId_.end()) {
        if (skipSpecialTokens && it->second->special) continue;
        tokens.push_back(it->second->content);
        continue;
      }
      if (auto t = model_->idToToken(id)) tokens.push_back(std::move(*t));
    }
    if (!decoder_) {
      std::string out;
      for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
      return out;
    }
    decoder_->decodeChain(tokens);
    std::string out;
    for (const auto& t : tokens) out += t;
    return out;
  }

  std::optional<std::string> tokenBytes(int32_t id) const override {
    if (id < 0 || id >= vocabSize_) return std::nullopt;
    const auto it = byId_.find(id);
    if (it != byId_.end() && it->second->special) return std::nullopt;
    std::string content = it != byId_.end() ? it->second->content : model_->idToToken(id).value_or(std::string());
    if (content.empty()) return std::nullopt;
    if (decoder_ && decoder_->byteLevel()) {
      std::string bytes;
      for (uint32_t cp : unicode::decodeUtf8(content)) {
        const int b = charToByte(cp);
        if (b < 0) return content;  // not byte-mapped (an added token's raw text): decoded as it is
        bytes += static_cast<char>(b);
      }
      return bytes;
    }
    if (content.size() == 6 && content.rfind("<0x", 0) == 0 && content[5] == '>') {  // byte fallback
      const std::string hex = content.substr(3, 2);
      if (hex.find_first_not_of("0123456789ABCDEFabcdef") == std::string::npos)
        return std::string(1, static_cast<char>(std::stoi(hex, nullptr, 16)));
    }
    std::string text = decode({id}, false);
    if (text.find("\xEF\xBF\xBD") != std::string::npos) return std::nullopt;
    static const std::string kMetaspace = "\xE2\x96\x81";
    if (content.rfind(kMetaspace, 0) == 0 && (text.empty() || text[0] != ' ')) text.insert(0, 1, ' ');
    return text;
  }

  std::optional<int32_t> tokenToId(std::string_view token) const override {
    const auto it = byContent_.find(std::string(token));
    if (it != byContent_.end()) return it->second->id;
    return model_->tokenToId(token);
  }
  std::string idToToken(int32_t id) const override {
    const auto it = byId_.find(id);
    if (it != byId_.end()) return it->second->content;
    auto t = model_->idToToken(id);
    return t ? *t : std::string();
  }
  bool isSpecial(int32_t id) const override {
    const auto it = byId_.find(id);
    return it != byId_.end() && it->second->special;
  }
  int32_t vocabSize() const override { return vocabSize_; }

 private:
  std::unique_ptr<Model> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> preTokenizer_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<PostProcessor> postProcessor_;
  std::vector<AddedToken> added_, normalizedContent_;
  std::map<int32_t, const AddedToken*> byId_;
  std::map<std::string, const AddedToken*, std::less<>> byContent_;
  AddedMatcher raw_, normalizedMatcher_;
  int32_t vocabSize_ = 0;
};

}  // namespace
}  // namespace tok

std::unique_ptr<Tokenizer> Tokenizer::fromFile(const std::filesystem::path& tokenizerJson) {
  const std::string file = tokenizerJson.string();
  std::ifstream in(tokenizerJson, std::ios::binary);
  if (!in) throw Error(file + ": cannot open tokenizer file");
  std::stringstream ss;
  ss << in.rdbuf();
  return fromJson(ss.str(), file);
}

std::unique_ptr<Tokenizer> Tokenizer::fromJson(std::string_view text, const std::string& name) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": invalid JSON: " + e.what());
  }
  try {
    return std::make_unique<tok::HfTokenizer>(j, name);
  } catch (const nlohmann::json::exception& e) {
    // A field of an unexpected JSON type deep inside a component the checks above did not name.
    throw Error(name + ": malformed tokenizer.json: " + e.what());
  }
}

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skipSpecialTokens)
    : tokenizer_(tokenizer), skipSpecial_(skipSpecialTokens) {}

// Decodes everything so far and emits the new text up to the last complete character: trailing
// U+FFFD (an incomplete byte sequence that a later token may complete) is held back, and nothing is
// emitted while the last token is a <0xXX> byte token, because the ByteFallback decoder turns a whole
// run of byte tokens into U+FFFDs when the run is not valid UTF-8 (the run is final once it ends).
// Cost: one decode of all ids so far per push.
std::string StreamingDecoder::push(int32_t id) {
  ids_.push_back(id);
  const std::string token = tokenizer_.idToToken(id);
  if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') return {};
  // A skipped special token, or an id outside the tokenizer's vocabulary (models pad their embedding
  // beyond it), decodes to nothing and must not end a run of byte tokens early: the full decode
  // sees the run without it.
  if (token.empty() || (skipSpecial_ && tokenizer_.isSpecial(id))) return {};
  const std::string text = tokenizer_.decode(ids_, skipSpecial_);
  size_t end = text.size();
  static const std::string kReplacement = "\xEF\xBF\xBD";
  while (end >= emittedBytes_ + 3 && text.compare(end - 3, 3, kReplacement) == 0) end -= 3;
  if (end <= emittedBytes_) return {};
  std::string out = text.substr(emittedBytes_, end - emittedBytes_);
  emittedBytes_ = end;
  return out;
}

std::string StreamingDecoder::finish() {
  const std::string text = tokenizer_.decode(ids_, skipSpecial_);
  std::string out = emittedBytes_ < text.size() ? text.substr(emittedBytes_) : std::string();
  emittedBytes_ = text.size();
  return out;
}

}  // namespace zipmoe
