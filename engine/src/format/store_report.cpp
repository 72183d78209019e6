// `zipmoe inspect`: the compression report of a store, by tensor kind, with the exponent entropy
// measured at conversion time and the size bound it implies for this split: (8 + H) / 16 of BF16.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "zipmoe/format/converter.h"
#include "zipmoe/format/store.h"

namespace zipmoe {
namespace {

std::string bytesText(uint64_t b) {
  char buf[64];
  const double v = static_cast<double>(b);
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", v / (1ull << 20));
  else if (b >= (1ull << 10)) std::snprintf(buf, sizeof buf, "%.1f KiB", v / (1ull << 10));
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

struct KindTotals {
  uint64_t tensors = 0, weights = 0, eBytes = 0, smBytes = 0, padded = 0;
};

}  // namespace

std::string describeStore(const std::filesystem::path& storeDir) {
  const auto store = Store::open(storeDir);
  const Manifest& m = store->manifest();
  std::vector<KindTotals> kinds(m.tensorKinds.size());
  KindTotals all;
  for (int l = 0; l < m.numLayers(); ++l)
    for (int x = 0; x < m.numExperts; ++x)
      for (int k = 0; k < m.numKinds(); ++k) {
        const auto& e = m.expert(l, x, k);
        auto& t = kinds[static_cast<size_t>(k)];
        t.tensors++;
        t.weights += e.numel;
        for (const auto& c : e.eChunks) {
          t.eBytes += c.size;
          t.padded += c.paddedSize;
        }
        t.smBytes += e.smChunk.size;
        t.padded += e.smChunk.paddedSize;
      }
  for (const auto& t : kinds) {
    all.tensors += t.tensors;
    all.weights += t.weights;
    all.eBytes += t.eBytes;
    all.smBytes += t.smBytes;
    all.padded += t.padded;
  }
  uint64_t denseBytes = 0;
  for (const auto& d : m.dense) denseBytes += d.size;

  std::ostringstream o;
  char line[512];
  o << "store        " << storeDir.string() << "\n";
  o << "model        " << familyName(m.family) << " (model_type " << m.modelType << "), " << m.numLayers()
    << " MoE layers x " << m.numExperts << " experts x " << m.numKinds() << " tensors\n";
  o << "format       version " << m.version << ", codec " << describe(m.codec) << ", K = " << m.shards
    << " E-chunks per tensor, 4 KiB-aligned chunks\n";
  if (m.codecChoice)
    o << "codec choice " << codecChosenByName(m.codecChoice->by) << ": " << m.codecChoice->reason << "\n";
  else
    o << "codec choice not recorded (converted before stores recorded why)\n";
  o << "files        experts.bin " << bytesText(m.expertsFileSize) << ", dense.bin " << bytesText(m.denseFileSize)
    << "\n\n";
  std::snprintf(line, sizeof line, "%-12s %8s %12s %10s %10s %9s %9s %9s %9s\n", "expert kind", "tensors", "BF16",
                "E bits/w", "entropy", "stored", "bound", "padded", "E ratio");
  o << line;
  auto row = [&](const std::string& name, const KindTotals& t, const std::vector<uint64_t>& hist) {
    const double w = static_cast<double>(t.weights);
    const double bf16 = 2.0 * w;
    const double h = hist.empty() ? 0.0 : entropyBits(hist.data());
    std::snprintf(line, sizeof line, "%-12s %8llu %12s %10.3f %10.3f %8.2f%% %8.2f%% %8.2f%% %8.2f%%\n", name.c_str(),
                  static_cast<unsigned long long>(t.tensors), bytesText(2 * t.weights).c_str(),
                  w > 0 ? 8.0 * static_cast<double>(t.eBytes) / w : 0.0, h,
                  bf16 > 0 ? 100.0 * static_cast<double>(t.eBytes + t.smBytes) / bf16 : 0.0, 100.0 * (8.0 + h) / 16.0,
                  bf16 > 0 ? 100.0 * static_cast<double>(t.padded) / bf16 : 0.0,
                  w > 0 ? 100.0 * static_cast<double>(t.eBytes) / w : 0.0);
    o << line;
  };
  std::vector<uint64_t> total(256, 0);
  for (size_t k = 0; k < kinds.size(); ++k) {
    const auto& hist = k < m.exponentHistograms.size() ? m.exponentHistograms[k] : std::vector<uint64_t>();
    for (size_t i = 0; i < hist.size() && i < 256; ++i) total[i] += hist[i];
    row(m.tensorKinds[k], kinds[k], hist);
  }
  row("all experts", all, m.exponentHistograms.empty() ? std::vector<uint64_t>() : total);
  o << "\n";
  std::snprintf(line, sizeof line, "dense        %zu tensors, %s stored raw (100%%)\n", m.dense.size(),
                bytesText(denseBytes).c_str());
  o << line;
  const double modelBf16 = 2.0 * static_cast<double>(all.weights) + static_cast<double>(denseBytes);
  std::snprintf(line, sizeof line, "whole model  %s on disk for %s of source weights (%.2f%%)\n",
                bytesText(m.expertsFileSize + m.denseFileSize).c_str(),
                bytesText(2 * all.weights + denseBytes).c_str(),
                modelBf16 > 0 ? 100.0 * static_cast<double>(m.expertsFileSize + m.denseFileSize) / modelBf16 : 0.0);
  o << line;
  o << "\nstored = (E-chunks + SM-chunks) / BF16 size; bound = (8 + entropy) / 16, the floor of an order-0 coder\n"
       "for this split; padded includes the 4 KiB alignment of every chunk; E ratio = E-chunks / exponent bytes.\n";
  return o.str();
}

}  // namespace zipmoe
