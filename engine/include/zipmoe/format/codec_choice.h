// Choosing the exponent codec for this machine: a pure decision from measured numbers, and the short
// measurement on real data that produces them (`zipmoe convert` without --codec, and the app's
// automatic conversion).
//
// The rule (chooseExponentCodec). For each candidate codec c let r_c be its stored bytes over the BF16
// bytes of an expert (E-chunks + the raw SM-chunk), d_c its decode speed in BF16 bytes recovered per
// second on one core, D the disk's sequential O_DIRECT read speed and L the cores. Per BF16 byte:
//   miss(c) = max(r_c / D, 1 / (d_c · L))   the I/O thread reads while the L workers decode, so the
//                                            slower of the two bounds a miss;
//   hit(c)  = 1 / (d_c · L), but 0 for nibble a C-pool hit is decoded on the same cores that run the
//                                            experts' products, except a nibble hit, whose 4-bit codes
//                                            the GEMV kernels read in place (no decompression worker);
//   cost(c) = miss(c) + hit(c)               one miss and one C-pool hit: the mix the runtime will see
//                                            depends on a memory budget not known at conversion time,
//                                            so both count equally.
// The cheapest cost wins; within 1 % the smaller store wins (fewer bytes on disk and in the pools).
// So few cores and a fast disk favour nibble (decoding is the long pole, and its hits cost nothing),
// many cores and a slow disk favour huffman8 (reading is the long pole, and it stores the fewest bytes).
//
// Thread-safety: both functions are reentrant. Cost: chooseExponentCodec is arithmetic;
// measureCodecs compresses the sample once per candidate, decodes it for ~30 ms per candidate and
// writes and reads a scratch file of at most 32 MiB for at most ~2 s (about 0.5 s on an SSD).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "zipmoe/format/exponent_codec.h"

namespace zipmoe {

struct CodecMeasurement {
  CodecSpec codec;
  double decodeBytesPerSecondPerCore = 0;  // BF16 bytes recovered per second (2 per exponent), one core
  double storedRatio = 0;                  // (E bytes + SM bytes) / BF16 bytes, padding left out
};

struct CodecMeasurements {
  std::vector<CodecMeasurement> codecs;  // the candidates; empty = nothing to choose from
  double diskReadBytesPerSecond = 0;     // sequential reads of a file on the store's filesystem
  bool diskReadDirect = true;            // false: the filesystem refused O_DIRECT; the page cache was timed
  int cores = 1;                         // L: the CPUs this process may use
  uint64_t sampleWeights = 0;            // exponents each codec was timed on
};

// The candidates measureCodecs times: huffman8, nibble and zstd at its default level.
std::vector<CodecSpec> codecChoiceCandidates();

// Who chose: measured (chooseExponentCodec) or the caller (`zipmoe convert --codec`, ConvertOptions).
enum class CodecChosenBy : uint8_t { Measured, Option };
const char* codecChosenByName(CodecChosenBy by);  // "measured", "--codec"

struct CodecChoice {
  CodecSpec chosen;
  CodecChosenBy by = CodecChosenBy::Measured;
  std::string reason;  // one sentence with the numbers, for the manifest and `zipmoe inspect`
  std::optional<CodecMeasurements> measurements;  // what the choice was made from (Measured only)
};

// Modelled seconds per BF16 byte of one miss and one C-pool hit (the rule above).
struct CodecCost {
  double missSecondsPerByte = 0;
  double hitSecondsPerByte = 0;
  double total() const { return missSecondsPerByte + hitSecondsPerByte; }
};
// Throws zipmoe::Error if a speed or ratio is not positive and finite, or cores < 1.
CodecCost codecCost(const CodecMeasurement& codec, double diskReadBytesPerSecond, int cores);

// The decision from measured numbers; reason names every candidate's cost and the inputs.
// Throws zipmoe::Error when m.codecs is empty or holds a number codecCost rejects.
CodecChoice chooseExponentCodec(const CodecMeasurements& m);

// Measures the candidates on `exponentPlanes` (exponent bytes of real expert tensors, e.g. one shard
// each, as bf16::split gives them: each is compressed and decoded as one E-chunk) and the read speed of
// `storeDir`'s filesystem: a scratch file written there (O_DIRECT where the filesystem takes it),
// read back with O_DIRECT and removed, also when this throws. `cores` < 1 means the CPUs this process
// may use. Throws zipmoe::Error (naming the path) if the scratch file cannot be written or read, or
// if the sample is empty.
CodecMeasurements measureCodecs(const std::vector<std::vector<uint8_t>>& exponentPlanes,
                                const std::filesystem::path& storeDir, int cores = 0);

// The CPUs this process may use (sched_getaffinity), at least 1.
int usableCores();

}  // namespace zipmoe
