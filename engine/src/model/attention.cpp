// Grouped-query attention and the shared causal attention kernel (see attention.h).
// Thread-safety: immutable layers. Cost: see attention.h.
#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hf/family_description.h"
#include "model/linear.h"
#include "model/moe_model_ops.h"
#include "model/weights.h"

namespace zipmoe {

at::Tensor futureKeys(int64_t n, int64_t total) {
  // Query i sits at position total - n + i and sees keys 0 .. total - n + i.
  const at::Tensor rows = at::arange(n, at::kLong).unsqueeze(1) + (total - n);
  const at::Tensor cols = at::arange(total, at::kLong).unsqueeze(0);
  return cols > rows;
}

namespace {

// n queries at positions T - n .. T - 1 against T keys, in one product.
at::Tensor attendOnce(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  const int64_t heads = q.size(0), n = q.size(1), d = q.size(2);
  const int64_t kvHeads = k.size(0), total = k.size(1), dv = v.size(2);
  const int64_t group = heads / kvHeads;
  // [kvHeads, group × n, d] so that each key/value head serves its group of query heads (repeat_kv).
  const at::Tensor qg = q.reshape({kvHeads, group * n, d});
  at::Tensor scores = at::matmul(qg, k.transpose(1, 2)) * scale;  // [kvHeads, group × n, T]
  scores = scores.view({heads, n, total});
  if (n > 1) scores = scores.masked_fill(futureKeys(n, total).unsqueeze(0), -std::numeric_limits<double>::infinity());
  const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  const at::Tensor out = at::matmul(probs.view({kvHeads, group * n, total}), v);  // [kvHeads, group × n, dv]
  return out.view({heads, n, dv}).transpose(0, 1).reshape({n, heads * dv});
}

}  // namespace

at::Tensor causalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  const int64_t n = q.size(1), total = k.size(1);
  if (n <= kAttentionQueryChunk) return attendOnce(q, k, v, scale);
  std::vector<at::Tensor> outs;
  for (int64_t b = 0; b < n; b += kAttentionQueryChunk) {
    const int64_t m = std::min(kAttentionQueryChunk, n - b), seen = total - n + b + m;
    outs.push_back(attendOnce(q.narrow(1, b, m), k.narrow(1, 0, seen), v.narrow(1, 0, seen), scale));
  }
  return at::cat(outs, 0);
}

bool attendsQueryByQuery(int64_t queries) { return queries > 1 && queries <= kMaxGemvRows; }

namespace {

class GqaAttention : public AttentionLayer {
 public:
  GqaAttention(const ModelConfig& c, const WeightLoader& w, const std::string& p, at::ScalarType dtype)
      : c_(c), dtype_(dtype), rope_(c, c.headDim, Rope::Layout::Half) {
    const int64_t hidden = c.hiddenSize, qWidth = int64_t{c.numHeads} * c.headDim,
                  kvWidth = int64_t{c.numKvHeads} * c.headDim;
    q_ = w.load(p + "q_proj.weight", {qWidth, hidden}, dtype);
    k_ = w.load(p + "k_proj.weight", {kvWidth, hidden}, dtype);
    v_ = w.load(p + "v_proj.weight", {kvWidth, hidden}, dtype);
    o_ = w.load(p + "o_proj.weight", {hidden, qWidth}, dtype);
    if (c.attentionBias) {
      qb_ = w.load(p + "q_proj.bias", {qWidth}, dtype);
      kb_ = w.load(p + "k_proj.bias", {kvWidth}, dtype);
      vb_ = w.load(p + "v_proj.bias", {kvWidth}, dtype);
      // qwen2_moe has no o_proj bias; qwen3_moe / olmoe put attention_bias on o_proj too.
      if (forwardPass(c.family).attentionBiasOnOutput) ob_ = w.load(p + "o_proj.bias", {hidden}, dtype);
    }
    if (c.qkNormPerHead) {
      qNorm_ = w.load(p + "q_norm.weight", {c.headDim}, dtype);
      kNorm_ = w.load(p + "k_norm.weight", {c.headDim}, dtype);
    } else if (c.qkNormFull) {
      qNorm_ = w.load(p + "q_norm.weight", {qWidth}, dtype);
      kNorm_ = w.load(p + "k_norm.weight", {kvWidth}, dtype);
    }
    scale_ = 1.0 / std::sqrt(static_cast<double>(c.headDim));
  }

  at::Tensor forward(const at::Tensor& x, const at::Tensor& positions,
                     const std::vector<AttentionSegment>& segments) const override {
    const int64_t n = x.size(0);
    at::Tensor q = project(x, q_, qb_), k = project(x, k_, kb_), v = project(x, v_, vb_);
    if (c_.qkNormFull) {
      q = rmsNorm(q, *qNorm_, c_.rmsNormEps);
      k = rmsNorm(k, *kNorm_, c_.rmsNormEps);
    }
    if (c_.clipQkv) {
      const double clip = *c_.clipQkv;
      q = q.clamp(-clip, clip), k = k.clamp(-clip, clip), v = v.clamp(-clip, clip);
    }
    q = q.view({n, c_.numHeads, c_.headDim});
    k = k.view({n, c_.numKvHeads, c_.headDim});
    v = v.view({n, c_.numKvHeads, c_.headDim});
    if (c_.qkNormPerHead) {
      q = rmsNorm(q, *qNorm_, c_.rmsNormEps);
      k = rmsNorm(k, *kNorm_, c_.rmsNormEps);
    }
    const Rope::Tables tables = rope_.tables(positions);
    q = rope_.apply(q, tables);
    k = rope_.apply(k, tables);
    std::vector<at::Tensor> outs;
    outs.reserve(segments.size());
    for (const AttentionSegment& s : segments) {
      const at::Tensor keys = s.first->writeAndView(s.past, k.narrow(0, s.offset, s.count).transpose(0, 1));
      const at::Tensor values = s.second->writeAndView(s.past, v.narrow(0, s.offset, s.count).transpose(0, 1));
      const at::Tensor qs = q.narrow(0, s.offset, s.count).transpose(0, 1);  // [heads, n, d]
      if (!attendsQueryByQuery(s.count)) {
        outs.push_back(causalAttention(qs, keys, values, scale_));
        continue;
      }
      for (int64_t i = 0; i < s.count; ++i) {
        const int64_t seen = s.past + i + 1;
        outs.push_back(causalAttention(qs.narrow(1, i, 1), keys.narrow(1, 0, seen), values.narrow(1, 0, seen), scale_));
      }
    }
    const at::Tensor attn = outs.size() == 1 ? outs[0] : at::cat(outs, 0);
    return project(attn, o_, ob_);
  }

  std::pair<GrowingTensor, GrowingTensor> makeCache() const override {
    std::vector<int64_t> shape{c_.numKvHeads, 0, c_.headDim};
    return {GrowingTensor(shape, 1, dtype_), GrowingTensor(shape, 1, dtype_)};
  }

 private:
  const ModelConfig& c_;
  at::ScalarType dtype_;
  Rope rope_;
  at::Tensor q_, k_, v_, o_;
  std::optional<at::Tensor> qb_, kb_, vb_, ob_, qNorm_, kNorm_;
  double scale_ = 1.0;
};

}  // namespace

std::unique_ptr<AttentionLayer> makeGqaAttention(const ModelConfig& config, const WeightLoader& weights,
                                                 const std::string& prefix, at::ScalarType dtype) {
  return std::make_unique<GqaAttention>(config, weights, prefix, dtype);
}

}  // namespace zipmoe
