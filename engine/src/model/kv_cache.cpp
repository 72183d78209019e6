// GrowingTensor (see kv_cache.h). Thread-safety: none. Cost: amortised O(1) copies per row.
#include "model/kv_cache.h"

#include <algorithm>
#include <istream>
#include <ostream>

#include "zipmoe/base/error.h"

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

std::string GrowingTensor::layout() const {
  std::string s = std::string(c10::toString(dtype_)) + "[";
  for (size_t d = 0; d < rowShape_.size(); ++d)
    s += (d ? "," : "") + (d == static_cast<size_t>(timeDim_) ? std::string("t") : std::to_string(rowShape_[d]));
  return s + "]";
}

void GrowingTensor::save(int64_t times, std::ostream& out) const {
  if (times <= 0) return;
  const at::Tensor rows = buffer_.narrow(timeDim_, 0, times).contiguous();
  out.write(static_cast<const char*>(rows.data_ptr()),
            static_cast<std::streamsize>(rows.numel() * static_cast<int64_t>(rows.element_size())));
  if (!out) throw Error("KV cache: the stream refused " + std::to_string(times) + " rows");
}

void GrowingTensor::load(std::istream& in, int64_t stored, int64_t keep) {
  if (stored <= 0) return;
  std::vector<int64_t> shape = rowShape_;
  shape[static_cast<size_t>(timeDim_)] = stored;
  at::Tensor rows = at::empty(shape, at::TensorOptions().dtype(dtype_));
  const auto bytes = static_cast<std::streamsize>(rows.numel() * static_cast<int64_t>(rows.element_size()));
  in.read(static_cast<char*>(rows.data_ptr()), bytes);
  if (in.gcount() != bytes)
    throw Error("KV cache: the stream ended after " + std::to_string(in.gcount()) + " of " + std::to_string(bytes) +
                " bytes of a layer's " + std::to_string(stored) + " rows");
  if (keep > 0) writeAndView(0, rows.narrow(timeDim_, 0, keep));
}

void saveKvCache(const KvCache& cache, int64_t tokens, std::ostream& out) {
  if (tokens < 0 || tokens > cache.length)
    throw Error("saveSequence: the sequence holds " + std::to_string(cache.length) + " tokens; cannot save " +
                std::to_string(tokens));
  for (size_t l = 0; l < cache.first.size(); ++l) {
    cache.first[l].save(tokens, out);
    cache.second[l].save(tokens, out);
  }
}

void loadKvCache(KvCache& cache, std::istream& in, int64_t stored, int64_t keep) {
  if (keep < 0 || keep > stored)
    throw Error("loadSequence: cannot keep " + std::to_string(keep) + " of " + std::to_string(stored) + " tokens");
  cache.length = 0;
  for (size_t l = 0; l < cache.first.size(); ++l) {
    cache.first[l].load(in, stored, keep);
    cache.second[l].load(in, stored, keep);
  }
  cache.length = keep;
}

}  // namespace zipmoe
