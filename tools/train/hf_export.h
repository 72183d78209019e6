// Export of the demo model as an ordinary Hugging Face Mixtral directory, and reading it back.
//
// writeHfDirectory() writes config.json (MixtralConfig fields), model.safetensors (every tensor BF16,
// HF names, in the order given), generation_config.json, tokenizer.json and tokenizer_config.json
// (bos/eos/pad `<|endoftext|>` and a chat template that renders turns as play speeches). Files are
// written next to their final name and renamed, so an interrupted export leaves the previous complete
// files or none. readBf16Tensors() reads every tensor of an exported model.safetensors.
// Thread-safety: free functions, no shared state. Cost: one sequential write/read of the weights.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "byte_level_bpe.h"

namespace zipmoe::train {

struct Bf16Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<uint16_t> bits;  // BF16 bit patterns, row-major
};

struct MixtralHyper {
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0, kvHeads = 0, experts = 0, topK = 0;
  int64_t maxPositions = 0;
  double ropeTheta = 10000.0, rmsEps = 1e-5, initStd = 0.02, auxLossCoef = 0.0;
};

// The HF tensor names of a Mixtral model in export order, with their shapes.
std::vector<std::pair<std::string, std::vector<int64_t>>> mixtralTensorTable(const MixtralHyper& h);

// Throws zipmoe::Error naming the file on any I/O failure, or when `tensors` differs from
// mixtralTensorTable(h) in names or shapes.
void writeHfDirectory(const std::filesystem::path& dir, const MixtralHyper& h, const std::vector<Bf16Tensor>& tensors,
                      const ByteLevelBpe& bpe);

// Throws zipmoe::Error when the file is missing/invalid or a tensor is not BF16.
std::vector<Bf16Tensor> readBf16Tensors(const std::filesystem::path& safetensorsFile);

// The chat template written into tokenizer_config.json.
const char* demoChatTemplate();

}  // namespace zipmoe::train
