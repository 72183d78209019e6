// Unicode data for the tokenizer: the generated tables (unicode_tables.cpp, written by
// scripts/dev/gen_unicode_tables.py) and the small API over them — general category, White_Space,
// combining class, NFC/NFKC normalization, simple lowercase and UTF-8 coding helpers.
// Thread-safety: all functions are pure; lookup tables are built once, on first use.
// Cost: category/ccc are a binary search over ranges (ASCII is a fast path); normalization is linear.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zipmoe::unicode {

namespace tables {
struct CategoryRun { uint32_t first, last; uint8_t cat; };
struct CombiningRun { uint32_t first, last; uint8_t ccc; };
struct Decomposition { uint32_t cp, offset; uint8_t length, compat; };
struct Composition { uint32_t first, second, composite; };
struct CaseMapping { uint32_t cp, mapped; };
extern const char* const kUnicodeVersion;
extern const CategoryRun kCategoryRuns[];
extern const size_t kCategoryRunsCount;
extern const CombiningRun kCombiningRuns[];
extern const size_t kCombiningRunsCount;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionsCount;
extern const uint32_t kDecompositionPool[];
extern const Composition kCompositions[];
extern const size_t kCompositionsCount;
extern const CaseMapping kLowercase[];
extern const size_t kLowercaseCount;
}  // namespace tables

// General categories, in the generator's order.
enum class Category : uint8_t {
  Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp,
  Cc, Cf, Cs, Co
};

Category category(uint32_t cp);
inline bool isLetter(uint32_t cp) {
  const auto c = category(cp);
  return c >= Category::Lu && c <= Category::Lo;
}
inline bool isNumber(uint32_t cp) {
  const auto c = category(cp);
  return c >= Category::Nd && c <= Category::No;
}
inline bool isMark(uint32_t cp) {
  const auto c = category(cp);
  return c >= Category::Mn && c <= Category::Me;
}
// The White_Space property (what Oniguruma's \s and Rust's char::is_whitespace use).
bool isWhitespace(uint32_t cp);
uint8_t combiningClass(uint32_t cp);
uint32_t toLowerSimple(uint32_t cp);

// UTF-8. decodeUtf8 maps each invalid byte to U+FFFD (inputs here are valid UTF-8 strings).
std::vector<uint32_t> decodeUtf8(std::string_view s);
void appendUtf8(std::string& out, uint32_t cp);
// Length of the UTF-8 sequence a lead byte starts (1 for invalid lead bytes).
size_t utf8Length(unsigned char lead);
// Like Rust's String::from_utf8_lossy: each maximal invalid subpart becomes one U+FFFD.
std::string utf8Lossy(std::string_view bytes);

enum class NormalForm { NFC, NFKC, NFD, NFKD };
std::string normalize(std::string_view s, NormalForm form);
std::string lowercase(std::string_view s);

}  // namespace zipmoe::unicode
