// ModelConfig — the architecture of a decoder-only MoE model, read from an HF config.json.
//
// One struct for every supported family (mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2); fields
// that a family does not have keep their neutral defaults. parseModelConfig validates every field it
// reads (presence, type, range, consistency such as heads × head_dim) and throws zipmoe::Error naming
// the file and the field. switch_transformers (encoder-decoder) is stored by the converter but has no
// forward pass: parseModelConfig rejects it, naming the supported architectures.
// Thread-safety: plain value type. Cost: microseconds.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "zipmoe/hf/model_family.h"

namespace zipmoe {

struct RopeScaling {
  std::string type;  // "" (none), "yarn", "linear", "dynamic"
  double factor = 1.0;
  int originalMaxPositionEmbeddings = 0;
  double betaFast = 32.0, betaSlow = 1.0;
  double mscale = 1.0, mscaleAllDim = 0.0;
  double attentionFactor = 0.0;  // yarn: 0 = derived from factor / mscale (transformers' rule)
  bool truncate = true;          // yarn: round the correction range to integers
};

struct ModelConfig {
  ModelFamily family = ModelFamily::Mixtral;
  int vocabSize = 0;
  int hiddenSize = 0;
  int numLayers = 0;
  int numHeads = 0;
  int numKvHeads = 0;
  int headDim = 0;
  int intermediateSize = 0;  // dense MLP layers
  int maxPositionEmbeddings = 0;
  double rmsNormEps = 1e-6;
  double ropeTheta = 10000.0;
  RopeScaling ropeScaling;
  bool tieWordEmbeddings = false;
  bool attentionBias = false;     // qwen2_moe: q/k/v biases
  bool qkNormPerHead = false;     // qwen3_moe: RMSNorm over head_dim on q and k
  bool qkNormFull = false;        // olmoe: RMSNorm over the whole q / k projection
  std::optional<double> clipQkv;  // olmoe

  // Routed experts.
  int numExperts = 0;
  int numExpertsPerTok = 0;
  int moeIntermediateSize = 0;
  bool normTopkProb = false;
  std::vector<bool> layerIsMoe;  // per layer: routed experts (true) or a dense MLP (false)

  // qwen2_moe shared expert (with a sigmoid gate); deepseek_v2 shared experts (no gate).
  int sharedExpertIntermediateSize = 0;  // 0 = none
  bool sharedExpertGated = false;

  // deepseek_v2 (MLA and routing).
  int qLoraRank = 0;  // 0 = q_proj directly
  int kvLoraRank = 0;
  int qkNopeHeadDim = 0;
  int qkRopeHeadDim = 0;
  int vHeadDim = 0;
  std::string topkMethod = "greedy";  // "greedy" or "group_limited_greedy"
  int nGroup = 1;
  int topkGroup = 1;
  double routedScalingFactor = 1.0;

  std::vector<int> eosTokenIds;
  std::optional<int> bosTokenId;

  int numMoeLayers() const;
  // The store/expert-provider layer index of decoder layer `layer` (-1 for a dense layer).
  int moeLayerIndex(int layer) const;
};

// Throws zipmoe::Error naming `what` (the config file) and the offending field.
ModelConfig parseModelConfig(const nlohmann::json& config, const std::string& what);

}  // namespace zipmoe
