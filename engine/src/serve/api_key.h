// The API key check every door of the HTTP server shares (openai_server.cpp, anthropic_routes.cpp).
// Thread-safety: pure. Cost: O(the key), in constant time for a key of the expected length.
#pragma once

#include <string>

namespace zipmoe::serve {

// Whether the presented key `a` equals the server's key `b`, in time that depends on b's length only.
inline bool sameKey(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < b.size(); ++i)
    diff |= static_cast<unsigned>(static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(b[i]));
  return diff == 0;
}

}  // namespace zipmoe::serve
