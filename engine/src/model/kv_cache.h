// KvCache — the per-sequence attention cache: for every layer two growable tensors.
//
// Internal to the forward pass. For grouped-query attention the pair is (keys, values), each
// [kvHeads, capacity, headDim] with time along dimension 1; for MLA it is (compressed latent after
// kv_a_layernorm [capacity, kv_lora_rank], rotated rope key [capacity, qk_rope_head_dim]) with time
// along dimension 0. Capacity doubles when exceeded, so appends are amortised O(1) per token. Rows
// past the committed length may be written by a forward that is later abandoned (an exception): the
// sequence's length is only advanced once a forward completes, so such rows are simply overwritten.
// save/load move a cache's committed rows to and from a byte stream (the prompt cache on disk,
// MoeModel::saveSequence): each layer's first tensor, then its second, each as its contiguous
// [..., tokens, ...] rows in the compute dtype, in this machine's byte order.
// Thread-safety: none; owned by the model's thread. Cost: the cache's bytes; a grow copies once;
// save/load copy the rows once more (a contiguous staging tensor per layer).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace zipmoe {

class GrowingTensor {
 public:
  GrowingTensor() = default;
  GrowingTensor(std::vector<int64_t> rowShape, int timeDim, at::ScalarType dtype)
      : rowShape_(std::move(rowShape)), timeDim_(timeDim), dtype_(dtype) {}
  // Writes `rows` (time along timeDim) at time offset `start`, growing as needed; returns the view of
  // times [0, start + rows).
  at::Tensor writeAndView(int64_t start, const at::Tensor& rows);
  // Grows the buffer to hold at least `capacity` times (keeping every row it holds), so that writes
  // up to there never grow it again: the serving scheduler reserves a request's whole length up front.
  void reserve(int64_t capacity);
  uint64_t capacityBytes() const;  // the buffer's bytes (its capacity, not the committed rows)
  uint64_t bytesPerTime() const;   // the bytes one more time step of capacity takes
  std::string layout() const;      // e.g. "bf16[4,t,64]": dtype and row shape, t the time dimension
  // Writes times [0, times) as contiguous bytes (times × bytesPerTime()). REQUIRES: times ≤ rows written.
  void save(int64_t times, std::ostream& out) const;
  // Reads `stored` times as save wrote them and writes the first `keep` at time 0.
  // Throws zipmoe::Error when the stream ends early.
  void load(std::istream& in, int64_t stored, int64_t keep);

 private:
  std::vector<int64_t> rowShape_;  // the shape with the time dimension set to 0
  int timeDim_ = 0;
  at::ScalarType dtype_ = at::kFloat;
  at::Tensor buffer_;
  int64_t capacity_ = 0;

  void growTo(int64_t capacity, int64_t keep);
};

struct KvCache {
  std::vector<GrowingTensor> first, second;  // per layer
  int64_t length = 0;                        // committed tokens
};

// The cache's first `tokens` tokens, every layer in turn (throws zipmoe::Error for tokens > length
// or a failed stream); and back, keeping `keep` of `stored` (length becomes keep; 0 on a throw).
void saveKvCache(const KvCache& cache, int64_t tokens, std::ostream& out);
void loadKvCache(KvCache& cache, std::istream& in, int64_t stored, int64_t keep);

}  // namespace zipmoe
