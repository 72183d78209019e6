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
//
// Contention (profile version 2): on a machine where the model computes on the same cores as the
// decompression workers, each slows the other. measureContention runs L threads decoding the
// store's real E-chunks in a loop (what the runtime's workers do) and times, meanwhile, the model's
// expert FFN (a callback: the FFN needs libtorch, the engine's profiler passes it), one E-chunk's
// decompression and one whole-tensor read. The planner turns these into its contention term
// (zipmoe/plan/pool_planner.h, estimateMakespan). A version-1 file loads with no contention figures (the
// paper's cost model); loadMatchingProfile reports it as not fitting, so that the engine and the
// benches re-measure it.
// Kernels (profile version 3): a profile also names the code it timed (kernelsIdentity: a digest of
// the GEMV kernels, the codecs, the merge, the reads and the build's flags). Costs measured by other
// code do not fit: after an upgrade that makes a kernel faster, the engine re-measures instead of
// planning with the old kernel's speed. A version-2 file names no kernels and does not fit either.
// Thread-safety: free functions. Cost: measureCostProfile reads `samples` chunks of each kind;
// measureContention runs for about (L + 2) × `reps` FFN calls plus `reps` reads.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zipmoe/format/store.h"

namespace zipmoe {

// Operation costs measured inside the runtime's own layers, as the model runs: the time each
// operation took there, contention with the model's compute and the host's read cache included.
// The profile measures each operation alone and cold before any chat; on a small machine the two
// differ by far more than the profile's contention figures say (docs/RUNTIME.md, "Pricing plans with
// observed costs"), so the planner prices its plans with these once it has seen them.
// A mean covers the last kObservedWindow operations at most (a running mean), count says how many.
struct ObservedCost {
  static constexpr uint64_t kObservedWindow = 512;
  double seconds = 0;
  uint64_t count = 0;  // 0: never observed
  void add(double s);
  void merge(const ObservedCost& other);  // as if other's operations had come after ours
};
struct ObservedCosts {
  ObservedCost tensorRead;  // a miss's coalesced read: K E-chunks + SM-chunk of one tensor
  ObservedCost eRead;       // one E-chunk read on its own
  ObservedCost smRead;      // one SM-chunk read on its own
  ObservedCost fullRead;    // one whole BF16 tensor from the checkpoint (raw miss, baseline)
  ObservedCost decompress;  // one E-chunk decoded
  ObservedCost recover;     // one tensor merged
  // Whole layers: measured makespan ÷ the planner's estimate for the layer's hit pattern (with the
  // observed operation costs), for layers with CPU work (decompression or recovery) and for layers
  // that only read (raw or full-tensor misses). Their quotient is the planner's cpuLayerFactor.
  ObservedCost cpuLayer, readLayer;
  void merge(const ObservedCosts& other);
  bool any() const;
};

// Measured on this machine by `zipmoe profile` (see profile.h for how). Seconds per operation on
// one expert tensor (averaged over the tensor kinds), and the expert FFN's time as a + b·tokens.
struct CostProfile {
  double smRead = 0;      // u
  double eRead = 0;       // v (one E-chunk)
  double decompress = 0;  // c (one E-chunk, one core)
  double recover = 0;     // one tensor merged on one core
  double fullRead = 0;    // one whole BF16 tensor (baselines)
  double computeBase = 0, computePerToken = 0;  // expert FFN: a + b·tokens
  double tensorRead = 0;  // one tensor's K E-chunks + SM-chunk in one request (a coalesced miss); 0 = not measured
  // Contention, measured by measureContention (all empty / 0 when not measured: no contention).
  int contentionWorkers = 0;               // L, the busy decoders of the last figure below
  std::vector<double> computeBusy;         // [w], w = 0..L: one expert FFN (1 token) with w decoders busy
  double decompressBusy = 0;               // one E-chunk decoded by one of L workers while the FFN runs
  double fullReadBusy = 0;                 // a whole BF16 tensor read while L decoders are busy
  std::string host;       // machine identity: hostname, CPU model, cores
  std::string storeId;    // the store it was measured on (manifest checksum)
  std::string readMode;   // "direct" or "buffered"
  std::string kernels;    // the code that measured it (kernelsIdentity(); empty before version 3)
  // What runtimes observed on this machine and store in use (saved back by Engine, field
  // "observed"; empty in a fresh profile): a new runtime plans with it from the start.
  ObservedCosts observed;
  double expertCompute(int tokens) const { return computeBase + computePerToken * tokens; }
  bool hasContention() const { return contentionWorkers > 0 && computeBusy.size() == static_cast<size_t>(contentionWorkers) + 1; }
  // Ratios ≥ 1 (1 when not measured): FFN with L busy decoders / alone, decompression with the
  // FFN running / alone, a whole-tensor read with busy decoders / alone.
  double computeSlowdown() const;
  double decompressSlowdown() const;
  double readSlowdown() const;
};

inline constexpr int kCostProfileVersion = 3;

std::string hostIdentity();
// This build's timed code: "code <16 hex digits of a digest>; <build type> build, <compiler>"
// (generated by cmake/kernels_identity.cmake from the files that decide the measured costs).
std::string kernelsIdentity();
std::string storeIdentity(const Store& store);  // "crc32c:XXXXXXXX size:N" of manifest.json
CostProfile measureCostProfile(const Store& store, ReadMode mode, int samples = 24);
// Fills profile's contention figures with `workers` (≥ 1) busy decoder threads. `computeOnce` runs
// one expert FFN for one token and returns its seconds (empty: computeBusy is left empty and the
// decompression is timed against a spinning thread instead). Each figure is the median of `reps`.
// REQUIRES: profile.decompress and profile.fullRead measured (measureCostProfile).
void measureContention(CostProfile& profile, const Store& store, ReadMode mode, int workers,
                       const std::function<double()>& computeOnce, int reps = 9);
// The observed figures by their JSON names ("tensor_read", …, "cpu_layer", "read_layer").
std::vector<std::pair<const char*, ObservedCost*>> observedFigures(ObservedCosts& observed);
std::vector<std::pair<const char*, const ObservedCost*>> observedFigures(const ObservedCosts& observed);
// Throws zipmoe::Error (`what`: the file or option) naming a figure that is not a cost: not finite,
// negative, above 1e4 s, or over more operations than the window.
void checkObserved(const ObservedCosts& observed, const std::string& what);
// Throws zipmoe::Error naming the file and the mismatching field (host, store, read mode, kernels).
void checkProfile(const CostProfile& profile, const Store& store, ReadMode mode, const std::string& what);
void saveCostProfile(const CostProfile& profile, const std::filesystem::path& path);
// The profile saved at `path` when it exists and fits this machine, store and read mode; otherwise
// nullopt, with checkProfile's reason in *whyNot when the file exists but does not fit. Throws for
// a file that is not a valid profile.
std::optional<CostProfile> loadMatchingProfile(const std::filesystem::path& path, const Store& store, ReadMode mode,
                                               std::string* whyNot = nullptr);
CostProfile loadCostProfile(const std::filesystem::path& path);  // throws naming the file and field

}  // namespace zipmoe
