// TraceRouting (see activation_trace.h): replaying a trace prompt's expert counts token by token.
// Thread-safety: one caller (the model's thread). Cost: O(k × experts) per token.
#include <algorithm>
#include <cmath>
#include <string>

#include "base/random.h"
#include "zipmoe/trace/activation_trace.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

// An index e with picked[e] == 0, drawn with probability weight(e) / Σ weight over the unpicked.
// REQUIRES: that sum is positive.
template <typename Weight>
int drawUnpicked(uint64_t (&rng)[4], const std::vector<char>& picked, Weight weight) {
  uint64_t sum = 0;
  for (size_t e = 0; e < picked.size(); ++e)
    if (!picked[e]) sum += weight(e);
  // The modulo bias is below sum / 2^64: irrelevant for counts of tokens.
  uint64_t r = detail::xoshiro256StarStar(rng) % sum;
  for (size_t e = 0; e < picked.size(); ++e) {
    if (picked[e]) continue;
    const uint64_t w = weight(e);
    if (r < w) return static_cast<int>(e);
    r -= w;
  }
  throw Error("TraceRouting: internal error: weighted draw ran past the last expert");
}

// The urn weighs a routed token as kUrnScale and the prior in the same units, so that integer
// draws keep a fraction of a token's prior.
constexpr uint64_t kUrnScale = uint64_t{1} << 16;

}  // namespace

TraceRouting::TraceRouting(std::shared_ptr<const ActivationTrace> trace, int moeLayers, int experts, int k,
                           uint64_t seed)
    : trace_(std::move(trace)), moeLayers_(moeLayers), experts_(experts), k_(k), seed_(seed) {
  if (!trace_) throw Error("TraceRouting: no trace");
  const std::string what = "TraceRouting (trace of " + trace_->model() + ")";
  if (experts != trace_->numExperts())
    throw Error(what + ": the model has " + std::to_string(experts) + " experts per layer, the trace " +
                std::to_string(trace_->numExperts()));
  if (k < 1 || k > experts)
    throw Error(what + ": k = " + std::to_string(k) + " experts per token is not in 1 .. " + std::to_string(experts));
  if (moeLayers < 1) throw Error(what + ": the model has " + std::to_string(moeLayers) + " MoE layers");
  if (trace_->activeLayers().empty()) throw Error(what + ": every count of the trace is zero (no active layer)");
  const auto n = static_cast<size_t>(experts);
  for (int l = 0; l < moeLayers; ++l) {
    std::vector<uint64_t> weights(n, 1);
    for (int p = 0; p < trace_->numPrompts(); ++p) {
      const auto row = trace_->counts(p, traceLayer(l));
      for (size_t e = 0; e < n; ++e) weights[e] += row[e];
    }
    fallback_.push_back(std::move(weights));
  }
  pools_.resize(static_cast<size_t>(moeLayers));
  picked_.assign(n, 0);
  setPrompt(0);
}

void TraceRouting::setPrompt(int prompt) {
  if (prompt < 0 || prompt >= trace_->numPrompts())
    throw Error("TraceRouting: prompt " + std::to_string(prompt) + " is out of range 0 .. " +
                std::to_string(trace_->numPrompts() - 1) + " (trace of " + trace_->model() + ")");
  prompt_ = prompt;
  peeked_.assign(pools_.size(), {});
  for (size_t l = 0; l < pools_.size(); ++l) {
    Pool& pool = pools_[l];
    pool.remaining.clear();
    pool.total = 0;
    pool.positive = 0;
    pool.seen.assign(static_cast<size_t>(experts_), 0);
    pool.rowDrawn = false;
    // One independent stream per (seed, prompt, layer).
    uint64_t state = seed_ ^ (0xD1B54A32D192ED03ull * (static_cast<uint64_t>(prompt) + 1)) ^
                     (0xABC98388FB8FAC03ull * (static_cast<uint64_t>(l) + 1));
    detail::seedXoshiro256(pool.rng, state);
  }
}

void TraceRouting::setContinuation(double priorTokens) {
  if (!std::isfinite(priorTokens) || priorTokens < 0 || priorTokens > 1e6)
    throw Error("TraceRouting: continuation prior " + std::to_string(priorTokens) +
                " tokens is not in 0 .. 1000000 (trace of " + trace_->model() + ")");
  continuation_ = priorTokens;
  urnPrior_.clear();
  if (priorTokens <= 0) return;
  // priorTokens tokens of k experts each, spread as the layer's counts over all prompts (+1 each, so
  // that every expert stays possible).
  for (const std::vector<uint64_t>& counts : fallback_) {
    uint64_t sum = 0;
    for (const uint64_t c : counts) sum += c;
    std::vector<uint64_t> prior(counts.size());
    for (size_t e = 0; e < counts.size(); ++e)
      prior[e] = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(priorTokens * k_ * static_cast<double>(kUrnScale) *
                                                                           static_cast<double>(counts[e]) /
                                                                           static_cast<double>(sum))));
    urnPrior_.push_back(std::move(prior));
  }
}

int TraceRouting::traceLayer(int moeLayer) const {
  if (moeLayer < 0 || moeLayer >= moeLayers_)
    throw Error("TraceRouting: MoE layer " + std::to_string(moeLayer) + " is out of range 0 .. " +
                std::to_string(moeLayers_ - 1));
  const std::vector<int>& active = trace_->activeLayers();
  return active[static_cast<size_t>(moeLayer) % active.size()];
}

void TraceRouting::choose(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) {
  traceLayer(moeLayer);  // checks the layer
  std::vector<int64_t>& ahead = peeked_[static_cast<size_t>(moeLayer)];
  if (!ahead.empty() && ahead.size() == out.size() && k == k_) {
    std::copy(ahead.begin(), ahead.end(), out.begin());
    ahead.clear();
    return;
  }
  ahead.clear();
  draw(moeLayer, tokens, k, out);
}

bool TraceRouting::peek(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) {
  traceLayer(moeLayer);
  std::vector<int64_t>& ahead = peeked_[static_cast<size_t>(moeLayer)];
  if (ahead.empty() || ahead.size() != out.size()) {
    ahead.assign(out.size(), 0);
    draw(moeLayer, tokens, k, ahead);
  }
  std::copy(ahead.begin(), ahead.end(), out.begin());
  return true;
}

void TraceRouting::draw(int moeLayer, int64_t tokens, int k, std::span<int64_t> out) {
  const int rowLayer = traceLayer(moeLayer);
  if (k != k_)
    throw Error("TraceRouting: asked for " + std::to_string(k) + " experts per token, constructed for " +
                std::to_string(k_));
  if (tokens < 0 || out.size() != static_cast<size_t>(tokens) * static_cast<size_t>(k))
    throw Error("TraceRouting: " + std::to_string(tokens) + " tokens × k = " + std::to_string(k) + " need " +
                std::to_string(tokens * k) + " slots, given " + std::to_string(out.size()));
  Pool& pool = pools_[static_cast<size_t>(moeLayer)];
  const auto kk = static_cast<size_t>(k);
  for (int64_t t = 0; t < tokens; ++t)
    chooseOne(pool, moeLayer, rowLayer, out.subspan(static_cast<size_t>(t) * kk, kk));
}

void TraceRouting::chooseOne(Pool& pool, int moeLayer, int rowLayer, std::span<int64_t> out) {
  const auto k = static_cast<uint64_t>(k_);
  std::fill(picked_.begin(), picked_.end(), 0);
  int count = 0;
  if (pool.positive < k_ && pool.rowDrawn && continuation_ > 0) {
    // The row is spent: the urn (see activation_trace.h).
    const std::vector<uint64_t>& prior = urnPrior_[static_cast<size_t>(moeLayer)];
    for (; count < k_; ++count)
      picked_[static_cast<size_t>(drawUnpicked(pool.rng, picked_, [&](size_t e) -> uint64_t {
        return pool.seen[e] * kUrnScale + prior[e];
      }))] = 1;
  } else {
    if (pool.positive < k_) {
      pool.rowDrawn = true;
      const auto row = trace_->counts(prompt_, rowLayer);
      pool.remaining.assign(row.begin(), row.end());
      pool.total = 0;
      pool.positive = 0;
      for (const uint32_t c : pool.remaining) {
        pool.total += c;
        pool.positive += c > 0 ? 1 : 0;
      }
    }
    if (pool.total > 0) {
      // The multiset still covers `left` tokens (rounded up). An expert with `left` counts must be in
      // every one of them, so it is taken now; there are at most k such experts (their counts sum to
      // at most total ≤ k × left). Taking them keeps every count ≤ the tokens left, which is what
      // lets the remaining counts always be drawn as k distinct experts per token, to the end.
      const uint64_t left = (pool.total + k - 1) / k;
      for (size_t e = 0; e < picked_.size(); ++e)
        if (pool.remaining[e] >= left) {
          picked_[e] = 1;
          ++count;
        }
      for (; count < k_ && count < pool.positive; ++count)
        picked_[static_cast<size_t>(drawUnpicked(pool.rng, picked_, [&](size_t e) -> uint64_t {
          return pool.remaining[e];
        }))] = 1;
    }
  }
  // A row with fewer than k experts that have counts: top up from the layer's counts over all prompts.
  const std::vector<uint64_t>& fallback = fallback_[static_cast<size_t>(moeLayer)];
  for (; count < k_; ++count)
    picked_[static_cast<size_t>(drawUnpicked(pool.rng, picked_, [&](size_t e) { return fallback[e]; }))] = 1;
  size_t j = 0;
  for (size_t e = 0; e < picked_.size(); ++e) {
    if (!picked_[e]) continue;
    out[j++] = static_cast<int64_t>(e);
    ++pool.seen[e];
    if (pool.remaining[e] > 0) {
      --pool.remaining[e];
      --pool.total;
      if (pool.remaining[e] == 0) --pool.positive;
    }
  }
}

}  // namespace zipmoe
