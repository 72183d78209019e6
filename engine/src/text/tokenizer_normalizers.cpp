// Normalizers of tokenizer.json: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace (string pattern),
// Strip, Sequence, and Precompiled (SentencePiece's charsmap: see tokenizer_precompiled.cpp).
// Each maps a whole piece of text to its normalized form; the tokenizer does not track offsets.
#include <memory>

#include "text/tokenizer_internal.h"
#include "text/unicode_tables.h"

namespace zipmoe::tok {

std::unique_ptr<Normalizer> makePrecompiled(const json& j, const Where& w);

namespace {

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(unicode::NormalForm f) : form_(f) {}
  std::string normalize(std::string text) const override { return unicode::normalize(text, form_); }

 private:
  unicode::NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  std::string normalize(std::string text) const override { return unicode::lowercase(text); }
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string p) : prefix_(std::move(p)) {}
  std::string normalize(std::string text) const override { return text.empty() ? text : prefix_ + text; }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  std::string normalize(std::string text) const override {
    if (from_.empty()) return text;
    std::string out;
    size_t pos = 0;
    for (;;) {
      const size_t hit = text.find(from_, pos);
      if (hit == std::string::npos) break;
      out.append(text, pos, hit - pos);
      out += to_;
      pos = hit + from_.size();
    }
    out.append(text, pos, std::string::npos);
    return out;
  }

 private:
  std::string from_, to_;
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    const auto cps = unicode::decodeUtf8(text);
    size_t b = 0, e = cps.size();
    if (left_) while (b < e && unicode::isWhitespace(cps[b])) ++b;
    if (right_) while (e > b && unicode::isWhitespace(cps[e - 1])) --e;
    std::string out;
    for (size_t i = b; i < e; ++i) unicode::appendUtf8(out, cps[i]);
    return out;
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  std::string normalize(std::string text) const override {
    for (const auto& p : parts_) text = p->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

std::string stringPattern(const json& j, const Where& w) {
  if (!j.is_object()) w.fail("expected a pattern object");
  if (j.contains("String") && j["String"].is_string()) return j["String"].get<std::string>();
  if (j.contains("Regex")) w.fail("unsupported Regex pattern in a Replace component: " + j.dump());
  w.fail("malformed pattern " + j.dump());
}

}  // namespace

std::string replacePatternString(const json& j, const Where& w) { return stringPattern(j, w); }

std::unique_ptr<Normalizer> makeNormalizer(const json& j, const Where& w) {
  if (j.is_null()) return nullptr;
  const std::string& type = jsonTypeOf(j, w);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(unicode::NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Prepend") {
    if (!j.contains("prepend") || !j["prepend"].is_string()) w.at("prepend").fail("expected a string");
    return std::make_unique<Prepend>(j["prepend"].get<std::string>());
  }
  if (type == "Replace") {
    if (!j.contains("content") || !j["content"].is_string()) w.at("content").fail("expected a string");
    return std::make_unique<Replace>(stringPattern(j.value("pattern", json()), w.at("pattern")),
                                     j["content"].get<std::string>());
  }
  if (type == "Strip") return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "Precompiled") return makePrecompiled(j, w);
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) w.at("normalizers").fail("expected an array");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < j["normalizers"].size(); ++i) {
      auto p = makeNormalizer(j["normalizers"][i], w.at("normalizers").at(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  w.at("type").fail("unsupported normalizer type \"" + type + "\"");
}

}  // namespace zipmoe::tok
