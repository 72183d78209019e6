// Sampler: transformers' logits processors and warpers, in transformers' order, then one draw.
//
// 1. Repetition penalty (RepetitionPenaltyLogitsProcessor): every distinct id in the history has its
//    logit divided by the penalty when positive, multiplied when negative.
// 2. temperature == 0 → greedy: the argmax, lowest id on ties (no randomness consumed).
// 3. Temperature (logits / T), top-k (keep every token whose logit is ≥ the k-th largest, so ties at the
//    boundary survive, as torch.topk's threshold does), top-p (sorted by probability, keep the smallest
//    prefix whose cumulative probability reaches top_p, at least one token), min-p (keep tokens whose
//    probability is ≥ min_p × the top probability, i.e. logit ≥ max + ln(min_p)).
// 4. One draw from the softmax of the kept logits with a 53-bit uniform from mt19937_64 (the same
//    numbers on every platform for a seed). Probabilities are computed in double.
// Candidates are found by partial sorting (order_), so a draw costs O(vocab log k) rather than a full
// sort; top-p widens its partial sort geometrically until the mass is reached.
#include "zipmoe/generation/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "zipmoe/base/error.h"

namespace zipmoe {

void validate(const SamplingParams& p) {
  const auto bad = [](const std::string& field, const std::string& rule, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", value);
    throw Error("sampling: " + field + " " + rule + ", got " + buf);
  };
  if (!(p.temperature >= 0.0) || !std::isfinite(p.temperature)) bad("temperature", "must be >= 0 and finite", p.temperature);
  if (p.topK < 0) bad("top_k", "must be >= 0 (0 = off)", p.topK);
  if (!(p.topP > 0.0 && p.topP <= 1.0)) bad("top_p", "must be in (0, 1] (1 = off)", p.topP);
  if (!(p.minP >= 0.0 && p.minP < 1.0)) bad("min_p", "must be in [0, 1) (0 = off)", p.minP);
  if (!(p.repetitionPenalty > 0.0) || !std::isfinite(p.repetitionPenalty))
    bad("repetition_penalty", "must be > 0 and finite (1 = off)", p.repetitionPenalty);
  if (p.maxTokens < 1) bad("max_tokens", "must be >= 1", p.maxTokens);
  for (size_t i = 0; i < p.stopStrings.size(); ++i)
    if (p.stopStrings[i].empty()) throw Error("sampling: stop string " + std::to_string(i) + " is empty");
}

void applyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> history, double penalty) {
  const auto p = static_cast<float>(penalty);
  // Each distinct id once: transformers gathers and scatters, so duplicates are penalised once.
  std::vector<int32_t> ids(history.begin(), history.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    float& x = logits[static_cast<size_t>(id)];
    x = x < 0 ? x * p : x / p;
  }
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) { validate(params_); }

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  if (logits.empty()) throw Error("sampler: empty logits row");
  if (logits.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error("sampler: vocabulary too large");
  const size_t vocab = logits.size();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  work_.assign(logits.begin(), logits.end());
  for (float& x : work_)
    if (std::isnan(x)) x = kNegInf;

  if (params_.repetitionPenalty != 1.0) applyRepetitionPenalty(work_, history, params_.repetitionPenalty);

  if (params_.temperature == 0.0) {
    size_t best = 0;
    for (size_t i = 1; i < vocab; ++i)
      if (work_[i] > work_[best]) best = i;
    return static_cast<int32_t>(best);
  }

  const auto temperature = static_cast<float>(params_.temperature);
  for (float& x : work_) x /= temperature;

  // Candidates in descending logit order (ties: lower id first); `kept` of them survive the filters.
  order_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) order_[i] = static_cast<int32_t>(i);
  const auto before = [this](int32_t a, int32_t b) {
    const float x = work_[static_cast<size_t>(a)], y = work_[static_cast<size_t>(b)];
    return x > y || (x == y && a < b);
  };
  size_t sorted = 0;  // order_[0, sorted) is sorted and holds the `sorted` largest
  const auto ensureSorted = [&](size_t n) {
    n = std::min(n, vocab);
    if (n <= sorted) return;
    std::partial_sort(order_.begin() + static_cast<std::ptrdiff_t>(sorted), order_.begin() + static_cast<std::ptrdiff_t>(n),
                      order_.end(), before);
    sorted = n;
  };

  size_t kept = vocab;
  if (params_.topK > 0 && static_cast<size_t>(params_.topK) < vocab) {
    const auto k = static_cast<size_t>(params_.topK);
    ensureSorted(k);
    const float threshold = work_[static_cast<size_t>(order_[k - 1])];
    kept = k;
    while (true) {  // ties with the k-th value are kept
      ensureSorted(kept + 1);
      if (kept < vocab && work_[static_cast<size_t>(order_[kept])] >= threshold) {
        ++kept;
      } else {
        break;
      }
    }
  }
  ensureSorted(1);
  const float top = work_[static_cast<size_t>(order_[0])];
  if (top == kNegInf) return order_[0];  // nothing has any probability: the lowest id

  if (params_.topP < 1.0) {
    // Normaliser over the kept set (sum of exp(l - top)); then walk the sorted prefix.
    double total = 0;
    if (kept == vocab) {
      for (float x : work_) total += std::exp(static_cast<double>(x) - top);
    } else {
      for (size_t i = 0; i < kept; ++i) total += std::exp(static_cast<double>(work_[static_cast<size_t>(order_[i])]) - top);
    }
    double cumulative = 0;
    size_t n = 0;
    while (n < kept) {
      ensureSorted(n < 64 ? 64 : 2 * n);
      const size_t limit = std::min(sorted, kept);
      for (; n < limit; ++n) {
        cumulative += std::exp(static_cast<double>(work_[static_cast<size_t>(order_[n])]) - top) / total;
        if (cumulative >= params_.topP) break;
      }
      if (n < limit) {
        ++n;  // include the token that reached top_p
        break;
      }
    }
    kept = std::max<size_t>(1, std::min(n, kept));
  }

  if (params_.minP > 0.0) {
    const double floorLogit = static_cast<double>(top) + std::log(params_.minP);
    size_t n = 1;
    while (n < kept) {
      ensureSorted(std::min(kept, n < 64 ? 64 : 2 * n));
      const size_t limit = std::min(sorted, kept);
      bool stop = false;
      for (; n < limit; ++n)
        if (static_cast<double>(work_[static_cast<size_t>(order_[n])]) < floorLogit) {
          stop = true;
          break;
        }
      if (stop) break;
    }
    kept = n;
  }

  ensureSorted(kept);
  double total = 0;
  for (size_t i = 0; i < kept; ++i) total += std::exp(static_cast<double>(work_[static_cast<size_t>(order_[i])]) - top);
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
  double acc = 0;
  for (size_t i = 0; i < kept; ++i) {
    acc += std::exp(static_cast<double>(work_[static_cast<size_t>(order_[i])]) - top);
    if (u < acc) return order_[i];
  }
  return order_[kept - 1];
}

}  // namespace zipmoe
