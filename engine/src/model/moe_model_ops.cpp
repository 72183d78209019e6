// rmsNormRows (see moe_model_ops.h).
#include "model/moe_model_ops.h"

#include <cmath>

#include "kernels/bf16_gemv.h"

namespace zipmoe {

std::optional<at::Tensor> rmsNormRows(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (x.scalar_type() != at::kBFloat16 || weight.scalar_type() != at::kBFloat16 || x.dim() < 1 ||
      weight.dim() != 1 || x.size(-1) != weight.size(0) || x.size(-1) == 0 ||
      (x.numel() > kMaxNormElements && !(x.dim() > 1 && decodingRows(x.size(0)))))
    return std::nullopt;
  const int64_t d = x.size(-1), rows = x.numel() / d;
  // A row-strided matrix (a narrowed projection, say) is read in place; anything else made contiguous.
  const at::Tensor xs = x.dim() == 2 && x.stride(1) == 1 ? x : x.contiguous();
  const int64_t stride = xs.dim() == 2 ? xs.stride(0) : d;
  const at::Tensor wc = weight.contiguous();
  at::Tensor y = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const auto* in = reinterpret_cast<const uint16_t*>(xs.data_ptr<at::BFloat16>());
  const auto* w = reinterpret_cast<const uint16_t*>(wc.data_ptr<at::BFloat16>());
  auto* out = reinterpret_cast<uint16_t*>(y.data_ptr<at::BFloat16>());
  const auto epsilon = static_cast<float>(eps);  // libtorch adds the scalar in fp32
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = in + r * stride;
    // Each square rounded to fp32 (h.pow(2)), summed in double over eight fixed lanes.
    double lanes[8] = {};
    for (int64_t c = 0; c < d; ++c) {
      const float h = kernels::bf16ToFloat(row[c]);
      lanes[c % 8] += static_cast<double>(h * h);
    }
    double sum = 0;
    for (const double lane : lanes) sum += lane;
    const float mean = static_cast<float>(sum) / static_cast<float>(d);
    const float scale = 1.0f / std::sqrt(mean + epsilon);
    uint16_t* o = out + r * d;
    for (int64_t c = 0; c < d; ++c) {
      const float normed = kernels::roundedToBf16(kernels::bf16ToFloat(row[c]) * scale);
      o[c] = kernels::floatToBf16(kernels::bf16ToFloat(w[c]) * normed);
    }
  }
  return y;
}

}  // namespace zipmoe
