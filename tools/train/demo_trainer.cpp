// DemoTrainer: the libtorch training loop of the demo model. See demo_trainer.h.
// Thread-safety: one driving thread. Cost: ~6 × active params × tokens FLOPs per step.
#include "tools/train/demo_trainer.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <map>
#include <sstream>
#include <cmath>
#include <numbers>
#include <random>

#include "bpe_trainer.h"
#include "hf_export.h"
#include "mixtral_modules.h"
#include "token_corpus.h"
#include "zipmoe/base/error.h"

namespace zipmoe::train {
namespace {

[[noreturn]] void badOption(const std::string& option, const std::string& value, const std::string& why) {
  throw Error("train-demo: " + option + " " + value + ": " + why);
}

std::string str(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void checkRange(const std::string& option, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    badOption(option, std::to_string(v), "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
}

torch::Tensor toTensor(const std::vector<int64_t>& values, int64_t rows, int64_t cols) {
  return torch::from_blob(const_cast<int64_t*>(values.data()), {rows, cols}, torch::kInt64).clone();
}

// RAII: bf16 autocast on the CPU for a scope, when asked for.
class AutocastScope {
 public:
  explicit AutocastScope(bool on) : on_(on) {
    if (!on_) return;
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
  ~AutocastScope() {
    if (!on_) return;
    at::autocast::set_cpu_enabled(false);
    at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool on_;
};

}  // namespace

void validateOptions(const DemoTrainOptions& o) {
  checkRange("--steps", o.steps, 1, 100'000'000);
  checkRange("--layers", o.layers, 1, 64);
  checkRange("--hidden", o.hidden, 8, 8192);
  checkRange("--heads", o.heads, 1, 256);
  checkRange("--kv-heads", o.kvHeads, 1, o.heads);
  if (o.hidden % o.heads != 0 || (o.hidden / o.heads) % 2 != 0)
    badOption("--hidden", std::to_string(o.hidden), "must be a multiple of 2 × --heads (" + std::to_string(o.heads) + ")");
  if (o.heads % o.kvHeads != 0)
    badOption("--kv-heads", std::to_string(o.kvHeads), "must divide --heads (" + std::to_string(o.heads) + ")");
  if (o.intermediate != 0) checkRange("--intermediate", o.intermediate, 1, 65536);
  checkRange("--experts", o.experts, 1, 256);
  checkRange("--top-k", o.topK, 1, o.experts);
  checkRange("--vocab", o.vocab, 257, 65536);
  checkRange("--context", o.context, 2, 8192);
  checkRange("--batch", o.batch, 1, 4096);
  checkRange("--warmup", o.warmup, 0, 100'000'000);
  checkRange("--threads", o.threads, 1, 1024);
  if (!(o.lr > 0 && o.lr < 1)) badOption("--lr", str(o.lr), "must be in (0, 1)");
  if (!(o.minLrFraction >= 0 && o.minLrFraction <= 1)) badOption("--min-lr-fraction", str(o.minLrFraction), "must be in [0, 1]");
  if (!(o.weightDecay >= 0 && o.weightDecay < 10)) badOption("--weight-decay", str(o.weightDecay), "must be in [0, 10)");
  if (!(o.gradClip > 0)) badOption("--grad-clip", str(o.gradClip), "must be positive");
  if (!(o.auxLossCoef >= 0 && o.auxLossCoef < 100)) badOption("--aux-loss", str(o.auxLossCoef), "must be in [0, 100)");
  if (!(o.valFraction > 0 && o.valFraction < 0.5)) badOption("--val-fraction", str(o.valFraction), "must be in (0, 0.5)");
  if (!(o.ropeTheta > 1)) badOption("--rope-theta", str(o.ropeTheta), "must be greater than 1");
}

struct DemoTrainer::Impl {
  DemoTrainOptions options;
  DemoModelShape shape;
  ByteLevelBpe bpe;
  TokenCorpus corpus;
  MixtralForCausalLM model{nullptr};
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::mt19937_64 rng;
  int64_t step = 0;

  Impl(const DemoTrainOptions& o, ByteLevelBpe tokenizer, std::vector<int32_t> tokens)
      : options(o),
        bpe(std::move(tokenizer)),
        corpus(std::move(tokens), bpe.endOfTextId(), o.valFraction, o.context),
        rng(o.seed) {}

  double lrAt(int64_t s) const {
    if (s < options.warmup) return options.lr * static_cast<double>(s + 1) / static_cast<double>(options.warmup);
    const double span = static_cast<double>(std::max<int64_t>(1, options.steps - options.warmup));
    const double progress = std::min(1.0, static_cast<double>(s - options.warmup) / span);
    const double minLr = options.lr * options.minLrFraction;
    return minLr + 0.5 * (options.lr - minLr) * (1.0 + std::cos(std::numbers::pi * progress));
  }

  torch::Tensor crossEntropy(const TokenBatch& b, std::vector<RoutingRecord>* records) {
    const torch::Tensor inputs = toTensor(b.inputs, b.batch, b.context);
    const torch::Tensor targets = toTensor(b.targets, b.batch, b.context);
    const torch::Tensor logits = model->forward(inputs, records);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat32),
                                                targets.reshape({-1}));
  }
};

DemoTrainer::DemoTrainer(const DemoTrainOptions& options, const std::string& corpusText) {
  validateOptions(options);
  torch::set_num_threads(options.threads);
  torch::manual_seed(options.seed);
  ByteLevelBpe bpe = trainBpe(corpusText, static_cast<int32_t>(options.vocab));
  if (bpe.vocabSize() != options.vocab)
    throw Error("train-demo: --vocab " + std::to_string(options.vocab) + ": the corpus supports only " +
                std::to_string(bpe.vocabSize()) + " tokens (no pair occurs twice any more)");
  std::vector<int32_t> tokens = bpe.encode(corpusText);
  impl_ = std::make_unique<Impl>(options, std::move(bpe), std::move(tokens));
  DemoModelShape& s = impl_->shape;
  s.vocab = options.vocab;
  s.hidden = options.hidden;
  s.intermediate = options.intermediate != 0 ? options.intermediate : 2 * options.hidden;
  s.layers = options.layers;
  s.heads = options.heads;
  s.kvHeads = options.kvHeads;
  s.experts = options.experts;
  s.topK = options.topK;
  s.maxPositions = options.context;
  s.ropeTheta = options.ropeTheta;
  impl_->model = MixtralForCausalLM(s);

  std::vector<torch::Tensor> decay, noDecay;
  for (const auto& p : impl_->model->parameters()) (p.dim() >= 2 ? decay : noDecay).push_back(p);
  const auto adamw = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(options.lr).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, adamw(options.weightDecay));
  groups.emplace_back(noDecay, adamw(0.0));
  impl_->optimizer = std::make_unique<torch::optim::AdamW>(groups, *adamw(options.weightDecay));
}

DemoTrainer::~DemoTrainer() = default;

const DemoTrainOptions& DemoTrainer::options() const { return impl_->options; }
int64_t DemoTrainer::step() const { return impl_->step; }
int64_t DemoTrainer::trainTokens() const { return impl_->corpus.trainTokens(); }
int64_t DemoTrainer::valTokens() const { return impl_->corpus.valTokens(); }
const ByteLevelBpe& DemoTrainer::tokenizer() const { return impl_->bpe; }

int64_t DemoTrainer::parameterCount() const {
  int64_t n = 0;
  for (const auto& p : impl_->model->parameters()) n += p.numel();
  return n;
}

int64_t DemoTrainer::activeParameterCount() const {
  const DemoModelShape& s = impl_->shape;
  const int64_t unused = s.layers * (s.experts - s.topK) * 3 * s.hidden * s.intermediate;
  return parameterCount() - unused;
}

StepStats DemoTrainer::trainStep() {
  Impl& m = *impl_;
  const auto start = std::chrono::steady_clock::now();
  m.model->train();
  const double lr = m.lrAt(m.step);
  for (auto& group : m.optimizer->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  const TokenBatch batch = m.corpus.sampleBatch(m.rng, m.options.batch);
  std::vector<RoutingRecord> records;
  torch::Tensor ce, aux;
  {
    AutocastScope autocast(m.options.bf16Autocast);
    ce = m.crossEntropy(batch, &records);
    aux = loadBalancingLoss(records, m.shape.experts);
  }
  const torch::Tensor loss = m.options.auxLossCoef > 0 ? ce + m.options.auxLossCoef * aux : ce;
  m.optimizer->zero_grad();
  loss.backward();
  const double gradNorm = torch::nn::utils::clip_grad_norm_(m.model->parameters(), m.options.gradClip);
  m.optimizer->step();
  ++m.step;
  StepStats stats;
  stats.step = m.step;
  stats.loss = ce.item<double>();
  stats.auxLoss = aux.item<double>();
  stats.lr = lr;
  stats.gradNorm = gradNorm;
  stats.tokens = batch.batch * batch.context;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

double DemoTrainer::validationLoss(int64_t maxWindows) {
  Impl& m = *impl_;
  torch::NoGradGuard noGrad;
  m.model->eval();
  const int64_t windows = std::min(maxWindows, m.corpus.valWindowCount());
  double total = 0;
  int64_t counted = 0;
  for (int64_t w = 0; w < windows; w += m.options.batch) {
    const TokenBatch b = m.corpus.valBatch(w, std::min(m.options.batch, windows - w));
    AutocastScope autocast(m.options.bf16Autocast);
    total += m.crossEntropy(b, nullptr).item<double>() * static_cast<double>(b.batch);
    counted += b.batch;
  }
  return counted > 0 ? total / static_cast<double>(counted) : 0.0;
}

RoutingStats DemoTrainer::routingStats(int64_t maxTokens) {
  Impl& m = *impl_;
  torch::NoGradGuard noGrad;
  m.model->eval();
  RoutingStats stats;
  stats.counts.assign(static_cast<size_t>(m.shape.layers), std::vector<int64_t>(static_cast<size_t>(m.shape.experts), 0));
  const int64_t windows = std::min(m.corpus.corpusWindowCount(), std::max<int64_t>(1, maxTokens / m.options.context));
  for (int64_t w = 0; w < windows; w += m.options.batch) {
    const TokenBatch b = m.corpus.corpusBatch(w, std::min(m.options.batch, windows - w));
    std::vector<RoutingRecord> records;
    m.model->forward(toTensor(b.inputs, b.batch, b.context), &records);
    for (size_t layer = 0; layer < records.size(); ++layer) {
      const torch::Tensor counts = torch::bincount(records[layer].selected.reshape({-1}), {}, m.shape.experts);
      for (int64_t e = 0; e < m.shape.experts; ++e) stats.counts[layer][static_cast<size_t>(e)] += counts[e].item<int64_t>();
    }
    stats.tokens += b.batch * b.context;
  }
  for (const auto& layer : stats.counts) {
    int64_t total = 0;
    for (int64_t c : layer) total += c;
    double h = 0;
    for (int64_t c : layer)
      if (c > 0) {
        const double p = static_cast<double>(c) / static_cast<double>(total);
        h -= p * std::log2(p);
      }
    stats.entropyBits.push_back(h);
  }
  return stats;
}

std::string DemoTrainer::sample(const std::string& prompt, int64_t tokens, double temperature, int64_t topK,
                                uint64_t seed) {
  Impl& m = *impl_;
  torch::NoGradGuard noGrad;
  m.model->eval();
  std::vector<int32_t> ids = m.bpe.encode(prompt);
  std::vector<int32_t> generated;
  std::mt19937_64 rng(seed);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int64_t> window{m.bpe.endOfTextId()};
    const size_t keep = static_cast<size_t>(m.options.context - 1);
    const size_t from = ids.size() > keep ? ids.size() - keep : 0;
    window.insert(window.end(), ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end());
    const auto n = static_cast<int64_t>(window.size());
    const torch::Tensor logits = m.model->forward(toTensor(window, 1, n)).select(1, n - 1).squeeze(0).to(torch::kFloat32);
    const auto [topValues, topIds] = (logits / std::max(temperature, 1e-6)).topk(std::min(topK, logits.size(0)));
    const torch::Tensor probs = torch::softmax(topValues, -1).contiguous();
    const std::vector<double> weights(probs.data_ptr<float>(), probs.data_ptr<float>() + probs.numel());
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    const auto next = static_cast<int32_t>(topIds[static_cast<int64_t>(pick(rng))].item<int64_t>());
    if (next == m.bpe.endOfTextId()) break;
    ids.push_back(next);
    generated.push_back(next);
  }
  return prompt + m.bpe.decode(generated);
}

void DemoTrainer::saveCheckpoint(const std::filesystem::path& file) const {
  const Impl& m = *impl_;
  torch::serialize::OutputArchive archive;
  m.model->save(archive);
  torch::serialize::OutputArchive optimizerArchive;
  m.optimizer->save(optimizerArchive);
  archive.write("optimizer", optimizerArchive);
  archive.write("train_step", torch::tensor(m.step, torch::kInt64));
  const DemoModelShape& s = m.shape;
  archive.write("train_shape", torch::tensor(std::vector<int64_t>{s.vocab, s.hidden, s.intermediate, s.layers, s.heads,
                                                                  s.kvHeads, s.experts, s.topK, s.maxPositions}));
  const std::filesystem::path partial = file.string() + ".partial";
  try {
    archive.save_to(partial.string());
  } catch (const c10::Error& e) {
    throw Error("cannot write checkpoint " + partial.string() + ": " + e.what_without_backtrace());
  }
  std::error_code ec;
  std::filesystem::rename(partial, file, ec);
  if (ec) throw Error("cannot rename " + partial.string() + " to " + file.string() + ": " + ec.message());
}

void DemoTrainer::loadCheckpoint(const std::filesystem::path& file) {
  Impl& m = *impl_;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(file.string());
    torch::Tensor shape, step;
    archive.read("train_shape", shape);
    const DemoModelShape& s = m.shape;
    const torch::Tensor expected = torch::tensor(
        std::vector<int64_t>{s.vocab, s.hidden, s.intermediate, s.layers, s.heads, s.kvHeads, s.experts, s.topK, s.maxPositions});
    if (!shape.equal(expected))
      throw Error("checkpoint " + file.string() +
                  " was made with another architecture (vocab, hidden, intermediate, layers, heads, kv heads, experts, "
                  "top-k, context differ from the options)");
    m.model->load(archive);
    torch::serialize::InputArchive optimizerArchive;
    archive.read("optimizer", optimizerArchive);
    m.optimizer->load(optimizerArchive);
    archive.read("train_step", step);
    m.step = step.item<int64_t>();
    m.rng.seed(m.options.seed ^ (static_cast<uint64_t>(m.step) * 0x9E3779B97F4A7C15ULL));
  } catch (const c10::Error& e) {
    throw Error("cannot read checkpoint " + file.string() + ": " + e.what_without_backtrace());
  }
}

MixtralHyper DemoTrainer::hyper() const {
  const DemoModelShape& s = impl_->shape;
  MixtralHyper h;
  h.vocab = s.vocab;
  h.hidden = s.hidden;
  h.intermediate = s.intermediate;
  h.layers = s.layers;
  h.heads = s.heads;
  h.kvHeads = s.kvHeads;
  h.experts = s.experts;
  h.topK = s.topK;
  h.maxPositions = s.maxPositions;
  h.ropeTheta = s.ropeTheta;
  h.rmsEps = s.rmsEps;
  h.initStd = s.initStd;
  h.auxLossCoef = impl_->options.auxLossCoef;
  return h;
}

std::vector<Bf16Tensor> DemoTrainer::bf16Weights() const {
  torch::NoGradGuard noGrad;
  std::map<std::string, torch::Tensor> byName;
  for (const auto& item : impl_->model->named_parameters()) byName[item.key()] = item.value();
  std::vector<Bf16Tensor> out;
  for (const auto& [name, shape] : mixtralTensorTable(hyper())) {
    const auto it = byName.find(name);
    if (it == byName.end()) throw Error("export: the training model has no parameter " + name);
    const torch::Tensor bf16 = it->second.detach().to(torch::kBFloat16).contiguous();
    Bf16Tensor t{name, bf16.sizes().vec(), std::vector<uint16_t>(static_cast<size_t>(bf16.numel()))};
    std::memcpy(t.bits.data(), bf16.data_ptr(), t.bits.size() * sizeof(uint16_t));
    out.push_back(std::move(t));
  }
  return out;
}

void DemoTrainer::exportHf(const std::filesystem::path& dir) const {
  writeHfDirectory(dir, hyper(), bf16Weights(), impl_->bpe);
}

void DemoTrainer::importHf(const std::filesystem::path& dir) {
  torch::NoGradGuard noGrad;
  std::map<std::string, torch::Tensor> byName;
  for (const auto& item : impl_->model->named_parameters()) byName[item.key()] = item.value();
  const std::vector<Bf16Tensor> tensors = readBf16Tensors(dir / "model.safetensors");
  if (tensors.size() != byName.size())
    throw Error(dir.string() + ": model.safetensors has " + std::to_string(tensors.size()) + " tensors, the model " +
                std::to_string(byName.size()));
  for (const Bf16Tensor& t : tensors) {
    const auto it = byName.find(t.name);
    if (it == byName.end() || it->second.sizes().vec() != t.shape)
      throw Error(dir.string() + ": tensor " + t.name + " is not a parameter of this architecture");
    const torch::Tensor bf16 =
        torch::from_blob(const_cast<uint16_t*>(t.bits.data()), t.shape, torch::kBFloat16).to(torch::kFloat32);
    it->second.copy_(bf16);
  }
}

}  // namespace zipmoe::train
