// expertOutput — one routed expert's FFN output for its rows, from its BF16 weights, computed the way
// the MoE block computes it (the weights taken as BF16 and converted to the rows' type when that is
// fp32; SwiGLU through project()). Shared by the places that compute an expert outside the block —
// a node serving other machines, a caller's fallback when a node is down — so that their outputs are
// bit-identical to the block's on the same machine and type.
// Thread-safety: pure (libtorch intra-op threads). Cost: 3 · rows · hidden · intermediate MACs.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

#include "model/moe_model_ops.h"

namespace zipmoe {

// gate and up are [intermediate, hidden], down [hidden, intermediate], row-major BF16 words; rows is
// [n, hidden] in BF16 or fp32. REQUIRES: the weights stay valid during the call.
inline at::Tensor expertOutput(const at::Tensor& rows, const uint16_t* gate, const uint16_t* up, const uint16_t* down,
                               int64_t intermediate) {
  const int64_t hidden = rows.size(1);
  const auto wrap = [&](const uint16_t* data, int64_t r, int64_t c) {
    const at::Tensor t = at::from_blob(const_cast<uint16_t*>(data), {r, c}, at::kBFloat16);
    return rows.scalar_type() == at::kBFloat16 ? t : t.to(rows.scalar_type());
  };
  return gatedMlp(rows, wrap(gate, intermediate, hidden), wrap(up, intermediate, hidden), wrap(down, hidden, intermediate));
}

}  // namespace zipmoe
