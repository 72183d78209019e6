// AMX-BF16 products of prefill (see amx_gemm.h). Tiles 0–3 accumulate up to four 16 × 16 blocks of
// Cᵀ (16 rows of W against 16 rows of x each), tile 4 holds 16 rows × 32 columns of W, tiles 5 and
// 6 alternate as the packed x of the block being multiplied.
#include "kernels/amx_gemm.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/bf16_gemv.h"

#define ZIPMOE_AMX __attribute__((target("amx-tile,amx-bf16")))

namespace zipmoe::kernels {
namespace {

constexpr long kArchReqXcompPerm = 0x1023;  // arch_prctl: ask for an XSAVE feature's state
constexpr long kXfeatureXtiledata = 18;     // the tile data

struct alignas(64) TileConfig {
  uint8_t palette = 1, startRow = 0;
  std::array<uint8_t, 14> reserved{};
  std::array<uint16_t, 16> bytesPerRow{};
  std::array<uint8_t, 16> rowCount{};
};

bool detectAmx() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool bf16 = (d >> 22) & 1u, tile = (d >> 24) & 1u;
  if (!bf16 || !tile) return false;
  // Linux hands a process the 8 KiB tile state only when asked (5.16 and later); an older kernel
  // or a sandbox that refuses leaves AMX off.
  return ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// Tiles 0–6: 16 rows of 64 bytes. A constant in memory: GCC's _tile_loadconfig tells the compiler
// it reads 8 bytes of the configuration, so the stores that build one on the stack may be dropped.
constexpr TileConfig tileConfig() {
  TileConfig config;
  for (size_t t = 0; t < 7; ++t) {
    config.rowCount[t] = 16;
    config.bytesPerRow[t] = 64;
  }
  return config;
}
const TileConfig kTileConfig = tileConfig();

ZIPMOE_AMX void configureTiles() { _tile_loadconfig(&kTileConfig); }

// Accumulates J blocks of Cᵀ (16 rows of W at `a`, row-major with `cols` words a row, against the
// packed x blocks first, first + 1, …) over every column, and stores them to c[j] (16 × 16 fp32 each).
template <int J>
ZIPMOE_AMX void tileBlocks(const uint16_t* a, const uint16_t* packed, size_t cols, size_t first, float (*c)[256]) {
  const size_t steps = cols / 32, blockWords = cols * 16, rowBytes = cols * 2;
  _tile_zero(0);
  if constexpr (J > 1) _tile_zero(1);
  if constexpr (J > 2) _tile_zero(2);
  if constexpr (J > 3) _tile_zero(3);
  const uint16_t* x0 = packed + first * blockWords;
  for (size_t s = 0; s < steps; ++s) {
    _tile_loadd(4, a + s * 32, rowBytes);
    const size_t at = s * 512;  // 16 lines of 32 words per 32 columns
    _tile_loadd(5, x0 + at, 64);
    _tile_dpbf16ps(0, 4, 5);
    if constexpr (J > 1) {
      _tile_loadd(6, x0 + blockWords + at, 64);
      _tile_dpbf16ps(1, 4, 6);
    }
    if constexpr (J > 2) {
      _tile_loadd(5, x0 + 2 * blockWords + at, 64);
      _tile_dpbf16ps(2, 4, 5);
    }
    if constexpr (J > 3) {
      _tile_loadd(6, x0 + 3 * blockWords + at, 64);
      _tile_dpbf16ps(3, 4, 6);
    }
  }
  _tile_stored(0, c[0], 64);
  if constexpr (J > 1) _tile_stored(1, c[1], 64);
  if constexpr (J > 2) _tile_stored(2, c[2], 64);
  if constexpr (J > 3) _tile_stored(3, c[3], 64);
}

ZIPMOE_AMX void releaseTiles() { _tile_release(); }

}  // namespace

bool amxSupported() {
  static const bool yes = detectAmx();
  return yes;
}

bool amxTakes(size_t rows, size_t cols) {
  return amxSupported() && cols % 32 == 0 && rows % 16 == 0 && rows > 0 && cols > 0;
}

std::vector<uint16_t> packX(const uint16_t* x, size_t batch, size_t cols) {
  const size_t blocks = (batch + 15) / 16;
  std::vector<uint16_t> packed(blocks * 16 * cols, 0);
  for (size_t m = 0; m < batch; ++m) {
    uint16_t* block = packed.data() + (m / 16) * 16 * cols;
    const size_t lane = (m % 16) * 2;
    const uint16_t* row = x + m * cols;
    for (size_t i = 0; i < cols / 2; ++i) {
      block[i * 32 + lane] = row[2 * i];
      block[i * 32 + lane + 1] = row[2 * i + 1];
    }
  }
  return packed;
}

void amxProductRows(const uint16_t* words, const RowBlockWords& rowWords, size_t cols, const uint16_t* packed,
                    size_t batch, const float* bias, size_t blockBegin, size_t blockEnd, uint16_t* out, size_t ldo) {
  if (blockBegin >= blockEnd || batch == 0) return;
  thread_local std::vector<uint16_t> scratch;
  if (!words && scratch.size() < 16 * cols) scratch.resize(16 * cols);
  const size_t xBlocks = (batch + 15) / 16;
  alignas(64) float c[4][256];
  configureTiles();
  for (size_t nb = blockBegin; nb < blockEnd; ++nb) {
    const size_t r0 = nb * 16;
    // Words are read in place; a compressed block's words are made in the thread's scratch, in L2.
    const uint16_t* a = words ? words + r0 * cols : scratch.data();
    if (!words) rowWords(r0, scratch.data());
    for (size_t g = 0; g < xBlocks; g += 4) {
      const size_t count = std::min<size_t>(4, xBlocks - g);
      switch (count) {
        case 1: tileBlocks<1>(a, packed, cols, g, c); break;
        case 2: tileBlocks<2>(a, packed, cols, g, c); break;
        case 3: tileBlocks<3>(a, packed, cols, g, c); break;
        default: tileBlocks<4>(a, packed, cols, g, c); break;
      }
      // c[j][n · 16 + i]: row r0 + n of W against row (g + j) · 16 + i of x.
      for (size_t j = 0; j < count; ++j)
        for (size_t i = 0; i < 16; ++i) {
          const size_t m = (g + j) * 16 + i;
          if (m >= batch) break;
          uint16_t* o = out + m * ldo + r0;
          for (size_t n = 0; n < 16; ++n)
            o[n] = floatToBf16(bias ? c[j][n * 16 + i] + bias[r0 + n] : c[j][n * 16 + i]);
        }
    }
  }
  releaseTiles();
}

}  // namespace zipmoe::kernels
