// A small backtracking regex engine over code points for the pre-tokenizer patterns of Hugging Face
// tokenizers (which use Oniguruma). Supported: literals and escapes, `.`, classes `[...]` with ranges,
// negation and \p{..}/\P{..}/\s/\S/\d/\D/\w/\W inside, alternation, non-capturing groups `(?:...)`,
// case-insensitive groups `(?i:...)`, quantifiers ? * + {m} {m,} {m,n} (greedy and lazy), lookahead
// `(?=...)`/`(?!...)`, and the anchors ^ $ \A \z (Ruby semantics: ^/$ also match at line breaks).
// Anything else makes the constructor throw std::invalid_argument naming the construct, so that an
// unknown pattern is rejected at load time rather than splitting text wrongly.
// Thread-safety: a compiled Regex is immutable; findAll may run concurrently.
// Cost: compile is linear in the pattern; matching is backtracking, linear for the patterns real
// tokenizers use (greedy single-character repeats are matched iteratively). A tokenizer.json is
// untrusted input, so both are bounded: groups nest at most kMaxGroupDepth deep and {m,n} counts
// stay ≤ kMaxRepeatCount (else the constructor throws); findAll may take at most kBaseSteps +
// kStepsPerCodePoint × (code points) steps in all and one match attempt kMaxDepth levels of
// recursion (else it throws zipmoe::Error naming the pattern and the position) — a pathological
// pattern fails in time linear in the text instead of hanging or overflowing the stack. Real
// tokenizers' patterns take a few steps per code point (tests/engine/model/test_tokenizer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace zipmoe::tok {

class Regex {
 public:
  static constexpr int kMaxGroupDepth = 64;
  static constexpr int kMaxRepeatCount = 100000;
  static constexpr uint64_t kBaseSteps = 1u << 20;
  static constexpr uint64_t kStepsPerCodePoint = 256;
  static constexpr int kMaxDepth = 2000;

  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  // Non-overlapping leftmost matches over code points `text`, as [begin, end) code-point indices.
  // Empty matches are skipped.
  // Throws zipmoe::Error when a match attempt exceeds the limits above.
  std::vector<std::pair<size_t, size_t>> findAll(const std::vector<uint32_t>& text) const;
  const std::string& pattern() const { return pattern_; }
  struct Node;

 private:
  std::string pattern_;
  std::unique_ptr<Node> root_;
};

}  // namespace zipmoe::tok
