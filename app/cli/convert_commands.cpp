// convert, inspect, verify, info.
#include <cstdio>
#include <string>

#include "command_line.h"
#include "commands.h"
#include "terminal_progress.h"
#include "zipmoe/build_info.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/base/error.h"

namespace zipmoe::cli {

int runConvert(const Args& arguments) {
  static const CommandSpec spec{
      "zipmoe convert HF_DIR OUT_DIR [OPTIONS]",
      "Converts an HF checkpoint (safetensors) to a ZipMoE store: expert exponents compressed in K shards.",
      {{"--codec", "C",
        "exponent codec: huffman8, huffman, nibble, zstd[:LEVEL], lz4[:ACCEL], lz4hc[:LEVEL], raw "
        "(default: huffman8, nibble or zstd, whichever measures cheapest on this machine and disk)"},
       {"--level", "N", "the --codec's level (its range depends on the codec)"},
       {"--shards", "K", "exponent shards per expert tensor (1-64)"}},
      2, 2, ""};
  const CommandLine line = CommandLine::parse(spec, arguments);
  if (line.help()) return printUsage(spec);
  ConvertOptions options;
  if (const auto v = line.text("--codec")) options.codec = parseCodecSpec(*v);
  if (line.has("--level")) {
    const int level = line.integer<int>("--level", -1000000, 1000000, 0);
    if (!options.codec)
      throw Error("--level " + std::to_string(level) + " needs --codec (a measured choice uses the codec's default level)");
    options.codec->level = level;
    makeCodec(*options.codec);  // rejects a level the codec does not take
  }
  options.shards = line.integer<int>("--shards", 1, 64, options.shards);
  const Args& args = line.positionals();

  options.onCodecChosen = [](const CodecChoice& c) {
    if (c.by == CodecChosenBy::Measured)
      std::printf("codec measured on this machine (--codec overrides): %s\n", c.reason.c_str());
    std::fflush(stdout);
  };
  TerminalProgress bar("converting");
  options.onProgress = [&](const ConvertProgress& p) { bar.update(p.bytesDone, p.bytesTotal, p.currentTensor); };
  options.cancel = installInterruptHandler();
  const ConvertReport r = convertCheckpoint(args[0], args[1], options);
  bar.finish();
  std::printf("converted %s -> %s in %.1f s: %llu expert weights, experts %.2f%% of BF16 (%s, K = %d), dense %.1f MiB\n",
              args[0].c_str(), args[1].c_str(), r.seconds, static_cast<unsigned long long>(r.expertWeights),
              r.expertBytesBf16 ? 100.0 * static_cast<double>(r.expertBytesStored) / static_cast<double>(r.expertBytesBf16) : 0.0,
              describe(r.codecChoice.chosen).c_str(), options.shards, static_cast<double>(r.denseBytes) / (1 << 20));
  return 0;
}

int runInspect(const Args& arguments) {
  static const CommandSpec spec{"zipmoe inspect STORE",
                                "Sizes, ratios by tensor kind, exponent entropy and the bound it implies.", {}, 1, 1, ""};
  const CommandLine line = CommandLine::parse(spec, arguments);
  if (line.help()) return printUsage(spec);
  const Args& args = line.positionals();
  std::fputs(describeStore(args[0]).c_str(), stdout);
  return 0;
}

int runVerify(const Args& arguments) {
  static const CommandSpec spec{"zipmoe verify STORE HF_DIR",
                                "Bit-exact round trip of every tensor of STORE against the source checkpoint.", {}, 2, 2, ""};
  const CommandLine line = CommandLine::parse(spec, arguments);
  if (line.help()) return printUsage(spec);
  const Args& args = line.positionals();
  TerminalProgress bar("verifying");
  const VerifyReport r = verifyStore(args[0], args[1], [&](size_t done, size_t total) { bar.update(done, total); });
  bar.finish();
  std::printf("verified %s against %s: %zu expert and %zu dense tensors, %.1f MiB, bit-exact\n", args[0].c_str(),
              args[1].c_str(), r.expertTensors, r.denseTensors, static_cast<double>(r.bytesCompared) / (1 << 20));
  return 0;
}

int runInfo(const Args& arguments) {
  static const CommandSpec spec{"zipmoe info", "Build and CPU facts.", {}, 0, 0, ""};
  if (CommandLine::parse(spec, arguments).help()) return printUsage(spec);
  std::fputs(buildInfo().c_str(), stdout);
  return 0;
}

}  // namespace zipmoe::cli
