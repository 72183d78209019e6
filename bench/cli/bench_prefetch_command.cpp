// `zipmoe bench prefetch-accuracy MODEL --text FILE`: how well each expert predictor of speculative
// prefetch (zipmoe/experts/expert_prefetch.h) names the next MoE layer's experts, on a model whose router is
// real (the demo model) and on text it was not profiled on. The text's tokens are split: the first
// --profile-tokens build the per-token expert table (prefilled in windows); the last --eval-tokens
// (the demo model's validation split when they are the corpus's last 5 %) are decoded one token at a
// time (teacher forcing: the next token is the text's, not the model's) once per predictor, and the
// model scores every prediction against the experts the layer then asked for: exact (the predicted
// set is the requested set) and recall@k, per layer. All experts are resident: accuracy does not
// depend on the runtime. It drives MoeModel::forward itself, not the generation core
// (ServeScheduler), because it generates nothing: every next token is the text's, which the core,
// which samples its own, has no mode for.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "commands.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/error.h"
#include "zipmoe/experts/expert_prefetch.h"
#include "zipmoe/model/model.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe::cli {

int runBenchPrefetchAccuracy(const Args& arguments) {
  static const CommandSpec command{
      "zipmoe bench prefetch-accuracy MODEL --text FILE [OPTIONS]",
      "Accuracy of the prefetch predictors (next-layer router, previous token, per-token table) on held-out text:\n"
      "the table is built from the text's first tokens, every predictor is scored on its last tokens.",
      {{"--text", "FILE", "the text (required; e.g. resources/corpus/tinyshakespeare.txt)"},
       {"--profile-tokens", "N", "tokens from the start that build the expert table (1-10000000, default 65536)"},
       {"--eval-tokens", "N", "tokens from the end that score the predictors (1-1000000, default 4096)"},
       {"--window", "N", "tokens per sequence (2-65536, default 256; below the model's context window)"},
       {"--table-out", "FILE", "also save the expert table (for generate/chat --prefetch table)"},
       {"--json", "FILE", "also write the figures as JSON"}},
      1, 1, ""};
  const CommandLine line = CommandLine::parse(command, arguments);
  if (line.help()) return printUsage(command);
  const std::filesystem::path dir = line.positional(0);
  const auto textOption = line.text("--text");
  if (!textOption) throw Error("bench prefetch-accuracy needs --text FILE");
  const int profileTokens = line.integer<int>("--profile-tokens", 1, 10000000, 65536);
  const int evalTokens = line.integer<int>("--eval-tokens", 1, 1000000, 4096);
  const int window = line.integer<int>("--window", 2, 65536, 256);
  if (!std::filesystem::is_regular_file(dir / "tokenizer.json")) throw Error(dir.string() + ": no tokenizer.json (MODEL is an HF directory or store)");

  const auto tokenizer = Tokenizer::fromFile(dir / "tokenizer.json");
  const std::vector<int32_t> ids = tokenizer->encode(readInputFile(*textOption));
  if (static_cast<size_t>(profileTokens) + static_cast<size_t>(evalTokens) > ids.size())
    throw Error("--profile-tokens " + std::to_string(profileTokens) + " + --eval-tokens " + std::to_string(evalTokens) +
                " exceed the text's " + std::to_string(ids.size()) + " tokens");
  auto model = MoeModel::load(dir);
  const ModelConfig& c = model->config();
  if (window > c.maxPositionEmbeddings)
    throw Error("--window " + std::to_string(window) + " exceeds the model's context window (" + std::to_string(c.maxPositionEmbeddings) + ")");
  auto table = std::make_shared<ExpertTokenTable>(c.numMoeLayers(), c.numExperts);

  // Profile: prefill the first tokens window by window, recording each token's experts.
  PrefetchOptions record;
  record.record = table;
  model->setPrefetch(record);
  for (int start = 0; start < profileTokens; start += window) {
    const auto seq = model->addSequence();
    const int end = std::min(profileTokens, start + window);
    model->forward({{seq, std::vector<int32_t>(ids.begin() + start, ids.begin() + end)}});
    model->removeSequence(seq);
  }
  if (const auto out = line.text("--table-out")) table->save(*out);
  std::printf("model %s: %d MoE layers × %d experts, top-%d; text %s: %zu tokens\n", dir.string().c_str(), c.numMoeLayers(),
              c.numExperts, c.numExpertsPerTok, textOption->c_str(), ids.size());
  std::printf("expert table from tokens [0, %d): %zu (token, layer) pairs; scored on tokens [%zu, %zu), decoded one at a time\n",
              profileTokens, table->pairs(), ids.size() - static_cast<size_t>(evalTokens), ids.size());

  nlohmann::ordered_json doc;
  doc["model"] = dir.string();
  doc["host"] = hostIdentity();
  doc["text"] = *textOption;
  doc["text_tokens"] = ids.size();
  doc["profile_tokens"] = profileTokens;
  doc["eval_tokens"] = evalTokens;
  doc["window"] = window;
  doc["top_k"] = c.numExpertsPerTok;
  doc["experts"] = c.numExperts;
  doc["note"] = "layer 0 is predicted by the previous step's experts for every predictor; exact = the predicted set is the requested set";
  doc["predictors"] = nlohmann::ordered_json::array();
  std::printf("%-9s %8s %8s %9s   per layer recall\n", "predictor", "exact", "recall", "precision");
  const size_t evalStart = ids.size() - static_cast<size_t>(evalTokens);
  for (PrefetchPredictor p : {PrefetchPredictor::NextRouter, PrefetchPredictor::PreviousToken, PrefetchPredictor::TokenTable}) {
    PrefetchOptions o;
    o.predictor = p;
    o.table = table;
    model->setPrefetch(o);
    for (size_t start = evalStart; start < ids.size(); start += static_cast<size_t>(window)) {
      const auto seq = model->addSequence();
      const size_t end = std::min(ids.size(), start + static_cast<size_t>(window));
      for (size_t i = start; i < end; ++i) model->forward({{seq, {ids[i]}}});
      model->removeSequence(seq);
    }
    const PrefetchAccuracy a = model->prefetchAccuracy();
    nlohmann::ordered_json j = {{"predictor", prefetchPredictorName(p)}, {"exact", a.exactShare()}, {"recall", a.recall()},
                                {"precision", a.precision()}, {"layers", nlohmann::ordered_json::array()}};
    std::printf("%-9s %7.1f%% %7.1f%% %8.1f%%  ", prefetchPredictorName(p), 100 * a.exactShare(), 100 * a.recall(), 100 * a.precision());
    for (const auto& l : a.layers) {
      j["layers"].push_back({{"predictions", l.predictions}, {"exact", l.exactShare()}, {"recall", l.recall()}});
      std::printf(" %.2f", l.recall());
    }
    std::printf("\n");
    doc["predictors"].push_back(j);
  }
  model->setPrefetch({});
  if (const auto out = line.text("--json")) {
    std::ofstream f(*out);
    f << doc.dump(2) << "\n";
    if (!f) throw Error("cannot write " + *out);
  }
  return 0;
}

}  // namespace zipmoe::cli
