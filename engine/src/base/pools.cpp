// Pool names and parsing (see zipmoe/base/pools.h).
#include "zipmoe/base/pools.h"

#include <cctype>

#include "zipmoe/base/error.h"

namespace zipmoe {

char poolLetter(Pool p) { return "FCSE"[poolIndex(p)]; }

const char* poolDescription(Pool p) {
  switch (p) {
    case Pool::F: return "full BF16 tensors";
    case Pool::C: return "compressed (exponent + sign-mantissa chunks)";
    case Pool::S: return "sign-mantissa chunks";
    case Pool::E: return "exponent chunks";
  }
  return "?";
}

std::string poolLetters(PoolMask mask) {
  std::string out;
  for (Pool p : kPools)
    if (hasPool(mask, p)) out += poolLetter(p);
  return out;
}

PoolMask parsePoolMask(std::string_view letters, std::string_view what) {
  const auto fail = [&](const std::string& why) {
    throw Error(std::string(what) + " '" + std::string(letters) + "': " + why + " (letters of F, C, S, E, e.g. FCSE or FS)");
  };
  if (letters.empty()) fail("no pool");
  PoolMask mask = 0;
  for (char c : letters) {
    const char upper = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const auto at = std::string_view("FCSE").find(upper);
    if (at == std::string_view::npos) fail(std::string("'") + c + "' is not a pool");
    const PoolMask bit = 1u << at;
    if (mask & bit) fail(std::string("pool ") + upper + " is named twice");
    mask |= bit;
  }
  return mask;
}

}  // namespace zipmoe
