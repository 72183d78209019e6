// `zipmoe make-model`: writes a generated Hugging Face model directory (test models for every family).
//
//   zipmoe make-model --family F --preset P [--layers N] [--sigma S] [--seed N] [--shard-size MB] OUT_DIR
//   zipmoe make-model --family F --config CONFIG_JSON [--sigma S] [--seed N] [--shard-size MB] OUT_DIR
//   zipmoe make-model --list-presets
// --config generates weights for an existing config.json (e.g. a real model's, to get its exact tensor
// table without downloading it); the family then defaults to the config's model_type.
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "terminal_progress.h"
#include "zipmoe/error.h"
#include "zipmoe/test_model.h"

namespace zipmoe::cli {
namespace {

constexpr const char* kUsage =
    "usage: zipmoe make-model --family F (--preset P | --config CONFIG_JSON) [--layers N] [--sigma S] "
    "[--seed N] [--shard-size MB] OUT_DIR\n"
    "       zipmoe make-model --list-presets";

int listPresets() {
  for (ModelFamily family : allFamilies()) {
    std::cout << familyName(family) << ":";
    for (const auto& preset : testModelPresets(family)) std::cout << ' ' << preset;
    std::cout << '\n';
  }
  return 0;
}

ModelFamily parseFamily(const std::string& text) {
  if (auto family = familyFromName(text)) return *family;
  throw Error("make-model: unknown --family \"" + text + "\"; supported: " + supportedFamilyList());
}

nlohmann::json readConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(systemErrorMessage("make-model: cannot open --config " + path, errno));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error("make-model: --config " + path + " is not valid JSON: " + e.what());
  }
}

}  // namespace

int runMakeModel(const Args& arguments) {
  Args args = arguments;
  if (takeFlag(args, "--list-presets")) {
    expectPositionals(args, 0, kUsage);
    return listPresets();
  }
  std::string familyText, presetText, configPath, text;
  TestModelOptions options;
  const bool haveFamily = takeOption(args, "--family", familyText);
  const bool havePreset = takeOption(args, "--preset", presetText);
  const bool haveConfig = takeOption(args, "--config", configPath);
  if (takeOption(args, "--layers", text)) {
    const long long layers = parseInteger("--layers", text);
    if (layers < 1 || layers > 100000) throw Error("make-model: --layers must be in 1..100000, got " + text);
    options.layers = static_cast<int>(layers);
  }
  if (takeOption(args, "--sigma", text)) {
    options.sigma = parseNumber("--sigma", text);
    if (!(options.sigma > 0.0 && options.sigma < 1e30)) throw Error("make-model: --sigma must be positive, got " + text);
  }
  if (takeOption(args, "--seed", text)) {
    const long long seed = parseInteger("--seed", text);
    if (seed < 0) throw Error("make-model: --seed must not be negative, got " + text);
    options.seed = static_cast<uint64_t>(seed);
  }
  if (takeOption(args, "--shard-size", text)) {
    const long long megabytes = parseInteger("--shard-size", text);
    if (megabytes < 1) throw Error("make-model: --shard-size (MB) must be at least 1, got " + text);
    options.maxShardBytes = static_cast<uint64_t>(megabytes) << 20;
  }
  expectPositionals(args, 1, kUsage);
  const std::filesystem::path outDir = args[0];
  if (havePreset == haveConfig) throw Error("make-model: give exactly one of --preset and --config\n" + std::string(kUsage));

  nlohmann::json config;
  if (haveConfig) {
    config = readConfig(configPath);
    options.family = haveFamily ? parseFamily(familyText) : familyFromConfig(config, "make-model --config " + configPath);
    if (options.layers) throw Error("make-model: --layers applies to presets; edit num_hidden_layers in " + configPath);
    options.preset = "config " + configPath;
  } else {
    if (!haveFamily) throw Error("make-model: --family is required with --preset\n" + std::string(kUsage));
    options.family = parseFamily(familyText);
    options.preset = presetText;
    config = testModelConfig(options);
  }

  TerminalProgress progress("make-model");
  options.onProgress = [&progress](uint64_t done, uint64_t total) { progress.update(done, total); };
  const size_t tensorCount = checkpointTensors(options.family, config).size();
  const uint64_t bytes = generateTestModel(outDir, config, options);
  progress.finish();
  std::cout << "make-model: family " << familyName(options.family) << ", preset " << options.preset << ", "
            << tensorCount << " tensors, " << bytes << " bytes of weights -> " << outDir.string() << '\n';
  return 0;
}

}  // namespace zipmoe::cli
