// project(x, W[, b]) for the forward pass: y = x · Wᵀ (+ b), the one matrix product of every
// projection, router, expert and LM head.
//
// With BF16 activations and weights, the rows of decoding (a sequence's step of at most kMaxGemvRows
// tokens) run on the project's own GEMV kernels (kernels/bf16_gemv.h): the weights are streamed once
// per pass of up to kGemvPassRows rows, split by rows between the compute pool's threads
// (kernels/compute_pool.h), accumulated in fp32, the bias added in fp32 and the result rounded to
// BF16 once — as libtorch's BF16 linear rounds its fp32 result. A longer step (prefill) of up to
// kMaxTileRows rows runs on AMX tiles where the CPU has them and the shape fits (projectTiles,
// kernels/amx_gemm.h), else on at::linear, on its own rows; fp32 compute and odd layouts are
// at::linear on all of x.
//
// Batch invariance (BF16 on a GEMV kernel): a row's result does not depend on the other rows of the
// product. The GEMV reduces each row of x alone, in an order fixed by the weight's shape, whatever
// the number of rows; the forward names its sequences' rows (RowSegmentsScope), and a product cuts x
// into pieces by them (productByRows): runs of decoding steps, each on the GEMV, and every longer
// step alone on at::linear — the same call, on the same rows, as when its sequence runs alone. So
// a request's greedy reply is the same alone or batched. (at::linear's reduction order depends on
// the shape: fp32 products of a batch are not bit-invariant.)
//
// Which kernel a thread uses is set for the duration of a forward by a MatmulScope (MoeModel sets
// it from ModelOptions::matmul). Thread-safety: the choice and the row segments are per thread.
// Cost: rows × cols × 2 bytes of W read once per GEMV pass.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include <ATen/ATen.h>

#include "zipmoe/model/model.h"
#include "backend/compute_backend.h"
#include "zipmoe/format/nibble_shard.h"

namespace zipmoe {

// A sequence's step of at most this many rows is decoding's: its products run on the GEMV.
constexpr int64_t kMaxGemvRows = 8;
// The most rows one GEMV pass takes (several decoding steps batched): each weight row is multiplied
// with every row of x while it is in L1, x stays in L2. More rows take more passes.
constexpr int64_t kGemvPassRows = 32;

// The rows of the products the calling thread runs, by sequence, until destroyed (scopes nest): a
// product (or norm) whose x has as many rows (dim 0) as `counts` sum to takes counts[i] rows as
// sequence i's, one after another; any other x is one sequence's rows. MoeModel::forward sets its
// steps' token counts; productByRows sets each piece's own.
class RowSegmentsScope {
 public:
  explicit RowSegmentsScope(std::vector<int64_t> counts);
  ~RowSegmentsScope();
  RowSegmentsScope(const RowSegmentsScope&) = delete;
  RowSegmentsScope& operator=(const RowSegmentsScope&) = delete;

 private:
  std::vector<int64_t> counts_;
  const std::vector<int64_t>* previous_;
};

// The sequences' row counts for `rows` rows of x on this thread (RowSegmentsScope), or {rows}.
std::vector<int64_t> rowSegments(int64_t rows);
// Whether every sequence among `rows` rows is a decoding step (at most kMaxGemvRows rows).
bool decodingRows(int64_t rows);

// `product` applied to x piece by piece, the results concatenated along dim 0 (each piece's result
// has the piece's rows in dim 0 and the same other dimensions): runs of decoding steps of at most
// kGemvPassRows rows, and each longer step on its own, every piece a fresh contiguous tensor under
// a RowSegmentsScope of its own steps. A single piece is x itself (under its scope). So the result
// of a row is what `product` gives its sequence's rows alone, provided `product` treats decoding
// rows row by row (the GEMV, rmsNormRows).
at::Tensor productByRows(const at::Tensor& x, const std::function<at::Tensor(const at::Tensor&)>& product);

at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias = {});

// A batch of independent projections, one per head: x [H, n, cols], W [H, rows, cols] (contiguous)
// → [H, n, rows] with y[h] = x[h] · W[h]ᵀ. On the GEMV kernels (BF16, n ≤ kMaxGemvRows) every head's
// rows are items of one pool run, each rounded to BF16 once as project() rounds; otherwise at::matmul.
at::Tensor projectPerHead(const at::Tensor& x, const at::Tensor& weight);

// Whether project() runs `rows` rows of BF16 x on the project's GEMV on this thread now (and so
// whether projectSplit can: the same kernel, the same threads): a GEMV kernel is in use and the
// rows are at most kMaxGemvRows, or decoding steps (decodingRows) of at most kGemvPassRows rows.
bool gemvProjects(int64_t rows);
// project(x, W) for W [outRows × cols] given as its lossless split (exponent and sign-mantissa planes,
// row-major): recovery fused into the product, bit-identical to project() on the merged tensor.
// REQUIRES: gemvProjects(rows of x), x BF16 with cols columns (throws zipmoe::Error otherwise).
at::Tensor projectSplit(const at::Tensor& x, const uint8_t* exponents, const uint8_t* signMantissa, int64_t outRows,
                        int64_t cols);
// The same with the exponents as nibble codes read in place (zipmoe/format/nibble_shard.h, one shard per
// contiguous range of rows, together covering [0, outRows)): bit-identical to project() on the merged
// tensor, with no exponent plane decoded. Counts 1.5 bytes per weight read.
// REQUIRES: as projectSplit; cols even; shards from indexNibbleChunk. Throws zipmoe::Error when the
// shards do not cover the rows one after another.
at::Tensor projectNibble(const at::Tensor& x, std::span<const NibbleShard> shards, const uint8_t* signMantissa,
                         int64_t outRows, int64_t cols);

// One weight matrix [rows × cols] in a form decoding's GEMV kernels read (kernels/bf16_gemv.h):
// BF16 words, or the split planes (exponents and sign-mantissa), or nibble codes with the
// sign-mantissa plane (shards as projectNibble takes them). Every form gives the same products.
using GemvWeight = backend::Weight;  // backend/compute_backend.h: the same three forms

// The most rows a product runs on AMX tiles (projectTiles); more go to at::linear. Measured here
// (`zipmoe bench kernels --prefill 16,32,64,128,256,591`, docs/bench/run36/kernels.txt; a 1408 ×
// 2048 expert weight read from memory): the tiles 0.51, 0.63, 0.91 and 1.38 ms at 16, 32, 64 and
// 128 rows, oneDNN (libtorch) 1.6, 0.79, 0.87 and 1.13 once it has compiled its kernel for the
// shape, but 2.0–3.3 ms on its first call with each row count, which a prefill's experts bring by
// the dozen (every count from 9 up). Up to 128 rows the tiles win a process's first prompts and
// lose little after; above, a prompt brings few new shapes and oneDNN's faster product wins.
constexpr int64_t kMaxTileRows = 128;
// Whether projectTiles takes x against a W of outRows × cols on this thread: BF16 x of more rows than
// decoding's (kMaxGemvRows) and at most kMaxTileRows, a GEMV kernel in use (not --matmul libtorch),
// and AMX tiles that take the shape (kernels/amx_gemm.h).
bool amxProjects(const at::Tensor& x, int64_t outRows, int64_t cols);
// project(x, W) (+ bias) for a prefill's rows on AMX tiles, W in any of its three forms (a compressed
// W's words made 16 rows at a time, never the whole tensor): every form gives the same result, and
// a row's result does not depend on the other rows. project() uses it for BF16 weights. Counts W's
// bytes as read. REQUIRES: amxProjects(x, w.rows, w.cols) (throws zipmoe::Error otherwise).
at::Tensor projectTiles(const at::Tensor& x, const GemvWeight& w, const std::optional<at::Tensor>& bias = {});

// W's BF16 words from its nibble codes (w.nibble and w.signMantissa), written to `scratch` (grown to
// rows × cols) by libtorch's intra-op threads, split by rows: what a product of more rows than the
// GEMV takes (prefill) multiplies, with no exponent plane decoded first — the same words as
// bf16::merge of the decoded planes. Throws zipmoe::Error when w is not nibble codes or its shards do
// not cover its rows (as projectNibble).
const uint16_t* nibbleWeightWords(const GemvWeight& w, std::vector<uint16_t>& scratch);

// The SwiGLU MLP of decoding, its three products fused into two compute-pool runs, for the n rows
// of x (BF16, row i at x + i · cols):
//   h      = bf16(silu(bf16(gate · x)) · bf16(up · x)),  silu(v) = bf16(v / (1 + e^−v)) in fp32
//   out[i] = bf16(float(bf16(down · h)) · scale[i])      (scale null: bf16(down · h))
// — the roundings of project(silu(project(x, gate)) * project(x, up), down) with silu in fp32,
// rounded once, as PyTorch ≥ 2 (transformers' reference) and the unfused path here (gatedMlp)
// compute it, and of its BF16 product with a routing weight, with no libtorch operator in between.
// (libtorch 1.13's own BF16 silu rounds each of its steps, e^−v, 1 + e^−v and the quotient, to
// BF16: a few BF16 steps from this. The project does not use it.)
// The first run's items each compute a range of gate's and up's rows and then silu · up over that
// range; the second's a range of down's rows, rounded and scaled in the item.
// Counts the three weights' bytes as read. REQUIRES: 1 ≤ n ≤ kGemvPassRows on a GEMV kernel; gate and up [width × cols],
// down [cols × width]; out[i] has room for cols values and does not overlap x. Throws
// zipmoe::Error when the shapes or nibble shards do not fit.
void gatedMlpGemv(const uint16_t* x, int64_t n, const GemvWeight& gate, const GemvWeight& up,
                  const GemvWeight& down, const float* scale, uint16_t* const* out);
// gatedMlp's decoding form on tensors: the fused product when x is BF16 with rows the GEMV takes
// (gemvProjects) and the weights are contiguous BF16 on a GEMV kernel; nullopt otherwise.
std::optional<at::Tensor> gatedMlpProject(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up,
                                          const at::Tensor& down);

// The CPUs this process may run on (sched_getaffinity), at least 1: the default intra-op thread count.
int availableCpus();
// Sets libtorch's intra-op threads and the GEMV's compute pool: `requested` when > 0, else availableCpus().
void setComputeThreads(int requested);

// For one forward: libtorch's own intra-op threads (OpenMP) go down to one while the forward decodes
// (decodingRows(rows): its products run on the compute pool) and are the compute threads
// otherwise (prefill, whose matrix products are libtorch's). An idle OpenMP team spins after every
// parallel region and takes a core from the pool and the expert runtime's workers (measured under
// load on 2 cores: 565 ms per Qwen8 token with it spinning, 132 ms without). Only the calling
// thread's OpenMP count changes: no thread is created or joined (see linear.cpp).
class IntraOpThreadsScope {
 public:
  explicit IntraOpThreadsScope(int64_t rows);
  ~IntraOpThreadsScope();
  IntraOpThreadsScope(const IntraOpThreadsScope&) = delete;
  IntraOpThreadsScope& operator=(const IntraOpThreadsScope&) = delete;

 private:
  int previous_;
};

// The weight bytes project() has read on this thread since the last call (and resets the count).
uint64_t takeWeightBytesRead();
// Counts a weight a product outside project() reads (once), so that the count stays every weight read.
void countWeightRead(const at::Tensor& weight);

// Sets the calling thread's matmul kernel until destroyed (scopes nest).
class MatmulScope {
 public:
  explicit MatmulScope(MatmulKernel kernel);
  ~MatmulScope();
  MatmulScope(const MatmulScope&) = delete;
  MatmulScope& operator=(const MatmulScope&) = delete;

 private:
  MatmulKernel previous_;
};

}  // namespace zipmoe
