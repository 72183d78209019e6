// CostProfile — the measured costs that the planner and the scheduler use (never constants).
//
// measureCostProfile times, on this machine and this store, the operations of one expert tensor:
// reading an SM-chunk (u) and an E-chunk (v) with the given read mode, decompressing an E-chunk (c)
// and merging a tensor (recovery) on one core, and reading a whole BF16 tensor's worth of bytes (the
// baselines' unit). Reads go to chunks spread over the store, with O_DIRECT by default, so the page
// cache does not hide them. The expert FFN's time (a + b·tokens) needs libtorch and is measured by
// the engine's profiler (zipmoe profile) which fills computeBase / computePerToken.
// A profile names the machine (host name, CPU model, cores) and the store (checksum of its manifest)
// it was measured on; checkProfile rejects one from elsewhere with a message naming both.
// Thread-safety: free functions. Cost: measureCostProfile reads `samples` chunks of each kind.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "zipmoe/store.h"

namespace zipmoe {

// Measured on this machine by `zipmoe profile` (see profile.h for how). Seconds per operation on
// one expert tensor (averaged over the tensor kinds), and the expert FFN's time as a + b·tokens.
struct CostProfile {
  double smRead = 0;      // u
  double eRead = 0;       // v (one E-chunk)
  double decompress = 0;  // c (one E-chunk, one core)
  double recover = 0;     // one tensor merged on one core
  double fullRead = 0;    // one whole BF16 tensor (baselines)
  double computeBase = 0, computePerToken = 0;  // expert FFN: a + b·tokens
  std::string host;       // machine identity: hostname, CPU model, cores
  std::string storeId;    // the store it was measured on (manifest checksum)
  std::string readMode;   // "direct" or "buffered"
  double expertCompute(int tokens) const { return computeBase + computePerToken * tokens; }
};

std::string hostIdentity();
std::string storeIdentity(const Store& store);  // "crc32c:XXXXXXXX size:N" of manifest.json
CostProfile measureCostProfile(const Store& store, ReadMode mode, int samples = 24);
// Throws zipmoe::Error naming the file and the mismatching field (host, store, read mode).
void checkProfile(const CostProfile& profile, const Store& store, ReadMode mode, const std::string& what);
void saveCostProfile(const CostProfile& profile, const std::filesystem::path& path);
// The profile saved at `path` when it exists and fits this machine, store and read mode; otherwise
// nullopt, with checkProfile's reason in *whyNot when the file exists but does not fit. Throws for
// a file that is not a valid profile.
std::optional<CostProfile> loadMatchingProfile(const std::filesystem::path& path, const Store& store, ReadMode mode,
                                               std::string* whyNot = nullptr);
CostProfile loadCostProfile(const std::filesystem::path& path);  // throws naming the file and field

}  // namespace zipmoe
