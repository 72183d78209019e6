// The CoServe policy's pieces (see coserve_policy.h).
#include "serve/coserve_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zipmoe::serve {

UsageProfile::UsageProfile(int layers, int experts)
    : layers_(layers), experts_(experts),
      counts_(static_cast<size_t>(layers) * static_cast<size_t>(experts), 0),
      tokens_(static_cast<size_t>(layers), 0) {}

void UsageProfile::observe(int layer, std::span<const int32_t> ids, int k) {
  if (layer < 0 || layer >= layers_ || k <= 0) return;
  for (int32_t e : ids)
    if (e >= 0 && e < experts_) ++counts_[static_cast<size_t>(layer) * static_cast<size_t>(experts_) + static_cast<size_t>(e)];
  tokens_[static_cast<size_t>(layer)] += ids.size() / static_cast<size_t>(k);
}

void UsageProfile::merge(const UsageProfile& other) {
  if (other.layers_ != layers_ || other.experts_ != experts_) return;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  for (size_t i = 0; i < tokens_.size(); ++i) tokens_[i] += other.tokens_[i];
}

double UsageProfile::probability(int layer, int expert) const {
  const uint64_t t = tokens_[static_cast<size_t>(layer)];
  if (t == 0) return 0.0;
  return static_cast<double>(counts_[static_cast<size_t>(layer) * static_cast<size_t>(experts_) + static_cast<size_t>(expert)]) /
         static_cast<double>(t);
}

BatchFootprint::BatchFootprint(int layers, int experts, int halfLifeSteps)
    : layers_(layers), experts_(experts), decay_(std::pow(0.5, 1.0 / std::max(halfLifeSteps, 1))),
      weight_(static_cast<size_t>(layers) * static_cast<size_t>(experts), 0.0) {}

void BatchFootprint::observe(int layer, std::span<const int32_t> ids) {
  if (layer < 0 || layer >= layers_) return;
  for (int32_t e : ids)
    if (e >= 0 && e < experts_) weight_[static_cast<size_t>(layer) * static_cast<size_t>(experts_) + static_cast<size_t>(e)] = 1.0;
}

void BatchFootprint::endStep() {
  for (double& w : weight_) w *= decay_;
}

bool BatchFootprint::warm(int layer, int expert) const {
  return weight_[static_cast<size_t>(layer) * static_cast<size_t>(experts_) + static_cast<size_t>(expert)] > 0.5;
}

double expectedLoads(const UsageProfile& usage, const std::vector<char>& covered, int layers, int experts, int k) {
  double loads = 0;
  for (int l = 0; l < layers; ++l) {
    const size_t base = static_cast<size_t>(l) * static_cast<size_t>(experts);
    if (usage.empty() || usage.layers() != layers) {
      int open = 0;
      for (int e = 0; e < experts; ++e) open += covered[base + static_cast<size_t>(e)] ? 0 : 1;
      loads += static_cast<double>(k) * open / std::max(experts, 1);
      continue;
    }
    for (int e = 0; e < experts; ++e)
      if (!covered[base + static_cast<size_t>(e)]) loads += std::min(1.0, usage.probability(l, e));
  }
  return loads;
}

std::vector<size_t> chooseGroup(const std::vector<Candidate>& candidates, const BatchFootprint& footprint, int slots,
                                uint64_t agingSteps, int k, uint64_t* agedAdmissions) {
  std::vector<size_t> chosen;
  if (slots <= 0 || candidates.empty()) return chosen;
  std::vector<char> taken(candidates.size(), 0);
  // 1. The aging bound: the longest-waiting first, every one past the bound.
  std::vector<size_t> aged;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].waitedSteps >= agingSteps) aged.push_back(i);
  std::stable_sort(aged.begin(), aged.end(),
                   [&](size_t a, size_t b) { return candidates[a].waitedSteps > candidates[b].waitedSteps; });
  for (size_t i : aged) {
    if (static_cast<int>(chosen.size()) >= slots) return chosen;
    chosen.push_back(i);
    taken[i] = 1;
    if (agedAdmissions) ++*agedAdmissions;
  }
  // 2. Greedy: fewest expected loads given what is covered.
  const int layers = footprint.layers(), experts = footprint.experts();
  std::vector<char> covered(static_cast<size_t>(layers) * static_cast<size_t>(experts), 0);
  for (int l = 0; l < layers; ++l)
    for (int e = 0; e < experts; ++e)
      covered[static_cast<size_t>(l) * static_cast<size_t>(experts) + static_cast<size_t>(e)] = footprint.warm(l, e) ? 1 : 0;
  const auto cover = [&](const UsageProfile& u) {
    if (u.empty() || u.layers() != layers) return;
    const double likely = static_cast<double>(k) / std::max(experts, 1);  // above an even spread
    for (int l = 0; l < layers; ++l)
      for (int e = 0; e < experts; ++e)
        if (u.probability(l, e) >= likely) covered[static_cast<size_t>(l) * static_cast<size_t>(experts) + static_cast<size_t>(e)] = 1;
  };
  for (size_t i : chosen) cover(*candidates[i].usage);
  while (static_cast<int>(chosen.size()) < slots) {
    size_t best = candidates.size();
    double bestLoads = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (taken[i]) continue;
      const double loads = expectedLoads(*candidates[i].usage, covered, layers, experts, k);
      if (loads < bestLoads - 1e-9 ||
          (std::abs(loads - bestLoads) <= 1e-9 && best < candidates.size() &&
           candidates[i].waitedSteps > candidates[best].waitedSteps)) {
        best = i;
        bestLoads = loads;
      }
    }
    if (best == candidates.size()) break;
    chosen.push_back(best);
    taken[best] = 1;
    cover(*candidates[best].usage);
  }
  return chosen;
}

}  // namespace zipmoe::serve
