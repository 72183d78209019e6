// The HF directory writer and its shared JSON builders (see hf_directory.h).
#include "hf/hf_directory.h"

#include <array>
#include <cerrno>
#include <fstream>
#include <system_error>

#include "zipmoe/base/error.h"

namespace zipmoe::hf {

void writeJsonFile(const std::filesystem::path& path, const nlohmann::json& value) {
  const std::filesystem::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(systemErrorMessage("cannot create " + partial.string(), errno));
    out << value.dump(2) << '\n';
    if (!out.flush()) throw Error(systemErrorMessage("cannot write " + partial.string(), errno));
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) throw Error("cannot rename " + partial.string() + " to " + path.string() + ": " + ec.message());
}

void writeHfJsonFiles(const std::filesystem::path& dir, const HfJsonFiles& files) {
  writeJsonFile(dir / "config.json", files.config);
  writeJsonFile(dir / "generation_config.json", files.generationConfig);
  writeJsonFile(dir / "tokenizer.json", files.tokenizer);
  writeJsonFile(dir / "tokenizer_config.json", files.tokenizerConfig);
}

const std::string& byteLevelSymbol(uint8_t byte) {
  static const std::array<std::string, 256> kSymbols = [] {
    std::array<std::string, 256> out;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? b : next++;
      std::string utf8;
      if (cp < 0x80) {
        utf8.push_back(static_cast<char>(cp));
      } else {  // every code point here is below 0x800
        utf8.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        utf8.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      out[b] = utf8;
    }
    return out;
  }();
  return kSymbols[byte];
}

nlohmann::json addedToken(int64_t id, const std::string& content, bool normalized) {
  return {{"id", id},        {"content", content},       {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", normalized}, {"special", true}};
}

nlohmann::json byteLevelBpeTokenizer(const ByteLevelBpeJson& spec) {
  const nlohmann::json byteLevel = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", spec.trimOffsets}, {"use_regex", true}};
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", spec.addedTokens},
      {"normalizer", spec.nfcNormalizer ? nlohmann::json{{"type", "NFC"}} : nlohmann::json()},
      {"pre_tokenizer", byteLevel},
      {"post_processor", byteLevel},
      {"decoder", byteLevel},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", spec.vocab},
        {"merges", spec.merges}}},
  };
}

nlohmann::json mixtralConfig(const MixtralShape& s) {
  nlohmann::json config = {
      {"architectures", {"MixtralForCausalLM"}},
      {"model_type", "mixtral"},
      {"attention_dropout", 0.0},
      {"bos_token_id", s.bosId},
      {"eos_token_id", s.eosId},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initializer_range", s.initStd},
      {"intermediate_size", s.intermediate},  // Mixtral's experts use intermediate_size
      {"max_position_embeddings", s.maxPositions},
      {"num_attention_heads", s.heads},
      {"num_experts_per_tok", s.topK},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kvHeads},
      {"num_local_experts", s.experts},
      {"output_router_logits", false},
      {"rms_norm_eps", s.rmsEps},
      {"rope_theta", s.ropeTheta},
      {"router_aux_loss_coef", s.auxLossCoef},
      {"router_jitter_noise", 0.0},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"vocab_size", s.vocab},
  };
  if (s.headDim) config["head_dim"] = *s.headDim;
  if (s.padId) config["pad_token_id"] = *s.padId;
  return config;
}

}  // namespace zipmoe::hf
