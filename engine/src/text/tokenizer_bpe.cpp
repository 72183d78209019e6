// The BPE model of tokenizer.json: vocab + ranked merges (either "a b" strings or [a, b] pairs),
// unk_token with fuse_unk, byte_fallback (<0xXX> tokens), ignore_merges. dropout must be null or 0;
// continuing_subword_prefix and end_of_word_suffix must be null or empty (rejected otherwise).
// Merging uses a rank map keyed by the pair of ids and a heap of candidate merges (lowest rank, then
// leftmost, first), so a word of n symbols costs O(n log n); results are cached per word.
#include <array>
#include <climits>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <unordered_map>

#include "text/tokenizer_internal.h"
#include "text/unicode_tables.h"

namespace zipmoe::tok {
namespace {

class Bpe final : public Model {
 public:
  Bpe(const json& j, const Where& w) {
    const json& vocab = j.value("vocab", json());
    if (!vocab.is_object()) w.at("vocab").fail("expected an object of token → id");
    int32_t maxId = -1;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > kMaxTokenId)
        w.at("vocab").fail("token \"" + it.key() + "\" has no valid id (0.." + std::to_string(kMaxTokenId) + ")");
      const auto id = static_cast<int32_t>(it.value().get<int64_t>());
      vocab_[it.key()] = id;
      maxId = std::max(maxId, id);
    }
    tokens_.resize(static_cast<size_t>(maxId + 1));
    for (const auto& [t, id] : vocab_) tokens_[static_cast<size_t>(id)] = t;
    const json& merges = j.value("merges", json::array());
    if (!merges.is_array()) w.at("merges").fail("expected an array");
    for (size_t i = 0; i < merges.size(); ++i) {
      std::string a, b;
      const json& m = merges[i];
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
          w.at("merges").at(i).fail("malformed merge \"" + s + "\" (expected \"left right\")");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      } else {
        w.at("merges").at(i).fail("malformed merge " + m.dump());
      }
      const auto ia = vocab_.find(a), ib = vocab_.find(b), im = vocab_.find(a + b);
      if (ia == vocab_.end() || ib == vocab_.end() || im == vocab_.end())
        w.at("merges").at(i).fail("merge \"" + a + " " + b + "\" uses a token missing from the vocab");
      merges_.emplace(key(ia->second, ib->second), Merge{static_cast<uint32_t>(i), im->second});
    }
    if (j.contains("dropout") && !j["dropout"].is_null() && !(j["dropout"].is_number() && j["dropout"].get<double>() == 0.0))
      w.at("dropout").fail("BPE dropout is not supported (must be null or 0)");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (j.contains(k) && !j[k].is_null() && !(j[k].is_string() && j[k].get<std::string>().empty()))
        w.at(k).fail(std::string(k) + " is not supported (must be null or empty)");
    if (j.contains("unk_token") && j["unk_token"].is_string()) {
      const auto it = vocab_.find(j["unk_token"].get<std::string>());
      if (it == vocab_.end()) w.at("unk_token").fail("unk_token is not in the vocab");
      unk_ = it->second;
    }
    fuseUnk_ = j.value("fuse_unk", false);
    byteFallback_ = j.value("byte_fallback", false);
    ignoreMerges_ = j.value("ignore_merges", false);
    if (byteFallback_) {
      static const char* kHex = "0123456789ABCDEF";
      for (int b = 0; b < 256; ++b) {
        const auto it = vocab_.find(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
        byteIds_[static_cast<size_t>(b)] = it == vocab_.end() ? -1 : it->second;
      }
    }
  }

  void tokenize(const std::string& word, std::vector<int32_t>& out) const override {
    if (word.empty()) return;
    {
      std::shared_lock lock(cacheMutex_);
      const auto it = cache_.find(word);
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> ids = merge(word);
    out.insert(out.end(), ids.begin(), ids.end());
    if (word.size() > 256) return;
    std::unique_lock lock(cacheMutex_);
    if (cache_.size() > 200000) cache_.clear();
    cache_.emplace(word, std::move(ids));
  }

  std::optional<int32_t> tokenToId(std::string_view token) const override {
    const auto it = vocab_.find(std::string(token));
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string> idToToken(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || (tokens_[static_cast<size_t>(id)].empty() && !vocab_.count("")))
      return std::nullopt;
    return tokens_[static_cast<size_t>(id)];
  }
  int32_t size() const override { return static_cast<int32_t>(tokens_.size()); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t id;
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b); }

  std::vector<int32_t> merge(const std::string& word) const {
    if (ignoreMerges_) {
      const auto it = vocab_.find(word);
      if (it != vocab_.end()) return {it->second};
    }
    // Initial symbols: one per character (or per byte with byte_fallback, or unk).
    std::vector<int32_t> sym;
    bool lastUnk = false;
    size_t i = 0;
    std::string ch;
    while (i < word.size()) {
      const size_t n = std::min(unicode::utf8Length(static_cast<unsigned char>(word[i])), word.size() - i);
      ch.assign(word, i, n);
      i += n;
      const auto it = vocab_.find(ch);
      if (it != vocab_.end()) {
        sym.push_back(it->second);
        lastUnk = false;
        continue;
      }
      if (byteFallback_) {
        bool all = true;
        for (char c : ch) all = all && byteIds_[static_cast<unsigned char>(c)] >= 0;
        if (all) {
          for (char c : ch) sym.push_back(byteIds_[static_cast<unsigned char>(c)]);
          lastUnk = false;
          continue;
        }
      }
      if (unk_) {
        if (!(fuseUnk_ && lastUnk)) sym.push_back(*unk_);
        lastUnk = true;
      }
    }
    if (sym.size() < 2) return sym;
    // Linked symbols + heap of (rank, position).
    const size_t n = sym.size();
    std::vector<long> prev(n), next(n);
    std::vector<bool> alive(n, true);
    for (size_t k = 0; k < n; ++k) {
      prev[k] = static_cast<long>(k) - 1;
      next[k] = k + 1 < n ? static_cast<long>(k + 1) : -1;
    }
    struct Cand {
      uint32_t rank;
      size_t pos;
      int32_t left, right;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto push = [&](size_t pos) {
      if (next[pos] < 0) return;
      const auto r = static_cast<size_t>(next[pos]);
      const auto it = merges_.find(key(sym[pos], sym[r]));
      if (it != merges_.end()) heap.push({it->second.rank, pos, sym[pos], sym[r]});
    };
    for (size_t k = 0; k + 1 < n; ++k) push(k);
    while (!heap.empty()) {
      const Cand c = heap.top();
      heap.pop();
      if (!alive[c.pos] || next[c.pos] < 0) continue;
      const auto r = static_cast<size_t>(next[c.pos]);
      if (sym[c.pos] != c.left || sym[r] != c.right) continue;  // stale
      sym[c.pos] = merges_.at(key(c.left, c.right)).id;
      alive[r] = false;
      next[c.pos] = next[r];
      if (next[r] >= 0) prev[static_cast<size_t>(next[r])] = static_cast<long>(c.pos);
      if (prev[c.pos] >= 0) push(static_cast<size_t>(prev[c.pos]));
      push(c.pos);
    }
    std::vector<int32_t> out;
    for (long k = 0; k >= 0; k = next[static_cast<size_t>(k)]) out.push_back(sym[static_cast<size_t>(k)]);
    return out;
  }

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_;
  bool fuseUnk_ = false, byteFallback_ = false, ignoreMerges_ = false;
  std::array<int32_t, 256> byteIds_{};
  mutable std::shared_mutex cacheMutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

std::unique_ptr<Model> makeBpe(const json& j, const Where& w) { return std::make_unique<Bpe>(j, w); }

}  // namespace zipmoe::tok
