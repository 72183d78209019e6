// CpuBackend (see cpu_backend.h): each operation wraps the caller's pointers as libtorch tensors
// (no copy) and calls the free function the model has always called.
#include "backend/cpu_backend.h"

#include <cstring>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "backend/host_memory.h"
#include "model/linear.h"
#include "model/moe_model_ops.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"

namespace zipmoe::backend {
namespace {

at::Tensor bf16Matrix(const uint16_t* data, int64_t rows, int64_t cols) {
  // Only read: linear never writes its operands.
  return at::from_blob(const_cast<uint16_t*>(data), {rows, cols}, at::kBFloat16);
}

void requireOneForm(const Weight& w, const char* what) {
  const bool split = w.exponents && w.signMantissa && w.nibble.empty();
  const bool nibble = !w.nibble.empty() && w.signMantissa;
  if (w.rows <= 0 || w.cols <= 0 || (w.words ? 1 : 0) + (split ? 1 : 0) + (nibble ? 1 : 0) != 1)
    throw Error(std::string("CPU backend: ") + what + ": a weight of " + std::to_string(w.rows) + " × " +
                std::to_string(w.cols) + " needs exactly one form (words, exponents + sign-mantissa, or nibble "
                "codes + sign-mantissa)");
}

// W's BF16 words: its own, or recovered into `scratch` — what a product the GEMV does not take
// (prefill) multiplies; the same words as the fused products read.
const uint16_t* wordsOf(const Weight& w, std::vector<uint16_t>& scratch) {
  if (w.words) return w.words;
  if (!w.nibble.empty()) return nibbleWeightWords(w, scratch);
  const auto numel = static_cast<size_t>(w.rows * w.cols);
  if (scratch.size() < numel) scratch.resize(numel);
  bf16::merge(w.exponents, w.signMantissa, numel, scratch.data());
  return scratch.data();
}

}  // namespace

io::AlignedBuffer CpuBackend::allocate(size_t bytes, Placement where) const {
  return hostMemory().allocate(bytes, where);
}

std::shared_ptr<io::PagePool> CpuBackend::recyclingPool() const { return hostMemory().recyclingPool(); }

void CpuBackend::recover(const uint8_t* exponents, const uint8_t* signMantissa, size_t count, uint16_t* words) const {
  hostMemory().recover(exponents, signMantissa, count, words);
}

void CpuBackend::project(const uint16_t* x, int64_t n, const Weight& w, uint16_t* y) const {
  requireOneForm(w, "project");
  if (n <= 0) return;
  const at::Tensor xs = bf16Matrix(x, n, w.cols);
  at::Tensor result;
  if (w.words) {
    result = zipmoe::project(xs, bf16Matrix(w.words, w.rows, w.cols));
  } else if (gemvProjects(n)) {
    result = w.nibble.empty() ? projectSplit(xs, w.exponents, w.signMantissa, w.rows, w.cols)
                              : projectNibble(xs, w.nibble, w.signMantissa, w.rows, w.cols);
  } else {
    // A scratch tensor per thread, kept: a fresh one would fault its pages in at every call.
    thread_local std::vector<uint16_t> scratch;
    result = zipmoe::project(xs, bf16Matrix(wordsOf(w, scratch), w.rows, w.cols));
  }
  std::memcpy(y, result.contiguous().data_ptr(), static_cast<size_t>(n * w.rows) * sizeof(uint16_t));
}

void CpuBackend::gatedMlp(const uint16_t* x, int64_t n, const Weight& gate, const Weight& up, const Weight& down,
                          const float* scale, uint16_t* const* out) const {
  requireOneForm(gate, "gated MLP (gate)");
  requireOneForm(up, "gated MLP (up)");
  requireOneForm(down, "gated MLP (down)");
  requireGatedMlpShapes("CPU backend", gate, up, down);
  if (n <= 0) return;
  const int64_t cols = gate.cols, width = gate.rows;
  if (gemvProjects(n)) {
    gatedMlpGemv(x, n, gate, up, down, scale, out);
    return;
  }
  thread_local std::vector<uint16_t> gateScratch, upScratch, downScratch;
  at::Tensor h = zipmoe::gatedMlp(bf16Matrix(x, n, cols), bf16Matrix(wordsOf(gate, gateScratch), width, cols),
                                  bf16Matrix(wordsOf(up, upScratch), width, cols),
                                  bf16Matrix(wordsOf(down, downScratch), cols, width));
  if (scale) {
    const at::Tensor s = at::from_blob(const_cast<float*>(scale), {n, 1}, at::kFloat);
    h = (h.to(at::kFloat) * s).to(at::kBFloat16);
  }
  h = h.contiguous();
  const auto* rows = reinterpret_cast<const uint16_t*>(h.data_ptr<at::BFloat16>());
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out[i], rows + i * cols, static_cast<size_t>(cols) * sizeof(uint16_t));
}

}  // namespace zipmoe::backend
