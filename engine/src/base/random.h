// Internal: small deterministic generators, the same on every platform (std's distributions are
// not): splitmix64 (Steele, Lea, Flood) for seeding and xoshiro256** (Blackman, Vigna) for streams.
// Thread-safety: pure functions on caller-owned state. Cost: a few cycles per number.
#pragma once

#include <bit>
#include <cstdint>

namespace zipmoe::detail {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Fills a xoshiro256** state with successive splitmix64 outputs of `state`.
inline void seedXoshiro256(uint64_t (&s)[4], uint64_t state) {
  for (uint64_t& word : s) word = splitmix64(state);
}

inline uint64_t xoshiro256StarStar(uint64_t (&s)[4]) {
  const uint64_t result = std::rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = std::rotl(s[3], 45);
  return result;
}

}  // namespace zipmoe::detail
