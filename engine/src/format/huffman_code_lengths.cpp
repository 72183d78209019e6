// Package-merge for optimal length-limited Huffman code lengths; canonical code assignment.
//
// Package-merge, as used here: sort the n present symbols by count (the "leaves"). The list for the
// deepest level is the leaves themselves. Each shallower level's list is the leaves merged (by weight)
// with "packages", each the sum of two consecutive items of the previous level's list. The optimal code
// takes the 2n-2 lightest items of the final (shallowest) list; a symbol's code length is the number
// of selected items it is part of. Because every list is sorted and the leaves in any prefix are the
// lightest leaves, the selection is described by one prefix length per level: the c items taken from
// level j contain k leaves (the k lightest symbols get one more bit) and c-k packages, which are
// exactly the first 2(c-k) items of level j-1. So we only record, per level, whether each list slot
// is a leaf, and walk the levels back once.
#include "format/huffman_code_lengths.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

namespace zipmoe::detail {

void huffmanCodeLengths(const uint64_t* counts, int maxBits, uint8_t* lengths) {
  if (maxBits < 1 || maxBits > 16)
    throw std::invalid_argument("huffmanCodeLengths: maxBits must be in 1..16");
  std::array<uint8_t, 256> order{};  // present symbols, lightest first (ties: smaller symbol first)
  size_t n = 0;
  for (int s = 0; s < 256; ++s) {
    lengths[s] = 0;
    if (counts[s] != 0) order[n++] = static_cast<uint8_t>(s);
  }
  if (n == 0) return;
  if (n == 1) {
    lengths[order[0]] = 1;
    return;
  }
  if (n > (size_t{1} << maxBits))
    throw std::invalid_argument("huffmanCodeLengths: more symbols than codes of maxBits bits");
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n),
            [&](uint8_t a, uint8_t b) { return counts[a] != counts[b] ? counts[a] < counts[b] : a < b; });

  // Only the first 2n-2 items of any list can ever be selected (each level selects at most 2n-2 items
  // and the items selected at a level form a prefix), so lists are cut there.
  const size_t keep = 2 * n - 2;
  const auto levels = static_cast<size_t>(maxBits);
  std::vector<uint8_t> isLeaf(levels * keep);  // isLeaf[level * keep + i]; level 0 = deepest
  std::vector<size_t> listSize(levels);
  std::vector<uint64_t> weights(keep), next(keep);

  size_t size = std::min(n, keep);
  for (size_t i = 0; i < size; ++i) {
    weights[i] = counts[order[i]];
    isLeaf[i] = 1;
  }
  listSize[0] = size;
  for (size_t level = 1; level < levels; ++level) {
    const size_t packages = size / 2;
    size_t leaf = 0, pkg = 0, out = 0;
    uint8_t* flags = &isLeaf[level * keep];
    while (out < keep && (leaf < n || pkg < packages)) {
      const bool takeLeaf =
          pkg >= packages || (leaf < n && counts[order[leaf]] <= weights[2 * pkg] + weights[2 * pkg + 1]);
      if (takeLeaf) {
        next[out] = counts[order[leaf++]];
        flags[out++] = 1;
      } else {
        next[out] = weights[2 * pkg] + weights[2 * pkg + 1];
        ++pkg;
        flags[out++] = 0;
      }
    }
    size = out;
    listSize[level] = size;
    std::swap(weights, next);
  }

  // Walk back from the shallowest level: its first 2n-2 items are the selection.
  size_t take = keep;
  for (size_t level = levels; level-- > 0;) {
    const uint8_t* flags = &isLeaf[level * keep];
    size_t leaves = 0;
    for (size_t i = 0; i < take; ++i) leaves += flags[i];
    for (size_t i = 0; i < leaves; ++i) ++lengths[order[i]];
    take = 2 * (take - leaves);
    if (level > 0 && take > listSize[level - 1])
      throw std::logic_error("huffmanCodeLengths: package-merge selection exceeds a list");  // unreachable
  }
}

void canonicalReversedCodes(const uint8_t* lengths, uint16_t* codes) {
  // Canonical order: by length, then by symbol value. nextCode[len] is the first code of that length.
  std::array<uint32_t, 18> perLength{};
  for (int s = 0; s < 256; ++s) ++perLength[lengths[s]];
  perLength[0] = 0;
  std::array<uint32_t, 18> nextCode{};
  uint32_t code = 0;
  for (int len = 1; len <= 16; ++len) {
    code = (code + perLength[static_cast<size_t>(len - 1)]) << 1;
    nextCode[static_cast<size_t>(len)] = code;
  }
  for (int s = 0; s < 256; ++s) {
    const unsigned len = lengths[s];
    codes[s] = 0;
    if (len == 0) continue;
    const uint32_t c = nextCode[len]++;
    uint32_t reversed = 0;
    for (unsigned b = 0; b < len; ++b) reversed |= ((c >> b) & 1u) << (len - 1 - b);
    codes[s] = static_cast<uint16_t>(reversed);
  }
}

}  // namespace zipmoe::detail
