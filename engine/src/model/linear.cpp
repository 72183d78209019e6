// project(): the project's BF16 GEMV for few rows, at::linear otherwise (see linear.h).
#include "model/linear.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include <ATen/Parallel.h>

#include "kernels/bf16_gemv.h"
#include "zipmoe/error.h"

namespace zipmoe {
namespace {

thread_local MatmulKernel currentKernel = MatmulKernel::Auto;
thread_local uint64_t weightBytesRead = 0;

std::optional<kernels::GemvLevel> gemvLevel(MatmulKernel k) {
  switch (k) {
    case MatmulKernel::Auto: return kernels::bestGemvLevel();
    case MatmulKernel::Libtorch: return std::nullopt;
    case MatmulKernel::Scalar: return kernels::GemvLevel::Scalar;
    case MatmulKernel::Avx2: return kernels::GemvLevel::Avx2;
    case MatmulKernel::Avx512Bf16: return kernels::GemvLevel::Avx512Bf16;
  }
  return std::nullopt;
}

}  // namespace

const char* matmulKernelName(MatmulKernel kernel) {
  switch (kernel) {
    case MatmulKernel::Auto: return "auto";
    case MatmulKernel::Libtorch: return "libtorch";
    default: return kernels::gemvLevelName(*gemvLevel(kernel));
  }
}

bool matmulKernelSupported(MatmulKernel kernel) {
  const auto level = gemvLevel(kernel);
  return !level || kernels::gemvLevelSupported(*level);
}

int availableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void setComputeThreads(int requested) { at::set_num_threads(requested > 0 ? requested : availableCpus()); }

uint64_t takeWeightBytesRead() {
  const uint64_t bytes = weightBytesRead;
  weightBytesRead = 0;
  return bytes;
}

MatmulScope::MatmulScope(MatmulKernel kernel) : previous_(currentKernel) { currentKernel = kernel; }
MatmulScope::~MatmulScope() { currentKernel = previous_; }

at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  weightBytesRead += static_cast<uint64_t>(weight.numel()) * static_cast<uint64_t>(weight.element_size());
  const std::optional<kernels::GemvLevel> level = gemvLevel(currentKernel);
  const bool gemv = level && x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16 &&
                    weight.dim() == 2 && weight.is_contiguous() && x.dim() >= 1 && x.size(-1) == weight.size(1) &&
                    weight.size(1) > 0 && x.numel() / weight.size(1) <= kMaxGemvRows;
  if (!gemv) return bias ? at::linear(x, weight, *bias) : at::linear(x, weight);

  const int64_t cols = weight.size(1), rows = weight.size(0), batch = x.numel() / cols;
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty({batch, rows}, at::kFloat);
  const auto* w = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
  const auto* xs = reinterpret_cast<const uint16_t*>(xc.data_ptr<at::BFloat16>());
  float* ys = y.data_ptr<float>();
  // Blocks of four rows (the kernels' unit); a thread's share is at least 64 KiB of weights, so that
  // small matrices do not pay for waking the pool.
  const int64_t blocks = (rows + 3) / 4;
  const int64_t grain = std::max<int64_t>(1, (int64_t{64} << 10) / std::max<int64_t>(1, 4 * cols * 2));
  const kernels::GemvLevel l = *level;
  at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
    kernels::gemvBf16(l, w, static_cast<size_t>(cols), static_cast<size_t>(begin * 4),
                      static_cast<size_t>(std::min(end * 4, rows)), xs, static_cast<size_t>(batch), ys,
                      static_cast<size_t>(rows));
  });
  if (bias) y.add_(bias->to(at::kFloat));
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = rows;
  return y.to(at::kBFloat16).view(shape);
}

}  // namespace zipmoe
