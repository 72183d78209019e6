// ExpertPredictor (see expert_predictor.h).
#include "model/expert_predictor.h"

#include <algorithm>
#include <string>

#include "base/random.h"
#include "model/router.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

// Experts ranked by how many tokens named them (ties: the order they were first named in).
std::vector<int> byVotes(std::span<const int64_t> ids, int experts) {
  std::vector<int> votes(static_cast<size_t>(experts), 0), order;
  for (int64_t e : ids) {
    if (e < 0 || e >= experts) continue;
    if (votes[static_cast<size_t>(e)]++ == 0) order.push_back(static_cast<int>(e));
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return votes[static_cast<size_t>(a)] > votes[static_cast<size_t>(b)]; });
  return order;
}

}  // namespace

ExpertPredictor::ExpertPredictor(const ModelConfig& config, const PrefetchOptions& options, RoutingOverride* routing,
                                 ExpertProvider& experts)
    : c_(config), routing_(routing), experts_(experts), moeLayers_(config.numMoeLayers()) {
  routers_.assign(static_cast<size_t>(moeLayers_), nullptr);
  previous_.resize(static_cast<size_t>(moeLayers_));
  predicted_.resize(static_cast<size_t>(moeLayers_));
  setOptions(options);
}

void ExpertPredictor::setOptions(const PrefetchOptions& options) {
  if (options.oracleAccuracy < 0 || options.oracleAccuracy > 1)
    throw Error("prefetch: oracle accuracy " + std::to_string(options.oracleAccuracy) + " is outside [0, 1]");
  if (options.predictor == PrefetchPredictor::Oracle && !routing_)
    throw Error("prefetch predictor 'oracle' needs a routing override that can look ahead (trace replay)");
  const auto checkShape = [&](const ExpertTokenTable& t, const char* what) {
    if (t.layers() != moeLayers_ || t.experts() != c_.numExperts)
      throw Error(std::string("prefetch: the ") + what + " expert token table is for " + std::to_string(t.layers()) +
                  " MoE layers × " + std::to_string(t.experts()) + " experts; this model has " +
                  std::to_string(moeLayers_) + " × " + std::to_string(c_.numExperts));
  };
  if (options.predictor == PrefetchPredictor::TokenTable) {
    if (!options.table) throw Error("prefetch predictor 'table' needs an expert token table (PrefetchOptions::table)");
    checkShape(*options.table, "given");
  }
  if (options.record) checkShape(*options.record, "recording");
  options_ = options;
  hasPrediction_.assign(static_cast<size_t>(moeLayers_), 0);
  accuracy_ = PrefetchAccuracy{};
  accuracy_.layers.resize(static_cast<size_t>(moeLayers_));
}

void ExpertPredictor::addRouter(int moeLayer, const Router* router) { routers_.at(static_cast<size_t>(moeLayer)) = router; }

void ExpertPredictor::beginForward(std::span<const int64_t> tokenIds) {
  tokenIds_.assign(tokenIds.begin(), tokenIds.end());
  for (auto& layer : routingLog_) layer.clear();
}

void ExpertPredictor::setRecordRouting(bool on) {
  recordRouting_ = on;
  routingLog_.assign(on ? static_cast<size_t>(moeLayers_) : 0, {});
}

void ExpertPredictor::afterAcquire(int moeLayer, const at::Tensor& x, const at::Tensor& chosen) {
  if (recordRouting_) {
    const at::Tensor ids = chosen.contiguous();
    const int64_t* p = ids.data_ptr<int64_t>();
    routingLog_[static_cast<size_t>(moeLayer)].assign(p, p + ids.numel());
  }
  if (options_.predictor == PrefetchPredictor::Off && !options_.record) return;  // nothing to predict or record
  const at::Tensor ids = chosen.contiguous();
  const int64_t tokens = ids.size(0), k = ids.size(1);
  const std::span<const int64_t> flat(ids.data_ptr<int64_t>(), static_cast<size_t>(tokens * k));
  std::vector<int> requested = byVotes(flat, c_.numExperts);
  std::sort(requested.begin(), requested.end());

  const auto layer = static_cast<size_t>(moeLayer);
  if (hasPrediction_[layer]) {  // score the standing prediction for this layer
    std::vector<int> guess = predicted_[layer];
    std::sort(guess.begin(), guess.end());
    PrefetchAccuracy::Layer& a = accuracy_.layers[layer];
    ++a.predictions;
    a.requested += requested.size();
    a.predicted += guess.size();
    std::vector<int> both;
    std::set_intersection(guess.begin(), guess.end(), requested.begin(), requested.end(), std::back_inserter(both));
    a.covered += both.size();
    if (guess == requested) ++a.exact;
    hasPrediction_[layer] = 0;
  }
  if (options_.record && static_cast<int64_t>(tokenIds_.size()) == tokens)
    for (int64_t t = 0; t < tokens; ++t)
      options_.record->record(static_cast<int32_t>(tokenIds_[static_cast<size_t>(t)]), moeLayer,
                              flat.subspan(static_cast<size_t>(t * k), static_cast<size_t>(k)));
  previous_[layer] = requested;

  if (options_.predictor == PrefetchPredictor::Off) return;
  const int next = (moeLayer + 1) % moeLayers_;
  std::vector<int> hint = next == 0 ? previous_[0] : predict(next, moeLayer, x, tokens);
  if (hint.empty()) return;
  predicted_[static_cast<size_t>(next)] = hint;
  hasPrediction_[static_cast<size_t>(next)] = 1;
  experts_.prefetch(next, hint);
}

std::vector<int> ExpertPredictor::predict(int next, int moeLayer, const at::Tensor& x, int64_t tokens) {
  const int k = c_.numExpertsPerTok;
  switch (options_.predictor) {
    case PrefetchPredictor::Off: return {};
    case PrefetchPredictor::PreviousToken: return previous_[static_cast<size_t>(next)];
    case PrefetchPredictor::NextRouter: {
      const Router* router = routers_[static_cast<size_t>(next)];
      if (!router) return {};
      const at::Tensor top = std::get<1>(at::topk(router->scores(x), k, -1)).contiguous();
      return byVotes({top.data_ptr<int64_t>(), static_cast<size_t>(top.numel())}, c_.numExperts);
    }
    case PrefetchPredictor::TokenTable: {
      std::vector<int64_t> ids;
      for (int64_t token : tokenIds_)
        for (int e : options_.table->predict(static_cast<int32_t>(token), next, k)) ids.push_back(e);
      return byVotes(ids, c_.numExperts);
    }
    case PrefetchPredictor::Oracle: {
      std::vector<int64_t> truth(static_cast<size_t>(tokens * k));
      if (!routing_->peek(next, tokens, k, truth))
        throw Error("prefetch predictor 'oracle': the routing override cannot look ahead");
      const std::vector<int> real = byVotes(truth, c_.numExperts);
      std::vector<char> taken(static_cast<size_t>(c_.numExperts), 0);
      for (int e : real) taken[static_cast<size_t>(e)] = 1;
      uint64_t rng[4];
      detail::seedXoshiro256(rng, options_.seed ^ (0x9E3779B97F4A7C15ull * ++draws_) ^ static_cast<uint64_t>(moeLayer));
      std::vector<int> out;
      uint64_t left = static_cast<uint64_t>(c_.numExperts) - real.size();
      for (int e : real) {
        const double u = static_cast<double>(detail::xoshiro256StarStar(rng) >> 11) * 0x1.0p-53;
        if (u < options_.oracleAccuracy) {
          out.push_back(e);
          continue;
        }
        if (left == 0) continue;  // every expert is a true one: no wrong guess left to make
        // A wrong guess: the j-th expert neither requested nor guessed yet.
        uint64_t j = detail::xoshiro256StarStar(rng) % left;
        for (int w = 0; w < c_.numExperts; ++w)
          if (!taken[static_cast<size_t>(w)] && j-- == 0) {
            taken[static_cast<size_t>(w)] = 1;
            out.push_back(w);
            --left;
            break;
          }
      }
      return out;
    }
  }
  return {};
}

}  // namespace zipmoe
