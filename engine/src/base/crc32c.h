// Internal: CRC-32C (Castagnoli), the checksum of every store chunk. Uses the SSE4.2 crc32
// instruction (three interleaved streams) when the CPU has it, a table otherwise.
// Thread-safety: re-entrant. Cost: ~10+ GB/s with SSE4.2.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zipmoe::detail {

uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// The portable table implementation (for tests: both must agree).
uint32_t crc32cPortable(const void* data, size_t size, uint32_t crc = 0);

}  // namespace zipmoe::detail
