// `zipmoe bench kernels`: this machine's memory read bandwidth (1 thread and every core) and the
// speed of every BF16 matrix-vector kernel — libtorch's at::linear and the project's GEMV at each
// SIMD level — on a model's matrix shapes, each reading its weights from memory as decoding does.
// Decoding is bound by memory bandwidth: the closer a kernel's GB/s comes to the read bandwidth,
// the closer a token comes to its floor, (bytes a token touches) ÷ (bandwidth).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "commands.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/error.h"
#include "bench/kernels/kernel_bench.h"

namespace zipmoe::cli {
namespace {

struct Shape {
  std::string name;
  int64_t rows = 0, cols = 0;
};

// Qwen1.5-MoE-A2.7B: hidden 2048, expert 1408, shared expert 5632, vocabulary 151,936.
const std::vector<Shape> kQwenShapes = {{"attention q/k/v/o 2048x2048", 2048, 2048},
                                        {"expert gate/up 1408x2048", 1408, 2048},
                                        {"expert down 2048x1408", 2048, 1408},
                                        {"shared expert gate/up 5632x2048", 5632, 2048},
                                        {"shared expert down 2048x5632", 2048, 5632},
                                        {"lm head 151936x2048", 151936, 2048}};

std::vector<Shape> parseShapes(const std::string& text) {
  std::vector<Shape> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto x = item.find('x');
    if (x == std::string::npos) throw Error("option --shapes: '" + item + "' is not ROWSxCOLS");
    const long long rows = parseInteger("--shapes", item.substr(0, x)), cols = parseInteger("--shapes", item.substr(x + 1));
    if (rows < 1 || cols < 1 || rows > (1 << 22) || cols > (1 << 20))
      throw Error("option --shapes: '" + item + "' is out of range (1-4194304 rows, 1-1048576 columns)");
    out.push_back({item, rows, cols});
  }
  if (out.empty()) throw Error("option --shapes is empty");
  return out;
}

}  // namespace

int runBenchKernels(const Args& arguments) {
  static const CommandSpec command{
      "zipmoe bench kernels [OPTIONS]",
      "Memory read bandwidth (1 thread, every core) and every BF16 GEMV kernel (libtorch, scalar, avx2,\n"
      "avx512-bf16 where the CPU has them) on a model's matrix shapes: microseconds per product and GB/s of weights.",
      {{"--shapes", "LIST", "ROWSxCOLS,... (default: the Qwen1.5-MoE-A2.7B shapes)"},
       {"--batch", "B", "rows of activations (1-8, default 1)"},
       {"--mb", "N", "bandwidth buffer and GEMV working set in MiB (64-65536, default 1024)"},
       {"--repeat", "R", "bandwidth passes and timed products per kernel ×4 (1-1000, default 10)"},
       {"--threads", "N", "compute threads for the products (0 = every CPU this process may use, default)"},
       {"--huge-pages", "", "the GEMVs' weights in memory advised for huge pages, as the model loads its weights"},
       {"--prefill", "ROWS,...", "also each shape's prefill product at these rows of x: AMX tiles and libtorch"},
       {"--json", "FILE", "also write the figures as JSON"}},
      0, 0, ""};
  const CommandLine line = CommandLine::parse(command, arguments);
  if (line.help()) return printUsage(command);
  const auto shapesText = line.text("--shapes");
  const std::vector<Shape> shapes = shapesText ? parseShapes(*shapesText) : kQwenShapes;
  const int batch = line.integer<int>("--batch", 1, 8, 1);
  const size_t bytes = line.integer<size_t>("--mb", 64, 65536, 1024) << 20;
  const int repeats = line.integer<int>("--repeat", 1, 1000, 10);
  const std::optional<std::string> jsonPath = line.text("--json");
  const int threads = line.integer<int>("--threads", 0, 4096, 0);
  const bool hugePages = line.has("--huge-pages");
  std::vector<int64_t> prefillRows;
  if (const auto text = line.text("--prefill")) {
    std::stringstream ss(*text);
    std::string item;
    while (std::getline(ss, item, ',')) {
      const long long r = parseInteger("--prefill", item);
      if (r < 1 || r > 65536) throw Error("option --prefill: " + item + " rows is out of range (1-65536)");
      prefillRows.push_back(r);
    }
    if (prefillRows.empty()) throw Error("option --prefill is empty");
  }

  nlohmann::ordered_json j;
  j["host"] = hostIdentity();
  j["batch"] = batch;
  j["threads"] = threads;
  j["huge_pages"] = hugePages;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("memory read bandwidth (%.0f MiB buffer, %d passes: best, median, slowest):\n",
              static_cast<double>(bytes) / 1048576.0, repeats);
  for (int t = 1; t <= cores; t = t == cores ? cores + 1 : std::min(cores, t * 2)) {
    const BandwidthFigure b = measureReadBandwidth(bytes, t, repeats);
    std::printf("  %2d thread%s  %6.1f  %6.1f  %6.1f GB/s\n", t, t == 1 ? " " : "s", b.gbPerSecond, b.medianGbPerSecond,
                b.worstGbPerSecond);
    j["bandwidth"].push_back({{"threads", t}, {"gb_per_s", b.gbPerSecond}, {"median_gb_per_s", b.medianGbPerSecond},
                              {"slowest_gb_per_s", b.worstGbPerSecond}});
  }
  if (!prefillRows.empty()) {
    // First, before any other product: libtorch's first call with a shape is what a fresh process pays.
    std::printf("\nprefill products, weights read from memory, all compute threads (us per product: AMX tiles from\n"
                "the words and from the split planes; libtorch's first call with the shape, then its median):\n");
    std::printf("  %-34s %6s %10s %10s %12s %10s\n", "shape", "rows", "tiles", "tiles split", "torch first", "torch");
    for (const Shape& s : shapes) {
      if (s.rows > 65536) continue;  // the LM head: prefill computes it for the last row only
      for (const PrefillFigure& f : measurePrefill(s.rows, s.cols, prefillRows, bytes, repeats)) {
        std::printf("  %-34s %6lld %10.1f %10.1f %12.1f %10.1f\n", s.name.c_str(), static_cast<long long>(f.batch),
                    f.tilesUs, f.tilesSplitUs, f.libtorchFirstUs, f.libtorchUs);
        j["prefill"].push_back({{"shape", s.name}, {"rows", s.rows}, {"cols", s.cols}, {"batch", f.batch},
                                {"tiles_us", f.tilesUs}, {"tiles_split_us", f.tilesSplitUs},
                                {"libtorch_first_us", f.libtorchFirstUs}, {"libtorch_us", f.libtorchUs}});
      }
    }
  }
  std::printf("\nBF16 GEMV, batch %d, weights read from memory%s, %s compute threads (the median product; sust.: all\n"
              "products' bytes ÷ their time):\n",
              batch, hugePages ? " advised for huge pages" : "", threads > 0 ? std::to_string(threads).c_str() : "all");
  std::printf("  %-34s %-18s %12s %9s %11s %10s\n", "shape", "kernel", "us/product", "GB/s", "sust. GB/s",
              "rel. err");
  for (const Shape& s : shapes) {
    nlohmann::ordered_json row{{"shape", s.name}, {"rows", s.rows}, {"cols", s.cols}};
    for (const GemvFigure& f : measureGemv(s.rows, s.cols, batch, bytes, repeats, threads, hugePages)) {
      std::printf("  %-34s %-18s %12.1f %9.1f %11.1f %10.2g\n", s.name.c_str(), f.kernel.c_str(), f.microseconds,
                  f.gbPerSecond, f.sustainedGbPerSecond, f.maxRelativeError);
      row["kernels"].push_back({{"kernel", f.kernel}, {"us", f.microseconds}, {"gb_per_s", f.gbPerSecond},
                                {"sustained_gb_per_s", f.sustainedGbPerSecond},
                                {"max_relative_error", f.maxRelativeError}});
    }
    j["gemv"].push_back(row);
  }
  if (jsonPath) {
    std::ofstream f(*jsonPath);
    f << j.dump(2) << "\n";
    if (!f) throw Error(*jsonPath + ": cannot write");
  }
  return 0;
}

}  // namespace zipmoe::cli
