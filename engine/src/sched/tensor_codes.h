// Internal: one expert tensor's E-chunks indexed for reading its nibble codes in place
// (zipmoe/format/nibble_shard.h), as a C member's buffer holds them: the chunks one after another, each
// padded to its ChunkRef::paddedSize, and each chunk's escape positions written into its own padding.
// Used for a C member the runtime keeps (experts/zipmoe_strategy.cpp, at its first in-place hit or its
// warm start) and for a miss a worker indexes instead of decoding (sched/executor_operations.cpp).
// Thread-safety: re-entrant; writes only into `base`. Cost: one pass over the codes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "zipmoe/format/nibble_shard.h"
#include "zipmoe/format/store.h"

namespace zipmoe::sched {

// The shards of tensor `te` whose E-chunks are at base[0, bytes), each with its rows set; nullopt when
// the tensor cannot be read in place (not 2-D with an even number of columns, a shard that does not
// start and end on a row, a chunk in raw or run mode, escapes that do not fit in a chunk's padding, or
// a buffer shorter than the chunks). Throws zipmoe::Error naming the chunk (by its shard index, after
// `what`) when a chunk is malformed.
std::optional<std::vector<NibbleShard>> indexTensorCodes(const ExpertTensorEntry& te, uint8_t* base, size_t bytes,
                                                         const std::string& what);

}  // namespace zipmoe::sched
