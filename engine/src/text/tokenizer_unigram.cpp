// The Unigram model of tokenizer.json (T5/Switch, SentencePiece unigram): pieces with log-probability
// scores, unk_id, byte_fallback. Encoding is Viterbi over a byte trie of the pieces, as in the
// `tokenizers` library: at each character position every piece that starts there is tried in
// increasing length; a position without a one-character piece gets an unk edge scored
// min_score - 10; ties keep the first candidate; consecutive unknowns are fused into one unk; an
// unknown piece becomes <0xXX> byte tokens when byte_fallback is set.
#include <algorithm>
#include <array>
#include <limits>
#include <unordered_map>

#include "text/tokenizer_internal.h"
#include "text/unicode_tables.h"

namespace zipmoe::tok {
namespace {

class Unigram final : public Model {
 public:
  Unigram(const json& j, const Where& w) {
    const json& vocab = j.value("vocab", json());
    if (!vocab.is_array()) w.at("vocab").fail("expected an array of [piece, score]");
    double minScore = std::numeric_limits<double>::max();
    nodes_.push_back({});
    for (size_t i = 0; i < vocab.size(); ++i) {
      const json& e = vocab[i];
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
        w.at("vocab").at(i).fail("expected [piece, score]");
      const std::string piece = e[0].get<std::string>();
      const double score = e[1].get<double>();
      pieces_.push_back(piece);
      scores_.push_back(score);
      ids_.emplace(piece, static_cast<int32_t>(i));
      minScore = std::min(minScore, score);
      insert(piece, static_cast<int32_t>(i));
    }
    unkScore_ = minScore - 10.0;
    if (j.contains("unk_id") && j["unk_id"].is_number_integer()) {
      const int64_t u = j["unk_id"].get<int64_t>();
      if (u < 0 || static_cast<size_t>(u) >= pieces_.size()) w.at("unk_id").fail("unk_id out of range");
      unk_ = static_cast<int32_t>(u);
    }
    byteFallback_ = j.value("byte_fallback", false);
    if (byteFallback_) {
      static const char* kHex = "0123456789ABCDEF";
      for (int b = 0; b < 256; ++b) {
        const auto it = ids_.find(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
        byteIds_[static_cast<size_t>(b)] = it == ids_.end() ? -1 : it->second;
      }
    }
  }

  void tokenize(const std::string& s, std::vector<int32_t>& out) const override {
    if (s.empty()) return;
    struct Best {
      double score = 0;
      long start = -1;
      int32_t id = -1;
    };
    std::vector<Best> best(s.size() + 1);
    size_t pos = 0;
    while (pos < s.size()) {
      const size_t mblen = std::min(unicode::utf8Length(static_cast<unsigned char>(s[pos])), s.size() - pos);
      const double here = best[pos].score;
      bool single = false;
      size_t node = 0;
      for (size_t k = pos; k < s.size(); ++k) {
        const auto it = edges_.find((uint64_t{node} << 8) | static_cast<unsigned char>(s[k]));
        if (it == edges_.end()) break;
        node = it->second;
        const int32_t id = nodes_[node].id;
        if (id < 0) continue;
        const size_t end = k + 1;
        const double cand = here + scores_[static_cast<size_t>(id)];
        if (best[end].start < 0 || cand > best[end].score) best[end] = {cand, static_cast<long>(pos), id};
        if (end - pos == mblen) single = true;
      }
      if (!single) {
        const size_t end = pos + mblen;
        const double cand = here + unkScore_;
        if (best[end].start < 0 || cand > best[end].score) best[end] = {cand, static_cast<long>(pos), unk_ ? *unk_ : -1};
      }
      pos += mblen;
    }
    // Backtrack, fusing consecutive unknowns.
    std::vector<std::pair<std::string, int32_t>> rev;
    size_t end = s.size();
    bool prevUnk = false;
    while (end > 0) {
      const Best& b = best[end];
      const auto start = static_cast<size_t>(b.start);
      const bool isUnk = !unk_ || b.id == *unk_;
      std::string piece = s.substr(start, end - start);
      if (isUnk && prevUnk) rev.back().first = piece + rev.back().first;
      else rev.emplace_back(std::move(piece), b.id);
      prevUnk = isUnk;
      end = start;
    }
    for (size_t k = rev.size(); k-- > 0;) {
      const auto& [piece, id] = rev[k];
      const auto it = ids_.find(piece);
      if (it != ids_.end()) {
        out.push_back(it->second);
        continue;
      }
      if (byteFallback_) {
        bool all = true;
        for (char c : piece) all = all && byteIds_[static_cast<unsigned char>(c)] >= 0;
        if (all) {
          for (char c : piece) out.push_back(byteIds_[static_cast<unsigned char>(c)]);
          continue;
        }
      }
      if (unk_) out.push_back(*unk_);
    }
  }

  std::optional<int32_t> tokenToId(std::string_view token) const override {
    const auto it = ids_.find(std::string(token));
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string> idToToken(int32_t id) const override {
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return std::nullopt;
    return pieces_[static_cast<size_t>(id)];
  }
  int32_t size() const override { return static_cast<int32_t>(pieces_.size()); }

 private:
  struct Node {
    int32_t id = -1;
  };
  void insert(const std::string& piece, int32_t id) {
    size_t node = 0;
    for (char c : piece) {
      const uint64_t k = (uint64_t{node} << 8) | static_cast<unsigned char>(c);
      const auto it = edges_.find(k);
      if (it != edges_.end()) {
        node = it->second;
      } else {
        nodes_.push_back({});
        edges_.emplace(k, nodes_.size() - 1);
        node = nodes_.size() - 1;
      }
    }
    if (nodes_[node].id < 0) nodes_[node].id = id;
  }

  std::vector<std::string> pieces_;
  std::vector<double> scores_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, size_t> edges_;
  double unkScore_ = 0;
  std::optional<int32_t> unk_;
  bool byteFallback_ = false;
  std::array<int32_t, 256> byteIds_{};
};

}  // namespace

std::unique_ptr<Model> makeUnigram(const json& j, const Where& w) { return std::make_unique<Unigram>(j, w); }

std::unique_ptr<Model> makeBpe(const json& j, const Where& w);

std::unique_ptr<Model> makeModel(const json& j, const Where& w) {
  if (!j.is_object()) w.fail("expected a model object");
  const std::string& type = jsonTypeOf(j, w);
  if (type == "BPE") return makeBpe(j, w);
  if (type == "Unigram") return makeUnigram(j, w);
  w.at("type").fail("unsupported model type \"" + type + "\"");
}

}  // namespace zipmoe::tok
