// `zipmoe bench tokenizer MODEL|TOKENIZER_JSON`: how fast a model's tokenizer encodes and decodes a
// text (e.g. the Tiny Shakespeare corpus in resources/corpus/): bytes and tokens per second, best of
// R runs on one thread, every run's round trip checked byte for byte. The figure that a pass/fail
// test used to assert (and that failed under ASan on a loaded machine) lives here, as a measurement.
// `zipmoe bench constrain MODEL`: constrained decoding's cost per decode step on the same vocabulary.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/kernels/constrain_bench.h"
#include "command_line.h"
#include "commands.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/error.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe::cli {
namespace {

// MODEL (a directory holding tokenizer.json) or the file itself.
std::filesystem::path tokenizerFile(std::filesystem::path path) {
  if (std::filesystem::is_directory(path)) path /= "tokenizer.json";
  if (!std::filesystem::is_regular_file(path)) throw Error(path.string() + ": no such tokenizer file");
  return path;
}

void writeJson(const nlohmann::ordered_json& j, const std::string& path) {
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  if (!f) throw Error(path + ": cannot write");
}

}  // namespace

int runBenchConstrain(const Args& arguments) {
  static const CommandSpec command{
      "zipmoe bench constrain MODEL|TOKENIZER_JSON [OPTIONS]",
      "What constrained decoding (tool calls, response_format) adds to a decode step on a model's\n"
      "vocabulary: the byte index built once, then per step the token mask, the completability check of\n"
      "the sampled token and taking it, over replies driven by random logits (mean, p50, p99, max ms).",
      {{"--replies", "N", "replies per scenario (1-10000, default 50)"},
       {"--seed", "S", "the random logits' seed (default 1)"},
       {"--json", "FILE", "also write the figures as JSON"}},
      1, 1, ""};
  const CommandLine line = CommandLine::parse(command, arguments);
  if (line.help()) return printUsage(command);
  const int replies = line.integer<int>("--replies", 1, 10000, 50);
  const auto seed = line.integer<uint64_t>("--seed", 0, ~uint64_t{0}, 1);
  const std::filesystem::path path = tokenizerFile(line.positional(0));
  const auto tok = Tokenizer::fromFile(path);
  const ConstraintFigures f = measureConstrainedDecoding(*tok, replies, seed);
  std::printf("tokenizer %s: %d tokens, byte index built in %.1f ms (once per tokenizer)\n", path.string().c_str(), f.vocab,
              f.indexMs);
  std::printf("%-12s %8s %7s %9s %9s %9s %9s\n", "scenario", "replies", "steps", "mean ms", "p50 ms", "p99 ms", "max ms");
  for (const auto& s : f.scenarios)
    std::printf("%-12s %8d %7d %9.3f %9.3f %9.3f %9.3f\n", s.scenario.c_str(), s.replies, s.steps, s.meanMs, s.p50Ms,
                s.p99Ms, s.maxMs);
  if (const auto out = line.text("--json")) {
    nlohmann::ordered_json j;
    j["tokenizer"] = path.string();
    j["host"] = hostIdentity();
    j["vocab"] = f.vocab;
    j["index_ms"] = f.indexMs;
    j["seed"] = seed;
    for (const auto& s : f.scenarios)
      j["scenarios"].push_back({{"scenario", s.scenario}, {"replies", s.replies}, {"steps", s.steps}, {"mean_ms", s.meanMs},
                                {"p50_ms", s.p50Ms}, {"p99_ms", s.p99Ms}, {"max_ms", s.maxMs}});
    writeJson(j, *out);
  }
  return 0;
}

int runBenchTokenizer(const Args& arguments) {
  static const CommandSpec command{
      "zipmoe bench tokenizer MODEL|TOKENIZER_JSON --text FILE [OPTIONS]",
      "Encode and decode speed of a model's tokenizer.json on one thread: MB/s and tokens/s, best of R runs,\n"
      "every round trip checked byte for byte.",
      {{"--text", "FILE", "the text to encode (required; e.g. resources/corpus/tinyshakespeare.txt)"},
       {"--repeat", "R", "timed runs, the best is reported (1-100, default 5)"},
       {"--json", "FILE", "also write the figures as JSON"}},
      1, 1, ""};
  const CommandLine line = CommandLine::parse(command, arguments);
  if (line.help()) return printUsage(command);
  const int repeats = line.integer<int>("--repeat", 1, 100, 5);
  const auto textOption = line.text("--text");
  if (!textOption) throw Error("bench tokenizer needs --text FILE (the text to encode)");
  const std::filesystem::path tokenizerPath = tokenizerFile(line.positional(0));
  const std::filesystem::path textPath = *textOption;
  if (!std::filesystem::is_regular_file(textPath)) throw Error(textPath.string() + ": no such text file (--text)");

  const auto tok = Tokenizer::fromFile(tokenizerPath);
  const std::string text = readInputFile(textPath);
  using Clock = std::chrono::steady_clock;
  double encodeBest = 1e300, decodeBest = 1e300;
  size_t tokens = 0;
  for (int r = 0; r < repeats; ++r) {
    // Every run encodes from a fresh tokenizer so the per-word merge cache starts empty each time
    // (a warm cache would measure lookups, not tokenization).
    const auto fresh = Tokenizer::fromFile(tokenizerPath);
    auto t0 = Clock::now();
    const std::vector<int32_t> ids = fresh->encode(text);
    encodeBest = std::min(encodeBest, std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    const std::string back = fresh->decode(ids);
    decodeBest = std::min(decodeBest, std::chrono::duration<double>(Clock::now() - t0).count());
    if (back != text) throw Error("the round trip of " + textPath.string() + " through " + tokenizerPath.string() + " differs");
    tokens = ids.size();
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("tokenizer %s\ntext %s: %.2f MB -> %zu tokens (%.2f bytes per token), best of %d runs, one thread\n",
              tokenizerPath.string().c_str(), textPath.string().c_str(), mb, tokens,
              static_cast<double>(text.size()) / static_cast<double>(std::max<size_t>(1, tokens)), repeats);
  std::printf("encode: %.3f s  %.2f MB/s  %.0f tokens/s\ndecode: %.3f s  %.2f MB/s  %.0f tokens/s\n", encodeBest,
              mb / encodeBest, static_cast<double>(tokens) / encodeBest, decodeBest, mb / decodeBest,
              static_cast<double>(tokens) / decodeBest);
  if (const auto out = line.text("--json")) {
    nlohmann::ordered_json j;
    j["tokenizer"] = tokenizerPath.string();
    j["text"] = textPath.string();
    j["host"] = hostIdentity();
    j["bytes"] = text.size();
    j["tokens"] = tokens;
    j["repeat"] = repeats;
    j["encode_seconds"] = encodeBest;
    j["decode_seconds"] = decodeBest;
    j["encode_mb_per_s"] = mb / encodeBest;
    j["decode_mb_per_s"] = mb / decodeBest;
    writeJson(j, *out);
  }
  return 0;
}

}  // namespace zipmoe::cli
