// profileStore: the store's measured I/O and CPU costs plus the expert FFN's time, fitted as
// a + b·tokens by least squares over token counts 1..64, in the dtype and thread count the model uses,
// and the contention between that FFN and the runtime's decompression workers (measureContention,
// with as many busy workers as the runtime starts by default: one per core).
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "model/linear.h"
#include "model/moe_model_ops.h"
#include "zipmoe/engine.h"
#include "zipmoe/base/error.h"

namespace zipmoe {

CostProfile profileStore(const Store& store, ReadMode mode, ComputeDtype dtype, int threads, int samples) {
  CostProfile p = measureCostProfile(store, mode, samples);
  const Manifest& m = store.manifest();
  if (m.numKinds() != 3) return p;  // gated experts only (every supported decoder family)
  const auto& gate = m.expert(0, 0, 0).shape;
  const auto& down = m.expert(0, 0, 2).shape;
  if (gate.size() != 2 || down.size() != 2) return p;
  const int64_t inter = gate[0], hidden = gate[1];
  setComputeThreads(threads);
  const at::ScalarType type = dtype == ComputeDtype::Float32 ? at::kFloat : at::kBFloat16;
  // Weights arrive as BF16 buffers (what the runtime hands out); fp32 models convert them per use,
  // so that conversion is part of the measured time, as in the forward pass.
  const auto opts = at::TensorOptions().dtype(at::kBFloat16);
  const at::Tensor wg = at::randn({inter, hidden}, opts) * 0.02, wu = at::randn({inter, hidden}, opts) * 0.02,
                   wd = at::randn({down[0], down[1]}, opts) * 0.02;
  auto run = [&](int64_t tokens) {
    const at::Tensor x = at::randn({tokens, hidden}).to(type);
    const auto start = std::chrono::steady_clock::now();
    const at::Tensor y = gatedMlp(x, wg.to(type), wu.to(type), wd.to(type));
    (void)y.sum().item<float>();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  run(1);  // warm up
  std::vector<double> ts, ys;
  for (int64_t tokens : {1, 2, 4, 8, 16, 32, 64}) {
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) best = std::min(best, run(tokens));
    ts.push_back(static_cast<double>(tokens));
    ys.push_back(best);
  }
  double mt = 0, my = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    mt += ts[i];
    my += ys[i];
  }
  mt /= static_cast<double>(ts.size());
  my /= static_cast<double>(ts.size());
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    sxy += (ts[i] - mt) * (ys[i] - my);
    sxx += (ts[i] - mt) * (ts[i] - mt);
  }
  p.computePerToken = std::max(0.0, sxy / sxx);
  p.computeBase = std::max(1e-7, my - p.computePerToken * mt);
  // The FFN of one token (a decode step) against 0..L busy decoders: the weights converted once, as
  // the decode path reuses them.
  const at::Tensor g1 = wg.to(type), u1 = wu.to(type), d1 = wd.to(type), x1 = at::randn({1, hidden}).to(type);
  const auto once = [&] {
    const auto start = std::chrono::steady_clock::now();
    const at::Tensor y = gatedMlp(x1, g1, u1, d1);
    (void)y.sum().item<float>();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const int workers = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  measureContention(p, store, mode, workers, once, 15);
  return p;
}

}  // namespace zipmoe
