// fillGaussianBf16: exact samples of round-to-nearest-even-BF16(N(0, σ²)).
//
// Why exact rather than "draw a float, round it": the store's compression ratio depends on the
// distribution of BF16 exponents, so synthetic models must have precisely the exponent statistics that
// real Gaussian-like weights have, and generating multi-GB models must cost ~1 ns per weight.
//
// Method. Every non-negative finite BF16 magnitude m (bit patterns 0x0000..0x7F7F) receives the
// probability that |x| rounds to it, x ~ N(0, σ²): the mass of the interval between the midpoints to
// its neighbours, computed from differences of erfc (accurate in the far tail, where 1 - erf would
// cancel to zero). The sign is an independent fair bit, which is exactly how rounding treats negative
// values (including -0 for tiny negatives). The masses become integer weights summing to 2^63 and a
// Walker/Vose alias table over 2^15 slots (the index *is* the magnitude's bit pattern; slots
// 0x7F80.. for inf/NaN have weight 0) with 48-bit acceptance thresholds. One 64-bit draw then gives
// the slot (15 bits), the sign (1 bit) and the accept test (48 bits): the sampled distribution equals
// the target up to the rounding of each mass to a multiple of 2^-63.
//
// Tables are built once per σ (a few ms) and cached for the process; the cache is mutex-protected,
// sampling itself is lock-free. The generator is xoshiro256** seeded by splitmix64 from
// (seed, streamIndex), so independent streams can fill a tensor's blocks in any order or in parallel
// and still produce the same bytes.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <string>
#include <vector>

#include "base/random.h"
#include "zipmoe/base/error.h"
#include "tools/synthetic/synthetic_model.h"

namespace zipmoe {
namespace {

constexpr int kIndexBits = 15;                    // one slot per non-negative BF16 bit pattern
constexpr size_t kSlots = size_t{1} << kIndexBits;
constexpr int kThresholdBits = 48;                // 64 - 15 index bits - 1 sign bit
constexpr uint64_t kSlotCapacity = uint64_t{1} << kThresholdBits;
constexpr uint16_t kLargestFinite = 0x7F7F;

double bf16ToDouble(uint16_t bits) {
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
}

// P(|x| rounds to each magnitude), as integers summing to exactly 2^63.
std::vector<uint64_t> magnitudeWeights(double sigma) {
  const double scale = 1.0 / (sigma * std::numbers::sqrt2);
  // Upper edge of magnitude m's rounding interval: the midpoint to m+1 (for the largest finite value,
  // everything above rounds to infinity, whose mass is negligible for any usable σ, so it is dropped).
  auto upperTail = [&](uint16_t m) {  // P(|x| > upper edge of m) = erfc(edge / (σ√2))
    if (m >= kLargestFinite) return 0.0;
    const double edge = 0.5 * (bf16ToDouble(m) + bf16ToDouble(static_cast<uint16_t>(m + 1)));
    return std::erfc(edge * scale);
  };
  std::vector<double> mass(kSlots, 0.0);
  double lowerTail = 1.0;  // P(|x| >= 0)
  double total = 0.0;
  for (uint16_t m = 0; m <= kLargestFinite; ++m) {
    const double upper = upperTail(m);
    mass[m] = std::max(0.0, lowerTail - upper);
    total += mass[m];
    lowerTail = upper;
  }
  // Near zero, erfc differences of values close to 1 lose relative accuracy; erf differences do not.
  // Switch to erf wherever the interval lies below σ (both forms agree to ~1e-16 elsewhere).
  double lowerEdge = 0.0;
  for (uint16_t m = 0; m < kLargestFinite; ++m) {
    const double upperEdge = 0.5 * (bf16ToDouble(m) + bf16ToDouble(static_cast<uint16_t>(m + 1)));
    if (upperEdge > sigma) break;
    total -= mass[m];
    mass[m] = std::erf(upperEdge * scale) - std::erf(lowerEdge * scale);
    total += mass[m];
    lowerEdge = upperEdge;
  }

  constexpr double kTotalWeight = 9223372036854775808.0;  // 2^63
  std::vector<uint64_t> weights(kSlots, 0);
  uint64_t assigned = 0;
  size_t largest = 0;
  for (size_t m = 0; m < kSlots; ++m) {
    // Halved before llround (whose range ends just below 2^63) and doubled in unsigned arithmetic.
    weights[m] = static_cast<uint64_t>(std::llround(mass[m] / total * kTotalWeight * 0.5)) * 2;
    assigned += weights[m];
    if (weights[m] > weights[largest]) largest = m;
  }
  // Give the rounding residue to the most probable magnitude, where it is relatively negligible.
  const uint64_t target = uint64_t{1} << 63;
  weights[largest] += target - assigned;  // unsigned wrap-around handles a negative residue
  return weights;
}

// One slot: acceptance threshold (≤ 2^48, 49 bits) << 15 | alias magnitude (15 bits).
class AliasTable {
 public:
  explicit AliasTable(double sigma) : slots_(kSlots) {
    const std::vector<uint64_t> weights = magnitudeWeights(sigma);
    // Vose's algorithm on integers: each slot holds capacity 2^48; the total is 2^63 = 2^15 · 2^48,
    // so the pairing closes exactly with no floating-point leftovers.
    std::vector<uint64_t> remaining = weights;
    std::vector<uint32_t> small, large;
    for (uint32_t i = 0; i < kSlots; ++i) (remaining[i] < kSlotCapacity ? small : large).push_back(i);
    while (!small.empty() && !large.empty()) {
      const uint32_t s = small.back();
      small.pop_back();
      const uint32_t l = large.back();
      slots_[s] = pack(remaining[s], l);
      remaining[l] -= kSlotCapacity - remaining[s];
      if (remaining[l] < kSlotCapacity) {
        large.pop_back();
        small.push_back(l);
      }
    }
    // Whatever is left has exactly full capacity (integer arithmetic leaves no drift).
    for (uint32_t i : large) slots_[i] = pack(kSlotCapacity, i);
    for (uint32_t i : small) slots_[i] = pack(kSlotCapacity, i);
  }

  uint16_t sample(uint64_t draw) const {
    const uint64_t slot = draw >> (64 - kIndexBits);
    const uint64_t entry = slots_[slot];
    const uint64_t accept = draw & (kSlotCapacity - 1);
    const uint64_t magnitude = accept < (entry >> kIndexBits) ? slot : (entry & (kSlots - 1));
    const uint64_t sign = (draw >> kThresholdBits) & 1;
    return static_cast<uint16_t>(magnitude | (sign << 15));
  }

 private:
  static uint64_t pack(uint64_t threshold, uint32_t alias) { return (threshold << kIndexBits) | alias; }
  std::vector<uint64_t> slots_;
};

std::shared_ptr<const AliasTable> tableFor(double sigma) {
  static std::mutex mutex;
  static std::map<double, std::shared_ptr<const AliasTable>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& entry = cache[sigma];
  if (!entry) entry = std::make_shared<const AliasTable>(sigma);
  return entry;
}

class Xoshiro256StarStar {
 public:
  Xoshiro256StarStar(uint64_t seed, uint64_t streamIndex) {
    // Mix the stream index through its own splitmix step first so that (seed, stream) pairs that
    // differ in either component start from unrelated states.
    uint64_t streamState = streamIndex;
    detail::seedXoshiro256(s_, seed ^ detail::splitmix64(streamState));
  }
  uint64_t next() { return detail::xoshiro256StarStar(s_); }

 private:
  uint64_t s_[4];
};

}  // namespace

void fillGaussianBf16(uint16_t* dst, size_t n, double sigma, uint64_t seed, uint64_t streamIndex) {
  // σ must leave the distribution inside BF16's finite range and above its subnormals' resolution.
  if (!(sigma > 1e-30 && sigma < 1e30))
    throw Error("fillGaussianBf16: sigma must be a finite positive number in (1e-30, 1e30), got " +
                std::to_string(sigma));
  const std::shared_ptr<const AliasTable> table = tableFor(sigma);
  Xoshiro256StarStar rng(seed, streamIndex);
  for (size_t i = 0; i < n; ++i) dst[i] = table->sample(rng.next());
}

}  // namespace zipmoe
