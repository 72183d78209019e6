// Bandwidth and GEMV measurements (see zipmoe/kernel_bench.h).
#include "bench/kernels/kernel_bench.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "base/crc32c.h"
#include "kernels/bf16_gemv.h"
#include "model/linear.h"
#include "model/weights.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/exponent_codec.h"
#include "zipmoe/format/nibble_shard.h"

namespace zipmoe {
namespace {

using Clock = std::chrono::steady_clock;

// Reads [p, p + n) with four independent 32-byte load chains; returns a value that depends on every
// byte so the loads cannot be dropped.
__attribute__((target("avx2"))) uint64_t readAvx2(const uint8_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a = _mm256_xor_si256(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_xor_si256(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_xor_si256(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_xor_si256(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  uint64_t out = static_cast<uint64_t>(_mm256_extract_epi64(x, 0)) ^ static_cast<uint64_t>(_mm256_extract_epi64(x, 3));
  for (; i < n; ++i) out ^= p[i];
  return out;
}

uint64_t readScalar(const uint8_t* p, size_t n) {
  uint64_t out = 0;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = 0;
    std::memcpy(&v, p + i, std::min<size_t>(8, n - i));
    out ^= v;
  }
  return out;
}

volatile uint64_t benchmarkSink = 0;  // what the bandwidth reads computed: keeps them observable

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

}  // namespace

BandwidthFigure measureReadBandwidth(size_t bytes, int threads, int repeats) {
  if (threads < 1 || repeats < 1 || bytes < 4096) throw Error("measureReadBandwidth: bad arguments");
  const size_t slice = (bytes / static_cast<size_t>(threads)) / 4096 * 4096;
  const size_t total = slice * static_cast<size_t>(threads);
  std::unique_ptr<uint8_t, FreeDeleter> buffer(static_cast<uint8_t*>(std::aligned_alloc(4096, total)));
  if (!buffer) throw Error("cannot allocate " + std::to_string(total) + " bytes for the bandwidth benchmark");
  for (size_t i = 0; i < total; ++i) buffer.get()[i] = static_cast<uint8_t>(i * 131u);
  const bool avx2 = __builtin_cpu_supports("avx2");
  std::vector<double> passes;
  std::atomic<uint64_t> sink{0};
  for (int r = 0; r < repeats; ++r) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const uint8_t* p = buffer.get() + static_cast<size_t>(t) * slice;
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        sink.fetch_xor(avx2 ? readAvx2(p, slice) : readScalar(p, slice));
      });
    while (ready.load() < threads) std::this_thread::yield();
    const auto t0 = Clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    passes.push_back(static_cast<double>(total) / s / 1e9);
  }
  benchmarkSink = sink.load();
  std::sort(passes.begin(), passes.end());
  BandwidthFigure f{threads, total, passes.back(), 0, passes.front()};
  const size_t mid = passes.size() / 2;
  f.medianGbPerSecond = passes.size() % 2 == 1 ? passes[mid] : (passes[mid - 1] + passes[mid]) / 2;
  return f;
}

namespace {

// Each BF16 weight's split planes (exponents, sign-mantissa), in the weights' order.
struct SplitPlanes {
  std::vector<std::vector<uint8_t>> exponents, signMantissa;
};
SplitPlanes splitPlanes(const std::vector<at::Tensor>& weights) {
  SplitPlanes out{std::vector<std::vector<uint8_t>>(weights.size()), std::vector<std::vector<uint8_t>>(weights.size())};
  for (size_t i = 0; i < weights.size(); ++i) {
    const auto n = static_cast<size_t>(weights[i].numel());
    out.exponents[i].resize(n);
    out.signMantissa[i].resize(n);
    bf16::split(reinterpret_cast<const uint16_t*>(weights[i].data_ptr<at::BFloat16>()), n, out.exponents[i].data(),
                out.signMantissa[i].data());
  }
  return out;
}

}  // namespace

std::vector<GemvFigure> measureGemv(int64_t rows, int64_t cols, int64_t batch, size_t workingSetBytes, int repeats,
                                    int threads, bool hugePages) {
  if (rows < 1 || cols < 1 || batch < 1 || repeats < 1) throw Error("measureGemv: bad arguments");
  setComputeThreads(threads);
  const size_t matrixBytes = static_cast<size_t>(rows * cols) * 2;
  const size_t copies = std::max<size_t>(2, (workingSetBytes + matrixBytes - 1) / matrixBytes);
  at::manual_seed(7);
  std::vector<at::Tensor> weights;
  for (size_t i = 0; i < copies; ++i) weights.push_back((at::randn({rows, cols}) * 0.05).to(at::kBFloat16));
  if (hugePages)
    for (at::Tensor& w : weights) w = emptyWeight({rows, cols}, at::kBFloat16).copy_(w);
  const at::Tensor x = at::randn({batch, cols}).to(at::kBFloat16);
  const at::Tensor reference = at::linear(x, weights[0]).to(at::kFloat);
  const double scale = reference.abs().mean().item<double>() + 1e-12;

  // Each copy also as its split planes, for the kernels that compute from them (projectSplit).
  const SplitPlanes planes = splitPlanes(weights);
  const auto& exponents = planes.exponents;
  const auto& signMantissa = planes.signMantissa;

  // And with the exponents as `nibble` codes in 4 row shards, as a store keeps them, indexed for
  // projectNibble (positions after each chunk, as the runtime writes them into a chunk's padding).
  // Only with an even number of columns and shards the codec codes (not raw or run).
  constexpr int64_t kShards = 4;
  const auto codec = makeNibbleCodec(bestNibbleDecodeLevel());
  std::vector<std::vector<uint8_t>> coded(copies);
  std::vector<std::vector<uint32_t>> positions(copies);
  std::vector<std::vector<NibbleShard>> nibble(copies);
  bool nibbleOk = cols % 2 == 0 && rows >= kShards;
  for (size_t i = 0; i < copies && nibbleOk; ++i) {
    coded[i].resize(kShards * codec->maxCompressedSize(static_cast<size_t>(rows * cols)));
    const size_t capacity = static_cast<size_t>(rows * cols) / 64 + 64;  // per shard: escapes are about 1 in 10⁴
    positions[i].resize(kShards * capacity);
    size_t at = 0;
    for (int64_t s = 0; s < kShards && nibbleOk; ++s) {
      const auto r0 = static_cast<size_t>(rows * s / kShards), r1 = static_cast<size_t>(rows * (s + 1) / kShards);
      const size_t n = (r1 - r0) * static_cast<size_t>(cols);
      const uint8_t* plane = exponents[i].data() + r0 * static_cast<size_t>(cols);
      const size_t size = codec->compress(plane, n, coded[i].data() + at, coded[i].size() - at);
      auto shard =
          indexNibbleChunk(coded[i].data() + at, size, n, positions[i].data() + static_cast<size_t>(s) * capacity, capacity);
      nibbleOk = shard.has_value();
      if (!shard) break;
      shard->rowBegin = r0;
      shard->rowEnd = r1;
      nibble[i].push_back(*shard);
      at += size;
    }
  }

  enum class Source { Words, Split, Nibble };
  struct Kernel {
    std::string name;
    MatmulKernel kernel;
    Source source;
  };
  std::vector<Kernel> kernels;
  for (const MatmulKernel k : {MatmulKernel::Scalar, MatmulKernel::Avx2, MatmulKernel::Avx512Bf16})
    if (matmulKernelSupported(k)) {
      kernels.push_back({matmulKernelName(k), k, Source::Words});
      kernels.push_back({std::string(matmulKernelName(k)) + " split", k, Source::Split});
      if (nibbleOk) kernels.push_back({std::string(matmulKernelName(k)) + " nibble", k, Source::Nibble});
    }
  kernels.push_back({"libtorch", MatmulKernel::Libtorch, Source::Words});  // last: see kernel_bench.h
  std::vector<GemvFigure> out;
  for (const Kernel& k : kernels) {
    const MatmulScope scope(k.kernel);
    const auto product = [&](size_t i) {
      switch (k.source) {
        case Source::Split: return projectSplit(x, exponents[i].data(), signMantissa[i].data(), rows, cols);
        case Source::Nibble: return projectNibble(x, nibble[i], signMantissa[i].data(), rows, cols);
        case Source::Words: break;
      }
      return project(x, weights[i]);
    };
    GemvFigure f;
    f.kernel = k.name;
    f.maxRelativeError = (product(0).to(at::kFloat) - reference).abs().max().item<double>() / scale;
    // Scalar is slow: fewer products, still every copy at least once.
    const size_t products =
        std::max(copies, static_cast<size_t>(repeats) * (k.kernel == MatmulKernel::Scalar ? 1 : 4));
    for (size_t i = 0; i < copies; ++i) (void)product(i);  // warm-up: page in, wake the pool
    std::vector<double> times;
    for (size_t i = 0; i < products; ++i) {
      const auto t0 = Clock::now();
      const at::Tensor y = product(i % copies);
      times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    double total = 0;
    for (const double t : times) total += t;
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    const double median = times[times.size() / 2];
    f.microseconds = median * 1e6;
    f.gbPerSecond = static_cast<double>(matrixBytes) / median / 1e9;
    f.sustainedGbPerSecond = static_cast<double>(matrixBytes) * static_cast<double>(times.size()) / total / 1e9;
    out.push_back(f);
  }
  return out;
}

std::vector<PrefillFigure> measurePrefill(int64_t rows, int64_t cols, const std::vector<int64_t>& batches,
                                          size_t workingSetBytes, int repeats) {
  if (rows < 1 || cols < 1 || repeats < 1) throw Error("measurePrefill: bad arguments");
  const size_t matrixBytes = static_cast<size_t>(rows * cols) * 2;
  const size_t copies = std::max<size_t>(2, (workingSetBytes + matrixBytes - 1) / matrixBytes);
  at::manual_seed(8);
  std::vector<at::Tensor> weights;
  for (size_t i = 0; i < copies; ++i) weights.push_back((at::randn({rows, cols}) * 0.05).to(at::kBFloat16));
  const SplitPlanes planes = splitPlanes(weights);
  const auto& exponents = planes.exponents;
  const auto& signMantissa = planes.signMantissa;
  const size_t products = std::max(copies, static_cast<size_t>(repeats) * 4);
  // oneDNN's one-time start (ISA detection, its first kernels) on a shape no prefill has, so that a
  // first call below pays only for its own shape.
  (void)at::linear(at::ones({3, 32}, at::kBFloat16), at::ones({48, 32}, at::kBFloat16));
  // The median microseconds of `products` calls of f(copy), after one call of each copy.
  const auto median = [&](const auto& f) {
    for (size_t i = 0; i < copies; ++i) (void)f(i);
    std::vector<double> times;
    for (size_t i = 0; i < products; ++i) {
      const auto t0 = Clock::now();
      (void)f(i % copies);
      times.push_back(std::chrono::duration<double>(Clock::now() - t0).count() * 1e6);
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    return times[times.size() / 2];
  };
  std::vector<PrefillFigure> out;
  for (const int64_t batch : batches) {
    PrefillFigure f;
    f.batch = batch;
    const at::Tensor x = at::randn({batch, cols}).to(at::kBFloat16);
    {
      const MatmulScope scope(MatmulKernel::Auto);
      if (amxProjects(x, rows, cols)) {
        f.tilesUs = median([&](size_t i) {
          return projectTiles(x, {.words = reinterpret_cast<const uint16_t*>(weights[i].data_ptr<at::BFloat16>()),
                                  .rows = rows, .cols = cols});
        });
        f.tilesSplitUs = median([&](size_t i) {
          return projectTiles(x, {.exponents = exponents[i].data(), .signMantissa = signMantissa[i].data(),
                                  .rows = rows, .cols = cols});
        });
      }
    }
    const auto t0 = Clock::now();
    (void)at::linear(x, weights[0]);
    f.libtorchFirstUs = std::chrono::duration<double>(Clock::now() - t0).count() * 1e6;
    f.libtorchUs = median([&](size_t i) { return at::linear(x, weights[i]); });
    out.push_back(f);
  }
  return out;
}

double measureChecksum(size_t bytes, bool threeStreams, int repeats) {
  if (bytes == 0 || repeats < 1) throw Error("measureChecksum: needs bytes > 0 and repeats >= 1");
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  constexpr size_t kSlice = size_t{4} << 20;
  double best = 0;
  uint32_t sink = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t pos = 0; pos < bytes; pos += kSlice) {
      const size_t n = std::min(kSlice, bytes - pos);
      sink ^= threeStreams ? detail::crc32c(data.data() + pos, n) : detail::crc32cOneStream(data.data() + pos, n);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (secs > 0) best = std::max(best, static_cast<double>(bytes) / secs / 1e9);
  }
  benchmarkSink = sink;  // keeps the checksums observable
  return best;
}

}  // namespace zipmoe
