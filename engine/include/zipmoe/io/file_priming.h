// File priming — reading whole files once, in the way the runtime will read them, before a
// measurement: a benchmark run right after another must find the machine's caches (the page cache,
// and under O_DIRECT the virtual disk's host cache) holding what the measured system reads, not
// what the previous system read. docs/BENCHMARKS.md tells why it matters on a VM.
// Thread-safety: free function. Cost: one sequential read of the file, 8 MiB at a time.
#pragma once

#include <cstdint>
#include <filesystem>

#include "zipmoe/format/store.h"

namespace zipmoe {

// Reads the whole file (O_DIRECT in aligned 8 MiB blocks, or through the page cache); returns its
// size. Throws zipmoe::Error naming the file and the offset.
uint64_t primeFile(const std::filesystem::path& path, ReadMode mode);

}  // namespace zipmoe
