// ExpertProvider — the one narrow interface through which the model gets routed-expert weights.
//
// For each MoE layer, once the router has chosen, the model calls acquire(layer, requests) with the
// experts it needs and how many tokens each serves, then calls next() repeatedly: each call blocks
// until one more requested expert's weights are ready (in whatever order the provider finishes them)
// and the model computes that expert at once. Weights are BF16 row-major [out, in] buffers, one per
// expert tensor kind in the family's store order (e.g. gate_proj, up_proj, down_proj) — or, where the
// request allowed it (ExpertRequest::acceptsSplit), the tensor's lossless split: its exponent plane
// and its sign-mantissa plane (zipmoe/bf16_split.h), which the model's decoding kernels merge in
// registers as they compute, so that a runtime need not recover the tensor first — and stay valid
// until the next call to next() or the ExpertBatch's destruction, whichever comes first (so that a
// runtime can recycle a bounded set of buffers); the model computes each expert before asking for
// the next one. The resident provider has everything in memory; the ZipMoE
// runtime and the offloading baselines implement the same interface with weights arriving from I/O,
// decompression and recovery threads.
// Thread-safety: one acquire() at a time per provider (the model's thread); an ExpertBatch is used
// by the thread that acquired it. Cost: resident — none; others — see the runtime.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace zipmoe {

class Store;

struct ExpertRequest {
  int expert = 0;
  int tokens = 0;  // tokens routed to it in this step (drives scheduling priority)
  // The model can compute this expert straight from split planes (decoding: few tokens, BF16
  // compute on the project's GEMV). A provider may then hand any tensor of it split.
  bool acceptsSplit = false;
};

struct ReadyExpert {
  int expert = 0;
  std::vector<const uint16_t*> tensors;  // BF16 words, one per kind, each [rows × cols] row-major
  // Where tensors[kind] is null (only when the request accepted it): the kind's exponent plane and
  // sign-mantissa plane, one byte per weight each, row-major. Empty when every tensor is BF16.
  std::vector<const uint8_t*> exponents, signMantissa;
};

class ExpertBatch {
 public:
  virtual ~ExpertBatch() = default;
  // Blocks until another requested expert is ready; std::nullopt once every one has been returned.
  // Throws zipmoe::Error if an expert could not be loaded (the batch is then finished).
  virtual std::optional<ReadyExpert> next() = 0;
};

class ExpertProvider {
 public:
  virtual ~ExpertProvider() = default;
  // `layer` is the MoE layer index (0 .. number of MoE layers − 1).
  virtual std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) = 0;
  // A hint: these experts of MoE layer `layer` will probably be requested by the next acquire() of
  // that layer (most likely first). A provider may read them ahead while the model computes; it
  // must never change what acquire() delivers (a wrong guess costs only I/O). Call it after the
  // current layer's acquire(). The default ignores it.
  virtual void prefetch(int layer, std::span<const int> experts) {
    (void)layer;
    (void)experts;
  }
  virtual int numLayers() const = 0;
  virtual int numExperts() const = 0;
  // Shape [rows, cols] of tensor kind `kind` (the same for every expert of a model).
  virtual std::pair<int64_t, int64_t> tensorShape(int kind) const = 0;
};

// Every expert of every layer in memory (BF16), loaded from an HF directory or a ZipMoE store.
std::unique_ptr<ExpertProvider> makeResidentExperts(const std::filesystem::path& modelDir);

}  // namespace zipmoe
