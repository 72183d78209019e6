// project(): the project's BF16 GEMV for decoding's rows, AMX tiles or at::linear for prefill's; the forward's rows
// cut by sequence so that a row's result does not depend on the batch (see linear.h).
#include "model/linear.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>

#include "kernels/amx_gemm.h"
#include "kernels/bf16_gemv.h"
#include "kernels/compute_pool.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/bf16_split.h"

namespace zipmoe {
namespace {

thread_local MatmulKernel currentKernel = MatmulKernel::Auto;
thread_local uint64_t weightBytesRead = 0;
thread_local const std::vector<int64_t>* currentSegments = nullptr;

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

// OpenMP's thread count for this thread only, which is what at::get_num_threads() reads with
// libtorch's OpenMP backend. Not at::set_num_threads: that also resizes libtorch's process-wide
// pthreadpool (XNNPACK's), joining and creating its threads, at 0.3–8 ms a call on this machine
// (the more the cores are busy, the longer it waits for the new thread to start), twice a token.
// The thread's first parallel operator would apply libtorch's own count over ours: applied first.
IntraOpThreadsScope::IntraOpThreadsScope(int64_t rows)
    : previous_((at::internal::lazy_init_num_threads(), omp_get_max_threads())) {
  const int wanted = decodingRows(rows) ? 1 : kernels::ComputePool::instance().threads();
  if (wanted != previous_) omp_set_num_threads(wanted);
}

IntraOpThreadsScope::~IntraOpThreadsScope() {
  if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
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

RowSegmentsScope::RowSegmentsScope(std::vector<int64_t> counts)
    : counts_(std::move(counts)), previous_(currentSegments) {
  currentSegments = &counts_;
}
RowSegmentsScope::~RowSegmentsScope() { currentSegments = previous_; }

std::vector<int64_t> rowSegments(int64_t rows) {
  if (currentSegments && currentSegments->size() > 1) {
    int64_t total = 0;
    for (const int64_t c : *currentSegments) total += c;
    if (total == rows) return *currentSegments;
  }
  return {rows};
}

bool decodingRows(int64_t rows) {
  if (rows <= kMaxGemvRows) return true;
  const std::vector<int64_t> counts = rowSegments(rows);
  return std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c <= kMaxGemvRows; });
}

at::Tensor productByRows(const at::Tensor& x, const std::function<at::Tensor(const at::Tensor&)>& product) {
  if (x.dim() < 2) return product(x);
  const int64_t rows = x.size(0);
  const std::vector<int64_t> counts = rowSegments(rows);
  // Pieces [begin, end) of x's rows with their steps' counts: a run of decoding steps up to
  // kGemvPassRows rows, or one longer step.
  struct Piece {
    int64_t begin = 0, end = 0;
    std::vector<int64_t> counts;
  };
  std::vector<Piece> pieces;
  int64_t at = 0;
  for (const int64_t c : counts) {
    const bool decoding = c <= kMaxGemvRows;
    const bool joins = decoding && !pieces.empty() && pieces.back().counts.back() <= kMaxGemvRows &&
                       pieces.back().end - pieces.back().begin + c <= kGemvPassRows;
    if (!joins) pieces.push_back({at, at, {}});
    pieces.back().end = at + c;
    pieces.back().counts.push_back(c);
    at += c;
  }
  if (pieces.size() <= 1) {
    const RowSegmentsScope scope(pieces.empty() ? std::vector<int64_t>{rows} : pieces[0].counts);
    return product(x);
  }
  std::vector<at::Tensor> outs;
  outs.reserve(pieces.size());
  for (const Piece& p : pieces) {
    // A fresh tensor, as a sequence's own rows are when it runs alone: no kernel sees another
    // offset or alignment.
    const at::Tensor rowsOfPiece = x.narrow(0, p.begin, p.end - p.begin).clone(at::MemoryFormat::Contiguous);
    const RowSegmentsScope scope(p.counts);
    outs.push_back(product(rowsOfPiece));
  }
  return at::cat(outs, 0);
}

namespace {

// y = x · Wᵀ on the GEMV kernels: `rowsOf(level, rowBegin, rowEnd, x, batch, y, ldy)` computes a range
// of W's rows. The rows are cut into items (gemvItemRows) that the compute pool's threads claim one by
// one (kernels/compute_pool.h): a thread the runtime's workers have preempted delays the product by
// one item at most, not by its share. A row's result does not depend on the item it falls in. Each
// item rounds its rows' fp32 results (plus the bias, in fp32) to BF16 once, as libtorch's BF16 linear
// rounds its fp32 result, so no libtorch operator runs after the products: with more than one
// intra-op thread (a caller outside decoding's IntraOpThreadsScope) a parallel conversion would leave
// libgomp's worker spinning on the core the pool's helper needs next (a 102400-row product read
// 22–26 GB/s that way against 34).
//
// Rows of a pool item: one sequential stream of up to 256 KiB of BF16 weights. The hardware
// prefetchers need the first lines of a stream to follow it, so every item starts cold: a 2048 × 1408
// product read 26.6 GB/s in 22 KiB items and 32.1 in 132 KiB ones (docs/MODEL.md, "One stream per
// item"). A small product gets smaller items, some eight per thread, so that the one thread
// computing its last item does not leave the others waiting long; never under 32 KiB, and a
// multiple of four rows (the AVX2 kernel's unit).
int64_t gemvItemRows(int64_t rows, int64_t cols) {
  const int64_t rowBytes = std::max<int64_t>(1, cols * 2);
  const int64_t share = rows * rowBytes / (8 * int64_t{kernels::ComputePool::instance().threads()});
  const int64_t bytes = std::clamp<int64_t>(share, int64_t{32} << 10, int64_t{256} << 10);
  return std::max<int64_t>(4, bytes / rowBytes / 4 * 4);
}

// Rows [r0, r1) of every batch row of the fp32 products y (row stride ldy), plus the fp32 bias when
// there is one, rounded to BF16 into out (the same stride).
void roundRows(const float* y, const float* bias, size_t r0, size_t r1, size_t batch, size_t ldy, uint16_t* out) {
  for (size_t b = 0; b < batch; ++b)
    for (size_t r = r0; r < r1; ++r)
      out[b * ldy + r] = kernels::floatToBf16(bias ? y[b * ldy + r] + bias[r] : y[b * ldy + r]);
}

template <class Rows>
at::Tensor gemvProject(const at::Tensor& x, int64_t rows, int64_t cols, kernels::GemvLevel level,
                       const std::optional<at::Tensor>& bias, const Rows& rowsOf) {
  const int64_t batch = x.numel() / cols;
  const at::Tensor xc = x.contiguous();
  const at::Tensor y = at::empty({batch, rows}, at::kFloat);
  at::Tensor out = at::empty({batch, rows}, at::kBFloat16);
  const at::Tensor b = bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
  const float* bs = b.defined() ? b.data_ptr<float>() : nullptr;
  const auto* xs = reinterpret_cast<const uint16_t*>(xc.data_ptr<at::BFloat16>());
  float* ys = y.data_ptr<float>();
  auto* os = reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>());
  const int64_t itemRows = gemvItemRows(rows, cols);
  const int64_t items = (rows + itemRows - 1) / itemRows;
  kernels::ComputePool::instance().run(items, [&](int64_t item) {
    const auto r0 = static_cast<size_t>(item * itemRows);
    const auto r1 = static_cast<size_t>(std::min((item + 1) * itemRows, rows));
    rowsOf(level, r0, r1, xs, static_cast<size_t>(batch), ys, static_cast<size_t>(rows));
    roundRows(ys, bs, r0, r1, static_cast<size_t>(batch), static_cast<size_t>(rows), os);
  });
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = rows;
  return out.view(shape);
}

}  // namespace

bool gemvProjects(int64_t rows) {
  return gemvLevel(currentKernel).has_value() &&
         (rows <= kMaxGemvRows || (rows <= kGemvPassRows && decodingRows(rows)));
}

at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  const std::optional<kernels::GemvLevel> level = gemvLevel(currentKernel);
  const bool gemvTakes = level && x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16 &&
                         weight.dim() == 2 && weight.is_contiguous() && x.dim() >= 1 &&
                         x.size(-1) == weight.size(1) && weight.size(1) > 0;
  if (!gemvTakes) {
    countWeightRead(weight);
    return bias ? at::linear(x, weight, *bias) : at::linear(x, weight);
  }
  const int64_t cols = weight.size(1), rows = x.numel() / cols;
  if (!gemvProjects(rows)) {
    // One step of prefill (at::linear on all of x, as alone), or several steps: piece by piece.
    if (x.dim() != 2 || rowSegments(rows).size() == 1) {
      if (x.dim() == 2 && amxProjects(x, weight.size(0), cols))
        return projectTiles(x, {.words = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>()),
                                .rows = weight.size(0), .cols = cols},
                            bias);
      countWeightRead(weight);
      return bias ? at::linear(x, weight, *bias) : at::linear(x, weight);
    }
    return productByRows(x, [&](const at::Tensor& piece) { return project(piece, weight, bias); });
  }
  countWeightRead(weight);
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
  const at::Tensor y = at::empty({heads, n, rows}, at::kFloat);
  at::Tensor out = at::empty({heads, n, rows}, at::kBFloat16);
  const auto* xs = reinterpret_cast<const uint16_t*>(xc.data_ptr<at::BFloat16>());
  const auto* w = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
  float* ys = y.data_ptr<float>();
  auto* os = reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>());
  // Items as gemvProject cuts them, never across two heads.
  const int64_t itemRows = std::min(rows, gemvItemRows(rows, cols));
  const int64_t perHead = (rows + itemRows - 1) / itemRows;
  kernels::ComputePool::instance().run(heads * perHead, [&](int64_t item) {
    const int64_t h = item / perHead, r0 = item % perHead * itemRows, r1 = std::min(r0 + itemRows, rows);
    kernels::gemvBf16(*level, w + h * rows * cols, static_cast<size_t>(cols), static_cast<size_t>(r0),
                      static_cast<size_t>(r1), xs + h * n * cols, static_cast<size_t>(n), ys + h * n * rows,
                      static_cast<size_t>(rows));
    roundRows(ys + h * n * rows, nullptr, static_cast<size_t>(r0), static_cast<size_t>(r1), static_cast<size_t>(n),
              static_cast<size_t>(rows), os + h * n * rows);
  });
  return out;
}

namespace {

// The GEMV level for a product from planes or codes, checked against x (`what` names the caller).
kernels::GemvLevel planeLevel(const char* what, const at::Tensor& x, int64_t cols) {
  const std::optional<kernels::GemvLevel> level = gemvLevel(currentKernel);
  if (!level || x.scalar_type() != at::kBFloat16 || x.dim() < 1 || x.size(-1) != cols || cols <= 0 ||
      !gemvProjects(x.numel() / cols))
    throw Error(std::string(what) + ": needs BF16 input with " + std::to_string(cols) + " columns, at most " +
                std::to_string(kMaxGemvRows) + " rows (or decoding steps of at most " + std::to_string(kGemvPassRows) +
                "), on a GEMV kernel");
  return *level;
}

// The bytes a product reads from w, after checking that its form is whole (`what` names the caller):
// nibble shards must cover its rows one after another, and its columns be even.
uint64_t checkedWeightBytes(const char* what, const GemvWeight& w) {
  if (w.rows <= 0 || w.cols <= 0 || (!w.words && (!w.signMantissa || (w.nibble.empty() && !w.exponents))))
    throw Error(std::string(what) + ": a " + std::to_string(w.rows) + " × " + std::to_string(w.cols) +
                " weight without its words, or without both of its planes");
  const auto weights = static_cast<uint64_t>(w.rows) * static_cast<uint64_t>(w.cols);
  if (w.words || w.nibble.empty()) return weights * 2;
  size_t covered = 0;
  for (const NibbleShard& s : w.nibble) {
    if (s.rowBegin != covered || s.rowEnd <= s.rowBegin)
      throw Error(std::string(what) + ": shard rows " + std::to_string(s.rowBegin) + ".." +
                  std::to_string(s.rowEnd) + " do not follow row " + std::to_string(covered));
    covered = s.rowEnd;
  }
  if (covered != static_cast<size_t>(w.rows) || w.cols % 2 != 0)
    throw Error(std::string(what) + ": the shards cover " + std::to_string(covered) + " of " + std::to_string(w.rows) +
                " rows of " + std::to_string(w.cols) + " columns (all rows and an even number of columns needed)");
  return weights * 3 / 2;
}

// Rows [r0, r1) of y = x · Wᵀ for W in whichever form it came.
void gemvRows(kernels::GemvLevel level, const GemvWeight& w, size_t r0, size_t r1, const uint16_t* xs, size_t batch,
              float* ys, size_t ldy) {
  const auto cols = static_cast<size_t>(w.cols);
  if (w.words)
    kernels::gemvBf16(level, w.words, cols, r0, r1, xs, batch, ys, ldy);
  else if (!w.nibble.empty())
    kernels::gemvNibbleBf16(level, w.nibble, w.signMantissa, cols, r0, r1, xs, batch, ys, ldy);
  else
    kernels::gemvSplitBf16(level, w.exponents, w.signMantissa, cols, r0, r1, xs, batch, ys, ldy);
}

at::Tensor projectWeight(const char* what, const at::Tensor& x, const GemvWeight& w) {
  const kernels::GemvLevel level = planeLevel(what, x, w.cols);
  weightBytesRead += checkedWeightBytes(what, w);
  return gemvProject(x, w.rows, w.cols, level, std::nullopt,
                     [&](kernels::GemvLevel l, size_t r0, size_t r1, const uint16_t* xs, size_t batch, float* ys,
                         size_t ldy) { gemvRows(l, w, r0, r1, xs, batch, ys, ldy); });
}

}  // namespace

const uint16_t* nibbleWeightWords(const GemvWeight& w, std::vector<uint16_t>& scratch) {
  if (w.nibble.empty() || w.words) throw Error("nibbleWeightWords: a weight that is not given as nibble codes");
  checkedWeightBytes("nibbleWeightWords", w);
  const auto rows = static_cast<size_t>(w.rows), cols = static_cast<size_t>(w.cols);
  if (scratch.size() < rows * cols) scratch.resize(rows * cols);
  uint16_t* out = scratch.data();
  // Every level writes the same words: the best one, whichever kernel the products use.
  const kernels::GemvLevel level = kernels::bestGemvLevel();
  // Row blocks of about 256 KiB of words: a few per thread, each a sequential stream.
  const auto grain = static_cast<int64_t>(std::max<size_t>(1, (size_t{128} << 10) / cols));
  at::parallel_for(0, w.rows, grain, [&](int64_t r0, int64_t r1) {
    kernels::nibbleToBf16(level, w.nibble, w.signMantissa, cols, static_cast<size_t>(r0), static_cast<size_t>(r1), out);
  });
  return out;
}

bool amxProjects(const at::Tensor& x, int64_t outRows, int64_t cols) {
  if (x.scalar_type() != at::kBFloat16 || x.dim() < 1 || cols <= 0 || x.size(-1) != cols) return false;
  const int64_t rows = x.numel() / cols;
  return rows > kMaxGemvRows && rows <= kMaxTileRows && gemvLevel(currentKernel).has_value() &&
         kernels::amxTakes(static_cast<size_t>(outRows), static_cast<size_t>(cols));
}

at::Tensor projectTiles(const at::Tensor& x, const GemvWeight& w, const std::optional<at::Tensor>& bias) {
  if (!amxProjects(x, w.rows, w.cols))
    throw Error("projectTiles: a " + std::to_string(w.rows) + " × " + std::to_string(w.cols) +
                " product this thread cannot run on AMX tiles (needs BF16 x of " + std::to_string(kMaxGemvRows + 1) +
                "-" + std::to_string(kMaxTileRows) + " rows, rows a multiple of 16 and columns of 32, a GEMV kernel)");
  weightBytesRead += checkedWeightBytes("projectTiles", w);
  const auto rows = static_cast<size_t>(w.rows), cols = static_cast<size_t>(w.cols);
  const int64_t batch = x.numel() / w.cols;
  const at::Tensor xc = x.contiguous();
  const std::vector<uint16_t> packed =
      kernels::packX(reinterpret_cast<const uint16_t*>(xc.data_ptr<at::BFloat16>()), static_cast<size_t>(batch), cols);
  at::Tensor out = at::empty({batch, w.rows}, at::kBFloat16);
  const at::Tensor b = bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
  auto* os = reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>());
  // A compressed weight's words are made 16 rows at a time, in the item's thread, into its scratch.
  kernels::RowBlockWords rowWords;
  if (!w.words && !w.nibble.empty()) {
    const kernels::GemvLevel level = kernels::bestGemvLevel();
    rowWords = [&w, level, cols](size_t r0, uint16_t* block) {
      kernels::nibbleToBf16(level, w.nibble, w.signMantissa, cols, r0, r0 + 16, block, r0);
    };
  } else if (!w.words) {
    rowWords = [&w, cols](size_t r0, uint16_t* block) {
      bf16::merge(w.exponents + r0 * cols, w.signMantissa + r0 * cols, 16 * cols, block);
    };
  }
  // Items of two 16-row blocks (up to 128 KiB of words each): a stream the prefetchers follow, and
  // enough items that a preempted thread delays the product by little.
  const size_t blocks = rows / 16, perItem = 2, items = (blocks + perItem - 1) / perItem;
  kernels::ComputePool::instance().run(static_cast<int64_t>(items), [&](int64_t item) {
    const size_t b0 = static_cast<size_t>(item) * perItem, b1 = std::min(blocks, b0 + perItem);
    kernels::amxProductRows(w.words, rowWords, cols, packed.data(), static_cast<size_t>(batch),
                            b.defined() ? b.data_ptr<float>() : nullptr, b0, b1, os, rows);
  });
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = w.rows;
  return out.view(shape);
}

at::Tensor projectSplit(const at::Tensor& x, const uint8_t* exponents, const uint8_t* signMantissa, int64_t outRows,
                        int64_t cols) {
  return projectWeight("projectSplit", x,
                       {.exponents = exponents, .signMantissa = signMantissa, .rows = outRows, .cols = cols});
}

at::Tensor projectNibble(const at::Tensor& x, std::span<const NibbleShard> shards, const uint8_t* signMantissa,
                         int64_t outRows, int64_t cols) {
  return projectWeight("projectNibble", x,
                       {.signMantissa = signMantissa, .nibble = shards, .rows = outRows, .cols = cols});
}

void gatedMlpGemv(const uint16_t* x, int64_t n, const GemvWeight& gate, const GemvWeight& up, const GemvWeight& down,
                  const float* scale, uint16_t* const* out) {
  const int64_t width = gate.rows, cols = gate.cols;
  if (up.rows != width || up.cols != cols || down.rows != cols || down.cols != width)
    throw Error("gatedMlpGemv: gate " + std::to_string(gate.rows) + " × " + std::to_string(gate.cols) + ", up " +
                std::to_string(up.rows) + " × " + std::to_string(up.cols) + " and down " + std::to_string(down.rows) +
                " × " + std::to_string(down.cols) + " are not [width × cols], [width × cols], [cols × width]");
  const std::optional<kernels::GemvLevel> level = gemvLevel(currentKernel);
  if (!level || n < 1 || n > kGemvPassRows)
    throw Error("gatedMlpGemv: " + std::to_string(n) + " rows, expected 1 … " + std::to_string(kGemvPassRows) +
                " on a GEMV kernel");
  const uint64_t bytes = checkedWeightBytes("gatedMlpGemv", gate) + checkedWeightBytes("gatedMlpGemv", up) +
                         checkedWeightBytes("gatedMlpGemv", down);
  // The caller's scratch, kept: fresh buffers would fault their pages in at every expert.
  thread_local std::vector<float> products;
  thread_local std::vector<uint16_t> gated;
  const auto rows = static_cast<size_t>(n), w = static_cast<size_t>(width), c = static_cast<size_t>(cols);
  products.resize(std::max(2 * rows * w, rows * c));
  gated.resize(rows * w);
  float* g = products.data();
  float* u = g + rows * w;
  uint16_t* h = gated.data();
  kernels::ComputePool& pool = kernels::ComputePool::instance();
  const int64_t upRows = gemvItemRows(width, cols);
  pool.run((width + upRows - 1) / upRows, [&](int64_t item) {
    const auto r0 = static_cast<size_t>(item * upRows);
    const auto r1 = static_cast<size_t>(std::min(width, (item + 1) * upRows));
    gemvRows(*level, gate, r0, r1, x, rows, g, w);
    gemvRows(*level, up, r0, r1, x, rows, u, w);
    for (size_t b = 0; b < rows; ++b)
      for (size_t r = r0; r < r1; ++r) {
        const size_t i = b * w + r;
        const float v = kernels::roundedToBf16(g[i]);
        const float silu = kernels::roundedToBf16(v / (1.0f + std::exp(-v)));
        h[i] = kernels::floatToBf16(silu * kernels::roundedToBf16(u[i]));
      }
  });
  // The gate and up products are consumed: their buffer takes down's.
  float* y = products.data();
  const int64_t downRows = gemvItemRows(cols, width);
  pool.run((cols + downRows - 1) / downRows, [&](int64_t item) {
    const auto r0 = static_cast<size_t>(item * downRows);
    const auto r1 = static_cast<size_t>(std::min(cols, (item + 1) * downRows));
    gemvRows(*level, down, r0, r1, h, rows, y, c);
    for (size_t b = 0; b < rows; ++b)
      for (size_t r = r0; r < r1; ++r) {
        const float v = kernels::roundedToBf16(y[b * c + r]);
        out[b][r] = kernels::floatToBf16(scale ? v * scale[b] : v);
      }
  });
  weightBytesRead += bytes;
}

std::optional<at::Tensor> gatedMlpProject(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up,
                                          const at::Tensor& down) {
  const auto gemvTakes = [](const at::Tensor& t) {
    return t.scalar_type() == at::kBFloat16 && t.dim() == 2 && t.is_contiguous() && t.size(0) > 0 && t.size(1) > 0;
  };
  if (!gemvLevel(currentKernel) || x.scalar_type() != at::kBFloat16 || x.dim() < 1 || !gemvTakes(gate) ||
      !gemvTakes(up) || !gemvTakes(down) || x.size(-1) != gate.size(1))
    return std::nullopt;
  const int64_t cols = gate.size(1), n = x.numel() / cols;
  if (n < 1 || !gemvProjects(n) || up.sizes() != gate.sizes() || down.size(0) != cols || down.size(1) != gate.size(0))
    return std::nullopt;
  const auto weightOf = [](const at::Tensor& t) {
    GemvWeight w;
    w.words = reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>());
    w.rows = t.size(0);
    w.cols = t.size(1);
    return w;
  };
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty(xc.sizes(), xc.options());
  auto* ys = reinterpret_cast<uint16_t*>(y.data_ptr<at::BFloat16>());
  std::array<uint16_t*, kGemvPassRows> out{};
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = ys + i * cols;
  gatedMlpGemv(reinterpret_cast<const uint16_t*>(xc.data_ptr<at::BFloat16>()), n, weightOf(gate), weightOf(up),
               weightOf(down), nullptr, out.data());
  return y;
}

}  // namespace zipmoe
