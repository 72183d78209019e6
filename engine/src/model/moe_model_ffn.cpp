// Dense MLP and MoE block (see moe_model_ffn.h). Thread-safety: immutable. Cost: see header.
#include "model/moe_model_ffn.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <vector>

#include "backend/backend_registry.h"
#include "hf/family_description.h"
#include "model/expert_predictor.h"
#include "model/linear.h"
#include "model/moe_model_ops.h"
#include "model/remote_expert_step.h"
#include "model/weights.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

struct Mlp {
  at::Tensor gate, up, down;
  Mlp() = default;
  Mlp(const WeightLoader& w, const std::string& p, int64_t hidden, int64_t width, at::ScalarType dtype)
      : gate(w.load(p + "gate_proj.weight", {width, hidden}, dtype)),
        up(w.load(p + "up_proj.weight", {width, hidden}, dtype)),
        down(w.load(p + "down_proj.weight", {hidden, width}, dtype)) {}
  at::Tensor operator()(const at::Tensor& x) const { return gatedMlp(x, gate, up, down); }
};

class DenseMlp : public FeedForward {
 public:
  DenseMlp(const ModelConfig& c, const WeightLoader& w, const std::string& p, at::ScalarType dtype)
      : mlp_(w, p, c.hiddenSize, c.intermediateSize, dtype) {}
  at::Tensor forward(const at::Tensor& x) const override { return mlp_(x); }

 private:
  Mlp mlp_;
};

class MoeBlock : public FeedForward {
 public:
  MoeBlock(const ModelConfig& c, const WeightLoader& w, const std::string& p, at::ScalarType dtype, int moeLayer,
           ExpertProvider& experts, RoutingOverride* routing, ExpertPredictor* predictor)
      : c_(c), dtype_(dtype), moeLayer_(moeLayer), experts_(experts), routingOverride_(routing), predictor_(predictor),
        router_(c, w, p + forwardPass(c.family).names.router, dtype) {
    if (predictor_) predictor_->addRouter(moeLayer_, &router_);
    if (c.sharedExpertIntermediateSize > 0) {
      const DecoderLayerNames& names = forwardPass(c.family).names;
      shared_ = Mlp(w, p + names.sharedExperts, c.hiddenSize, c.sharedExpertIntermediateSize, dtype);
      if (c.sharedExpertGated) sharedGate_ = w.load(p + names.sharedExpertGate, {1, c.hiddenSize}, dtype);
    }
  }

  at::Tensor forward(const at::Tensor& x) const override {
    const int64_t n = x.size(0), k = c_.numExpertsPerTok, hidden = c_.hiddenSize;
    const Routing routing = routingOverride_ ? forcedRouting(x) : router_.route(x);
    // Flat slot s = token × k + j; group the slots by expert.
    const at::Tensor flatExperts = routing.experts.reshape({-1}).contiguous();
    const int64_t* chosen = flatExperts.data_ptr<int64_t>();
    std::vector<std::vector<int64_t>> slots(static_cast<size_t>(c_.numExperts));
    for (int64_t s = 0; s < n * k; ++s) slots[static_cast<size_t>(chosen[s])].push_back(s);
    // Decoding computes each expert fused on the GEMV (gatedMlpGemv), straight into its slots' rows.
    const bool fusable = dtype_ == at::kBFloat16 && x.scalar_type() == at::kBFloat16 && gemvProjects(1);
    const std::vector<Work> work = split(slots, n, fusable);
    std::vector<ExpertRequest> requests;
    for (int e = 0; e < c_.numExperts; ++e)
      if (!slots[static_cast<size_t>(e)].empty()) {
        const int tokens = static_cast<int>(slots[static_cast<size_t>(e)].size());
        // Decoding computes from split planes; anything else merges them (apply) where a runtime
        // without output slots hands them over.
        requests.push_back({e, tokens, fusable && work[static_cast<size_t>(e)].steps.empty(), true});
      }

    const at::Tensor flatWeights = routing.weights.reshape({-1});
    at::Tensor contributions = at::empty({n * k, hidden}, x.options());
    const at::Tensor xc = fusable ? x.contiguous() : x;
    const at::Tensor slotWeights = fusable ? flatWeights.to(at::kFloat).contiguous() : flatWeights;
    std::vector<bool> done(static_cast<size_t>(c_.numExperts), false);
    // Experts the provider computes elsewhere leave `requests`; their calls run during the loop below.
    RemoteExpertStep remote(experts_, moeLayer_, x, slots, k, requests);
    size_t received = 0;
    const auto batch = experts_.acquire(moeLayer_, requests);
    if (predictor_) predictor_->afterAcquire(moeLayer_, x, routing.experts);
    // The shared expert needs no routed one: computed now, it overlaps the runtime's reads of the
    // routed experts. After them (as before) it ran with the I/O thread idle. Same value either way.
    std::optional<at::Tensor> shared;
    if (shared_) {
      shared = (*shared_)(x);
      if (sharedGate_) shared = at::sigmoid(project(x, *sharedGate_)) * *shared;
    }
    while (auto ready = batch->next()) {
      const int e = ready->expert;
      if (e < 0 || e >= c_.numExperts || slots[static_cast<size_t>(e)].empty() || done[static_cast<size_t>(e)])
        throw Error("MoE layer " + std::to_string(moeLayer_) + ": the expert provider returned expert " +
                    std::to_string(e) + ", which was not requested or was already returned");
      if (ready->tensors.size() != 3 || !validSplit(*ready))
        throw Error("MoE layer " + std::to_string(moeLayer_) + ": expert " + std::to_string(e) + " came with " +
                    std::to_string(ready->tensors.size()) + " tensors (or a null one without its planes), expected 3");
      done[static_cast<size_t>(e)] = true;
      ++received;
      const Work& mine = work[static_cast<size_t>(e)];
      const GemvWeight gate = tensorOf(*ready, 0, c_.moeIntermediateSize, hidden);
      const GemvWeight up = tensorOf(*ready, 1, c_.moeIntermediateSize, hidden);
      const GemvWeight down = tensorOf(*ready, 2, hidden, c_.moeIntermediateSize);
      const std::span<const int64_t> decoding(mine.decoding);
      for (size_t from = 0; from < decoding.size(); from += static_cast<size_t>(kGemvPassRows))
        computeFused(xc, decoding.subspan(from, std::min(decoding.size() - from, static_cast<size_t>(kGemvPassRows))),
                     slotWeights, gate, up, down, contributions);
      for (const std::vector<int64_t>& list : mine.steps) {
        // One step's rows, which its products take as they would alone (linear.h).
        const RowSegmentsScope oneStep({static_cast<int64_t>(list.size())});
        const at::Tensor slotIndex =
            at::from_blob(const_cast<int64_t*>(list.data()), {static_cast<int64_t>(list.size())}, at::kLong);
        const at::Tensor rows = x.index_select(0, at::floor_divide(slotIndex, k));
        const at::Tensor out = apply(fp32Silu(apply(rows, gate)) * apply(rows, up), down);
        const at::Tensor weighted = (out * flatWeights.index_select(0, slotIndex).unsqueeze(1)).to(dtype_);
        contributions.index_copy_(0, slotIndex, weighted);
      }
    }
    if (received != requests.size())
      throw Error("MoE layer " + std::to_string(moeLayer_) + ": the expert provider returned " +
                  std::to_string(received) + " of " + std::to_string(requests.size()) + " requested experts");
    if (remote.active()) remote.collect(contributions, flatWeights, dtype_);
    // Fixed-order sum over each token's slots (ascending expert id), like transformers' index_add_ loop.
    const at::Tensor perToken = contributions.view({n, k, hidden});
    at::Tensor result = perToken.select(1, 0).clone();
    for (int64_t j = 1; j < k; ++j) result = result + perToken.select(1, j);
    if (shared) result = result + *shared;
    return result;
  }

 private:
  // An expert's slots by how they are computed: the slots of decoding steps (at most kMaxGemvRows
  // of a step's tokens chose the expert), fused on the GEMV in passes of kGemvPassRows whatever the
  // step, and every other step's slots on their own, as when that step's sequence runs alone — so
  // a token's result does not depend on the other sequences of the batch (linear.h). Without the
  // GEMV (fp32, the libtorch kernel) all the expert's slots are one product.
  struct Work {
    std::vector<int64_t> decoding;
    std::vector<std::vector<int64_t>> steps;
  };
  std::vector<Work> split(const std::vector<std::vector<int64_t>>& slots, int64_t n, bool fusable) const {
    std::vector<int32_t> stepOf(static_cast<size_t>(n));
    int32_t step = 0;
    size_t token = 0;
    for (const int64_t count : rowSegments(n)) {
      for (int64_t i = 0; i < count; ++i) stepOf[token++] = step;
      ++step;
    }
    std::vector<Work> work(slots.size());
    for (size_t e = 0; e < slots.size(); ++e) {
      const std::vector<int64_t>& list = slots[e];
      if (!fusable) {
        if (!list.empty()) work[e].steps.push_back(list);
        continue;
      }
      // Slots ascend with their tokens, and a step's tokens are consecutive: its slots are a run.
      for (size_t begin = 0; begin < list.size();) {
        const int32_t s = stepOf[static_cast<size_t>(list[begin] / c_.numExpertsPerTok)];
        size_t end = begin + 1;
        while (end < list.size() && stepOf[static_cast<size_t>(list[end] / c_.numExpertsPerTok)] == s) ++end;
        if (static_cast<int64_t>(end - begin) <= kMaxGemvRows)
          work[e].decoding.insert(work[e].decoding.end(), list.begin() + static_cast<std::ptrdiff_t>(begin),
                                  list.begin() + static_cast<std::ptrdiff_t>(end));
        else
          work[e].steps.emplace_back(list.begin() + static_cast<std::ptrdiff_t>(begin),
                                     list.begin() + static_cast<std::ptrdiff_t>(end));
        begin = end;
      }
    }
    return work;
  }

  // The override's experts, checked, weighed by the router.
  Routing forcedRouting(const at::Tensor& x) const {
    const int64_t n = x.size(0);
    const int k = c_.numExpertsPerTok;
    at::Tensor chosen = at::empty({n, k}, at::kLong);
    int64_t* ids = chosen.data_ptr<int64_t>();
    routingOverride_->choose(moeLayer_, n, k, std::span<int64_t>(ids, static_cast<size_t>(n * k)));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = ids[t * k + j];
        if (e < 0 || e >= c_.numExperts || (j > 0 && e <= ids[t * k + j - 1]))
          throw Error("MoE layer " + std::to_string(moeLayer_) + ": the routing override gave token " +
                      std::to_string(t) + " expert " + std::to_string(e) + " in slot " + std::to_string(j) +
                      "; expected " + std::to_string(k) + " distinct experts in 0 .. " +
                      std::to_string(c_.numExperts - 1) + ", ascending");
      }
    return router_.weigh(x, chosen);
  }

  // One expert's contribution to its slots at decoding, fused (gatedMlpGemv): its tokens' rows of x
  // gathered, each slot's output scaled by its routing weight and written to its row of
  // `contributions` — the same values as the unfused path's products, silu, scaling and index_copy_.
  void computeFused(const at::Tensor& x, std::span<const int64_t> list, const at::Tensor& slotWeights,
                    const GemvWeight& gate, const GemvWeight& up, const GemvWeight& down,
                    at::Tensor& contributions) const {
    const int64_t hidden = c_.hiddenSize, k = c_.numExpertsPerTok;
    const auto* xs = reinterpret_cast<const uint16_t*>(x.data_ptr<at::BFloat16>());
    auto* cs = reinterpret_cast<uint16_t*>(contributions.data_ptr<at::BFloat16>());
    const float* weights = slotWeights.data_ptr<float>();
    thread_local std::vector<uint16_t> rows;
    rows.resize(list.size() * static_cast<size_t>(hidden));
    std::array<float, kGemvPassRows> scale{};
    std::array<uint16_t*, kGemvPassRows> out{};
    for (size_t i = 0; i < list.size(); ++i) {
      std::memcpy(rows.data() + i * static_cast<size_t>(hidden), xs + list[i] / k * hidden,
                  static_cast<size_t>(hidden) * sizeof(uint16_t));
      scale[i] = weights[list[i]];
      out[i] = cs + list[i] * hidden;
    }
    backend::defaultBackend().gatedMlp(rows.data(), static_cast<int64_t>(list.size()), gate,
                                       up, down, scale.data(), out.data());
  }

  static bool inPlace(const ReadyExpert& r, size_t kind) { return kind < r.nibble.size() && !r.nibble[kind].empty(); }

  static bool validSplit(const ReadyExpert& r) {
    for (size_t kind = 0; kind < r.tensors.size(); ++kind)
      if (r.tensors[kind] == nullptr &&
          (kind >= r.signMantissa.size() || !r.signMantissa[kind] ||
           (!inPlace(r, kind) && (kind >= r.exponents.size() || !r.exponents[kind]))))
        return false;
    return true;
  }

  // One expert tensor as the provider handed it (GemvWeight): BF16 words, the split planes (recovery
  // fused into the product — the same result as the merged words, see projectSplit), or nibble codes
  // read in place with the sign-mantissa plane (projectNibble, the same result again).
  static GemvWeight tensorOf(const ReadyExpert& r, size_t kind, int64_t rows, int64_t cols) {
    GemvWeight t;
    t.rows = rows;
    t.cols = cols;
    if (r.tensors[kind] != nullptr) {
      t.words = r.tensors[kind];
    } else if (inPlace(r, kind)) {
      t.nibble = r.nibble[kind];
      t.signMantissa = r.signMantissa[kind];
    } else {
      t.exponents = r.exponents[kind];
      t.signMantissa = r.signMantissa[kind];
    }
    return t;
  }

  // project(x, W) for any form; codes or planes the GEMV cannot take here (prefill: many rows) are
  // turned into words first (same result).
  at::Tensor apply(const at::Tensor& x, const GemvWeight& w) const {
    if (w.words) return project(x, wrap(w.words, w.rows, w.cols));
    const bool gemv = dtype_ == at::kBFloat16 && x.scalar_type() == at::kBFloat16 && gemvProjects(x.numel() / w.cols);
    if (gemv) return w.nibble.empty() ? projectSplit(x, w.exponents, w.signMantissa, w.rows, w.cols)
                                      : projectNibble(x, w.nibble, w.signMantissa, w.rows, w.cols);
    // Prefill on AMX tiles: the words are made 16 rows at a time beside the product, no whole tensor.
    if (amxProjects(x, w.rows, w.cols)) return projectTiles(x, w);
    // One tensor of scratch per thread, kept: a fresh one would fault its pages in at every expert.
    thread_local std::vector<uint16_t> scratch;
    const uint16_t* words = nullptr;
    if (!w.nibble.empty()) {
      words = nibbleWeightWords(w, scratch);
    } else {
      const size_t numel = static_cast<size_t>(w.rows * w.cols);
      if (scratch.size() < numel) scratch.resize(numel);
      bf16::merge(w.exponents, w.signMantissa, numel, scratch.data());
      words = scratch.data();
    }
    return project(x, wrap(words, w.rows, w.cols));
  }

  at::Tensor wrap(const uint16_t* data, int64_t rows, int64_t cols) const {
    // The buffer is only read: linear never writes its weight.
    const at::Tensor t = at::from_blob(const_cast<uint16_t*>(data), {rows, cols}, at::kBFloat16);
    return dtype_ == at::kBFloat16 ? t : t.to(dtype_);
  }

  const ModelConfig& c_;
  at::ScalarType dtype_;
  int moeLayer_;
  ExpertProvider& experts_;
  RoutingOverride* routingOverride_;
  ExpertPredictor* predictor_;
  Router router_;
  std::optional<Mlp> shared_;
  std::optional<at::Tensor> sharedGate_;
};

}  // namespace

std::unique_ptr<FeedForward> makeDenseMlp(const ModelConfig& config, const WeightLoader& weights,
                                          const std::string& prefix, at::ScalarType dtype) {
  return std::make_unique<DenseMlp>(config, weights, prefix + "mlp.", dtype);
}

std::unique_ptr<FeedForward> makeMoeBlock(const ModelConfig& config, const WeightLoader& weights,
                                          const std::string& prefix, at::ScalarType dtype, int moeLayer,
                                          ExpertProvider& experts, RoutingOverride* routing,
                                          ExpertPredictor* predictor) {
  return std::make_unique<MoeBlock>(config, weights, prefix, dtype, moeLayer, experts, routing, predictor);
}

}  // namespace zipmoe
