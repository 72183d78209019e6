// DemoTrainer — trains the embedded demo model (a small Mixtral MoE) on a text corpus.
//
// Torch-free interface over the libtorch implementation (engine/src/train/demo_trainer.cpp), so that
// the CLI (`zipmoe train-demo`) and the tests can drive training without torch headers. The constructor learns the byte-level BPE tokenizer
// on the corpus, encodes it, splits off the validation tail and builds the model (fp32, HF Mixtral
// init: normal(0, 0.02), norms 1). trainStep() runs one AdamW step (decoupled weight decay on
// matrices only, linear warmup then cosine decay to minLrFraction × lr, global gradient clipping,
// cross-entropy plus auxLossCoef × the load-balancing loss). Checkpoints hold the weights, the
// optimizer state and the step; exportHf() writes the BF16 Hugging Face directory.
// Every bad option is reported by validateOptions() as zipmoe::Error naming the option and value.
// Thread-safety: one thread drives a trainer; libtorch uses `threads` intra-op threads.
// Cost: a step costs about 6 × active parameters × batch × context FLOPs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace zipmoe::train {

// Internal types (engine/src/train/): only the engine and its tests use the functions that take them.
class ByteLevelBpe;
struct MixtralHyper;
struct Bf16Tensor;

struct DemoTrainOptions {
  int64_t steps = 2000;
  int64_t layers = 4;
  int64_t hidden = 256;
  int64_t intermediate = 0;  // 0: 2 × hidden
  int64_t heads = 4;
  int64_t kvHeads = 2;
  int64_t experts = 8;
  int64_t topK = 2;
  int64_t vocab = 1536;
  int64_t context = 256;
  int64_t batch = 16;
  double lr = 1.5e-3;
  double minLrFraction = 0.1;
  int64_t warmup = 100;
  double weightDecay = 0.1;
  double gradClip = 1.0;
  double auxLossCoef = 0.005;
  double valFraction = 0.05;
  double ropeTheta = 10000.0;
  uint64_t seed = 1234;
  int threads = 2;
  bool bf16Autocast = false;
};

// Throws zipmoe::Error naming the option (CLI spelling, e.g. "--hidden") and its value.
void validateOptions(const DemoTrainOptions& options);

struct StepStats {
  int64_t step = 0;          // steps done after this one
  double loss = 0;           // cross-entropy (nats/token)
  double auxLoss = 0;        // load-balancing loss (1 = balanced)
  double lr = 0;
  double gradNorm = 0;
  double seconds = 0;        // wall time of the step
  int64_t tokens = 0;        // tokens in the batch
};

struct RoutingStats {
  std::vector<std::vector<int64_t>> counts;  // [layer][expert] top-k selections
  std::vector<double> entropyBits;           // per layer, of the selection distribution
  int64_t tokens = 0;
};

class DemoTrainer {
 public:
  // `corpusText` is the whole corpus. Throws zipmoe::Error for bad options or a too-short corpus.
  DemoTrainer(const DemoTrainOptions& options, const std::string& corpusText);
  ~DemoTrainer();
  DemoTrainer(const DemoTrainer&) = delete;
  DemoTrainer& operator=(const DemoTrainer&) = delete;

  const DemoTrainOptions& options() const;
  int64_t parameterCount() const;
  int64_t activeParameterCount() const;  // per token: everything but the unchosen experts
  int64_t step() const;
  int64_t trainTokens() const;
  int64_t valTokens() const;
  const ByteLevelBpe& tokenizer() const;

  StepStats trainStep();
  // Mean cross-entropy over (at most maxWindows of) the validation windows.
  double validationLoss(int64_t maxWindows = 1 << 30);
  // Top-k selections over (at most maxTokens of) the whole corpus.
  RoutingStats routingStats(int64_t maxTokens = int64_t{1} << 40);
  // Samples `tokens` tokens after bos + prompt (temperature, top-k), returns prompt + continuation.
  std::string sample(const std::string& prompt, int64_t tokens, double temperature, int64_t topK, uint64_t seed);

  void saveCheckpoint(const std::filesystem::path& file) const;
  // Throws zipmoe::Error when the checkpoint is unreadable or was made with another architecture.
  void loadCheckpoint(const std::filesystem::path& file);

  MixtralHyper hyper() const;
  // The weights rounded to BF16 (round to nearest even), HF names in export order.
  std::vector<Bf16Tensor> bf16Weights() const;
  void exportHf(const std::filesystem::path& dir) const;
  // Loads weights from an exported directory's model.safetensors (BF16 -> fp32).
  void importHf(const std::filesystem::path& dir);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zipmoe::train
