// ExpertTokenTable and the predictor names (see zipmoe/experts/expert_prefetch.h). Thread-safety: see there.
// Cost: record O(k), predict O(experts · log), save/load linear in the pairs.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include "zipmoe/base/error.h"
#include "zipmoe/experts/expert_prefetch.h"

namespace zipmoe {

const char* prefetchPredictorName(PrefetchPredictor p) {
  switch (p) {
    case PrefetchPredictor::Off: return "off";
    case PrefetchPredictor::NextRouter: return "router";
    case PrefetchPredictor::PreviousToken: return "previous";
    case PrefetchPredictor::TokenTable: return "table";
    case PrefetchPredictor::Oracle: return "oracle";
  }
  return "?";
}

PrefetchPredictor parsePrefetchPredictor(std::string_view text) {
  for (PrefetchPredictor p : {PrefetchPredictor::Off, PrefetchPredictor::NextRouter, PrefetchPredictor::PreviousToken,
                              PrefetchPredictor::TokenTable, PrefetchPredictor::Oracle})
    if (text == prefetchPredictorName(p)) return p;
  throw Error("unknown prefetch predictor '" + std::string(text) + "' (expected off, router, previous, table or oracle)");
}

namespace {

// Σ num / Σ den over the layers (0 when the denominator is 0).
double layerRatio(const PrefetchAccuracy& a, uint64_t PrefetchAccuracy::Layer::*num, uint64_t PrefetchAccuracy::Layer::*den) {
  uint64_t n = 0, d = 0;
  for (const PrefetchAccuracy::Layer& l : a.layers) {
    n += l.*num;
    d += l.*den;
  }
  return d ? static_cast<double>(n) / static_cast<double>(d) : 0.0;
}

}  // namespace

double PrefetchAccuracy::exactShare() const { return layerRatio(*this, &Layer::exact, &Layer::predictions); }
double PrefetchAccuracy::recall() const { return layerRatio(*this, &Layer::covered, &Layer::requested); }
double PrefetchAccuracy::precision() const { return layerRatio(*this, &Layer::covered, &Layer::predicted); }

ExpertTokenTable::ExpertTokenTable(int layers, int experts) : layers_(layers), experts_(experts) {
  if (layers < 1 || experts < 1)
    throw Error("expert token table: " + std::to_string(layers) + " layers × " + std::to_string(experts) +
                " experts; both must be at least 1");
}

uint64_t ExpertTokenTable::key(int32_t token, int layer) const {
  return (static_cast<uint64_t>(static_cast<uint32_t>(token)) << 16) | static_cast<uint64_t>(layer);
}

void ExpertTokenTable::record(int32_t token, int layer, std::span<const int64_t> experts) {
  if (layer < 0 || layer >= layers_)
    throw Error("expert token table: layer " + std::to_string(layer) + " out of range (0.." + std::to_string(layers_ - 1) + ")");
  std::vector<uint32_t>& counts = counts_[key(token, layer)];
  if (counts.empty()) counts.assign(static_cast<size_t>(experts_), 0);
  for (int64_t e : experts) {
    if (e < 0 || e >= experts_)
      throw Error("expert token table: expert " + std::to_string(e) + " out of range (0.." + std::to_string(experts_ - 1) + ")");
    ++counts[static_cast<size_t>(e)];
  }
}

std::vector<int> ExpertTokenTable::predict(int32_t token, int layer, int count) const {
  const auto it = counts_.find(key(token, layer));
  if (it == counts_.end() || count <= 0) return {};
  const std::vector<uint32_t>& counts = it->second;
  std::vector<int> order(counts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return counts[static_cast<size_t>(a)] > counts[static_cast<size_t>(b)]; });
  std::vector<int> out;
  for (int e : order) {
    if (static_cast<int>(out.size()) == count || counts[static_cast<size_t>(e)] == 0) break;
    out.push_back(e);
  }
  return out;
}

void ExpertTokenTable::save(const std::filesystem::path& path) const {
  std::ofstream out(path);
  if (!out) throw Error("cannot write the expert token table " + path.string());
  out << "zipmoe-expert-token-table 1 layers=" << layers_ << " experts=" << experts_ << "\n";
  std::vector<uint64_t> keys;
  for (const auto& [k, v] : counts_) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  for (uint64_t k : keys) {
    out << (k >> 16) << ' ' << (k & 0xffff);
    const std::vector<uint32_t>& counts = counts_.at(k);
    for (size_t e = 0; e < counts.size(); ++e)
      if (counts[e]) out << ' ' << e << ':' << counts[e];
    out << '\n';
  }
  if (!out.flush()) throw Error("cannot write the expert token table " + path.string());
}

std::shared_ptr<ExpertTokenTable> ExpertTokenTable::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open the expert token table " + path.string());
  std::string line;
  int layers = 0, experts = 0;
  const auto fail = [&](int lineNo, const std::string& what) {
    throw Error(path.string() + ":" + std::to_string(lineNo) + ": " + what);
  };
  if (!std::getline(in, line) ||
      std::sscanf(line.c_str(), "zipmoe-expert-token-table 1 layers=%d experts=%d", &layers, &experts) != 2)
    fail(1, "expected the header 'zipmoe-expert-token-table 1 layers=L experts=E'");
  if (layers < 1 || layers > 0xffff || experts < 1) fail(1, "layers and experts must be positive (layers < 65536)");
  auto table = std::make_shared<ExpertTokenTable>(layers, experts);
  int lineNo = 1;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty()) continue;
    std::istringstream fields(line);
    long long token = -1, layer = -1;
    if (!(fields >> token >> layer) || token < 0 || token > 0x7fffffff || layer < 0 || layer >= layers)
      fail(lineNo, "expected 'token layer' with token ≥ 0 and layer in 0.." + std::to_string(layers - 1));
    std::vector<uint32_t>& counts = table->counts_[table->key(static_cast<int32_t>(token), static_cast<int>(layer))];
    counts.assign(static_cast<size_t>(experts), 0);
    std::string pair;
    while (fields >> pair) {
      long long e = -1, c = -1;
      char colon = 0;
      std::istringstream p(pair);
      if (!(p >> e >> colon >> c) || colon != ':' || e < 0 || e >= experts || c < 1 || c > 0xffffffffLL)
        fail(lineNo, "bad 'expert:count' field '" + pair + "' (expert in 0.." + std::to_string(experts - 1) + ", count ≥ 1)");
      counts[static_cast<size_t>(e)] = static_cast<uint32_t>(c);
    }
  }
  return table;
}

}  // namespace zipmoe
