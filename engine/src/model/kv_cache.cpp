// GrowingTensor (see kv_cache.h). Thread-safety: none. Cost: amortised O(1) copies per row.
#include "model/kv_cache.h"

#include <algorithm>

namespace zipmoe {

at::Tensor GrowingTensor::writeAndView(int64_t start, const at::Tensor& rows) {
  const auto dim = static_cast<size_t>(timeDim_);
  const int64_t end = start + rows.size(timeDim_);
  if (end > capacity_) {
    const int64_t capacity = std::max<int64_t>({end, 2 * capacity_, 16});
    std::vector<int64_t> shape = rowShape_;
    shape[dim] = capacity;
    at::Tensor grown = at::empty(shape, at::TensorOptions().dtype(dtype_));
    if (start > 0) grown.narrow(timeDim_, 0, start).copy_(buffer_.narrow(timeDim_, 0, start));
    buffer_ = grown;
    capacity_ = capacity;
  }
  buffer_.narrow(timeDim_, start, rows.size(timeDim_)).copy_(rows);
  return buffer_.narrow(timeDim_, 0, end);
}

}  // namespace zipmoe
