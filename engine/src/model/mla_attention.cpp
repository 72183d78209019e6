// Multi-head latent attention (see mla_attention.h). Thread-safety: immutable. Cost: see header.
#include "model/mla_attention.h"

#include <cmath>
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
    kvB_ = w.load(p + "kv_b_proj.weight", {heads * (c.qkNopeHeadDim + c.vHeadDim), rank}, dtype);
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
    const int64_t rank = c_.kvLoraRank, vDim = c_.vHeadDim;
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
      const int64_t total = latents.size(0);
      const at::Tensor kv = project(latents, kvB_).view({total, heads, nope + vDim});
      const at::Tensor keys = at::cat({kv.narrow(-1, 0, nope), rotKeys.unsqueeze(1).expand({total, heads, ropeDim})}, -1);
      const at::Tensor values = kv.narrow(-1, nope, vDim);
      outs.push_back(causalAttention(q.narrow(0, s.offset, s.count).transpose(0, 1), keys.transpose(0, 1),
                                     values.transpose(0, 1), scale_));
    }
    const at::Tensor attn = outs.size() == 1 ? outs[0] : at::cat(outs, 0);
    return project(attn, o_, ob_);
  }

  std::pair<GrowingTensor, GrowingTensor> makeCache() const override {
    return {GrowingTensor({0, c_.kvLoraRank}, 0, dtype_), GrowingTensor({0, c_.qkRopeHeadDim}, 0, dtype_)};
  }

 private:
  const ModelConfig& c_;
  at::ScalarType dtype_;
  Rope rope_;
  at::Tensor qA_, qANorm_, q_, kvA_, kvANorm_, kvB_, o_;
  std::optional<at::Tensor> qAb_, kvAb_, ob_;
  double scale_ = 1.0;
};

}  // namespace

std::unique_ptr<AttentionLayer> makeMlaAttention(const ModelConfig& config, const WeightLoader& weights,
                                                 const std::string& prefix, at::ScalarType dtype) {
  return std::make_unique<MlaAttention>(config, weights, prefix, dtype);
}

}  // namespace zipmoe
