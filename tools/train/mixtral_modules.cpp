// The Mixtral modules: HF MixtralForCausalLM math for training. See mixtral_modules.h.
// Thread-safety: one thread per module. Cost: ~6 × active parameters FLOPs per trained token.
#include "mixtral_modules.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace zipmoe::train {
namespace {

torch::nn::Linear makeLinear(int64_t in, int64_t out, double std) {
  torch::nn::Linear linear(torch::nn::LinearOptions(in, out).bias(false));
  torch::nn::init::normal_(linear->weight, 0.0, std);
  return linear;
}

torch::Tensor rotateHalf(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

RmsNormImpl::RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  const auto inputType = x.scalar_type();
  const torch::Tensor h = x.to(torch::kFloat32);
  const torch::Tensor normed = h * torch::rsqrt(h.pow(2).mean(-1, true) + eps_);
  return weight * normed.to(inputType);
}

AttentionImpl::AttentionImpl(const DemoModelShape& shape)
    : heads_(shape.heads), kvHeads_(shape.kvHeads), headDim_(shape.headDim()) {
  q_proj = register_module("q_proj", makeLinear(shape.hidden, heads_ * headDim_, shape.initStd));
  k_proj = register_module("k_proj", makeLinear(shape.hidden, kvHeads_ * headDim_, shape.initStd));
  v_proj = register_module("v_proj", makeLinear(shape.hidden, kvHeads_ * headDim_, shape.initStd));
  o_proj = register_module("o_proj", makeLinear(heads_ * headDim_, shape.hidden, shape.initStd));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t batch = x.size(0), time = x.size(1);
  torch::Tensor q = q_proj(x).view({batch, time, heads_, headDim_}).transpose(1, 2);
  torch::Tensor k = k_proj(x).view({batch, time, kvHeads_, headDim_}).transpose(1, 2);
  torch::Tensor v = v_proj(x).view({batch, time, kvHeads_, headDim_}).transpose(1, 2);
  const torch::Tensor c = cos.narrow(0, 0, time).to(q.scalar_type());
  const torch::Tensor s = sin.narrow(0, 0, time).to(q.scalar_type());
  q = q * c + rotateHalf(q) * s;
  k = k * c + rotateHalf(k) * s;
  if (kvHeads_ != heads_) {  // each kv head serves heads/kvHeads consecutive query heads
    k = k.repeat_interleave(heads_ / kvHeads_, 1);
    v = v.repeat_interleave(heads_ / kvHeads_, 1);
  }
  torch::Tensor scores = torch::matmul(q, k.transpose(2, 3)) / std::sqrt(static_cast<double>(headDim_));
  const torch::Tensor mask = torch::ones({time, time}, torch::TensorOptions().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  const torch::Tensor probs = torch::softmax(scores.to(torch::kFloat32), -1).to(q.scalar_type());
  const torch::Tensor out = torch::matmul(probs, v).transpose(1, 2).reshape({batch, time, heads_ * headDim_});
  return o_proj(out);
}

ExpertImpl::ExpertImpl(int64_t hidden, int64_t intermediate) {
  w1 = register_module("w1", makeLinear(hidden, intermediate, 0.02));
  w2 = register_module("w2", makeLinear(intermediate, hidden, 0.02));
  w3 = register_module("w3", makeLinear(hidden, intermediate, 0.02));
}

torch::Tensor ExpertImpl::forward(const torch::Tensor& x) { return w2(torch::silu(w1(x)) * w3(x)); }

SparseMoeImpl::SparseMoeImpl(const DemoModelShape& shape) : experts_(shape.experts), topK_(shape.topK) {
  gate = register_module("gate", makeLinear(shape.hidden, shape.experts, shape.initStd));
  for (int64_t e = 0; e < shape.experts; ++e) {
    Expert expert(shape.hidden, shape.intermediate);
    torch::nn::init::normal_(expert->w1->weight, 0.0, shape.initStd);
    torch::nn::init::normal_(expert->w2->weight, 0.0, shape.initStd);
    torch::nn::init::normal_(expert->w3->weight, 0.0, shape.initStd);
    experts->push_back(expert);
  }
  register_module("experts", experts);
}

torch::Tensor SparseMoeImpl::forward(const torch::Tensor& x, RoutingRecord* record) {
  const auto sizes = x.sizes().vec();
  const torch::Tensor flat = x.reshape({-1, x.size(-1)});
  const torch::Tensor logits = gate(flat);
  const torch::Tensor probs = torch::softmax(logits.to(torch::kFloat32), -1);
  auto [topWeights, topIds] = probs.topk(topK_, -1);
  topWeights = (topWeights / topWeights.sum(-1, true)).to(x.scalar_type());
  if (record != nullptr) *record = RoutingRecord{probs, topIds};

  torch::Tensor out = torch::zeros_like(flat);
  // Sort the (token, slot) choices by expert so that each expert's rows are one contiguous slice.
  const torch::Tensor flatIds = topIds.reshape({-1});
  const torch::Tensor order = flatIds.argsort();
  const torch::Tensor sortedExperts = flatIds.index_select(0, order);
  const torch::Tensor tokenOf = order.div(topK_, "floor");
  const torch::Tensor weightOf = topWeights.reshape({-1}).index_select(0, order);
  const torch::Tensor counts = torch::bincount(sortedExperts, {}, experts_).cpu();
  const auto* countPtr = counts.data_ptr<int64_t>();
  int64_t start = 0;
  for (int64_t e = 0; e < experts_; ++e) {
    const int64_t n = countPtr[e];
    if (n == 0) continue;
    const torch::Tensor rows = tokenOf.narrow(0, start, n);
    const torch::Tensor y = experts[static_cast<size_t>(e)]->as<ExpertImpl>()->forward(flat.index_select(0, rows));
    out = out.index_add(0, rows, y * weightOf.narrow(0, start, n).unsqueeze(1));
    start += n;
  }
  return out.view(sizes);
}

DecoderLayerImpl::DecoderLayerImpl(const DemoModelShape& shape) {
  self_attn = register_module("self_attn", Attention(shape));
  block_sparse_moe = register_module("block_sparse_moe", SparseMoe(shape));
  input_layernorm = register_module("input_layernorm", RmsNorm(shape.hidden, shape.rmsEps));
  post_attention_layernorm = register_module("post_attention_layernorm", RmsNorm(shape.hidden, shape.rmsEps));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                        RoutingRecord* record) {
  const torch::Tensor h = x + self_attn(input_layernorm(x), cos, sin);
  return h + block_sparse_moe(post_attention_layernorm(h), record);
}

MixtralBodyImpl::MixtralBodyImpl(const DemoModelShape& shape) : shape_(shape) {
  embed_tokens = register_module("embed_tokens", torch::nn::Embedding(shape.vocab, shape.hidden));
  torch::nn::init::normal_(embed_tokens->weight, 0.0, shape.initStd);
  for (int64_t i = 0; i < shape.layers; ++i) layers->push_back(DecoderLayer(shape));
  register_module("layers", layers);
  norm = register_module("norm", RmsNorm(shape.hidden, shape.rmsEps));
  const int64_t dim = shape.headDim();
  const torch::Tensor invFreq =
      1.0 / torch::pow(shape.ropeTheta, torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) /
                                            static_cast<double>(dim));
  const torch::Tensor t = torch::arange(shape.maxPositions, torch::kInt64).to(torch::kFloat32);
  const torch::Tensor freqs = torch::outer(t, invFreq);
  const torch::Tensor emb = torch::cat({freqs, freqs}, -1);
  cos_ = register_buffer("rope_cos", emb.cos());
  sin_ = register_buffer("rope_sin", emb.sin());
}

torch::Tensor MixtralBodyImpl::forward(const torch::Tensor& ids, std::vector<RoutingRecord>* records) {
  if (ids.size(1) > shape_.maxPositions)
    throw std::invalid_argument("sequence of " + std::to_string(ids.size(1)) + " tokens exceeds the context of " +
                                std::to_string(shape_.maxPositions));
  torch::Tensor x = embed_tokens(ids);
  if (records != nullptr) records->assign(static_cast<size_t>(shape_.layers), RoutingRecord{});
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers[i]->as<DecoderLayerImpl>()->forward(x, cos_, sin_, records != nullptr ? &(*records)[i] : nullptr);
  return norm(x);
}

MixtralForCausalLMImpl::MixtralForCausalLMImpl(const DemoModelShape& shape) : shape_(shape) {
  model = register_module("model", MixtralBody(shape));
  lm_head = register_module("lm_head", makeLinear(shape.hidden, shape.vocab, shape.initStd));
}

torch::Tensor MixtralForCausalLMImpl::forward(const torch::Tensor& ids, std::vector<RoutingRecord>* records) {
  return lm_head(model(ids, records));
}

torch::Tensor loadBalancingLoss(const std::vector<RoutingRecord>& records, int64_t experts) {
  torch::Tensor total = torch::zeros({}, torch::kFloat32);
  for (const RoutingRecord& r : records) {
    const torch::Tensor chosen = torch::one_hot(r.selected.reshape({-1}), experts).to(torch::kFloat32).mean(0);
    const torch::Tensor meanProb = r.probs.mean(0);
    total = total + static_cast<double>(experts) * (chosen * meanProb).sum();
  }
  return total / static_cast<double>(records.empty() ? 1 : records.size());
}

}  // namespace zipmoe::train
