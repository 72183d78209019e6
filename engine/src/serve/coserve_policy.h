// The CoServe policy's pieces (CoServe §4.2, adapted to an MoE decoder served with continuous
// batching; zipmoe/serve/serve_scheduler.h says where they are used).
//
// UsageProfile: one request's own observed expert usage — per MoE layer, how many of its tokens the
// router sent to each expert (its prompt's prefill and every decode step so far; a conversation's
// earlier turns when its cached sequence is reused). Never its future.
// BatchFootprint: what the running batch keeps using — per (layer, expert) a count that decays by
// half every few steps; an expert is "warm" while its count stays above one half. It stands for what
// the expert runtime's pools hold (the runtime does not publish its residency per expert): the
// pools fill with what the batch asks for.
// chooseGroup: of the candidates, which to admit into `slots` free places: first every candidate
// that has waited agingSteps steps or more (oldest first: the aging bound), then greedily the one
// with the fewest expected expert loads per decode step given the warm experts and those of the
// candidates already chosen (Σ over layers and experts of P(token uses e) × [e not covered]); ties
// go to the one that waited longest.
// Thread-safety: none (the engine thread). Cost: O(candidates² × layers × experts) per call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace zipmoe::serve {

class UsageProfile {
 public:
  UsageProfile() = default;
  UsageProfile(int layers, int experts);
  // `ids`: the experts of some tokens of this request at MoE layer `layer` (tokens × k ids).
  void observe(int layer, std::span<const int32_t> ids, int k);
  void merge(const UsageProfile& other);
  bool empty() const { return tokens_.empty() || tokens_[0] == 0; }
  int layers() const { return layers_; }
  int experts() const { return experts_; }
  // P(a token of this request uses expert e at layer l) = count / tokens (0 without observations).
  double probability(int layer, int expert) const;

 private:
  int layers_ = 0, experts_ = 0;
  std::vector<uint64_t> counts_;  // [layer × experts + expert]
  std::vector<uint64_t> tokens_;  // [layer]
};

class BatchFootprint {
 public:
  BatchFootprint() = default;
  BatchFootprint(int layers, int experts, int halfLifeSteps = 4);
  void observe(int layer, std::span<const int32_t> ids);
  void endStep();  // decays every count
  bool warm(int layer, int expert) const;
  int layers() const { return layers_; }
  int experts() const { return experts_; }

 private:
  int layers_ = 0, experts_ = 0;
  double decay_ = 1.0;
  std::vector<double> weight_;
};

struct Candidate {
  const UsageProfile* usage = nullptr;  // may be empty (nothing observed yet)
  uint64_t waitedSteps = 0;
};

// Expected expert loads per decode step of `usage` given the covered experts ([layer × experts]);
// an empty profile counts k experts per layer spread evenly over the experts not covered.
double expectedLoads(const UsageProfile& usage, const std::vector<char>& covered, int layers, int experts, int k);

// Indices into `candidates`, in admission order, at most `slots` of them (see the file comment).
// `agedAdmissions` counts those chosen by the aging bound.
std::vector<size_t> chooseGroup(const std::vector<Candidate>& candidates, const BatchFootprint& footprint, int slots,
                                uint64_t agingSteps, int k, uint64_t* agedAdmissions = nullptr);

}  // namespace zipmoe::serve
