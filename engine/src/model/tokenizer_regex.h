// A small backtracking regex engine over code points for the pre-tokenizer patterns of Hugging Face
// tokenizers (which use Oniguruma). Supported: literals and escapes, `.`, classes `[...]` with ranges,
// negation and \p{..}/\P{..}/\s/\S/\d/\D/\w/\W inside, alternation, non-capturing groups `(?:...)`,
// case-insensitive groups `(?i:...)`, quantifiers ? * + {m} {m,} {m,n} (greedy and lazy), lookahead
// `(?=...)`/`(?!...)`, and the anchors ^ $ \A \z (Ruby semantics: ^/$ also match at line breaks).
// Anything else makes the constructor throw std::invalid_argument naming the construct, so that an
// unknown pattern is rejected at load time rather than splitting text wrongly.
// Thread-safety: a compiled Regex is immutable; findAll may run concurrently.
// Cost: compile is linear in the pattern; matching is backtracking, linear for the patterns real
// tokenizers use (greedy single-character repeats are matched iteratively).
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
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  // Non-overlapping leftmost matches over code points `text`, as [begin, end) code-point indices.
  // Empty matches are skipped.
  std::vector<std::pair<size_t, size_t>> findAll(const std::vector<uint32_t>& text) const;
  struct Node;

 private:
  std::unique_ptr<Node> root_;
};

}  // namespace zipmoe::tok
