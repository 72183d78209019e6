// How many queries attention scores at once (internal, no libtorch): the forward's attention scores of
// a step are at most [heads, kAttentionQueryChunk, T] at a time, whatever the step's length — the
// bound serving's memory split reserves (serve/memory_split.h) and attention.cpp keeps.
#pragma once

#include <cstdint>

namespace zipmoe {

inline constexpr int64_t kAttentionQueryChunk = 32;

}  // namespace zipmoe
