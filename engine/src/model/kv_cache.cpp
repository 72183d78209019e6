// GrowingTensor (see kv_cache.h). Thread-safety: none. Cost: amortised O(1) copies per row.
#include "model/kv_cache.h"

#include <algorithm>

namespace zipmoe {

at::Tensor GrowingTensor::writeAndView(int64_t start, const at::Tensor& rows) {
  const int64_t end = start + rows.size(timeDim_);
  if (end > capacity_) growTo(std::max<int64_t>({end, 2 * capacity_, 16}), start);
  buffer_.narrow(timeDim_, start, rows.size(timeDim_)).copy_(rows);
  return buffer_.narrow(timeDim_, 0, end);
}

void GrowingTensor::growTo(int64_t capacity, int64_t keep) {
  std::vector<int64_t> shape = rowShape_;
  shape[static_cast<size_t>(timeDim_)] = capacity;
  at::Tensor grown = at::empty(shape, at::TensorOptions().dtype(dtype_));
  if (keep > 0) grown.narrow(timeDim_, 0, keep).copy_(buffer_.narrow(timeDim_, 0, keep));
  buffer_ = grown;
  capacity_ = capacity;
}

void GrowingTensor::reserve(int64_t capacity) {
  if (capacity > capacity_) growTo(capacity, capacity_);
}

uint64_t GrowingTensor::capacityBytes() const {
  return buffer_.defined() ? static_cast<uint64_t>(buffer_.numel()) * static_cast<uint64_t>(buffer_.element_size()) : 0;
}

uint64_t GrowingTensor::bytesPerTime() const {
  uint64_t n = static_cast<uint64_t>(c10::elementSize(dtype_));
  for (size_t d = 0; d < rowShape_.size(); ++d)
    if (d != static_cast<size_t>(timeDim_)) n *= static_cast<uint64_t>(rowShape_[d]);
  return n;
}

}  // namespace zipmoe
