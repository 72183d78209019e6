// Internal: CRC-32C (Castagnoli), the checksum of every store chunk. Uses the SSE4.2 crc32
// instruction (three interleaved streams) when the CPU has it, a table otherwise.
// Thread-safety: re-entrant. Cost: about 3 × the one-stream rate with SSE4.2 on buffers of 24 KiB
// or more (docs/RUNTIME.md, "Chunk checksums at three streams"); the first call builds a 4 KiB table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zipmoe::detail {

uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// One stream of the crc32 instruction (the previous implementation; for tests and the figures).
uint32_t crc32cOneStream(const void* data, size_t size, uint32_t crc = 0);
// The portable table implementation (for tests: both must agree).
uint32_t crc32cPortable(const void* data, size_t size, uint32_t crc = 0);

}  // namespace zipmoe::detail
