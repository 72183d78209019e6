// Decoders and post-processors of tokenizer.json. Decoders (each rewrites the list of token strings
// as the `tokenizers` library's decode_chain does): ByteLevel (printable chars → bytes, then lossy
// UTF-8), Metaspace, Replace (string pattern), ByteFallback (<0xXX> runs → UTF-8, one U+FFFD per byte
// when invalid), Fuse, Strip, Sequence. Post-processors (special tokens around a single sequence):
// TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel (adds nothing) and Sequence.
#include <array>
#include <map>
#include <optional>

#include "text/tokenizer_internal.h"
#include "text/unicode_tables.h"

namespace zipmoe::tok {

std::string replacePatternString(const json& j, const Where& w);

uint32_t byteToChar(uint8_t b) {
  static const std::array<uint32_t, 256> kMap = [] {
    std::array<uint32_t, 256> m{};
    uint32_t next = 256;
    for (uint32_t c = 0; c < 256; ++c) {
      const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
      m[c] = printable ? c : next++;
    }
    return m;
  }();
  return kMap[b];
}

int charToByte(uint32_t cp) {
  static const std::map<uint32_t, int> kInverse = [] {
    std::map<uint32_t, int> m;
    for (int b = 0; b < 256; ++b) m[byteToChar(static_cast<uint8_t>(b))] = b;
    return m;
  }();
  if (cp >= '!' && cp <= '~') return static_cast<int>(cp);
  const auto it = kInverse.find(cp);
  return it == kInverse.end() ? -1 : it->second;
}

namespace {

class ByteLevelDecoder final : public Decoder {
 public:
  bool byteLevel() const override { return true; }
  void decodeChain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      std::string mine;
      bool ok = true;
      for (uint32_t cp : unicode::decodeUtf8(t)) {
        const int b = charToByte(cp);
        if (b < 0) { ok = false; break; }
        mine += static_cast<char>(b);
      }
      bytes += ok ? mine : t;
    }
    tokens = {unicode::utf8Lossy(bytes)};
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string rep, bool prepend) : rep_(std::move(rep)), prepend_(prepend) {}
  void decodeChain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t at = 0; at < t.size();) {
        if (t.compare(at, rep_.size(), rep_) == 0) {
          if (!(i == 0 && prepend_)) out += ' ';
          at += rep_.size();
        } else {
          out += t[at++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string rep_;
  bool prepend_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  void decodeChain(std::vector<std::string>& tokens) const override {
    if (from_.empty()) return;
    for (auto& t : tokens) {
      std::string out;
      size_t pos = 0;
      for (size_t hit = t.find(from_); hit != std::string::npos; hit = t.find(from_, pos)) {
        out.append(t, pos, hit - pos);
        out += to_;
        pos = hit + from_.size();
      }
      out.append(t, pos, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string from_, to_;
};

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class ByteFallbackDecoder final : public Decoder {
 public:
  void decodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (unicode::utf8Lossy(pending) == pending) out.push_back(pending);
      else
        for (size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
      pending.clear();
    };
    for (auto& t : tokens) {
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hexDigit(t[3]) >= 0 && hexDigit(t[4]) >= 0) {
        pending += static_cast<char>(hexDigit(t[3]) * 16 + hexDigit(t[4]));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens.swap(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decodeChain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens = {all};
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(uint32_t c, size_t start, size_t stop) : c_(c), start_(start), stop_(stop) {}
  void decodeChain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      const auto cps = unicode::decodeUtf8(t);
      size_t b = 0, e = cps.size();
      while (b < start_ && b < e && cps[b] == c_) ++b;
      size_t stripped = 0;
      while (stripped < stop_ && e > b && cps[e - 1] == c_) --e, ++stripped;
      std::string out;
      for (size_t i = b; i < e; ++i) unicode::appendUtf8(out, cps[i]);
      t = std::move(out);
    }
  }

 private:
  uint32_t c_;
  size_t start_, stop_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decodeChain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) p->decodeChain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

class TemplatePost final : public PostProcessor {
 public:
  TemplatePost(const json& j, const Where& w) {
    const json& single = j.value("single", json());
    if (!single.is_array()) w.at("single").fail("expected an array");
    const json& specials = j.value("special_tokens", json::object());
    for (size_t i = 0; i < single.size(); ++i) {
      const json& item = single[i];
      if (item.contains("Sequence")) {
        items_.push_back({});
      } else if (item.contains("SpecialToken") && item["SpecialToken"].contains("id")) {
        const std::string name = item["SpecialToken"]["id"].get<std::string>();
        if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
          w.at("special_tokens").fail("no ids for special token \"" + name + "\"");
        items_.push_back(specials[name]["ids"].get<std::vector<int32_t>>());
      } else {
        w.at("single").at(i).fail("expected Sequence or SpecialToken");
      }
    }
  }
  void process(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    for (const auto& item : items_) {
      if (!item) out.insert(out.end(), ids.begin(), ids.end());
      else out.insert(out.end(), item->begin(), item->end());
    }
    ids.swap(out);
  }

 private:
  std::vector<std::optional<std::vector<int32_t>>> items_;
};

class WrapPost final : public PostProcessor {  // Roberta/Bert: cls + A + sep
 public:
  WrapPost(int32_t cls, int32_t sep) : cls_(cls), sep_(sep) {}
  void process(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 2);
    out.push_back(cls_);
    out.insert(out.end(), ids.begin(), ids.end());
    out.push_back(sep_);
    ids.swap(out);
  }

 private:
  int32_t cls_, sep_;
};

class SequencePost final : public PostProcessor {
 public:
  explicit SequencePost(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& p : parts_) p->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> makeDecoder(const json& j, const Where& w) {
  if (j.is_null()) return nullptr;
  const std::string& type = jsonTypeOf(j, w);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    bool prepend = true;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) prepend = j["prepend_scheme"].get<std::string>() != "never";
    else if (j.contains("add_prefix_space")) prepend = j.value("add_prefix_space", true);
    return std::make_unique<MetaspaceDecoder>(j.value("replacement", std::string("\xE2\x96\x81")), prepend);
  }
  if (type == "Replace") {
    if (!j.contains("content") || !j["content"].is_string()) w.at("content").fail("expected a string");
    return std::make_unique<ReplaceDecoder>(replacePatternString(j.value("pattern", json()), w.at("pattern")),
                                            j["content"].get<std::string>());
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const auto cps = unicode::decodeUtf8(j.value("content", std::string(" ")));
    if (cps.size() != 1) w.at("content").fail("expected one character");
    return std::make_unique<StripDecoder>(cps[0], j.value("start", size_t{0}), j.value("stop", size_t{0}));
  }
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array()) w.at("decoders").fail("expected an array");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < j["decoders"].size(); ++i) {
      auto p = makeDecoder(j["decoders"][i], w.at("decoders").at(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  w.at("type").fail("unsupported decoder type \"" + type + "\"");
}

std::unique_ptr<PostProcessor> makePostProcessor(const json& j, const Where& w) {
  if (j.is_null()) return nullptr;
  const std::string& type = jsonTypeOf(j, w);
  if (type == "TemplateProcessing") return std::make_unique<TemplatePost>(j, w);
  if (type == "ByteLevel") return nullptr;
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    auto idOf = [&](const char* key) {
      if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2 || !j[key][1].is_number_integer())
        w.at(key).fail("expected [token, id]");
      return j[key][1].get<int32_t>();
    };
    return std::make_unique<WrapPost>(idOf("cls"), idOf("sep"));
  }
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array()) w.at("processors").fail("expected an array");
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (size_t i = 0; i < j["processors"].size(); ++i) {
      auto p = makePostProcessor(j["processors"][i], w.at("processors").at(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePost>(std::move(parts));
  }
  w.at("type").fail("unsupported post-processor type \"" + type + "\"");
}

}  // namespace zipmoe::tok
