// The demo model for training: HF transformers' MixtralForCausalLM written as torch::nn modules.
//
// Internal to engine/src/train (it includes <torch/torch.h>; nothing outside train/ includes it).
// Module and parameter names mirror Hugging Face exactly, so that named_parameters() yields
// "model.layers.0.block_sparse_moe.experts.3.w1.weight" etc. and export/import is a name-for-name copy.
// The math is Mixtral's: RMSNorm in fp32 (x * rsqrt(mean(x²) + eps) * w), grouped-query attention
// with RoPE in the rotate_half convention (inv_freq = theta^(-2i/d), cos/sin of cat(freqs, freqs)),
// scores scaled by 1/sqrt(head_dim), causal mask, fp32 softmax; sparse MoE with a bias-free linear
// router, fp32 softmax over all experts, top-k, weights renormalised over the top-k, SwiGLU experts
// w2(silu(w1 x) * w3 x); final RMSNorm and an untied lm_head. Tokens are gathered per expert and the
// weighted outputs scatter-added back (index_add_), so cost scales with top-k, not with the number of
// experts.
// Thread-safety: a module is used by one thread at a time (torch's intra-op threads are fine).
// Cost: per token about 6 × (active parameters) FLOPs for a training step plus attention.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace zipmoe::train {

struct DemoModelShape {
  int64_t vocab = 1536;
  int64_t hidden = 256;
  int64_t intermediate = 512;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t kvHeads = 2;
  int64_t experts = 8;
  int64_t topK = 2;
  int64_t maxPositions = 256;
  double ropeTheta = 10000.0;
  double rmsEps = 1e-5;
  double initStd = 0.02;
  int64_t headDim() const { return hidden / heads; }
};

class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const DemoModelShape& shape);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  int64_t heads_, kvHeads_, headDim_;
};
TORCH_MODULE(Attention);

class ExpertImpl : public torch::nn::Module {
 public:
  ExpertImpl(int64_t hidden, int64_t intermediate);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
};
TORCH_MODULE(Expert);

// What one MoE block did with a batch: the router's fp32 probabilities and top-k choices.
struct RoutingRecord {
  torch::Tensor probs;     // [tokens, experts] fp32
  torch::Tensor selected;  // [tokens, topK] int64
};

class SparseMoeImpl : public torch::nn::Module {
 public:
  explicit SparseMoeImpl(const DemoModelShape& shape);
  torch::Tensor forward(const torch::Tensor& x, RoutingRecord* record);
  torch::nn::Linear gate{nullptr};
  torch::nn::ModuleList experts;

 private:
  int64_t experts_, topK_;
};
TORCH_MODULE(SparseMoe);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const DemoModelShape& shape);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        RoutingRecord* record);
  Attention self_attn{nullptr};
  SparseMoe block_sparse_moe{nullptr};
  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

class MixtralBodyImpl : public torch::nn::Module {
 public:
  explicit MixtralBodyImpl(const DemoModelShape& shape);
  // ids [batch, time] int64 -> hidden states [batch, time, hidden]. `records` (optional) receives one
  // RoutingRecord per layer.
  torch::Tensor forward(const torch::Tensor& ids, std::vector<RoutingRecord>* records);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers;
  RmsNorm norm{nullptr};

 private:
  DemoModelShape shape_;
  torch::Tensor cos_, sin_;  // [maxPositions, headDim]
};
TORCH_MODULE(MixtralBody);

class MixtralForCausalLMImpl : public torch::nn::Module {
 public:
  explicit MixtralForCausalLMImpl(const DemoModelShape& shape);
  torch::Tensor forward(const torch::Tensor& ids, std::vector<RoutingRecord>* records = nullptr);
  const DemoModelShape& shape() const { return shape_; }
  MixtralBody model{nullptr};
  torch::nn::Linear lm_head{nullptr};

 private:
  DemoModelShape shape_;
};
TORCH_MODULE(MixtralForCausalLM);

// Switch-Transformer load-balancing loss as HF Mixtral computes it: experts × Σ_e f_e · P_e, where f_e
// is the fraction of top-k choices that went to e and P_e its mean router probability (1 when uniform).
torch::Tensor loadBalancingLoss(const std::vector<RoutingRecord>& records, int64_t experts);

}  // namespace zipmoe::train
