// expertOutput — one routed expert's FFN output for its rows, from its BF16 weights, computed the way
// the MoE block computes it: BF16 rows on the process's compute backend (backend/backend_registry.h;
// on the CPU backend the fused GEMV when decoding, SwiGLU through project() otherwise); fp32 rows
// with the weights converted to fp32 through project() (the backends take BF16 only). Shared by the places that compute an expert outside the block —
// a node serving other machines, a caller's fallback when a node is down — so that their outputs are
// bit-identical to the block's on the same machine and type.
// Thread-safety: pure (libtorch intra-op threads). Cost: 3 · rows · hidden · intermediate MACs.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "backend/backend_registry.h"
#include "model/moe_model_ops.h"

namespace zipmoe {

// gate and up are [intermediate, hidden], down [hidden, intermediate], row-major BF16 words; rows is
// [n, hidden] in BF16 or fp32. REQUIRES: the weights stay valid during the call.
inline at::Tensor expertOutput(const at::Tensor& rows, const uint16_t* gate, const uint16_t* up, const uint16_t* down,
                               int64_t intermediate) {
  const int64_t hidden = rows.size(1);
  if (rows.scalar_type() == at::kBFloat16) {
    const at::Tensor x = rows.contiguous();
    at::Tensor out = at::empty({x.size(0), hidden}, x.options());
    auto* outWords = reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>());
    std::vector<uint16_t*> outRows(static_cast<size_t>(x.size(0)));
    for (size_t i = 0; i < outRows.size(); ++i) outRows[i] = outWords + static_cast<int64_t>(i) * hidden;
    backend::defaultBackend().gatedMlp(reinterpret_cast<const uint16_t*>(x.data_ptr<at::BFloat16>()), x.size(0),
                                       backend::Weight{gate, nullptr, nullptr, {}, intermediate, hidden},
                                       backend::Weight{up, nullptr, nullptr, {}, intermediate, hidden},
                                       backend::Weight{down, nullptr, nullptr, {}, hidden, intermediate}, nullptr,
                                       outRows.data());
    return out;
  }
  const auto wrap = [&](const uint16_t* data, int64_t r, int64_t c) {
    const at::Tensor t = at::from_blob(const_cast<uint16_t*>(data), {r, c}, at::kBFloat16);
    return rows.scalar_type() == at::kBFloat16 ? t : t.to(rows.scalar_type());
  };
  return gatedMlp(rows, wrap(gate, intermediate, hidden), wrap(up, intermediate, hidden), wrap(down, hidden, intermediate));
}

}  // namespace zipmoe
