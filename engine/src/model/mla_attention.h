// Multi-head latent attention (DeepSeek-V2), internal to the forward pass.
//
// q comes from q_proj, or from q_a_proj → q_a_layernorm → q_b_proj when q_lora_rank is set, and is
// split per head into a "nope" part and a rotary part. kv_a_proj_with_mqa gives the compressed
// latent (kv_lora_rank) and one shared rotary key (qk_rope_head_dim). The cache holds exactly those
// two per token — the latent after kv_a_layernorm and the rotated key. Attention runs in whichever of
// two exact forms costs fewer multiply-adds for the segment's n queries against its T cached tokens:
// - expanded (transformers' form; prefill): every cached latent is expanded with kv_b_proj into
//   per-head nope keys and values, O(T × kv_lora_rank × heads × (nope + v)) per call;
// - absorbed (DeepSeek-V2 §2.1.2; decoding): kv_b_proj's key blocks are applied to the query and its
//   value blocks to the output, so the scores and the weighted sum run over the cached latents
//   themselves, O(n × heads × (T × (2 × kv_lora_rank + rope) + kv_lora_rank × (nope + v))). Its
//   products go through projectPerHead (the GEMV kernels at decoding).
// The two differ only in how the products associate (bf16 rounding): test_moe_model compares decoding
// (absorbed) with a full re-run (expanded), test_model_logits both with transformers.
// RoPE is DeepSeek's interleaved rotation; with YaRN the softmax scale is q_head_dim^-½ ×
// mscale(factor, mscale_all_dim)², and cos/sin carry yarn's attention factor, as in transformers.
// Thread-safety: immutable layer; forward writes only the segments' caches. Cost: see above.
#pragma once

#include <memory>
#include <string>

#include "model/attention.h"

namespace zipmoe {

std::unique_ptr<AttentionLayer> makeMlaAttention(const ModelConfig& config, const WeightLoader& weights,
                                                 const std::string& prefix, at::ScalarType dtype);

}  // namespace zipmoe
