// Internal: the sizes an expert runtime plans and accounts with, read from the store's manifest:
// each tensor kind's shape; each expert tensor's exponent and sign-mantissa bytes as held in memory
// (chunks padded to 4 KiB, as read with O_DIRECT); the bytes one expert takes in each pool on
// average (the planner's unit); and the ZipMoE working set's slot layouts.
// Thread-safety: immutable after construction. Cost: one pass over the manifest's expert table.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "sched/executor.h"
#include "zipmoe/base/pools.h"
#include "zipmoe/format/store.h"

namespace zipmoe::experts {

class ExpertSizes {
 public:
  // Throws zipmoe::Error for an expert tensor that is not 2-D.
  explicit ExpertSizes(const Store& store);

  int layers() const { return layers_; }
  int experts() const { return experts_; }
  int kinds() const { return kinds_; }
  int shards() const { return shards_; }  // K
  int topK() const { return topK_; }
  std::pair<int64_t, int64_t> shape(int kind) const { return shapes_.at(static_cast<size_t>(kind)); }
  uint64_t numel(int kind) const;

  uint64_t eBytes(int layer, int expert, int kind) const;   // Σ padded E-chunk sizes
  uint64_t smBytes(int layer, int expert, int kind) const;  // padded SM-chunk size
  uint64_t fullBytes(int kind) const;                       // the BF16 tensor, 64-byte aligned
  // What the tensor's part in `pool` takes: F the BF16 tensor, C both planes' chunks, S the SM-chunk,
  // E the E-chunks.
  uint64_t partBytes(Pool pool, int layer, int expert, int kind) const;
  // One expert's bytes in each pool, averaged over the store (C and E vary with compression).
  const std::array<double, kNumPools>& bytesPerExpert() const { return bytesPerExpert_; }
  uint64_t expertBytes() const;  // every routed expert in BF16

  // The ZipMoE runtime's fixed buffers: `count` staging slots (an expert's chunks in flight and its
  // exponent planes), `count` output slots (its recovered BF16 tensors).
  sched::SlotLayout stagingLayout(int count) const;
  sched::SlotLayout outputLayout(int count) const;
  // One prefetch slot: the largest E-chunks and SM-chunk of every tensor kind (one expert's reads).
  uint64_t prefetchSlotBytes() const;

 private:
  const Store& store_;
  int layers_ = 0, experts_ = 0, kinds_ = 0, shards_ = 1, topK_ = 1;
  std::vector<std::pair<int64_t, int64_t>> shapes_;
  std::vector<uint64_t> maxEBytes_;  // per kind
  std::array<double, kNumPools> bytesPerExpert_{};
};

}  // namespace zipmoe::experts
