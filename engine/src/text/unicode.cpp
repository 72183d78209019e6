// The Unicode API of unicode_tables.h over the generated tables: category/combining-class lookups by
// binary search, NFC/NFKC/NFD/NFKD (canonical ordering, algorithmic Hangul, primary composites) and
// UTF-8 helpers including Rust's from_utf8_lossy replacement rule.
#include <algorithm>
#include <array>
#include <unordered_map>

#include "text/unicode_tables.h"

namespace zipmoe::unicode {
namespace {

using namespace tables;

const std::array<uint8_t, 128>& asciiCategories() {
  static const std::array<uint8_t, 128> kTable = [] {
    std::array<uint8_t, 128> t{};
    for (uint32_t cp = 0; cp < 128; ++cp) {
      const auto* end = kCategoryRuns + kCategoryRunsCount;
      const auto* it = std::upper_bound(kCategoryRuns, end, cp,
                                        [](uint32_t v, const CategoryRun& r) { return v < r.first; });
      t[cp] = (it != kCategoryRuns && cp <= (it - 1)->last) ? (it - 1)->cat : 0;
    }
    return t;
  }();
  return kTable;
}

struct DecompIndex {
  std::unordered_map<uint32_t, const Decomposition*> byCp;
  std::unordered_map<uint64_t, uint32_t> compose;
  DecompIndex() {
    byCp.reserve(kDecompositionsCount);
    for (size_t i = 0; i < kDecompositionsCount; ++i) byCp.emplace(kDecompositions[i].cp, &kDecompositions[i]);
    compose.reserve(kCompositionsCount);
    for (size_t i = 0; i < kCompositionsCount; ++i)
      compose.emplace((uint64_t{kCompositions[i].first} << 32) | kCompositions[i].second, kCompositions[i].composite);
  }
};
const DecompIndex& decompIndex() {
  static const DecompIndex kIndex;
  return kIndex;
}

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decomposeInto(uint32_t cp, bool compat, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp < 0xA0) {  // nothing below U+00A0 decomposes
    out.push_back(cp);
    return;
  }
  const auto& idx = decompIndex().byCp;
  const auto it = idx.find(cp);
  if (it == idx.end() || (it->second->compat && !compat)) {
    out.push_back(cp);
    return;
  }
  const Decomposition& d = *it->second;
  for (uint32_t i = 0; i < d.length; ++i) decomposeInto(kDecompositionPool[d.offset + i], compat, out);
}

void canonicalOrder(std::vector<uint32_t>& cps) {
  // Stable sort of each run of non-starters by combining class.
  size_t i = 0;
  while (i < cps.size()) {
    if (combiningClass(cps[i]) == 0) { ++i; continue; }
    size_t j = i;
    while (j < cps.size() && combiningClass(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i), cps.begin() + static_cast<std::ptrdiff_t>(j),
                     [](uint32_t a, uint32_t b) { return combiningClass(a) < combiningClass(b); });
    i = j;
  }
}

uint32_t composePair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto& c = decompIndex().compose;
  const auto it = c.find((uint64_t{a} << 32) | b);
  return it == c.end() ? 0 : it->second;
}

void compose(std::vector<uint32_t>& cps) {
  if (cps.empty()) return;
  size_t starter = 0;
  bool haveStarter = combiningClass(cps[0]) == 0;
  std::vector<uint32_t> out;
  out.reserve(cps.size());
  out.push_back(cps[0]);
  int lastClass = haveStarter ? 0 : 256;
  for (size_t i = 1; i < cps.size(); ++i) {
    const uint32_t c = cps[i];
    const int cc = combiningClass(c);
    if (haveStarter && (lastClass < cc || (lastClass == 0 && out.size() - 1 == starter))) {
      const uint32_t composed = composePair(out[starter], c);
      if (composed) {
        out[starter] = composed;
        continue;
      }
    }
    if (cc == 0) {
      starter = out.size();
      haveStarter = true;
    }
    lastClass = cc;
    out.push_back(c);
  }
  cps.swap(out);
}

}  // namespace

Category category(uint32_t cp) {
  if (cp < 128) return static_cast<Category>(asciiCategories()[cp]);
  const auto* end = kCategoryRuns + kCategoryRunsCount;
  const auto* it = std::upper_bound(kCategoryRuns, end, cp, [](uint32_t v, const CategoryRun& r) { return v < r.first; });
  if (it == kCategoryRuns) return Category::Cn;
  --it;
  return cp <= it->last ? static_cast<Category>(it->cat) : Category::Cn;
}

bool isWhitespace(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

uint8_t combiningClass(uint32_t cp) {
  if (cp < 0x300) return 0;
  const auto* end = kCombiningRuns + kCombiningRunsCount;
  const auto* it = std::upper_bound(kCombiningRuns, end, cp, [](uint32_t v, const CombiningRun& r) { return v < r.first; });
  if (it == kCombiningRuns) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

uint32_t toLowerSimple(uint32_t cp) {
  if (cp < 128) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  const auto* end = kLowercase + kLowercaseCount;
  const auto* it = std::lower_bound(kLowercase, end, cp, [](const CaseMapping& m, uint32_t v) { return m.cp < v; });
  return (it != end && it->cp == cp) ? it->mapped : cp;
}

size_t utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

std::vector<uint32_t> decodeUtf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = utf8Length(b);
    if (n == 1 || i + n > s.size()) {
      out.push_back(b < 0x80 ? b : 0xFFFD);
      ++i;
      continue;
    }
    uint32_t cp = b & (0xFFu >> (n + 1));
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
    out.push_back(cp);
    i += n;
  }
  return out;
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8Lossy(std::string_view s) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) { out += static_cast<char>(b); ++i; continue; }
    size_t need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b >= 0xE0 && b <= 0xEF) { need = 2; if (b == 0xE0) lo = 0xA0; if (b == 0xED) hi = 0x9F; }
    else if (b >= 0xF0 && b <= 0xF4) { need = 3; if (b == 0xF0) lo = 0x90; if (b == 0xF4) hi = 0x8F; }
    if (need == 0) { out += kReplacement; ++i; continue; }
    size_t k = 1;
    for (; k <= need && i + k < s.size(); ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      const unsigned char l = (k == 1) ? lo : 0x80, h = (k == 1) ? hi : 0xBF;
      if (c < l || c > h) break;
    }
    if (k == need + 1) {
      out.append(s.substr(i, need + 1));
      i += need + 1;
    } else {
      out += kReplacement;
      i += k;
    }
  }
  return out;
}

std::string normalize(std::string_view s, NormalForm form) {
  bool ascii = true;
  for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(s);
  const bool compat = form == NormalForm::NFKC || form == NormalForm::NFKD;
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (uint32_t cp : decodeUtf8(s)) decomposeInto(cp, compat, cps);
  canonicalOrder(cps);
  if (form == NormalForm::NFC || form == NormalForm::NFKC) compose(cps);
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : cps) appendUtf8(out, cp);
  return out;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : decodeUtf8(s)) {
    if (cp == 0x130) { out += "i\xCC\x87"; continue; }  // İ → i + combining dot, as Rust's to_lowercase
    appendUtf8(out, toLowerSimple(cp));
  }
  return out;
}

}  // namespace zipmoe::unicode
