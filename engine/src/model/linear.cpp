// project(): the project's BF16 GEMV for few rows, at::linear otherwise (see linear.h).
#include "model/linear.h"

#include <sched.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include <ATen/Parallel.h>

#include "kernels/bf16_gemv.h"
#include "kernels/compute_pool.h"
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

void setComputeThreads(int requested) {
  const int threads = requested > 0 ? requested : availableCpus();
  at::set_num_threads(threads);
  kernels::ComputePool::instance().setThreads(threads);
}

IntraOpThreadsScope::IntraOpThreadsScope(int64_t rows) : previous_(at::get_num_threads()) {
  const int wanted = rows <= kMaxGemvRows ? 1 : kernels::ComputePool::instance().threads();
  if (wanted != previous_) at::set_num_threads(wanted);
}

IntraOpThreadsScope::~IntraOpThreadsScope() {
  if (at::get_num_threads() != previous_) at::set_num_threads(previous_);
}

uint64_t takeWeightBytesRead() {
  const uint64_t bytes = weightBytesRead;
  weightBytesRead = 0;
  return bytes;
}

void countWeightRead(const at::Tensor& weight) {
  weightBytesRead += static_cast<uint64_t>(weight.numel()) * static_cast<uint64_t>(weight.element_size());
}

MatmulScope::MatmulScope(MatmulKernel kernel) : previous_(currentKernel) { currentKernel = kernel; }
MatmulScope::~MatmulScope() { currentKernel = previous_; }

namespace {

// y = x · Wᵀ on the GEMV kernels: `rowsOf(level, rowBegin, rowEnd, x, batch, y, ldy)` computes a range
// of W's rows. The rows are cut into items of about 32 KiB of weights (a multiple of four rows, the
// kernels' unit) that the compute pool's threads claim one by one (kernels/compute_pool.h): a thread
// the runtime's workers have preempted delays the product by one item at most, not by its share. A
// row's result does not depend on the item it falls in. The fp32 result is rounded to BF16 once, as
// libtorch's BF16 linear rounds its fp32 result.
// Rows of a pool item: about 32 KiB of BF16 weights, a multiple of four rows (the kernels' unit).
int64_t gemvItemRows(int64_t cols) {
  return std::max<int64_t>(4, (int64_t{32} << 10) / std::max<int64_t>(1, cols * 2) / 4 * 4);
}

template <class Rows>
at::Tensor gemvProject(const at::Tensor& x, int64_t rows, int64_t cols, kernels::GemvLevel level,
                       const std::optional<at::Tensor>& bias, const Rows& rowsOf) {
  const int64_t batch = x.numel() / cols;
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty({batch, rows}, at::kFloat);
  const auto* xs = reinterpret_cast<const uint16_t*>(xc.data_ptr<at::BFloat16>());
  float* ys = y.data_ptr<float>();
  const int64_t itemRows = gemvItemRows(cols);
  const int64_t items = (rows + itemRows - 1) / itemRows;
  kernels::ComputePool::instance().run(items, [&](int64_t item) {
    rowsOf(level, static_cast<size_t>(item * itemRows), static_cast<size_t>(std::min((item + 1) * itemRows, rows)),
           xs, static_cast<size_t>(batch), ys, static_cast<size_t>(rows));
  });
  if (bias) y.add_(bias->to(at::kFloat));
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = rows;
  return y.to(at::kBFloat16).view(shape);
}

}  // namespace

bool gemvProjects(int64_t rows) { return gemvLevel(currentKernel).has_value() && rows <= kMaxGemvRows; }

at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  countWeightRead(weight);
  const std::optional<kernels::GemvLevel> level = gemvLevel(currentKernel);
  const bool gemv = level && x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16 &&
                    weight.dim() == 2 && weight.is_contiguous() && x.dim() >= 1 && x.size(-1) == weight.size(1) &&
                    weight.size(1) > 0 && x.numel() / weight.size(1) <= kMaxGemvRows;
  if (!gemv) return bias ? at::linear(x, weight, *bias) : at::linear(x, weight);
  const int64_t cols = weight.size(1);
  const auto* w = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
  return gemvProject(x, weight.size(0), cols, *level, bias,
                     [&](kernels::GemvLevel l, size_t r0, size_t r1, const uint16_t* xs, size_t batch, float* ys,
                         size_t ldy) { kernels::gemvBf16(l, w, static_cast<size_t>(cols), r0, r1, xs, batch, ys, ldy); });
}

at::Tensor projectPerHead(const at::Tensor& x, const at::Tensor& weight) {
  if (x.dim() != 3 || weight.dim() != 3 || x.size(0) != weight.size(0) || x.size(2) != weight.size(2)) {
    std::ostringstream message;
    message << "projectPerHead: x " << x.sizes() << " and W " << weight.sizes()
            << " are not [heads, n, cols] and [heads, rows, cols]";
    throw Error(message.str());
  }
  countWeightRead(weight);
  const std::optional<kernels::GemvLevel> level = gemvLevel(currentKernel);
  const int64_t heads = weight.size(0), rows = weight.size(1), cols = weight.size(2), n = x.size(1);
  if (!level || x.scalar_type() != at::kBFloat16 || weight.scalar_type() != at::kBFloat16 || !weight.is_contiguous() ||
      cols <= 0 || n > kMaxGemvRows)
    return at::matmul(x, weight.transpose(1, 2));
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty({heads, n, rows}, at::kFloat);
  const auto* xs = reinterpret_cast<const uint16_t*>(xc.data_ptr<at::BFloat16>());
  const auto* w = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
  float* ys = y.data_ptr<float>();
  // Items as gemvProject cuts them, never across two heads.
  const int64_t itemRows = std::min(rows, gemvItemRows(cols));
  const int64_t perHead = (rows + itemRows - 1) / itemRows;
  kernels::ComputePool::instance().run(heads * perHead, [&](int64_t item) {
    const int64_t h = item / perHead, r0 = item % perHead * itemRows, r1 = std::min(r0 + itemRows, rows);
    kernels::gemvBf16(*level, w + h * rows * cols, static_cast<size_t>(cols), static_cast<size_t>(r0),
                      static_cast<size_t>(r1), xs + h * n * cols, static_cast<size_t>(n), ys + h * n * rows,
                      static_cast<size_t>(rows));
  });
  return y.to(at::kBFloat16);
}

namespace {

// The GEMV level for a product from planes or codes, checked against x (`what` names the caller).
kernels::GemvLevel planeLevel(const char* what, const at::Tensor& x, int64_t cols) {
  const std::optional<kernels::GemvLevel> level = gemvLevel(currentKernel);
  if (!level || x.scalar_type() != at::kBFloat16 || x.dim() < 1 || x.size(-1) != cols || cols <= 0 ||
      x.numel() / cols > kMaxGemvRows)
    throw Error(std::string(what) + ": needs BF16 input with " + std::to_string(cols) + " columns, at most " +
                std::to_string(kMaxGemvRows) + " rows, on a GEMV kernel");
  return *level;
}

}  // namespace

at::Tensor projectSplit(const at::Tensor& x, const uint8_t* exponents, const uint8_t* signMantissa, int64_t outRows,
                        int64_t cols) {
  const kernels::GemvLevel level = planeLevel("projectSplit", x, cols);
  weightBytesRead += static_cast<uint64_t>(outRows) * static_cast<uint64_t>(cols) * 2;
  return gemvProject(x, outRows, cols, level, std::nullopt,
                     [&](kernels::GemvLevel l, size_t r0, size_t r1, const uint16_t* xs, size_t batch, float* ys,
                         size_t ldy) {
                       kernels::gemvSplitBf16(l, exponents, signMantissa, static_cast<size_t>(cols), r0, r1, xs,
                                              batch, ys, ldy);
                     });
}

at::Tensor projectNibble(const at::Tensor& x, std::span<const NibbleShard> shards, const uint8_t* signMantissa,
                         int64_t outRows, int64_t cols) {
  const kernels::GemvLevel level = planeLevel("projectNibble", x, cols);
  size_t covered = 0;
  for (const NibbleShard& s : shards) {
    if (s.rowBegin != covered || s.rowEnd <= s.rowBegin)
      throw Error("projectNibble: shard rows " + std::to_string(s.rowBegin) + ".." + std::to_string(s.rowEnd) +
                  " do not follow row " + std::to_string(covered));
    covered = s.rowEnd;
  }
  if (covered != static_cast<size_t>(outRows) || cols % 2 != 0)
    throw Error("projectNibble: the shards cover " + std::to_string(covered) + " of " + std::to_string(outRows) +
                " rows of " + std::to_string(cols) + " columns (all rows and an even number of columns needed)");
  weightBytesRead += static_cast<uint64_t>(outRows) * static_cast<uint64_t>(cols) * 3 / 2;
  return gemvProject(x, outRows, cols, level, std::nullopt,
                     [&](kernels::GemvLevel l, size_t r0, size_t r1, const uint16_t* xs, size_t batch, float* ys,
                         size_t ldy) {
                       kernels::gemvNibbleBf16(l, shards, signMantissa, static_cast<size_t>(cols), r0, r1, xs, batch,
                                               ys, ldy);
                     });
}

}  // namespace zipmoe
