// Shared by the expert-runtime suites: a tiny generated Qwen2-MoE model converted to a real store
// (with every expert tensor read back as the reference), a skewed request stream, and a driver that
// runs a stream through a runtime checking every tensor against the store and the memory bound
// after every layer.
#pragma once

#include <QtTest>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "zipmoe/format/converter.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/format/store.h"
#include "tools/synthetic/synthetic_model.h"

namespace zipmoe::testing {

using Stream = std::vector<std::vector<std::vector<ExpertRequest>>>;  // [step][layer] → requests

struct Fixture {
  std::filesystem::path hf, store;
  std::shared_ptr<const Store> opened;
  std::vector<std::vector<uint16_t>> reference;  // [(layer * experts + expert) * kinds + kind]
  CostProfile directProfile, bufferedProfile;
};

inline void makeFixture(Fixture& f, const std::filesystem::path& root, CodecSpec codec, int shards) {
  f.hf = root / "hf";
  f.store = root / "store";
  SyntheticModelOptions options;
  options.family = ModelFamily::Qwen2Moe;
  options.preset = "tiny";
  options.layers = 3;
  generateSyntheticModel(f.hf, options);
  ConvertOptions convert;
  convert.codec = codec;
  convert.shards = shards;
  convertCheckpoint(f.hf, f.store, convert);
  f.opened = std::shared_ptr<const Store>(Store::open(f.store).release());
  const Manifest& m = f.opened->manifest();
  for (int l = 0; l < m.numLayers(); ++l)
    for (int e = 0; e < m.numExperts; ++e)
      for (int k = 0; k < m.numKinds(); ++k) {
        std::vector<uint16_t> words(m.expert(l, e, k).numel);
        f.opened->readExpertTensor(l, e, k, words.data(), ReadMode::Buffered);
        f.reference.push_back(std::move(words));
      }
  f.directProfile = measureCostProfile(*f.opened, ReadMode::Direct, 8);
  f.bufferedProfile = measureCostProfile(*f.opened, ReadMode::Buffered, 8);
}

// A skewed request stream: each step picks k distinct experts per layer, popular ones more often.
// With `acceptsSplit`, every request lets the runtime hand its tensors split (decoding's form); every
// request merges planes it is handed otherwise (the model's prefill: mergesSplit), as the MoE block's.
inline Stream requestStream(int steps, int layers, int experts, int k, uint64_t seed, bool acceptsSplit = false) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights;
  for (int e = 0; e < experts; ++e) weights.push_back(1.0 / (1.0 + e));
  Stream out;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<ExpertRequest>> step;
    for (int l = 0; l < layers; ++l) {
      std::vector<double> w = weights;
      std::rotate(w.begin(), w.begin() + (l * 3) % experts, w.end());  // each layer its own favourites
      std::vector<ExpertRequest> reqs;
      for (int j = 0; j < k; ++j) {
        std::discrete_distribution<int> pick(w.begin(), w.end());
        const int e = pick(rng);
        w[static_cast<size_t>(e)] = 0;
        reqs.push_back({e, 1 + static_cast<int>(rng() % 3), acceptsSplit, true});
      }
      std::sort(reqs.begin(), reqs.end(), [](auto& a, auto& b) { return a.expert < b.expert; });
      step.push_back(reqs);
    }
    out.push_back(step);
  }
  return out;
}

// A tensor's exponent plane from the nibble codes a provider handed in place (ReadyExpert::nibble),
// read symbol by symbol as the format describes them (zipmoe/format/nibble_shard.h): the test's own reading,
// apart from the kernels'. Fails the test on shards that do not cover the tensor.
inline std::vector<uint8_t> nibbleExponents(std::span<const NibbleShard> shards, const ExpertTensorEntry& tensor,
                                            size_t numel) {
  const auto cols = static_cast<size_t>(tensor.shape.at(1));
  std::vector<uint8_t> out(numel);
  size_t row = 0;
  for (const NibbleShard& s : shards) {
    if (s.rowBegin != row || s.rowEnd * cols > numel) qFatal("nibble shards do not cover the tensor's rows in order");
    size_t escape = 0;
    for (size_t j = 0; j < (s.rowEnd - s.rowBegin) * cols; ++j) {
      const unsigned c = (s.codes[j / 2] >> (4 * (j % 2))) & 0xF;
      if (c < s.size) {
        out[s.rowBegin * cols + j] = s.dictionary[c];
      } else {
        if (escape >= s.escapeCount || s.escapePositions[escape] != j) qFatal("an escape the index does not list");
        out[s.rowBegin * cols + j] = s.escapes[escape++];
      }
    }
    if (escape != s.escapeCount) qFatal("the index lists escapes the codes do not hold");
    row = s.rowEnd;
  }
  if (row * cols != numel) qFatal("nibble shards end before the tensor does");
  return out;
}

// Runs the stream, checking every tensor and the memory bound; returns the number of experts seen.
inline int runStream(Fixture& f, ExpertRuntime& rt, const Stream& stream, std::function<void(int step)> betweenSteps = {},
                     std::function<void(int step, int layer)> afterAcquire = {}) {
  const Manifest& m = f.opened->manifest();
  int seen = 0;
  for (size_t s = 0; s < stream.size(); ++s) {
    if (betweenSteps) betweenSteps(static_cast<int>(s));
    for (int l = 0; l < m.numLayers(); ++l) {
      const auto& reqs = stream[s][static_cast<size_t>(l)];
      auto batch = rt.acquire(l, reqs);
      if (afterAcquire) afterAcquire(static_cast<int>(s), l);
      std::set<int> got;
      while (auto ready = batch->next()) {
        if (!got.insert(ready->expert).second) qFatal("expert returned twice");
        if (ready->tensors.size() != static_cast<size_t>(m.numKinds())) qFatal("wrong tensor count");
        for (int k = 0; k < m.numKinds(); ++k) {
          const auto& ref = f.reference[(static_cast<size_t>(l) * static_cast<size_t>(m.numExperts) +
                                         static_cast<size_t>(ready->expert)) * static_cast<size_t>(m.numKinds()) +
                                        static_cast<size_t>(k)];
          std::vector<uint16_t> merged;
          const ReadyExpert* view = &*ready;  // with in-place codes: a copy holding their plane
          ReadyExpert planes;
          std::vector<uint8_t> exponents;
          if (!ready->tensors[static_cast<size_t>(k)]) {  // split: only where the request accepted it, and then both planes
            const bool accepted = std::any_of(reqs.begin(), reqs.end(), [&](const ExpertRequest& r) {
              return r.expert == ready->expert && (r.acceptsSplit || (r.mergesSplit && rt.options().outputSlots == 0));
            });
            // Nibble codes (a C hit read in place, or a prefill's miss indexed in its kept buffer):
            // decoded here into a plane of the test's own.
            const bool codes = ready->nibble.size() > static_cast<size_t>(k) && !ready->nibble[static_cast<size_t>(k)].empty();
            if (codes) {
              exponents = nibbleExponents(ready->nibble[static_cast<size_t>(k)], m.expert(l, ready->expert, k), ref.size());
              planes = *ready;
              planes.exponents.resize(static_cast<size_t>(m.numKinds()));
              planes.exponents[static_cast<size_t>(k)] = exponents.data();
              view = &planes;
            }
            if (!accepted || view->exponents.size() <= static_cast<size_t>(k) ||
                !view->exponents[static_cast<size_t>(k)] || ready->signMantissa.size() <= static_cast<size_t>(k) ||
                !ready->signMantissa[static_cast<size_t>(k)])
              qFatal("layer %d expert %d tensor %d: no BF16 words and no split planes it may have", l, ready->expert, k);
          }
          const uint16_t* words = bf16Words(*view, static_cast<size_t>(k), ref.size(), merged);
          if (std::memcmp(ref.data(), words, ref.size() * 2) != 0)
            qFatal("layer %d expert %d tensor %d differs from the store", l, ready->expert, k);
        }
        ++seen;
      }
      if (got.size() != reqs.size()) qFatal("batch returned %zu of %zu experts", got.size(), reqs.size());
      // The layer ends with its batch. (While it runs, a budget that shrank meanwhile may still be
      // exceeded by the experts it is using: they are pinned until then.)
      batch.reset();
      const RuntimeStats st = rt.stats();
      if (st.heldBytes > st.budgetBytes)
        qFatal("held %llu bytes over the budget %llu", static_cast<unsigned long long>(st.heldBytes),
               static_cast<unsigned long long>(st.budgetBytes));
    }
  }
  return seen;
}

}  // namespace zipmoe::testing
