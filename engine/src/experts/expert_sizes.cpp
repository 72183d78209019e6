// ExpertSizes (see expert_sizes.h).
#include "experts/expert_sizes.h"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "zipmoe/base/error.h"

namespace zipmoe::experts {

ExpertSizes::ExpertSizes(const Store& store) : store_(store) {
  const Manifest& m = store.manifest();
  layers_ = m.numLayers();
  experts_ = m.numExperts;
  kinds_ = m.numKinds();
  shards_ = m.shards;
  topK_ = static_cast<int>(m.config->value("num_experts_per_tok", 1));
  for (int kind = 0; kind < kinds_; ++kind) {
    const auto& shape = m.expert(0, 0, kind).shape;
    if (shape.size() != 2) throw Error(store.dir().string() + ": expert tensors must be 2-D");
    shapes_.emplace_back(shape[0], shape[1]);
  }
  maxEBytes_.assign(static_cast<size_t>(kinds_), 0);
  double eTotal = 0, smTotal = 0;
  for (int l = 0; l < layers_; ++l)
    for (int e = 0; e < experts_; ++e)
      for (int kind = 0; kind < kinds_; ++kind) {
        const uint64_t eb = eBytes(l, e, kind);
        maxEBytes_[static_cast<size_t>(kind)] = std::max(maxEBytes_[static_cast<size_t>(kind)], eb);
        eTotal += static_cast<double>(eb);
        smTotal += static_cast<double>(smBytes(l, e, kind));
      }
  const double n = static_cast<double>(layers_) * experts_;
  double full = 0;
  for (int kind = 0; kind < kinds_; ++kind) full += static_cast<double>(fullBytes(kind));
  bytesPerExpert_ = {full, (eTotal + smTotal) / n, smTotal / n, eTotal / n};
}

uint64_t ExpertSizes::numel(int kind) const {
  const auto& [rows, cols] = shapes_[static_cast<size_t>(kind)];
  return static_cast<uint64_t>(rows * cols);
}

uint64_t ExpertSizes::eBytes(int layer, int expert, int kind) const {
  return store_.manifest().expert(layer, expert, kind).paddedEBytes();
}

uint64_t ExpertSizes::smBytes(int layer, int expert, int kind) const {
  return store_.manifest().expert(layer, expert, kind).smChunk.paddedSize;
}

uint64_t ExpertSizes::fullBytes(int kind) const { return io::alignUp(numel(kind) * 2, 64); }

uint64_t ExpertSizes::partBytes(Pool pool, int layer, int expert, int kind) const {
  switch (pool) {
    case Pool::F: return fullBytes(kind);
    case Pool::C: return eBytes(layer, expert, kind) + smBytes(layer, expert, kind);
    case Pool::S: return smBytes(layer, expert, kind);
    case Pool::E: return eBytes(layer, expert, kind);
  }
  return 0;
}

uint64_t ExpertSizes::expertBytes() const { return store_.manifest().routedExpertBytes(); }

sched::SlotLayout ExpertSizes::stagingLayout(int count) const {
  sched::SlotLayout staging;
  staging.count = count;
  for (int kind = 0; kind < kinds_; ++kind) {
    staging.eOffset.push_back(staging.slotBytes);
    staging.slotBytes += maxEBytes_[static_cast<size_t>(kind)];
    staging.smOffset.push_back(staging.slotBytes);
    staging.slotBytes += io::alignUp(numel(kind), kChunkAlignment);
    staging.planeOffset.push_back(staging.slotBytes);
    staging.slotBytes += io::alignUp(numel(kind), kChunkAlignment);
  }
  return staging;
}

uint64_t ExpertSizes::prefetchSlotBytes() const {
  uint64_t bytes = 0;
  for (int kind = 0; kind < kinds_; ++kind)
    bytes += maxEBytes_[static_cast<size_t>(kind)] + io::alignUp(numel(kind), kChunkAlignment);
  return bytes;
}

sched::SlotLayout ExpertSizes::outputLayout(int count) const {
  sched::SlotLayout output;
  output.count = count;
  for (int kind = 0; kind < kinds_; ++kind) {
    output.outOffset.push_back(output.slotBytes);
    output.slotBytes += fullBytes(kind);
  }
  return output;
}

}  // namespace zipmoe::experts
