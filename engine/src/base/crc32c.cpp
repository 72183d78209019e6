#include "base/crc32c.h"

#include <array>
#include <cstring>
#include <nmmintrin.h>

namespace zipmoe::detail {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> makeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kTable = makeTable();

// The CRC register (no pre/post inversion) is linear over GF(2) in the register and the data:
// R(r, A‖B) = Z_|B|(R(r, A)) ⊕ R(0, B), where Z_n(x) = R(x, n zero bytes) is itself linear in x, a
// 32 × 32 bit matrix, kept as four 256-entry tables. So three streams of kLane bytes each run
// independently — the crc32 instruction's latency is three times its issue interval — and are
// joined with two applications of Z_kLane: R(r, A‖B‖C) = Z(Z(R(r, A)) ⊕ R(0, B)) ⊕ R(0, C).
constexpr size_t kLane = 8192;

struct ZeroShift {
  std::array<std::array<uint32_t, 256>, 4> table{};
  uint32_t operator()(uint32_t x) const {
    return table[0][x & 0xFF] ^ table[1][(x >> 8) & 0xFF] ^ table[2][(x >> 16) & 0xFF] ^ table[3][x >> 24];
  }
};

__attribute__((target("sse4.2"))) uint32_t afterZeros(uint32_t x, size_t bytes) {
  uint64_t c = x;
  for (size_t i = 0; i < bytes; i += 8) c = _mm_crc32_u64(c, 0);
  return static_cast<uint32_t>(c);
}

const ZeroShift& laneShift() {
  static const ZeroShift shift = [] {
    ZeroShift s;
    std::array<uint32_t, 32> basis{};
    for (int bit = 0; bit < 32; ++bit) basis[static_cast<size_t>(bit)] = afterZeros(uint32_t{1} << bit, kLane);
    for (size_t byte = 0; byte < 4; ++byte)
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t z = 0;
        for (int bit = 0; bit < 8; ++bit)
          if (v & (1u << bit)) z ^= basis[byte * 8 + static_cast<size_t>(bit)];
        s.table[byte][v] = z;
      }
    return s;
  }();
  return shift;
}

__attribute__((target("sse4.2"))) uint32_t crc32cSerial(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = static_cast<uint32_t>(~crc);
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  while (n-- > 0) c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
}

__attribute__((target("sse4.2"))) uint32_t crc32cHardware(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = static_cast<uint32_t>(~crc);
  if (n >= 3 * kLane) {
    const ZeroShift& shift = laneShift();
    for (; n >= 3 * kLane; n -= 3 * kLane, p += 3 * kLane) {
      uint64_t a = c, b = 0, d = 0;
      for (size_t i = 0; i < kLane; i += 8) {
        uint64_t va, vb, vd;
        std::memcpy(&va, p + i, 8);
        std::memcpy(&vb, p + kLane + i, 8);
        std::memcpy(&vd, p + 2 * kLane + i, 8);
        a = _mm_crc32_u64(a, va);
        b = _mm_crc32_u64(b, vb);
        d = _mm_crc32_u64(d, vd);
      }
      c = shift(shift(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^ static_cast<uint32_t>(d);
    }
  }
  return crc32cSerial(p, n, ~static_cast<uint32_t>(c));
}

bool hasSse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}

}  // namespace

uint32_t crc32cOneStream(const void* data, size_t size, uint32_t crc) {
  return hasSse42() ? crc32cSerial(static_cast<const uint8_t*>(data), size, crc) : crc32cPortable(data, size, crc);
}

uint32_t crc32cPortable(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (size_t i = 0; i < size; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  return hasSse42() ? crc32cHardware(static_cast<const uint8_t*>(data), size, crc) : crc32cPortable(data, size, crc);
}

}  // namespace zipmoe::detail
