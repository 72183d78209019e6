// Multi-head latent attention (see mla_attention.h). Thread-safety: immutable. Cost: see header.
#include "model/mla_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "model/linear.h"
#include "model/moe_model_ops.h"
#include "model/weights.h"

namespace zipmoe {
namespace {

// q_a_layernorm and kv_a_layernorm are built without the config's eps in DeepSeek's code and in
// transformers, so they keep DeepseekV2RMSNorm's default.
constexpr double kLatentNormEps = 1e-6;

class MlaAttention : public AttentionLayer {
 public:
  MlaAttention(const ModelConfig& c, const WeightLoader& w, const std::string& p, at::ScalarType dtype)
      : c_(c), dtype_(dtype), rope_(c, c.qkRopeHeadDim, Rope::Layout::Interleaved) {
    const int64_t hidden = c.hiddenSize, heads = c.numHeads, qHead = c.qkNopeHeadDim + c.qkRopeHeadDim;
    const int64_t rank = c.kvLoraRank, ropeDim = c.qkRopeHeadDim;
    if (c.qLoraRank > 0) {
      qA_ = w.load(p + "q_a_proj.weight", {c.qLoraRank, hidden}, dtype);
      if (c.attentionBias) qAb_ = w.load(p + "q_a_proj.bias", {c.qLoraRank}, dtype);
      qANorm_ = w.load(p + "q_a_layernorm.weight", {c.qLoraRank}, dtype);
      q_ = w.load(p + "q_b_proj.weight", {heads * qHead, c.qLoraRank}, dtype);
    } else {
      q_ = w.load(p + "q_proj.weight", {heads * qHead, hidden}, dtype);
    }
    kvA_ = w.load(p + "kv_a_proj_with_mqa.weight", {rank + ropeDim, hidden}, dtype);
    if (c.attentionBias) kvAb_ = w.load(p + "kv_a_proj_with_mqa.bias", {rank + ropeDim}, dtype);
    kvANorm_ = w.load(p + "kv_a_layernorm.weight", {rank}, dtype);
    // kv_b_proj's rows are head-major, each head's nope-key rows then its value rows. They are kept
    // per head in the layouts the absorbed form multiplies as x · Wᵀ: the key blocks transposed
    // ([heads, rank, nope]: q_nope → latent space), the value blocks as they are ([heads, v, rank]:
    // latent space → v). The expanded form multiplies the latents by the same blocks.
    const at::Tensor kvB = w.load(p + "kv_b_proj.weight", {heads * (c.qkNopeHeadDim + c.vHeadDim), rank}, dtype)
                               .view({heads, c.qkNopeHeadDim + c.vHeadDim, rank});
    kBT_ = kvB.narrow(1, 0, c.qkNopeHeadDim).transpose(1, 2).contiguous();
    vB_ = kvB.narrow(1, c.qkNopeHeadDim, c.vHeadDim).contiguous();
    o_ = w.load(p + "o_proj.weight", {hidden, heads * c.vHeadDim}, dtype);
    if (c.attentionBias) ob_ = w.load(p + "o_proj.bias", {hidden}, dtype);
    scale_ = 1.0 / std::sqrt(static_cast<double>(qHead));
    if (c.ropeScaling.type == "yarn" && c.ropeScaling.mscaleAllDim != 0) {
      const double m = yarnGetMscale(c.ropeScaling.factor, c.ropeScaling.mscaleAllDim);
      scale_ *= m * m;
    }
  }

  at::Tensor forward(const at::Tensor& x, const at::Tensor& positions,
                     const std::vector<AttentionSegment>& segments) const override {
    const int64_t n = x.size(0), heads = c_.numHeads, nope = c_.qkNopeHeadDim, ropeDim = c_.qkRopeHeadDim;
    const int64_t rank = c_.kvLoraRank;
    at::Tensor q = qA_.defined() ? project(rmsNorm(project(x, qA_, qAb_), qANorm_, kLatentNormEps), q_) : project(x, q_);
    q = q.view({n, heads, nope + ropeDim});
    const Rope::Tables tables = rope_.tables(positions);
    const at::Tensor qRot = rope_.apply(q.narrow(-1, nope, ropeDim), tables);
    q = at::cat({q.narrow(-1, 0, nope), qRot}, -1);  // [n, heads, nope + rope]

    const at::Tensor compressed = project(x, kvA_, kvAb_);  // [n, rank + rope]
    const at::Tensor latent = rmsNorm(compressed.narrow(-1, 0, rank), kvANorm_, kLatentNormEps);
    const at::Tensor kRot = rope_.apply(compressed.narrow(-1, rank, ropeDim).unsqueeze(1), tables).squeeze(1);

    std::vector<at::Tensor> outs;
    outs.reserve(segments.size());
    for (const AttentionSegment& s : segments) {
      const at::Tensor latents = s.first->writeAndView(s.past, latent.narrow(0, s.offset, s.count));  // [T, rank]
      const at::Tensor rotKeys = s.second->writeAndView(s.past, kRot.narrow(0, s.offset, s.count));   // [T, rope]
      const at::Tensor qs = q.narrow(0, s.offset, s.count);
      if (!attendsQueryByQuery(s.count)) {
        outs.push_back(absorbedIsCheaper(s.count, latents.size(0)) ? absorbed(qs, latents, rotKeys)
                                                                   : expanded(qs, latents, rotKeys));
        continue;
      }
      for (int64_t i = 0; i < s.count; ++i) {
        const int64_t seen = s.past + i + 1;
        const at::Tensor one = qs.narrow(0, i, 1), l = latents.narrow(0, 0, seen), r = rotKeys.narrow(0, 0, seen);
        outs.push_back(absorbedIsCheaper(1, seen) ? absorbed(one, l, r) : expanded(one, l, r));
      }
    }
    const at::Tensor attn = outs.size() == 1 ? outs[0] : at::cat(outs, 0);
    return project(attn, o_, ob_);
  }

  // Multiply-adds of the two forms for n queries against T cached tokens (all heads).
  bool absorbedIsCheaper(int64_t n, int64_t total) const {
    const int64_t heads = c_.numHeads, nope = c_.qkNopeHeadDim, ropeDim = c_.qkRopeHeadDim;
    const int64_t rank = c_.kvLoraRank, vDim = c_.vHeadDim;
    const int64_t expandedCost = total * rank * heads * (nope + vDim) + n * total * heads * (nope + ropeDim + vDim);
    const int64_t absorbedCost = n * heads * (nope * rank + total * (2 * rank + ropeDim) + rank * vDim);
    return absorbedCost < expandedCost;
  }

  // Every cached latent expanded by kv_b_proj into per-head keys and values, then eager attention.
  at::Tensor expanded(const at::Tensor& q, const at::Tensor& latents, const at::Tensor& rotKeys) const {
    const int64_t total = latents.size(0), heads = c_.numHeads, ropeDim = c_.qkRopeHeadDim;
    countWeightRead(kBT_);
    const at::Tensor keysNope = at::matmul(latents.unsqueeze(0), kBT_);  // [heads, T, nope]
    const at::Tensor values = project(latents, vB_.view({heads * c_.vHeadDim, c_.kvLoraRank}))  // [T, heads × v]
                                  .view({total, heads, c_.vHeadDim})
                                  .transpose(0, 1);
    const at::Tensor keys = at::cat({keysNope, rotKeys.unsqueeze(0).expand({heads, total, ropeDim})}, -1);
    return causalAttention(q.transpose(0, 1), keys, values, scale_);
  }

  // The same attention with kv_b_proj absorbed into the query and the output (DeepSeek-V2 §2.1.2):
  // per head, q_nope·(W_UK c) = (W_UKᵀ q_nope)·c and Σ p·(W_UV c) = W_UV (Σ p·c), so the scores and the
  // weighted sum run over the cached latents themselves, as one shared (MQA-like) key/value head of
  // width rank (+ the shared rotary key). Products run in the compute dtype and the softmax in fp32,
  // as in the expanded form; only the association of the products differs.
  at::Tensor absorbed(const at::Tensor& q, const at::Tensor& latents, const at::Tensor& rotKeys) const {
    const int64_t n = q.size(0), total = latents.size(0), heads = c_.numHeads, nope = c_.qkNopeHeadDim;
    const int64_t ropeDim = c_.qkRopeHeadDim, rank = c_.kvLoraRank, vDim = c_.vHeadDim;
    const at::Tensor qh = q.transpose(0, 1);                                  // [heads, n, nope + rope]
    const at::Tensor qLatent = projectPerHead(qh.narrow(-1, 0, nope), kBT_);  // [heads, n, rank]
    const at::Tensor qRope = qh.narrow(-1, nope, ropeDim);                    // [heads, n, rope]
    // The scores in chunks of queries, each against the latents up to its last query (attention_bounds.h).
    std::vector<at::Tensor> outLatents;
    for (int64_t b = 0; b < n; b += kAttentionQueryChunk) {
      const int64_t m = std::min(kAttentionQueryChunk, n - b), seen = total - n + b + m;
      const at::Tensor l = latents.narrow(0, 0, seen);
      at::Tensor scores = at::mm(qLatent.narrow(1, b, m).reshape({heads * m, rank}), l.t()) +
                          at::mm(qRope.narrow(1, b, m).reshape({heads * m, ropeDim}), rotKeys.narrow(0, 0, seen).t());
      scores = (scores * scale_).view({heads, m, seen});
      if (m > 1) scores = scores.masked_fill(futureKeys(m, seen).unsqueeze(0), -std::numeric_limits<double>::infinity());
      const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type()).view({heads * m, seen});
      outLatents.push_back(at::mm(probs, l).view({heads, m, rank}));
    }
    const at::Tensor outLatent = outLatents.size() == 1 ? outLatents[0] : at::cat(outLatents, 1);
    const at::Tensor out = projectPerHead(outLatent, vB_);  // [heads, n, v]
    return out.transpose(0, 1).reshape({n, heads * vDim});
  }

  std::pair<GrowingTensor, GrowingTensor> makeCache() const override {
    return {GrowingTensor({0, c_.kvLoraRank}, 0, dtype_), GrowingTensor({0, c_.qkRopeHeadDim}, 0, dtype_)};
  }

 private:
  const ModelConfig& c_;
  at::ScalarType dtype_;
  Rope rope_;
  at::Tensor qA_, qANorm_, q_, kvA_, kvANorm_, kBT_, vB_, o_;
  std::optional<at::Tensor> qAb_, kvAb_, ob_;
  double scale_ = 1.0;
};

}  // namespace

std::unique_ptr<AttentionLayer> makeMlaAttention(const ModelConfig& config, const WeightLoader& weights,
                                                 const std::string& prefix, at::ScalarType dtype) {
  return std::make_unique<MlaAttention>(config, weights, prefix, dtype);
}

}  // namespace zipmoe
