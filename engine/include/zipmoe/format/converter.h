// Conversion of an HF checkpoint into a ZipMoE store, and the checks that go with it.
//
// convertCheckpoint streams the checkpoint tensor by tensor (memory use is bounded by the largest
// expert tensor plus a fixed copy buffer, whatever the model's size). It writes experts.bin and
// dense.bin under temporary names, syncs them, renames them, and writes manifest.json last through
// an atomic rename, so an interrupted or failed conversion never leaves a directory that opens as a
// store. Any manifest already in OUT_DIR is removed before the first byte is written.
// Without a codec in the options it first chooses one for this machine (codec_choice.h: a sample of
// the expert tensors decoded by each candidate, a scratch file read on OUT_DIR's filesystem; well
// under a few seconds) and records the choice and its reason in the manifest.
// Thread-safety: one conversion per output directory. Cost: I/O bound plus ~1 ns per weight.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "zipmoe/format/codec_choice.h"
#include "zipmoe/format/exponent_codec.h"

namespace zipmoe {

struct ConvertProgress {
  uint64_t bytesDone = 0;
  uint64_t bytesTotal = 0;
  size_t tensorsDone = 0;
  size_t tensorsTotal = 0;
  std::string currentTensor;
};

struct ConvertOptions {
  // nullopt: measured and chosen for this machine (chooseExponentCodec), recorded as "measured";
  // a codec given here is used as it is and recorded as chosen by "--codec".
  std::optional<CodecSpec> codec;
  int shards = 4;  // K
  std::function<void(const ConvertProgress&)> onProgress;  // called after every tensor
  const std::atomic<bool>* cancel = nullptr;               // checked between tensors and chunks
  std::function<void(const CodecChoice&)> onCodecChosen;   // called once, before the first tensor
};

struct ConvertReport {
  uint64_t expertWeights = 0;
  uint64_t expertBytesBf16 = 0;    // 2 bytes per weight
  uint64_t expertBytesStored = 0;  // E-chunks + SM-chunks, unpadded
  uint64_t denseBytes = 0;
  double seconds = 0;
  CodecChoice codecChoice;  // the codec used, who chose it and why (as in the manifest)
};

// Throws zipmoe::Error (zipmoe::Cancelled when cancelled).
ConvertReport convertCheckpoint(const std::filesystem::path& hfDir, const std::filesystem::path& outDir,
                                const ConvertOptions& options);

struct VerifyReport {
  size_t denseTensors = 0;
  size_t expertTensors = 0;
  uint64_t bytesCompared = 0;
};
// Re-reads every tensor of the store (decompress + merge for experts) and compares it byte for byte
// with the checkpoint. Throws zipmoe::Error naming the first tensor that differs or is missing.
VerifyReport verifyStore(const std::filesystem::path& storeDir, const std::filesystem::path& hfDir,
                         const std::function<void(size_t done, size_t total)>& onProgress = {});

// The compression report of `zipmoe inspect`.
std::string describeStore(const std::filesystem::path& storeDir);

}  // namespace zipmoe
