// ExpertProvider — the one narrow interface through which the model gets routed-expert weights.
//
// For each MoE layer, once the router has chosen, the model calls acquire(layer, requests) with the
// experts it needs and how many tokens each serves, then calls next() repeatedly: each call blocks
// until one more requested expert's weights are ready (in whatever order the provider finishes them)
// and the model computes that expert at once. Weights are BF16 row-major [out, in] buffers, one per
// expert tensor kind in the family's store order (e.g. gate_proj, up_proj, down_proj) — or, where the
// request allowed it (ExpertRequest::acceptsSplit, mergesSplit), the tensor's lossless split: its exponent plane
// and its sign-mantissa plane (zipmoe/format/bf16_split.h), which the model's decoding kernels merge in
// registers as they compute, so that a runtime need not recover the tensor first — and stay valid
// until the next call to next() or the ExpertBatch's destruction, whichever comes first (so that a
// runtime can recycle a bounded set of buffers); the model computes each expert before asking for
// the next one. The resident provider has everything in memory; the ZipMoE
// runtime and the offloading baselines implement the same interface with weights arriving from I/O,
// decompression and recovery threads.
// Compute seam (distributed experts): a provider may instead have some experts' *outputs* computed
// elsewhere. computedElsewhere() names them among a layer's requests; the model leaves them out of
// acquire(), passes their input rows to computeElsewhere() before computing the others, and weighs the
// outputs into the same slots of its fixed-order sum, so results do not depend on where or in which
// order experts finish. Where an output cannot be had elsewhere (a node down), the provider computes
// it from its own store or fails the request; the model sees an output either way.
// Thread-safety: one acquire() at a time per provider (the model's thread); an ExpertBatch is used
// by the thread that acquired it. Cost: resident — none; others — see the runtime.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "zipmoe/format/nibble_shard.h"

namespace zipmoe {

class Store;

struct ExpertRequest {
  int expert = 0;
  int tokens = 0;  // tokens routed to it in this step (drives scheduling priority)
  // The model can compute this expert straight from split planes (decoding: few tokens, BF16
  // compute on the project's GEMV). A provider may then hand any tensor of it split.
  bool acceptsSplit = false;
  // The model takes split planes it cannot compute from too, merging them itself into one tensor of
  // its own scratch (prefill: many tokens). A runtime with no output slots (RuntimeOptions::
  // outputSlots) hands such a request the planes instead of recovering it into a slot; one with
  // output slots recovers it there, off the model's thread.
  bool mergesSplit = false;
};

struct ReadyExpert {
  int expert = 0;
  std::vector<const uint16_t*> tensors;  // BF16 words, one per kind, each [rows × cols] row-major
  // Where tensors[kind] is null (only when the request accepted it): the kind's exponent plane and
  // sign-mantissa plane, one byte per weight each, row-major. Empty when every tensor is BF16.
  std::vector<const uint8_t*> exponents, signMantissa;
  // Where tensors[kind] and exponents[kind] are both null (only when the request accepted or merges
  // split planes): the kind's exponents as nibble codes read in place (zipmoe/format/nibble_shard.h), one
  // shard per range of rows, with signMantissa[kind]; a model that merges them turns them into words
  // (kernels::nibbleToBf16). Empty when no tensor is.
  std::vector<std::span<const NibbleShard>> nibble;
};

// Tensor `kind` of a ready expert as BF16 words: its own, or its split planes merged into `scratch`
// (grown to `numel` words). Valid while `ready`'s buffers and `scratch` are. Throws zipmoe::Error
// when the tensor has neither.
const uint16_t* bf16Words(const ReadyExpert& ready, size_t kind, size_t numel, std::vector<uint16_t>& scratch);

class ExpertBatch {
 public:
  virtual ~ExpertBatch() = default;
  // Blocks until another requested expert is ready; std::nullopt once every one has been returned.
  // Throws zipmoe::Error if an expert could not be loaded (the batch is then finished).
  virtual std::optional<ReadyExpert> next() = 0;
};

// One expert's input rows for computeElsewhere: rows × hidden activations, row-major, in the model's
// compute type (BF16 words or fp32).
enum class ActivationType { BFloat16, Float32 };
struct ExpertRows {
  int expert = 0;
  int64_t rows = 0;
  const void* data = nullptr;
};

struct ComputedExpert {
  int expert = 0;
  // rows × hidden outputs of the expert's FFN (before the router weight), same type and row order as
  // its ExpertRows; valid until the next call to next() or the ExpertOutputs' destruction.
  const void* output = nullptr;
};

class ExpertOutputs {
 public:
  virtual ~ExpertOutputs() = default;  // waits for (or cancels) calls still in flight
  // Blocks until another expert's output is there; std::nullopt once every one has been returned.
  // Throws zipmoe::Error when the provider fails the request (e.g. a node down and no fallback).
  virtual std::optional<ComputedExpert> next() = 0;
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
  // The experts among `requests` whose outputs this provider has computed elsewhere (ascending; the
  // default, none). Call once per layer step, before acquire(); it may count the requests.
  virtual std::vector<int> computedElsewhere(int layer, std::span<const ExpertRequest> requests) {
    (void)layer;
    (void)requests;
    return {};
  }
  // Starts computing them: `inputs` holds one entry per expert computedElsewhere() named, in its
  // order; their data stays valid until the returned ExpertOutputs is destroyed. Default: nothing is
  // computed elsewhere, so never called.
  virtual std::unique_ptr<ExpertOutputs> computeElsewhere(int layer, std::span<const ExpertRows> inputs,
                                                          ActivationType type, int64_t hidden) {
    (void)layer;
    (void)inputs;
    (void)type;
    (void)hidden;
    return nullptr;
  }
  virtual int numLayers() const = 0;
  virtual int numExperts() const = 0;
  // Shape [rows, cols] of tensor kind `kind` (the same for every expert of a model).
  virtual std::pair<int64_t, int64_t> tensorShape(int kind) const = 0;
};

// Every expert of every layer in memory (BF16), loaded from an HF directory or a ZipMoE store.
std::unique_ptr<ExpertProvider> makeResidentExperts(const std::filesystem::path& modelDir);

}  // namespace zipmoe
