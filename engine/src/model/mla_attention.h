// Multi-head latent attention (DeepSeek-V2), internal to the forward pass.
//
// q comes from q_proj, or from q_a_proj → q_a_layernorm → q_b_proj when q_lora_rank is set, and is
// split per head into a "nope" part and a rotary part. kv_a_proj_with_mqa gives the compressed
// latent (kv_lora_rank) and one shared rotary key (qk_rope_head_dim). The cache holds exactly those
// two per token — the latent after kv_a_layernorm and the rotated key — and every step expands the
// cached latent with kv_b_proj into per-head nope keys and values (the non-absorbed form: simple and
// exact, at O(T × kv_lora_rank × heads × (nope + v)) per step). RoPE is DeepSeek's interleaved
// rotation; with YaRN the softmax scale is q_head_dim^-½ × mscale(factor, mscale_all_dim)², and
// cos/sin carry yarn's attention factor, as in transformers.
// Thread-safety: immutable layer; forward writes only the segments' caches. Cost: see above.
#pragma once

#include <memory>
#include <string>

#include "model/attention.h"

namespace zipmoe {

std::unique_ptr<AttentionLayer> makeMlaAttention(const ModelConfig& config, const WeightLoader& weights,
                                                 const std::string& prefix, at::ScalarType dtype);

}  // namespace zipmoe
