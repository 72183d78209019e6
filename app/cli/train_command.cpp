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
#include <sstream>

#include "train/demo_trainer.h"
#include "commands.h"
#include "zipmoe/error.h"

namespace zipmoe::cli {
namespace {

constexpr const char* kUsage =
    "usage: zipmoe train-demo --corpus FILE --out DIR [--steps N] [--layers L] [--hidden H] [--experts E] "
    "[--vocab V] [--context T] [--batch B] [--lr X] [--seed S] [--threads N] [--resume CKPT] [--sample] "
    "[--intermediate I] [--heads N] [--kv-heads N] [--top-k K] [--warmup N] [--aux-loss X] [--eval-every N] "
    "[--checkpoint FILE] [--checkpoint-every N] [--eval-windows N] [--routing-tokens N] [--sample-tokens N] "
    "[--bf16-autocast]";

std::string readCorpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(systemErrorMessage("train-demo: cannot open --corpus " + path, errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) throw Error("train-demo: --corpus " + path + " is empty");
  return text.str();
}

int64_t integerOption(Args& args, const std::string& name, int64_t fallback) {
  std::string text;
  return takeOption(args, name, text) ? parseInteger(name, text) : fallback;
}

double numberOption(Args& args, const std::string& name, double fallback) {
  std::string text;
  return takeOption(args, name, text) ? parseNumber(name, text) : fallback;
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
  Args args = arguments;
  std::string corpusPath, outDir, resume, checkpoint;
  if (!takeOption(args, "--corpus", corpusPath)) throw Error("train-demo: --corpus FILE is required\n" + std::string(kUsage));
  if (!takeOption(args, "--out", outDir)) throw Error("train-demo: --out DIR is required\n" + std::string(kUsage));
  takeOption(args, "--resume", resume);
  takeOption(args, "--checkpoint", checkpoint);
  train::DemoTrainOptions o;
  o.steps = integerOption(args, "--steps", o.steps);
  o.layers = integerOption(args, "--layers", o.layers);
  o.hidden = integerOption(args, "--hidden", o.hidden);
  o.intermediate = integerOption(args, "--intermediate", o.intermediate);
  o.heads = integerOption(args, "--heads", o.heads);
  o.kvHeads = integerOption(args, "--kv-heads", o.kvHeads);
  o.experts = integerOption(args, "--experts", o.experts);
  o.topK = integerOption(args, "--top-k", o.topK);
  o.vocab = integerOption(args, "--vocab", o.vocab);
  o.context = integerOption(args, "--context", o.context);
  o.batch = integerOption(args, "--batch", o.batch);
  o.warmup = integerOption(args, "--warmup", o.warmup);
  o.lr = numberOption(args, "--lr", o.lr);
  o.auxLossCoef = numberOption(args, "--aux-loss", o.auxLossCoef);
  const int64_t seed = integerOption(args, "--seed", static_cast<int64_t>(o.seed));
  if (seed < 0) throw Error("train-demo: --seed " + std::to_string(seed) + ": must not be negative");
  o.seed = static_cast<uint64_t>(seed);
  const int64_t threads = integerOption(args, "--threads", o.threads);
  if (threads < 1 || threads > 1024) throw Error("train-demo: --threads " + std::to_string(threads) + ": must be in 1..1024");
  o.threads = static_cast<int>(threads);
  const int64_t evalEvery = integerOption(args, "--eval-every", 100);
  const int64_t evalWindows = integerOption(args, "--eval-windows", 16);
  const int64_t routingTokens = integerOption(args, "--routing-tokens", int64_t{1} << 40);
  const int64_t sampleTokens = integerOption(args, "--sample-tokens", 200);
  if (evalWindows < 1) throw Error("train-demo: --eval-windows " + std::to_string(evalWindows) + ": must be at least 1");
  if (routingTokens < 1)
    throw Error("train-demo: --routing-tokens " + std::to_string(routingTokens) + ": must be at least 1");
  if (sampleTokens < 1) throw Error("train-demo: --sample-tokens " + std::to_string(sampleTokens) + ": must be at least 1");
  const int64_t checkpointEvery = integerOption(args, "--checkpoint-every", 200);
  if (evalEvery < 1) throw Error("train-demo: --eval-every " + std::to_string(evalEvery) + ": must be at least 1");
  if (checkpointEvery < 1)
    throw Error("train-demo: --checkpoint-every " + std::to_string(checkpointEvery) + ": must be at least 1");
  o.bf16Autocast = takeFlag(args, "--bf16-autocast");
  const bool sample = takeFlag(args, "--sample");
  expectPositionals(args, 0, kUsage);
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
