// The `Precompiled` normalizer: SentencePiece's precompiled_charsmap (T5, Switch, XLM-R), a base64
// blob holding [u32 trie size][double-array trie of UTF-8 keys][NUL-terminated replacements]. As in
// the `tokenizers` library, text is walked by extended grapheme cluster: a cluster shorter than 6
// bytes is first looked up whole (the first — shortest — trie key that prefixes it replaces the whole
// cluster); otherwise, or without a hit, each character is looked up on its own.
// Grapheme clusters are approximated (documented difference): a cluster is a character followed by
// any Extend/SpacingMark characters (general categories Mn, Me, Mc, ZWJ, emoji modifiers and
// variation selectors), or CR LF. Rules that only join clusters of 6 bytes or more (Hangul jamo, emoji
// ZWJ sequences, regional-indicator pairs) do not matter, because such clusters go per character.
#include <memory>

#include "text/tokenizer_internal.h"
#include "text/unicode_tables.h"

namespace zipmoe::tok {
namespace {

std::string base64Decode(const std::string& in, const Where& w) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
    else if (ch == '+') v = 62;
    else if (ch == '/') v = 63;
    else if (ch == '=') break;
    else w.fail("invalid base64 in precompiled_charsmap");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

class Precompiled final : public Normalizer {
 public:
  Precompiled(const std::string& blob, const Where& w) {
    if (blob.size() < 4) w.fail("precompiled_charsmap too short");
    const uint32_t trieBytes = u32(blob, 0);
    if (trieBytes % 4 || 4 + size_t{trieBytes} > blob.size()) w.fail("precompiled_charsmap: bad trie size");
    units_.resize(trieBytes / 4);
    for (size_t i = 0; i < units_.size(); ++i) units_[i] = u32(blob, 4 + 4 * i);
    pool_ = blob.substr(4 + trieBytes);
    if (units_.empty()) w.fail("precompiled_charsmap: empty trie");
  }

  std::string normalize(std::string text) const override {
    std::string out;
    out.reserve(text.size());
    size_t i = 0;
    while (i < text.size()) {
      const size_t end = clusterEnd(text, i);
      const std::string_view cluster(text.data() + i, end - i);
      std::string_view rep;
      if (cluster.size() < 6 && lookup(cluster, rep)) {
        out += rep;
      } else {
        size_t k = 0;
        while (k < cluster.size()) {
          const size_t n = std::min(unicode::utf8Length(static_cast<unsigned char>(cluster[k])), cluster.size() - k);
          const std::string_view ch = cluster.substr(k, n);
          if (lookup(ch, rep)) out += rep;
          else out += ch;
          k += n;
        }
      }
      i = end;
    }
    return out;
  }

 private:
  static uint32_t u32(const std::string& s, size_t at) {
    return static_cast<uint32_t>(static_cast<unsigned char>(s[at])) |
           static_cast<uint32_t>(static_cast<unsigned char>(s[at + 1])) << 8 |
           static_cast<uint32_t>(static_cast<unsigned char>(s[at + 2])) << 16 |
           static_cast<uint32_t>(static_cast<unsigned char>(s[at + 3])) << 24;
  }
  static uint32_t offsetOf(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

  // The first (shortest) trie key that prefixes `key`.
  bool lookup(std::string_view key, std::string_view& rep) const {
    size_t node = offsetOf(units_[0]);
    for (char ch : key) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == 0) return false;
      node ^= c;
      if (node >= units_.size()) return false;
      const uint32_t unit = units_[node];
      if ((unit & ((1u << 31) | 0xFFu)) != c) return false;
      node ^= offsetOf(unit);
      if (node >= units_.size()) return false;
      if ((unit >> 8) & 1u) {
        const size_t value = units_[node] & ((1u << 31) - 1);
        if (value >= pool_.size()) return false;
        const size_t stop = pool_.find('\0', value);
        rep = std::string_view(pool_).substr(value, (stop == std::string::npos ? pool_.size() : stop) - value);
        return true;
      }
    }
    return false;
  }

  static bool extends(uint32_t cp) {
    const auto c = unicode::category(cp);
    if (c == unicode::Category::Mn || c == unicode::Category::Me || c == unicode::Category::Mc) return true;
    return cp == 0x200D || (cp >= 0x1F3FB && cp <= 0x1F3FF) || (cp >= 0xFE00 && cp <= 0xFE0F) ||
           (cp >= 0xE0020 && cp <= 0xE007F);
  }

  static size_t clusterEnd(const std::string& s, size_t i) {
    auto next = [&](size_t at, uint32_t& cp) {
      const size_t n = std::min(unicode::utf8Length(static_cast<unsigned char>(s[at])), s.size() - at);
      cp = unicode::decodeUtf8(std::string_view(s).substr(at, n)).front();
      return at + n;
    };
    uint32_t first = 0;
    size_t pos = next(i, first);
    if (first == '\r') return (pos < s.size() && s[pos] == '\n') ? pos + 1 : pos;
    if (first < 0x20 || first == 0x7F || first == '\n') return pos;
    while (pos < s.size()) {
      uint32_t cp = 0;
      const size_t after = next(pos, cp);
      if (!extends(cp)) break;
      pos = after;
    }
    return pos;
  }

  std::vector<uint32_t> units_;
  std::string pool_;
};

}  // namespace

std::unique_ptr<Normalizer> makePrecompiled(const json& j, const Where& w) {
  if (!j.contains("precompiled_charsmap") || !j["precompiled_charsmap"].is_string())
    w.at("precompiled_charsmap").fail("expected a base64 string");
  return std::make_unique<Precompiled>(base64Decode(j["precompiled_charsmap"].get<std::string>(), w),
                                       w.at("precompiled_charsmap"));
}

}  // namespace zipmoe::tok
