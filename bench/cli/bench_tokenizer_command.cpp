// `zipmoe bench tokenizer MODEL|TOKENIZER_JSON`: how fast a model's tokenizer encodes and decodes a
// text (e.g. the Tiny Shakespeare corpus in resources/corpus/): bytes and tokens per second, best of
// R runs on one thread, every run's round trip checked byte for byte. The figure that a pass/fail
// test used to assert (and that failed under ASan on a loaded machine) lives here, as a measurement.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "commands.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/error.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe::cli {
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
  std::filesystem::path tokenizerPath = line.positional(0);
  if (std::filesystem::is_directory(tokenizerPath)) tokenizerPath /= "tokenizer.json";
  const auto textOption = line.text("--text");
  if (!textOption) throw Error("bench tokenizer needs --text FILE (the text to encode)");
  const std::filesystem::path textPath = *textOption;
  if (!std::filesystem::is_regular_file(tokenizerPath)) throw Error(tokenizerPath.string() + ": no such tokenizer file");
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
    std::ofstream f(*out);
    f << j.dump(2) << "\n";
    if (!f) throw Error(*out + ": cannot write");
  }
  return 0;
}

}  // namespace zipmoe::cli
