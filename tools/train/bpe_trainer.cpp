// trainBpe: greedy pair merging over counted pre-tokens. See bpe_trainer.h.
// Thread-safety: pure. Cost: O(merges × distinct pre-tokens × length).
#include "bpe_trainer.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "zipmoe/base/error.h"

namespace zipmoe::train {

ByteLevelBpe trainBpe(std::string_view text, int32_t vocabSize) {
  if (vocabSize < 257)
    throw Error("BPE training: vocabulary size " + std::to_string(vocabSize) +
                " is too small (needs at least 256 byte tokens + 1 special token)");
  std::unordered_map<std::string_view, int64_t> counts;
  for (std::string_view word : gpt2PreTokenize(text)) ++counts[word];

  struct Word {
    std::vector<int32_t> ids;
    int64_t count;
  };
  std::vector<Word> words;
  words.reserve(counts.size());
  for (const auto& [word, count] : counts) {
    Word w{{}, count};
    for (char c : word) w.ids.push_back(static_cast<int32_t>(static_cast<uint8_t>(c)));
    words.push_back(std::move(w));
  }

  std::vector<std::string> tokenBytes;
  for (int b = 0; b < 256; ++b) tokenBytes.emplace_back(1, static_cast<char>(b));
  std::unordered_set<std::string> known(tokenBytes.begin(), tokenBytes.end());

  std::vector<std::pair<int32_t, int32_t>> merges;
  const size_t wanted = static_cast<size_t>(vocabSize) - 257;
  while (merges.size() < wanted) {
    // Count pairs; key = first << 32 | second, so ties resolve to the smallest pair.
    std::unordered_map<uint64_t, int64_t> pairs;
    pairs.reserve(1 << 16);
    for (const Word& w : words)
      for (size_t k = 0; k + 1 < w.ids.size(); ++k)
        pairs[(static_cast<uint64_t>(w.ids[k]) << 32) | static_cast<uint64_t>(w.ids[k + 1])] += w.count;
    uint64_t bestKey = 0;
    int64_t bestCount = 1;
    for (const auto& [key, count] : pairs) {
      if (count < bestCount || (count == bestCount && key > bestKey)) continue;
      if (count == bestCount && bestCount == 1) continue;  // a pair must occur at least twice
      const std::string joined = tokenBytes[key >> 32] + tokenBytes[key & 0xFFFFFFFFu];
      if (known.count(joined) != 0) continue;
      bestKey = key;
      bestCount = count;
    }
    if (bestCount < 2) break;
    const std::pair<int32_t, int32_t> best{static_cast<int32_t>(bestKey >> 32), static_cast<int32_t>(bestKey & 0xFFFFFFFFu)};
    const int32_t id = static_cast<int32_t>(tokenBytes.size());
    tokenBytes.push_back(tokenBytes[static_cast<size_t>(best.first)] + tokenBytes[static_cast<size_t>(best.second)]);
    known.insert(tokenBytes.back());
    merges.push_back(best);
    for (Word& w : words) {
      if (w.ids.size() < 2) continue;
      size_t out = 0;
      for (size_t k = 0; k < w.ids.size(); ++k) {
        if (k + 1 < w.ids.size() && w.ids[k] == best.first && w.ids[k + 1] == best.second) {
          w.ids[out++] = id;
          ++k;
        } else {
          w.ids[out++] = w.ids[k];
        }
      }
      w.ids.resize(out);
    }
  }
  return ByteLevelBpe(std::move(merges));
}

}  // namespace zipmoe::train
