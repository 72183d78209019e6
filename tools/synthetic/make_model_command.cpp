// `zipmoe make-model`: writes a synthetic Hugging Face model directory (any supported family and preset).
//
//   zipmoe make-model --family F --preset P [--layers N] [--sigma S] [--seed N] [--shard-size MB] OUT_DIR
//   zipmoe make-model --family F --config CONFIG_JSON [--sigma S] [--seed N] [--shard-size MB] OUT_DIR
//   zipmoe make-model --list-presets
// --config generates weights for an existing config.json (e.g. a real model's, to get its exact tensor
// table without downloading it); the family then defaults to the config's model_type.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "commands.h"
#include "terminal_progress.h"
#include "zipmoe/base/error.h"
#include "hf/checkpoint_tensors.h"
#include "tools/synthetic/synthetic_model.h"

namespace zipmoe::cli {
namespace {

const CommandSpec& makeModelSpec() {
  static const CommandSpec spec{
      "zipmoe make-model --family F (--preset P | --config CONFIG_JSON) [OPTIONS] OUT_DIR\n"
      "       zipmoe make-model --list-presets",
      "Writes a generated Hugging Face model directory (random weights of a real or small shape).",
      {{"--family", "F", "model family: " + supportedFamilyList()},
       {"--preset", "P", "shape preset (--list-presets lists them)"},
       {"--config", "CONFIG_JSON", "generate weights for this config.json instead of a preset"},
       {"--layers", "N", "number of layers of a preset (1-100000)"},
       {"--sigma", "S", "standard deviation of the weights (> 0)"},
       {"--seed", "N", "random seed (0 or more)"},
       {"--shard-size", "MB", "largest safetensors file, in MiB (1-1048576)"},
       {"--list-presets", "", "list every family's presets and exit"}},
      0, 1, ""};
  return spec;
}

int listPresets() {
  for (ModelFamily family : allFamilies()) {
    std::cout << familyName(family) << ":";
    for (const auto& preset : syntheticModelPresets(family)) std::cout << ' ' << preset;
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
  const CommandSpec& spec = makeModelSpec();
  const CommandLine line = CommandLine::parse(spec, arguments);
  if (line.help()) return printUsage(spec);
  const Args& args = line.positionals();
  if (line.has("--list-presets")) {
    if (!args.empty()) throw Error("make-model --list-presets takes no other argument\nusage: " + spec.synopsis);
    return listPresets();
  }
  SyntheticModelOptions options;
  const bool haveFamily = line.has("--family"), havePreset = line.has("--preset"), haveConfig = line.has("--config");
  const std::string familyText = line.text("--family", ""), presetText = line.text("--preset", ""),
                    configPath = line.text("--config", "");
  if (line.has("--layers")) options.layers = line.integer<int>("--layers", 1, 100000, 1);
  if (line.has("--sigma")) options.sigma = line.number("--sigma", 0, 1e30, options.sigma);
  if (line.has("--sigma") && !(options.sigma > 0)) throw Error("option --sigma: " + *line.text("--sigma") + " must be positive");
  options.seed = line.integer<uint64_t>("--seed", 0, std::numeric_limits<uint64_t>::max(), options.seed);
  if (line.has("--shard-size")) options.maxShardBytes = line.integer<uint64_t>("--shard-size", 1, 1 << 20, 1) << 20;
  if (args.size() != 1) throw Error("expected 1 argument (OUT_DIR), got " + std::to_string(args.size()) + "\nusage: " + spec.synopsis);
  if (haveFamily) parseFamily(familyText);  // named before anything is read
  const std::filesystem::path outDir = args[0];
  if (havePreset == haveConfig) throw Error("make-model: give exactly one of --preset and --config\nusage: " + spec.synopsis);

  nlohmann::json config;
  if (haveConfig) {
    config = readConfig(configPath);
    options.family = haveFamily ? parseFamily(familyText) : familyFromConfig(config, "make-model --config " + configPath);
    if (options.layers) throw Error("make-model: --layers applies to presets; edit num_hidden_layers in " + configPath);
    options.preset = "config " + configPath;
  } else {
    if (!haveFamily) throw Error("make-model: --family is required with --preset\nusage: " + spec.synopsis);
    options.family = parseFamily(familyText);
    options.preset = presetText;
    config = syntheticModelConfig(options);
  }

  TerminalProgress progress("make-model");
  options.onProgress = [&progress](uint64_t done, uint64_t total) { progress.update(done, total); };
  const size_t tensorCount = checkpointTensors(options.family, config).size();
  const uint64_t bytes = generateSyntheticModel(outDir, config, options);
  progress.finish();
  std::cout << "make-model: family " << familyName(options.family) << ", preset " << options.preset << ", "
            << tensorCount << " tensors, " << bytes << " bytes of weights -> " << outDir.string() << '\n';
  return 0;
}

}  // namespace zipmoe::cli
