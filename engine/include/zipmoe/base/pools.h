// Pools — the four cache pools of the ZipMoE expert runtime, named once for the whole product.
//
// A routed expert is held in at most one pool: F keeps its BF16 tensors (Full), C its exponent
// chunks and sign-mantissa chunk (Compressed), S only its sign-mantissa chunks, E only its exponent
// chunks. They are ordered F ≺ C ≺ S ≺ E: dispatch gives the most frequently used experts to the
// first enabled pool, the next ones to the second, and so on (docs/ARCHITECTURE.md, paper §3.4). A PoolMask
// enables a subset, bit p for pool p; the user spells a subset with the pools' letters ("FCSE",
// "FS") on the command line, in the app and in saved plans. Thread-safety: constants and pure
// functions. Cost: none.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace zipmoe {

enum class Pool : int { F = 0, C = 1, S = 2, E = 3 };
inline constexpr int kNumPools = 4;
inline constexpr std::array<Pool, kNumPools> kPools{Pool::F, Pool::C, Pool::S, Pool::E};

using PoolMask = unsigned;  // bit p set = pool p enabled
inline constexpr PoolMask kAllPools = 0xF;

constexpr int poolIndex(Pool p) { return static_cast<int>(p); }
constexpr PoolMask poolBit(Pool p) { return 1u << poolIndex(p); }
constexpr bool hasPool(PoolMask mask, Pool p) { return (mask & poolBit(p)) != 0; }

// What an expert in the pool keeps in memory.
constexpr bool keepsFullTensors(Pool p) { return p == Pool::F; }
constexpr bool keepsExponents(Pool p) { return p == Pool::C || p == Pool::E; }
constexpr bool keepsSignMantissa(Pool p) { return p == Pool::C || p == Pool::S; }

char poolLetter(Pool p);              // 'F', 'C', 'S', 'E'
const char* poolDescription(Pool p);  // "full BF16 tensors", "compressed (E + SM)", ...
// "FCSE" for kAllPools; the letters of the enabled pools in pool order.
std::string poolLetters(PoolMask mask);
// Parses letters of F, C, S, E (any order and case, no repeats, at least one). Throws zipmoe::Error
// naming `what` (e.g. "--pools") and the text.
PoolMask parsePoolMask(std::string_view letters, std::string_view what);

}  // namespace zipmoe
