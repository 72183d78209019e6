// Expert prefetch prediction — which experts the model will probably ask for next, so that the
// expert runtime can read them while the model computes (Speculative MoE, seed 004, §3.3 and
// App. A–B, adapted to one device).
//
// The model predicts at every MoE layer l, right after it has asked for layer l's experts, the
// experts of the next MoE layer (l + 1; after the last layer, layer 0 of the next step) and passes
// them to ExpertProvider::prefetch. Predictors (ModelOptions::prefetch):
//   router    the next layer's router applied to this layer's hidden state (the MoE input);
//   previous  the experts the next layer used in the previous step;
//   table     the per-token expert table of §3.3: for each token id and layer, the experts that most
//             often served that token in a profile run (ExpertTokenTable, built from history);
//   oracle    the true experts from the routing override (trace replay), each replaced by a wrong
//             one with probability 1 − accuracy — to show what prefetch is worth at each accuracy.
// Layer 0 of the next step is predicted by `previous` for every predictor (its token is not known
// yet). A prediction never changes what the model computes: it only steers reads.
// The model also scores its own predictions against the experts each layer then requested
// (PrefetchAccuracy): exact (the predicted set is the requested set) and recall (the share of
// requested experts that were predicted), per layer.
// Thread-safety: an ExpertTokenTable is built by one thread, then read by any. Cost: see each.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zipmoe {

enum class PrefetchPredictor : uint8_t { Off, NextRouter, PreviousToken, TokenTable, Oracle };
// "off", "router", "previous", "table", "oracle"
const char* prefetchPredictorName(PrefetchPredictor p);
// Throws zipmoe::Error naming the text and the accepted names.
PrefetchPredictor parsePrefetchPredictor(std::string_view text);

// Per (token id, MoE layer): how often each expert served that token. Sparse: only pairs seen.
class ExpertTokenTable {
 public:
  ExpertTokenTable(int layers, int experts);
  int layers() const { return layers_; }
  int experts() const { return experts_; }
  // Counts `experts` for `token` at `layer`. Throws zipmoe::Error for a layer or expert out of range.
  void record(int32_t token, int layer, std::span<const int64_t> experts);
  // The `count` experts most often seen with `token` at `layer` (ties: lower id first); fewer when
  // fewer were seen, none for a pair never seen.
  std::vector<int> predict(int32_t token, int layer, int count) const;
  size_t pairs() const { return counts_.size(); }

  // A text file: a header line, then one line per (token, layer): `token layer expert:count …`.
  // load throws zipmoe::Error naming file:line and the field.
  void save(const std::filesystem::path& path) const;
  static std::shared_ptr<ExpertTokenTable> load(const std::filesystem::path& path);

 private:
  uint64_t key(int32_t token, int layer) const;
  int layers_ = 0, experts_ = 0;
  std::unordered_map<uint64_t, std::vector<uint32_t>> counts_;  // key → per-expert counts
};

struct PrefetchOptions {
  PrefetchPredictor predictor = PrefetchPredictor::Off;
  double oracleAccuracy = 1.0;  // oracle: probability that each true expert is kept, in [0, 1]
  uint64_t seed = 1;            // oracle: its wrong guesses
  std::shared_ptr<const ExpertTokenTable> table;  // table: required
  // When set, every forward records each token's experts into it (to build a table from a run).
  std::shared_ptr<ExpertTokenTable> record;
};

// The model's own score of its predictions, per MoE layer (the layer predicted).
struct PrefetchAccuracy {
  struct Layer {
    uint64_t predictions = 0;  // steps at which this layer had a prediction
    uint64_t exact = 0;        // … that named exactly the requested experts
    uint64_t requested = 0;    // Σ requested experts over those steps
    uint64_t covered = 0;      // … of which were predicted
    uint64_t predicted = 0;    // Σ predicted experts
    double exactShare() const { return predictions ? static_cast<double>(exact) / static_cast<double>(predictions) : 0.0; }
    double recall() const { return requested ? static_cast<double>(covered) / static_cast<double>(requested) : 0.0; }
  };
  std::vector<Layer> layers;
  double exactShare() const;   // Σ exact / Σ predictions
  double recall() const;       // Σ covered / Σ requested
  double precision() const;    // Σ covered / Σ predicted
};

}  // namespace zipmoe
