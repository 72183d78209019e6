// Measurements behind `zipmoe bench kernels`: this machine's memory read bandwidth and the speed of
// every BF16 matrix-vector kernel (libtorch's and the project's) on the shapes of a model.
//
// Decoding a token reads each weight once, so its floor is (bytes a token touches) ÷ (read
// bandwidth); these figures say what that floor is here and how close each kernel comes to it.
// Thread-safety: run one measurement at a time (they use every core). Cost: seconds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zipmoe {

struct BandwidthFigure {
  int threads = 0;
  size_t bytes = 0;              // buffer read per pass
  double gbPerSecond = 0;        // best pass, 1e9 bytes per second
  // The median and the slowest pass. On this VM a pass now and then reads far faster than the
  // memory sustains (55 against 34 GB/s, docs/BENCHMARKS.md run 25): a floor taken from the best
  // pass is a burst, the median is what the machine delivers (the benches' floor).
  double medianGbPerSecond = 0;
  double worstGbPerSecond = 0;
};
// Streams a `bytes` buffer (allocated and touched first) with `threads` threads, each its own slice,
// SIMD loads, `repeats` passes.
BandwidthFigure measureReadBandwidth(size_t bytes, int threads, int repeats);

struct GemvFigure {
  std::string kernel;            // "libtorch", "scalar", "avx2", "avx512-bf16"; "… split": from the split planes;
                                 // "… nibble": from `nibble` codes read in place (4 row shards) and the SM plane
  double microseconds = 0;       // per product, median of the timed products
  double gbPerSecond = 0;        // the matrix's BF16 bytes ÷ time (whatever form the kernel reads)
  // The matrix's BF16 bytes of all timed products ÷ their total time: what a decode step, which
  // issues products back to back, sees. Below gbPerSecond on this VM, whose memory serves some
  // products much faster than it sustains.
  double sustainedGbPerSecond = 0;
  double maxRelativeError = 0;   // against libtorch's result, relative to its mean magnitude
};
// y = x · Wᵀ for W [rows × cols] and x [batch × cols], BF16, on `threads` compute threads (0 = every
// CPU this process may use, as the model's default). Enough
// distinct copies of W are cycled through (at least `workingSetBytes`) that every product reads
// its weights from memory, not from a cache, as decoding does. Each project kernel is measured twice:
// on the BF16 words and on the same weights' split planes (exponent and sign-mantissa, one byte per
// weight each: what a C/S/E hit or a miss is computed from when recovery is fused), "<kernel> split".
// libtorch is measured last: its parallel operators leave OpenMP's workers spinning for a while,
// on the cores the project's kernels would need. `hugePages`: every copy of the BF16 words in memory
// advised for transparent huge pages before it is written (emptyWeight, as the model's loaded
// weights are); otherwise libtorch's allocation.
std::vector<GemvFigure> measureGemv(int64_t rows, int64_t cols, int64_t batch, size_t workingSetBytes, int repeats,
                                    int threads = 0, bool hugePages = false);

struct PrefillFigure {
  int64_t batch = 0;             // rows of x
  // Per product, microseconds, W read from memory (a different copy each time): on AMX tiles from
  // the words and from the split planes (projectTiles; negative where the tiles do not run), and
  // libtorch's at::linear on its first call with this shape in the process (oneDNN compiles its
  // kernel then) and after that (the median).
  double tilesUs = -1, tilesSplitUs = -1, libtorchFirstUs = 0, libtorchUs = 0;
};
// A prefill step's product y = x · Wᵀ for W [rows × cols] at each of `batches` rows of x, BF16, on
// every compute thread, cycling through copies of W (at least `workingSetBytes`) as measureGemv does.
// Call it before anything else in the process has run at::linear with these shapes.
std::vector<PrefillFigure> measurePrefill(int64_t rows, int64_t cols, const std::vector<int64_t>& batches,
                                          size_t workingSetBytes, int repeats);

// CRC-32C (the check of every chunk the runtime reads, on its I/O thread) over a `bytes` buffer in
// cache-cold slices of 4 MiB, one thread: GB/s, best of `repeats`. `threeStreams` = the form every read
// uses; false = one stream of the crc32 instruction (the form before, for comparison).
double measureChecksum(size_t bytes, bool threeStreams, int repeats);

}  // namespace zipmoe
