// ToyModel — a MoeModel without libtorch, for the serving scheduler's threaded tests under
// ThreadSanitizer (libtorch is not instrumented, so the real model cannot run there; the suites
// that check what the model answers use the real demo model).
//
// Each sequence keeps its token ids; the "KV cache" is counted by capacity like the real one
// (reserveSequence allocates, bytes per token fixed). The logits of a position peak at a token that
// depends only on the sequence's own last token and length, so a request's greedy continuation is
// the same whatever it is batched with. Routing: token t of a forward goes to experts
// t mod E and (t / E) mod E (made distinct), recorded per MoE layer like the real model's record.
// Counts forwards and the largest batch seen. It keeps MoeModel's defaults for exporting the KV
// cache (empty kvIdentity, save/load throw "cannot"): the prompt cache on disk refuses it at start.
// Thread-safety: one thread, like the real model.
#pragma once

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "zipmoe/base/error.h"
#include "zipmoe/model/model.h"

namespace zipmoe::testing {

class ToyModel : public MoeModel {
 public:
  explicit ToyModel(int vocab, int context = 256, int moeLayers = 2, int experts = 8) {
    config_.vocabSize = vocab;
    config_.maxPositionEmbeddings = context;
    config_.numLayers = moeLayers;
    config_.layerIsMoe.assign(static_cast<size_t>(moeLayers), true);
    config_.numExperts = experts;
    config_.numExpertsPerTok = 2;
    config_.hiddenSize = 16;
    config_.numHeads = 1;
    config_.headDim = 16;
    config_.moeIntermediateSize = 16;
  }

  const ModelConfig& config() const override { return config_; }
  ComputeDtype computeDtype() const override { return ComputeDtype::Float32; }
  SequenceId addSequence() override {
    seqs_[next_] = {};
    return next_++;
  }
  void removeSequence(SequenceId seq) override {
    if (seqs_.erase(seq) == 0) throw Error("removeSequence: unknown sequence " + std::to_string(seq));
  }
  int64_t sequenceLength(SequenceId seq) const override { return static_cast<int64_t>(at(seq).tokens.size()); }
  void truncateSequence(SequenceId seq, int64_t length) override {
    Seq& s = at(seq);
    if (length < 0 || length > static_cast<int64_t>(s.tokens.size())) throw Error("truncateSequence: bad length");
    s.tokens.resize(static_cast<size_t>(length));
  }
  std::vector<std::vector<float>> forward(const std::vector<Step>& steps, bool allPositions) override {
    if (allPositions) throw Error("ToyModel: allPositions is not supported");
    std::vector<std::vector<float>> out;
    std::vector<int32_t> all;
    for (const Step& step : steps) {
      Seq& s = at(step.seq);
      if (step.tokens.empty()) throw Error("forward: empty step");
      if (static_cast<int64_t>(s.tokens.size() + step.tokens.size()) > config_.maxPositionEmbeddings)
        throw Error("forward: beyond the context window");
      s.tokens.insert(s.tokens.end(), step.tokens.begin(), step.tokens.end());
      s.capacity = std::max<int64_t>(s.capacity, static_cast<int64_t>(s.tokens.size()));
      all.insert(all.end(), step.tokens.begin(), step.tokens.end());
      std::vector<float> logits(static_cast<size_t>(config_.vocabSize), 0.0f);
      const auto peak = static_cast<size_t>((step.tokens.back() * 31 + static_cast<int32_t>(s.tokens.size()) * 7 + 3) %
                                            config_.vocabSize);
      logits[peak] = 10.0f;
      out.push_back(std::move(logits));
    }
    ++forwards_;
    maxBatch_ = std::max(maxBatch_, static_cast<int>(steps.size()));
    if (record_) {
      const int e = config_.numExperts;
      for (auto& layer : routing_) {
        layer.clear();
        for (int32_t t : all) {
          int a = t % e, b = (t / e) % e;
          if (b == a) b = (a + 1) % e;
          layer.push_back(std::min(a, b));
          layer.push_back(std::max(a, b));
        }
      }
    }
    return out;
  }
  uint64_t lastForwardWeightBytes() const override { return 0; }
  PrefetchAccuracy prefetchAccuracy() const override { return {}; }
  void setPrefetch(const PrefetchOptions&) override {}
  void reserveSequence(SequenceId seq, int64_t tokens) override {
    Seq& s = at(seq);
    s.capacity = std::max(s.capacity, tokens);
  }
  uint64_t kvCacheBytes() const override {
    uint64_t sum = 0;
    for (const auto& [id, s] : seqs_) sum += static_cast<uint64_t>(s.capacity) * kvBytesPerToken();
    return sum;
  }
  uint64_t kvBytesPerToken() const override { return 64; }
  void setRecordRouting(bool on) override {
    record_ = on;
    routing_.assign(on ? config_.layerIsMoe.size() : 0, {});
  }
  const std::vector<std::vector<int32_t>>& lastForwardRouting() const override { return routing_; }

  // Test-side views (call only while no scheduler drives the model, or after stop()).
  size_t sequences() const { return seqs_.size(); }
  uint64_t forwards() const { return forwards_; }
  int maxBatchSeen() const { return maxBatch_; }

 private:
  struct Seq {
    std::vector<int32_t> tokens;
    int64_t capacity = 0;
  };
  Seq& at(SequenceId seq) {
    const auto it = seqs_.find(seq);
    if (it == seqs_.end()) throw Error("unknown sequence " + std::to_string(seq));
    return it->second;
  }
  const Seq& at(SequenceId seq) const { return const_cast<ToyModel*>(this)->at(seq); }

  ModelConfig config_;
  std::map<SequenceId, Seq> seqs_;
  SequenceId next_ = 0;
  uint64_t forwards_ = 0;
  int maxBatch_ = 0;
  bool record_ = false;
  std::vector<std::vector<int32_t>> routing_;
};

}  // namespace zipmoe::testing
