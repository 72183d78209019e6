// Internal: the one writer of a Hugging Face model directory's JSON files, and the builders of the
// JSON both of the project's model producers share — the synthetic models (synthetic_model.h) and
// the demo model's export after training (train/hf_export.h).
//
// writeHfJsonFiles writes config.json, generation_config.json, tokenizer.json and
// tokenizer_config.json, each next to its final name and renamed into place, so an interrupted
// write leaves the previous complete file or none. byteLevelBpeTokenizer builds the tokenizer.json
// of a GPT-2-style byte-level BPE as the `tokenizers` library writes it; byteLevelSymbol is GPT-2's
// reversible byte → printable-character map its vocabularies are spelled in; mixtralConfig builds a
// MixtralConfig config.json. Thread-safety: free functions. Cost: the files' size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace zipmoe::hf {

struct HfJsonFiles {
  nlohmann::json config;            // config.json
  nlohmann::json generationConfig;  // generation_config.json
  nlohmann::json tokenizer;         // tokenizer.json
  nlohmann::json tokenizerConfig;   // tokenizer_config.json
};

// Writes `value` to PATH.partial, then renames it to PATH. Throws zipmoe::Error naming the file.
void writeJsonFile(const std::filesystem::path& path, const nlohmann::json& value);
// The four JSON files of an HF directory (which must exist).
void writeHfJsonFiles(const std::filesystem::path& dir, const HfJsonFiles& files);

// GPT-2's mapping of a byte to a printable character (UTF-8): printable Latin-1 bytes stand for
// themselves, the other 68 take the code points 256, 257, … in byte order ("Ġ" for a space).
const std::string& byteLevelSymbol(uint8_t byte);

struct ByteLevelBpeJson {
  nlohmann::json vocab = nlohmann::json::object();  // token spelling → id
  nlohmann::json merges = nlohmann::json::array();  // "left right", in rank order
  nlohmann::json addedTokens = nlohmann::json::array();  // {id, content, special, ...}
  bool nfcNormalizer = false;  // Qwen/OLMoE/DeepSeek-style tokenizers normalise to NFC
  bool trimOffsets = true;     // the ByteLevel components' trim_offsets
};
nlohmann::json byteLevelBpeTokenizer(const ByteLevelBpeJson& spec);
// An added_tokens entry: special, not normalised, no strip.
nlohmann::json addedToken(int64_t id, const std::string& content, bool normalized = false);

struct MixtralShape {
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0, kvHeads = 0, experts = 0, topK = 0;
  int64_t maxPositions = 0;
  std::optional<int64_t> headDim;  // written only when set (HF derives hidden / heads otherwise)
  double ropeTheta = 1e6, rmsEps = 1e-5, initStd = 0.02, auxLossCoef = 0.02;
  int64_t bosId = 1, eosId = 2;
  std::optional<int64_t> padId;
};
// MixtralForCausalLM's config.json (BF16, no sliding window, untied embeddings).
nlohmann::json mixtralConfig(const MixtralShape& shape);

}  // namespace zipmoe::hf
