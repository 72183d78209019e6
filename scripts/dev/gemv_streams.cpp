// gemv_streams — why the AVX-512 GEMV takes one row at a time in items of up to 256 KiB (docs/MODEL.md,
// "One stream per item"). A development probe, not part of the build: two threads (the caller and one
// spinning helper) split each product into items of R rows claimed from an atomic counter, as the
// compute pool does, over enough distinct copies of a W [rows × cols] (random BF16, 2 MiB-aligned,
// advised for huge pages) that every product reads from memory. Three loops per item: `read` (the
// item's bytes XOR-ed, no arithmetic: the streaming rate of that item size), `four-rows` (four
// rows side by side, 32 columns a step: the kernel before) and `one-row` (one row, four 32-column
// blocks a step: the kernel now). Rounds alternate the loops; each round's figure is all products'
// bytes ÷ their total time; the median of the rounds is printed.
//
//   g++ -O2 -std=c++20 -pthread scripts/dev/gemv_streams.cpp -o /tmp/gemv_streams
//   /tmp/gemv_streams ROWS COLS ROUNDS ITEM_ROWS...      e.g. /tmp/gemv_streams 4096 512 11 32 256
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

// GCC 12's AVX-512 reductions start from an "undefined" vector it then reports (see bf16_gemv.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace {

using Kernel = void (*)(const uint16_t*, size_t, size_t, size_t, const uint16_t*, float*);

TARGET inline __m512bh load32(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }

TARGET void readItem(const uint16_t* w, size_t cols, size_t r0, size_t r1, const uint16_t*, float* y) {
  const auto* p = reinterpret_cast<const __m512i*>(w + r0 * cols);
  const size_t blocks = (r1 - r0) * cols * 2 / 256;
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i < blocks; ++i) {
    a = _mm512_xor_si512(a, _mm512_loadu_si512(p + 4 * i));
    b = _mm512_xor_si512(b, _mm512_loadu_si512(p + 4 * i + 1));
    c = _mm512_xor_si512(c, _mm512_loadu_si512(p + 4 * i + 2));
    d = _mm512_xor_si512(d, _mm512_loadu_si512(p + 4 * i + 3));
  }
  y[r0] = static_cast<float>(_mm512_reduce_add_epi64(_mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d))));
}

TARGET void fourRows(const uint16_t* w, size_t cols, size_t r0, size_t r1, const uint16_t* x, float* y) {
  for (size_t r = r0; r + 4 <= r1; r += 4) {
    const uint16_t *w0 = w + r * cols, *w1 = w0 + cols, *w2 = w1 + cols, *w3 = w2 + cols;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t c = 0; c < cols; c += 32) {
      const __m512bh xv = load32(x + c);
      a0 = _mm512_dpbf16_ps(a0, load32(w0 + c), xv);
      a1 = _mm512_dpbf16_ps(a1, load32(w1 + c), xv);
      a2 = _mm512_dpbf16_ps(a2, load32(w2 + c), xv);
      a3 = _mm512_dpbf16_ps(a3, load32(w3 + c), xv);
    }
    y[r] = _mm512_reduce_add_ps(a0);
    y[r + 1] = _mm512_reduce_add_ps(a1);
    y[r + 2] = _mm512_reduce_add_ps(a2);
    y[r + 3] = _mm512_reduce_add_ps(a3);
  }
}

TARGET void oneRow(const uint16_t* w, size_t cols, size_t r0, size_t r1, const uint16_t* x, float* y) {
  for (size_t r = r0; r < r1; ++r) {
    const uint16_t* row = w + r * cols;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t c = 0; c < cols; c += 128) {
      a0 = _mm512_dpbf16_ps(a0, load32(row + c), load32(x + c));
      a1 = _mm512_dpbf16_ps(a1, load32(row + c + 32), load32(x + c + 32));
      a2 = _mm512_dpbf16_ps(a2, load32(row + c + 64), load32(x + c + 64));
      a3 = _mm512_dpbf16_ps(a3, load32(row + c + 96), load32(x + c + 96));
    }
    y[r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: gemv_streams ROWS COLS ROUNDS ITEM_ROWS...  (COLS a multiple of 128, ROWS of 4)\n");
    return 2;
  }
  const size_t rows = std::strtoul(argv[1], nullptr, 10), cols = std::strtoul(argv[2], nullptr, 10);
  const int rounds = std::atoi(argv[3]);
  if (rows == 0 || rows % 4 != 0 || cols == 0 || cols % 128 != 0 || rounds < 1) {
    std::fprintf(stderr, "gemv_streams: ROWS must be a multiple of 4, COLS of 128, ROUNDS ≥ 1\n");
    return 2;
  }
  const size_t bytes = rows * cols * 2, mapped = (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  const size_t copies = std::max<size_t>(2, (size_t{1} << 30) / bytes);
  std::vector<uint16_t*> weights;
  for (size_t i = 0; i < copies; ++i) {
    auto* w = static_cast<uint16_t*>(std::aligned_alloc(2u << 20, mapped));
    if (!w) return 1;
    madvise(w, mapped, MADV_HUGEPAGE);
    uint64_t s = 0x9E3779B97F4A7C15ull * (i + 1);
    for (size_t j = 0; j < rows * cols; ++j) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      w[j] = static_cast<uint16_t>(0x3c00 + ((s >> 20) & 0x7f) + ((s >> 40) & 0x8000));
    }
    weights.push_back(w);
  }
  std::vector<uint16_t> x(cols, 0x3f80);
  std::vector<float> y(rows);
  struct Loop {
    const char* name;
    Kernel kernel;
  };
  const Loop loops[] = {{"read", readItem}, {"four-rows", fourRows}, {"one-row", oneRow}};

  // The helper: spins for a new generation, computes items until none is left, reports done.
  std::atomic<int> generation{0}, done{0};
  std::atomic<size_t> next{0};
  std::atomic<bool> quit{false};
  const uint16_t* w = nullptr;
  Kernel kernel = nullptr;
  size_t itemRows = 0;
  const auto work = [&] {
    for (size_t r0; (r0 = next.fetch_add(itemRows)) < rows;) kernel(w, cols, r0, std::min(rows, r0 + itemRows), x.data(), y.data());
  };
  std::thread helper([&] {
    for (int seen = 0;;) {
      while (generation.load(std::memory_order_acquire) == seen)
        if (quit.load()) return;
        else _mm_pause();
      seen = generation.load();
      work();
      done.fetch_add(1);
    }
  });
  for (int a = 4; a < argc; ++a) {
    itemRows = std::strtoul(argv[a], nullptr, 10);
    std::vector<std::vector<double>> perLoop(3);
    for (int round = 0; round <= rounds; ++round)  // round 0 warms up
      for (size_t l = 0; l < 3; ++l) {
        double total = 0;
        for (size_t i = 0; i < copies; ++i) {
          w = weights[i], kernel = loops[l].kernel, next = 0, done = 0;
          const auto t0 = std::chrono::steady_clock::now();
          generation.fetch_add(1, std::memory_order_release);
          work();
          while (done.load() == 0) _mm_pause();
          total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        if (round > 0) perLoop[l].push_back(static_cast<double>(bytes * copies) / total / 1e9);
      }
    std::printf("%zu x %zu, items of %zu rows (%zu KiB):", rows, cols, itemRows, itemRows * cols * 2 / 1024);
    for (size_t l = 0; l < 3; ++l) {
      std::sort(perLoop[l].begin(), perLoop[l].end());
      std::printf("  %s %.1f", loops[l].name, perLoop[l][perLoop[l].size() / 2]);
    }
    std::printf(" GB/s (median of %d rounds)\n", rounds);
  }
  quit = true;
  helper.join();
  return 0;
}
