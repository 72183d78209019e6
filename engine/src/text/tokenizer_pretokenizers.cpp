// Pre-tokenizers of tokenizer.json: Split (Regex or String pattern, every behavior, invert),
// ByteLevel (add_prefix_space, use_regex with GPT-2's pattern, then the byte → printable map),
// Metaspace (replacement, prepend_scheme first/always/never or legacy add_prefix_space, split),
// WhitespaceSplit, Whitespace, Digits and Sequence. Regexes run on tokenizer_regex.h's engine; a
// pattern it cannot parse is a load error naming the pattern.
#include <algorithm>
#include <functional>
#include <memory>
#include <stdexcept>

#include "text/tokenizer_internal.h"
#include "text/tokenizer_regex.h"
#include "text/unicode_tables.h"

namespace zipmoe::tok {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

SplitBehavior parseBehavior(const json& j, const Where& w) {
  const std::string s = j.is_string() ? j.get<std::string>() : std::string();
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  w.fail("unknown split behavior " + j.dump());
}

std::vector<std::string> splitBySpans(const std::string& text, const std::vector<std::pair<size_t, size_t>>& spans,
                                      SplitBehavior behavior, bool invert) {
  // Cover the text with (range, isMatch) as the library's find_matches does.
  struct Part { size_t b, e; bool match; };
  std::vector<Part> parts;
  if (text.empty()) return {};
  size_t prev = 0;
  for (const auto& [b, e] : spans) {
    if (b > prev) parts.push_back({prev, b, false});
    parts.push_back({b, e, true});
    prev = e;
  }
  if (prev < text.size()) parts.push_back({prev, text.size(), false});
  if (invert)
    for (auto& p : parts) p.match = !p.match;
  struct Out { size_t b, e; bool remove; };
  std::vector<Out> outs;
  bool previousMatch = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const auto& p : parts) outs.push_back({p.b, p.e, false});
      break;
    case SplitBehavior::Removed:
      for (const auto& p : parts) outs.push_back({p.b, p.e, p.match});
      break;
    case SplitBehavior::Contiguous:
      for (const auto& p : parts) {
        if (p.match == previousMatch && !outs.empty()) outs.back().e = p.e;
        else outs.push_back({p.b, p.e, false});
        previousMatch = p.match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const auto& p : parts) {
        if (p.match && !previousMatch && !outs.empty()) outs.back().e = p.e;
        else outs.push_back({p.b, p.e, false});
        previousMatch = p.match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (size_t i = parts.size(); i-- > 0;) {
        const auto& p = parts[i];
        if (p.match && !previousMatch && !outs.empty()) outs.back().b = p.b;
        else outs.push_back({p.b, p.e, false});
        previousMatch = p.match;
      }
      std::reverse(outs.begin(), outs.end());
      break;
  }
  std::vector<std::string> result;
  for (const auto& o : outs)
    if (!o.remove && o.e > o.b) result.push_back(text.substr(o.b, o.e - o.b));
  return result;
}

namespace {

// Byte offsets of code-point-index spans.
std::vector<std::pair<size_t, size_t>> regexSpans(const Regex& re, const std::string& text) {
  const auto cps = unicode::decodeUtf8(text);
  std::vector<size_t> offset(cps.size() + 1, 0);
  size_t at = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    offset[i] = at;
    at += unicode::utf8Length(static_cast<unsigned char>(text[at]));
  }
  offset[cps.size()] = text.size();
  std::vector<std::pair<size_t, size_t>> spans;
  for (const auto& [b, e] : re.findAll(cps)) spans.emplace_back(offset[b], offset[e]);
  return spans;
}

void splitEach(std::vector<Piece>& pieces, const std::function<std::vector<std::string>(const std::string&)>& f) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (auto& p : pieces) {
    bool first = true;  // only the first sub-piece of a piece that starts the input still starts it
    for (auto& s : f(p.text)) {
      out.push_back({std::move(s), p.atStart && first});
      first = false;
    }
  }
  pieces.swap(out);
}

Regex compile(const std::string& pattern, const Where& w) {
  try {
    return Regex(pattern);
  } catch (const std::invalid_argument& e) {
    w.fail("unsupported regex pattern \"" + pattern + "\": " + e.what());
  }
}

class Split final : public PreTokenizer {
 public:
  Split(Regex re, SplitBehavior b, bool invert) : re_(std::move(re)), behavior_(b), invert_(invert) {}
  void split(std::vector<Piece>& pieces) const override {
    splitEach(pieces, [&](const std::string& t) { return splitBySpans(t, regexSpans(re_, t), behavior_, invert_); });
  }

 private:
  Regex re_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool prefix, bool useRegex) : prefix_(prefix), useRegex_(useRegex), re_(kGpt2Pattern) {}
  void split(std::vector<Piece>& pieces) const override {
    splitEach(pieces, [&](const std::string& t0) {
      std::string t = (prefix_ && (t0.empty() || t0[0] != ' ')) ? " " + t0 : t0;
      std::vector<std::string> parts =
          useRegex_ ? splitBySpans(t, regexSpans(re_, t), SplitBehavior::Isolated, false) : std::vector<std::string>{t};
      for (auto& p : parts) {
        std::string mapped;
        mapped.reserve(p.size() * 2);
        for (char c : p) unicode::appendUtf8(mapped, byteToChar(static_cast<uint8_t>(c)));
        p.swap(mapped);
      }
      return parts;
    });
  }

 private:
  bool prefix_, useRegex_;
  Regex re_;
};

enum class PrependScheme { Always, First, Never };

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::string rep, PrependScheme scheme, bool split) : rep_(std::move(rep)), scheme_(scheme), split_(split) {}
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (auto& p : pieces) {
      std::string t;
      for (char c : p.text) {
        if (c == ' ') t += rep_;
        else t += c;
      }
      const bool starts = t.compare(0, rep_.size(), rep_) == 0;
      if (!starts && (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && p.atStart))) t = rep_ + t;
      if (!split_) {
        if (!t.empty()) out.push_back({t, p.atStart});
        continue;
      }
      std::vector<std::pair<size_t, size_t>> spans;
      for (size_t at = t.find(rep_); at != std::string::npos; at = t.find(rep_, at + rep_.size()))
        spans.emplace_back(at, at + rep_.size());
      bool first = true;
      for (auto& s : splitBySpans(t, spans, SplitBehavior::MergedWithNext, false)) {
        out.push_back({std::move(s), p.atStart && first});
        first = false;
      }
    }
    pieces.swap(out);
  }

 private:
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

class WhitespaceSplit final : public PreTokenizer {
 public:
  void split(std::vector<Piece>& pieces) const override {
    splitEach(pieces, [](const std::string& t) {
      std::vector<std::string> out;
      std::string cur;
      for (uint32_t cp : unicode::decodeUtf8(t)) {
        if (unicode::isWhitespace(cp)) {
          if (!cur.empty()) out.push_back(std::move(cur));
          cur.clear();
        } else {
          unicode::appendUtf8(cur, cp);
        }
      }
      if (!cur.empty()) out.push_back(std::move(cur));
      return out;
    });
  }
};

class RegexSplitter final : public PreTokenizer {  // Whitespace, Digits
 public:
  RegexSplitter(const std::string& pattern, SplitBehavior b, bool invert) : re_(pattern), b_(b), invert_(invert) {}
  void split(std::vector<Piece>& pieces) const override {
    splitEach(pieces, [&](const std::string& t) { return splitBySpans(t, regexSpans(re_, t), b_, invert_); });
  }

 private:
  Regex re_;
  SplitBehavior b_;
  bool invert_;
};

class SequencePre final : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts_) p->split(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

std::string escapeLiteral(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::unique_ptr<PreTokenizer> makePreTokenizer(const json& j, const Where& w) {
  if (j.is_null()) return nullptr;
  const std::string& type = jsonTypeOf(j, w);
  if (type == "Split") {
    const json& pat = j.value("pattern", json());
    std::string pattern;
    if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string()) pattern = pat["Regex"].get<std::string>();
    else if (pat.is_object() && pat.contains("String") && pat["String"].is_string()) pattern = escapeLiteral(pat["String"].get<std::string>());
    else w.at("pattern").fail("expected {\"Regex\": ...} or {\"String\": ...}");
    return std::make_unique<Split>(compile(pattern, w.at("pattern")), parseBehavior(j.value("behavior", json()), w.at("behavior")),
                                   j.value("invert", false));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevel>(j.value("add_prefix_space", true), j.value("use_regex", true));
  if (type == "Metaspace") {
    std::string rep = j.value("replacement", std::string("\xE2\x96\x81"));
    if (unicode::decodeUtf8(rep).size() != 1) w.at("replacement").fail("expected one character");
    PrependScheme scheme = PrependScheme::Always;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      const std::string s = j["prepend_scheme"].get<std::string>();
      if (s == "always") scheme = PrependScheme::Always;
      else if (s == "first") scheme = PrependScheme::First;
      else if (s == "never") scheme = PrependScheme::Never;
      else w.at("prepend_scheme").fail("unknown prepend_scheme \"" + s + "\"");
    } else if (j.contains("add_prefix_space")) {
      scheme = j.value("add_prefix_space", true) ? PrependScheme::Always : PrependScheme::Never;
    }
    return std::make_unique<Metaspace>(rep, scheme, j.value("split", true));
  }
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplit>();
  if (type == "Whitespace") return std::make_unique<RegexSplitter>(R"(\w+|[^\w\s]+)", SplitBehavior::Removed, true);
  if (type == "Digits")
    return std::make_unique<RegexSplitter>(
        "[0-9]", j.value("individual_digits", false) ? SplitBehavior::Isolated : SplitBehavior::Contiguous, false);
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) w.at("pretokenizers").fail("expected an array");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i) {
      auto p = makePreTokenizer(j["pretokenizers"][i], w.at("pretokenizers").at(i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePre>(std::move(parts));
  }
  w.at("type").fail("unsupported pre-tokenizer type \"" + type + "\"");
}

}  // namespace zipmoe::tok
