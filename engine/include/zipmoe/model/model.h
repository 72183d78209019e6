// MoeModel — the forward pass of a decoder-only MoE model in libtorch, with per-sequence KV caches.
//
// Loads an HF directory (config.json + safetensors) or a ZipMoE store (manifest.json). Dense weights
// are held in memory; routed experts come through an ExpertProvider (all resident by default; the
// ZipMoE runtime plugs in the same way). Families: mixtral, qwen2_moe (shared expert with its sigmoid
// gate), qwen3_moe, olmoe (grouped-query attention, RoPE, RMSNorm, each family's top-k rule) and
// deepseek_v2 (MLA with the compressed KV cache, YaRN, shared experts, dense first layers, greedy or
// group-limited routing). Computes in BF16 where the CPU has native BF16 support, fp32 otherwise
// (ModelOptions can force fp32). Results match Hugging Face transformers (tests compare logits
// against fixtures it produced).
// Thread-safety: one thread drives a model (forward is not re-entrant). Cost: see docs/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "zipmoe/base/error.h"
#include "zipmoe/experts/expert_prefetch.h"
#include "zipmoe/experts/expert_provider.h"
#include "zipmoe/hf/model_config.h"
#include "zipmoe/model/routing_override.h"

namespace zipmoe {

enum class ComputeDtype { Auto, BFloat16, Float32 };

// The matrix products of decoding (at most a few rows of activations, BF16): Auto uses the project's
// BF16 GEMV at the widest SIMD level this CPU has, Libtorch always at::linear; the explicit levels
// are for benchmarks and tests. Prefill and fp32 compute always use at::linear.
enum class MatmulKernel { Auto, Libtorch, Scalar, Avx2, Avx512Bf16 };
const char* matmulKernelName(MatmulKernel kernel);  // "auto", "libtorch", "scalar", "avx2", "avx512-bf16"
bool matmulKernelSupported(MatmulKernel kernel);    // this CPU has its instructions

struct ModelOptions {
  ComputeDtype dtype = ComputeDtype::Auto;
  // Intra-op threads; 0 = every CPU this process may run on (its affinity mask). Not libtorch's own
  // default, which counts cores as its cpuinfo sees them and picks 1 on some 2-vCPU machines.
  int threads = 0;
  MatmulKernel matmul = MatmulKernel::Auto;  // throws at load when the CPU lacks its instructions
  std::shared_ptr<ExpertProvider> experts;  // null = every expert resident, loaded from the model dir
  // null = each MoE layer's router chooses its experts. Set: the override chooses them (e.g. a
  // TraceRouting replaying a real model's activation trace, for realistic load on a generated model)
  // and the router only weighs them by the family's rule; choose() is called from the model's thread.
  std::shared_ptr<RoutingOverride> routing;
  // Speculative prefetch: which predictor names each next MoE layer's probable experts to the
  // provider (ExpertProvider::prefetch); see zipmoe/experts/expert_prefetch.h. Never changes results.
  PrefetchOptions prefetch;
};

class MoeModel {
 public:
  // Throws zipmoe::Error naming the file and field for a bad config, missing or mis-shaped tensor.
  static std::unique_ptr<MoeModel> load(const std::filesystem::path& dir, const ModelOptions& options = {});
  virtual ~MoeModel() = default;

  virtual const ModelConfig& config() const = 0;
  virtual ComputeDtype computeDtype() const = 0;  // BFloat16 or Float32, never Auto

  using SequenceId = int;
  virtual SequenceId addSequence() = 0;
  virtual void removeSequence(SequenceId seq) = 0;
  virtual int64_t sequenceLength(SequenceId seq) const = 0;
  // Keeps the first `length` tokens of the sequence's KV cache and forgets the rest (a chat rolled
  // back to where the conversation changed). Throws zipmoe::Error for an unknown sequence or a
  // length above its current one. Cost: none (the rows are overwritten by the next forward).
  virtual void truncateSequence(SequenceId seq, int64_t length) = 0;

  struct Step {
    SequenceId seq = 0;
    std::vector<int32_t> tokens;  // appended to the sequence (prefill: many; decode: one)
  };
  // Runs the steps together (a batch of sequences) and returns per step the logits (vocab floats)
  // after its last token, or after every token when allPositions is set (tokens × vocab).
  // Throws zipmoe::Error for an empty step, an unknown sequence, a token id outside the vocabulary or
  // a sequence that would exceed the context window (max_position_embeddings).
  virtual std::vector<std::vector<float>> forward(const std::vector<Step>& steps, bool allPositions = false) = 0;
  // The weight bytes the last forward's matrix products read (projections, routers, the experts it
  // computed, the LM head): for a decode step, the bytes a token touches — divided by the machine's
  // read bandwidth, the floor of its time (`zipmoe bench kernels`). 0 before the first forward.
  virtual uint64_t lastForwardWeightBytes() const = 0;
  // How well the prefetch predictor (ModelOptions::prefetch) has named each MoE layer's experts
  // so far; empty layers when prefetching is off.
  virtual PrefetchAccuracy prefetchAccuracy() const = 0;
  // Replaces the prefetch options (ModelOptions::prefetch) and restarts the accuracy count. Throws
  // zipmoe::Error, changing nothing, when the predictor lacks what it needs.
  virtual void setPrefetch(const PrefetchOptions& options) = 0;

  // Serving (zipmoe/serve/serve_scheduler.h), where the KV cache is counted by capacity:
  // Allocates the sequence's KV cache for `tokens` tokens at once, so that forwards up to that
  // length never grow it (rows it holds are kept). Throws zipmoe::Error for an unknown sequence.
  virtual void reserveSequence(SequenceId seq, int64_t tokens) = 0;
  virtual uint64_t kvCacheBytes() const = 0;     // every sequence's KV buffers, by capacity
  virtual uint64_t kvBytesPerToken() const = 0;  // one token of capacity of one sequence
  // When on, every forward keeps its routing: lastForwardRouting()[moeLayer] holds the k experts of
  // each token of the last forward (tokens × k ids, the steps' tokens in order). Never changes results.
  virtual void setRecordRouting(bool on) = 0;
  virtual const std::vector<std::vector<int32_t>>& lastForwardRouting() const = 0;

  // A sequence's KV cache as bytes, for the serving scheduler's prompt cache on disk
  // (serve/prompt_cache.h). kvIdentity() names what the bytes mean — digests of the model's config
  // and of its embedding, LM head and some norms, the compute dtype and every layer's cache layout —
  // so that bytes of another model, dtype or layout are never loaded (the first call reads those
  // weights once: a fraction of a second on a large model); empty when the model cannot export its cache
  // (the defaults here: a model without a real KV cache, like the scheduler tests' ToyModel, leaves
  // the three alone and the prompt cache refuses it at start).
  virtual std::string kvIdentity() const { return {}; }
  // Writes the KV of the sequence's first `tokens` tokens: exactly tokens × kvBytesPerToken() bytes
  // (each layer's two tensors in turn). Throws zipmoe::Error for an unknown sequence, `tokens` above
  // its length, or a failed stream.
  virtual void saveSequence(SequenceId seq, int64_t tokens, std::ostream& out) const {
    (void)seq, (void)tokens, (void)out;
    throw Error("this model cannot save a sequence's KV cache");
  }
  // Reads `stored` tokens of KV as saveSequence wrote them and makes the sequence hold the first
  // `keep` of them (its length becomes `keep`; reserve first so that it does not grow). Throws
  // zipmoe::Error for an unknown sequence, keep > stored, or a stream that ends early; the sequence
  // is then empty (length 0).
  virtual void loadSequence(SequenceId seq, std::istream& in, int64_t stored, int64_t keep) {
    (void)seq, (void)in, (void)stored, (void)keep;
    throw Error("this model cannot load a sequence's KV cache");
  }
};

}  // namespace zipmoe
