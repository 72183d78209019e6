// `zipmoe train-demo`: trains the embedded demo model (a small Mixtral MoE) on a corpus and exports it
// as a BF16 Hugging Face directory.
//
//   zipmoe train-demo --corpus FILE --out DIR [--steps N] [--layers L] [--hidden H] [--experts E]
//       [--vocab V] [--context T] [--batch B] [--lr X] [--seed S] [--threads N] [--resume CKPT] [--sample]
//       [--intermediate I] [--heads N] [--kv-heads N] [--top-k K] [--warmup N] [--aux-loss X]
//       [--eval-every N] [--eval-windows N] [--checkpoint FILE] [--checkpoint-every N]
//       [--routing-tokens N] [--sample-tokens N] [--bf16-autocast]
// Prints step, train loss, validation loss (on --eval-windows windows during training, the whole
// validation split at the end) and tokens/s, then per-layer router entropy (top-k selections over the
// corpus, or its first --routing-tokens tokens) against log2(experts) and, with --sample, generated text.
// The checkpoint (default: zipmoe-train-demo-NAME.ckpt in the system temp folder, never inside DIR)
// holds the weights, optimizer state and step; every checkpoint also re-exports DIR, so an interrupted
// run still leaves a usable model. Thread-safety: a command runs on the main thread. Cost: the training.
// Note: on a machine whose cores are busy, --threads 1 is much faster than 2 (OpenMP threads spin
// waiting for each other): 131 vs ~1300 tokens/s on the shared 2-core build machine.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "tools/train/demo_trainer.h"
#include "command_line.h"
#include "commands.h"
#include "zipmoe/base/error.h"

namespace zipmoe::cli {
namespace {

const CommandSpec& trainSpec() {
  static const CommandSpec spec{
      "zipmoe train-demo --corpus FILE --out DIR [OPTIONS]",
      "Trains the demo MoE model (byte-level BPE + Mixtral) on a corpus and exports it as a BF16 HF directory.",
      {{"--corpus", "FILE", "the training text (required)"},
       {"--out", "DIR", "the exported HF directory (required)"},
       {"--steps", "N", "optimizer steps"},
       {"--layers", "L", "transformer layers"},
       {"--hidden", "H", "hidden size"},
       {"--intermediate", "I", "expert FFN size (0 = 2 × hidden)"},
       {"--heads", "N", "attention heads"},
       {"--kv-heads", "N", "key/value heads"},
       {"--experts", "E", "experts per layer"},
       {"--top-k", "K", "experts per token"},
       {"--vocab", "V", "BPE vocabulary size"},
       {"--context", "T", "training context length"},
       {"--batch", "B", "sequences per step"},
       {"--warmup", "N", "learning-rate warm-up steps"},
       {"--lr", "X", "peak learning rate"},
       {"--aux-loss", "X", "load-balancing loss coefficient"},
       {"--seed", "S", "random seed (0 or more)"},
       {"--threads", "N", "libtorch threads (1-1024)"},
       {"--resume", "CKPT", "continue from this checkpoint"},
       {"--checkpoint", "FILE", "where checkpoints go (default: the system temp folder)"},
       {"--checkpoint-every", "N", "steps between checkpoints (and re-exports)"},
       {"--eval-every", "N", "steps between validation losses"},
       {"--eval-windows", "N", "validation windows during training"},
       {"--routing-tokens", "N", "corpus tokens counted for the router entropy"},
       {"--sample-tokens", "N", "tokens of the --sample text"},
       {"--sample", "", "print generated text at the end"},
       {"--bf16-autocast", "", "train the matmuls in bf16"}},
      0, 0, ""};
  return spec;
}

std::string readCorpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(systemErrorMessage("train-demo: cannot open --corpus " + path, errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) throw Error("train-demo: --corpus " + path + " is empty");
  return text.str();
}

void printRouting(train::DemoTrainer& trainer, int64_t maxTokens) {
  const train::RoutingStats stats = trainer.routingStats(maxTokens);
  const double maxBits = std::log2(static_cast<double>(trainer.options().experts));
  std::printf("router entropy over %lld corpus tokens (top-%lld selections), uniform maximum log2(%lld) = %.3f bits\n",
              static_cast<long long>(stats.tokens), static_cast<long long>(trainer.options().topK),
              static_cast<long long>(trainer.options().experts), maxBits);
  for (size_t layer = 0; layer < stats.counts.size(); ++layer) {
    int64_t total = 0;
    for (int64_t c : stats.counts[layer]) total += c;
    std::printf("  layer %zu: %.3f bits (%.1f%% of max)  shares:", layer, stats.entropyBits[layer],
                100.0 * stats.entropyBits[layer] / maxBits);
    for (int64_t c : stats.counts[layer]) std::printf(" %.1f%%", 100.0 * static_cast<double>(c) / static_cast<double>(total));
    std::printf("\n");
  }
}

}  // namespace

int runTrainDemo(const Args& arguments) {
  const CommandSpec& spec = trainSpec();
  const CommandLine line = CommandLine::parse(spec, arguments);
  if (line.help()) return printUsage(spec);
  const auto corpusPathText = line.text("--corpus"), outDirText = line.text("--out");
  if (!corpusPathText) throw Error("train-demo: --corpus FILE is required\nusage: " + spec.synopsis);
  if (!outDirText) throw Error("train-demo: --out DIR is required\nusage: " + spec.synopsis);
  const std::string corpusPath = *corpusPathText, outDir = *outDirText, resume = line.text("--resume", "");
  std::string checkpoint = line.text("--checkpoint", "");
  constexpr int64_t kMax = int64_t{1} << 40;
  const auto integer = [&line](const char* name, int64_t min, int64_t fallback) {
    return line.integer<int64_t>(name, min, kMax, fallback);
  };
  train::DemoTrainOptions o;
  o.steps = integer("--steps", 1, o.steps);
  o.layers = integer("--layers", 1, o.layers);
  o.hidden = integer("--hidden", 1, o.hidden);
  o.intermediate = integer("--intermediate", 0, o.intermediate);
  o.heads = integer("--heads", 1, o.heads);
  o.kvHeads = integer("--kv-heads", 1, o.kvHeads);
  o.experts = integer("--experts", 1, o.experts);
  o.topK = integer("--top-k", 1, o.topK);
  o.vocab = integer("--vocab", 1, o.vocab);
  o.context = integer("--context", 1, o.context);
  o.batch = integer("--batch", 1, o.batch);
  o.warmup = integer("--warmup", 0, o.warmup);
  o.lr = line.number("--lr", 0, 1e6, o.lr);
  o.auxLossCoef = line.number("--aux-loss", 0, 1e6, o.auxLossCoef);
  o.seed = line.integer<uint64_t>("--seed", 0, std::numeric_limits<uint64_t>::max(), o.seed);
  o.threads = line.integer<int>("--threads", 1, 1024, o.threads);
  const int64_t evalEvery = integer("--eval-every", 1, 100);
  const int64_t evalWindows = integer("--eval-windows", 1, 16);
  const int64_t routingTokens = integer("--routing-tokens", 1, kMax);
  const int64_t sampleTokens = integer("--sample-tokens", 1, 200);
  const int64_t checkpointEvery = integer("--checkpoint-every", 1, 200);
  o.bf16Autocast = line.has("--bf16-autocast");
  const bool sample = line.has("--sample");
  train::validateOptions(o);
  if (checkpoint.empty())
    checkpoint = (std::filesystem::temp_directory_path() /
                  ("zipmoe-train-demo-" + std::filesystem::path(outDir).filename().string() + ".ckpt"))
                     .string();

  const std::string corpus = readCorpus(corpusPath);
  const auto started = std::chrono::steady_clock::now();
  train::DemoTrainer trainer(o, corpus);
  std::printf("tokenizer: byte-level BPE, %lld tokens; corpus %zu bytes -> %lld train + %lld validation tokens\n",
              static_cast<long long>(o.vocab), corpus.size(), static_cast<long long>(trainer.trainTokens()),
              static_cast<long long>(trainer.valTokens()));
  std::printf("model: mixtral, %lld layers, hidden %lld, %lld experts (top-%lld), %lld parameters (%lld active per token)\n",
              static_cast<long long>(o.layers), static_cast<long long>(o.hidden), static_cast<long long>(o.experts),
              static_cast<long long>(o.topK), static_cast<long long>(trainer.parameterCount()),
              static_cast<long long>(trainer.activeParameterCount()));
  std::printf("checkpoint: %s\n", checkpoint.c_str());
  if (!resume.empty()) {
    trainer.loadCheckpoint(resume);
    std::printf("resumed from %s at step %lld\n", resume.c_str(), static_cast<long long>(trainer.step()));
  }
  std::fflush(stdout);

  double lossSum = 0, secondsSum = 0;
  int64_t tokensSum = 0, window = 0;
  while (trainer.step() < o.steps) {
    const train::StepStats s = trainer.trainStep();
    lossSum += s.loss;
    secondsSum += s.seconds;
    tokensSum += s.tokens;
    ++window;
    const bool last = s.step == o.steps;
    if (s.step % 10 == 0 || last) {
      std::printf("step %6lld  loss %.4f  aux %.3f  lr %.2e  |g| %.2f  %.0f tokens/s", static_cast<long long>(s.step),
                  lossSum / static_cast<double>(window), s.auxLoss, s.lr, s.gradNorm,
                  static_cast<double>(tokensSum) / secondsSum);
      if (s.step % evalEvery == 0 || last) std::printf("  val %.4f", last ? trainer.validationLoss() : trainer.validationLoss(evalWindows));
      std::printf("  [%.0f s]\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      std::fflush(stdout);
      lossSum = secondsSum = 0;
      tokensSum = window = 0;
    }
    if (s.step % checkpointEvery == 0 || last) {
      trainer.saveCheckpoint(checkpoint);
      trainer.exportHf(outDir);
    }
  }
  std::printf("exported %s; training time %.0f s\n", outDir.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  printRouting(trainer, routingTokens);
  if (sample) {
    std::printf("--- sample (temperature 0.8, top-k 40) ---\n%s\n---\n",
                trainer.sample("ROMEO:\n", sampleTokens, 0.8, 40, o.seed).c_str());
  }
  return 0;
}

}  // namespace zipmoe::cli
