// Writing and reading the demo model's Hugging Face directory. See hf_export.h.
// Thread-safety: no shared state. Cost: one sequential pass over the weights.
#include "hf_export.h"

#include <nlohmann/json.hpp>

#include "hf/hf_directory.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/safetensors.h"

namespace zipmoe::train {

const char* demoChatTemplate() {
  // The model knows only play text: the user speaks as ROMEO, the model answers as JULIET.
  return "{{ bos_token }}{% for message in messages %}"
         "{% if message['role'] == 'user' %}{{ 'ROMEO:\\n' + message['content'] | trim + '\\n\\n' }}"
         "{% elif message['role'] == 'assistant' %}{{ 'JULIET:\\n' + message['content'] | trim + '\\n\\n' }}"
         "{% else %}{{ message['content'] | trim + '\\n\\n' }}{% endif %}"
         "{% endfor %}{% if add_generation_prompt %}{{ 'JULIET:\\n' }}{% endif %}";
}

std::vector<std::pair<std::string, std::vector<int64_t>>> mixtralTensorTable(const MixtralHyper& h) {
  const int64_t headDim = h.hidden / h.heads;
  std::vector<std::pair<std::string, std::vector<int64_t>>> table;
  table.push_back({"model.embed_tokens.weight", {h.vocab, h.hidden}});
  for (int64_t i = 0; i < h.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    table.push_back({p + "input_layernorm.weight", {h.hidden}});
    table.push_back({p + "self_attn.q_proj.weight", {h.heads * headDim, h.hidden}});
    table.push_back({p + "self_attn.k_proj.weight", {h.kvHeads * headDim, h.hidden}});
    table.push_back({p + "self_attn.v_proj.weight", {h.kvHeads * headDim, h.hidden}});
    table.push_back({p + "self_attn.o_proj.weight", {h.hidden, h.heads * headDim}});
    table.push_back({p + "post_attention_layernorm.weight", {h.hidden}});
    table.push_back({p + "block_sparse_moe.gate.weight", {h.experts, h.hidden}});
    for (int64_t e = 0; e < h.experts; ++e) {
      const std::string q = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
      table.push_back({q + "w1.weight", {h.intermediate, h.hidden}});
      table.push_back({q + "w2.weight", {h.hidden, h.intermediate}});
      table.push_back({q + "w3.weight", {h.intermediate, h.hidden}});
    }
  }
  table.push_back({"model.norm.weight", {h.hidden}});
  table.push_back({"lm_head.weight", {h.vocab, h.hidden}});
  return table;
}

void writeHfDirectory(const std::filesystem::path& dir, const MixtralHyper& h, const std::vector<Bf16Tensor>& tensors,
                      const ByteLevelBpe& bpe) {
  const auto table = mixtralTensorTable(h);
  if (tensors.size() != table.size())
    throw Error("export: " + std::to_string(tensors.size()) + " tensors given, the Mixtral table has " +
                std::to_string(table.size()));
  std::vector<SafetensorsWriter::Declared> declared;
  for (size_t i = 0; i < table.size(); ++i) {
    if (tensors[i].name != table[i].first || tensors[i].shape != table[i].second)
      throw Error("export: tensor " + std::to_string(i) + " is " + tensors[i].name + ", expected " + table[i].first +
                  " with the Mixtral shape");
    declared.push_back({tensors[i].name, DType::BF16, tensors[i].shape});
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("export: cannot create " + dir.string() + ": " + ec.message());

  SafetensorsWriter writer(dir / "model.safetensors", declared, {{"format", "pt"}});
  for (const Bf16Tensor& t : tensors) writer.append(t.bits.data(), t.bits.size() * sizeof(uint16_t));
  writer.finish();

  const int32_t eot = bpe.endOfTextId();
  hf::MixtralShape shape;
  shape.vocab = h.vocab;
  shape.hidden = h.hidden;
  shape.intermediate = h.intermediate;
  shape.layers = h.layers;
  shape.heads = h.heads;
  shape.kvHeads = h.kvHeads;
  shape.headDim = h.hidden / h.heads;
  shape.experts = h.experts;
  shape.topK = h.topK;
  shape.maxPositions = h.maxPositions;
  shape.initStd = h.initStd;
  shape.rmsEps = h.rmsEps;
  shape.ropeTheta = h.ropeTheta;
  shape.auxLossCoef = h.auxLossCoef;
  shape.bosId = shape.eosId = eot;
  shape.padId = eot;
  nlohmann::json added = nlohmann::json::object();
  added[std::to_string(eot)] = {{"content", kEndOfText}, {"lstrip", false},  {"normalized", false},
                                {"rstrip", false},       {"single_word", false}, {"special", true}};
  hf::writeHfJsonFiles(dir, {hf::mixtralConfig(shape),
                             {{"bos_token_id", eot},
                              {"eos_token_id", eot},
                              {"pad_token_id", eot},
                              {"do_sample", true},
                              {"temperature", 0.8},
                              {"top_k", 40},
                              {"max_new_tokens", 200}},
                             bpe.toJson(),
                             {{"tokenizer_class", "PreTrainedTokenizerFast"},
                              {"bos_token", kEndOfText},
                              {"eos_token", kEndOfText},
                              {"pad_token", kEndOfText},
                              {"unk_token", nullptr},
                              {"add_bos_token", false},
                              {"add_eos_token", false},
                              {"add_prefix_space", false},
                              {"clean_up_tokenization_spaces", false},
                              {"model_max_length", h.maxPositions},
                              {"added_tokens_decoder", added},
                              {"chat_template", demoChatTemplate()}}});
}

std::vector<Bf16Tensor> readBf16Tensors(const std::filesystem::path& safetensorsFile) {
  SafetensorsFile file(safetensorsFile);
  std::vector<Bf16Tensor> out;
  for (const TensorInfo& info : file.tensors()) {
    if (info.dtype != DType::BF16)
      throw Error(safetensorsFile.string() + ": tensor " + info.name + " is " + dtypeName(info.dtype) + ", not BF16");
    Bf16Tensor t{info.name, info.shape, std::vector<uint16_t>(info.numel())};
    file.read(info, 0, info.size, t.bits.data());
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace zipmoe::train
