// convert, inspect, verify, info.
#include <cstdio>

#include "commands.h"
#include "terminal_progress.h"
#include "zipmoe/build_info.h"
#include "zipmoe/converter.h"
#include "zipmoe/error.h"

namespace zipmoe::cli {

int runConvert(const Args& argsIn) {
  Args args = argsIn;
  const std::string usage = "zipmoe convert HF_DIR OUT_DIR [--codec huffman|zstd|lz4|lz4hc|raw] [--level N] [--shards K]";
  ConvertOptions options;
  std::string value;
  if (takeOption(args, "--codec", value)) options.codec = parseCodecSpec(value);
  if (takeOption(args, "--level", value)) {
    options.codec.level = static_cast<int>(parseInteger("--level", value));
    makeCodec(options.codec);  // rejects a level the codec does not take
  }
  if (takeOption(args, "--shards", value)) options.shards = static_cast<int>(parseInteger("--shards", value));
  expectPositionals(args, 2, usage);

  TerminalProgress bar("converting");
  options.onProgress = [&](const ConvertProgress& p) { bar.update(p.bytesDone, p.bytesTotal, p.currentTensor); };
  options.cancel = installInterruptHandler();
  const ConvertReport r = convertCheckpoint(args[0], args[1], options);
  bar.finish();
  std::printf("converted %s -> %s in %.1f s: %llu expert weights, experts %.2f%% of BF16 (%s, K = %d), dense %.1f MiB\n",
              args[0].c_str(), args[1].c_str(), r.seconds, static_cast<unsigned long long>(r.expertWeights),
              r.expertBytesBf16 ? 100.0 * static_cast<double>(r.expertBytesStored) / static_cast<double>(r.expertBytesBf16) : 0.0,
              describe(options.codec).c_str(), options.shards, static_cast<double>(r.denseBytes) / (1 << 20));
  return 0;
}

int runInspect(const Args& argsIn) {
  Args args = argsIn;
  expectPositionals(args, 1, "zipmoe inspect STORE");
  std::fputs(describeStore(args[0]).c_str(), stdout);
  return 0;
}

int runVerify(const Args& argsIn) {
  Args args = argsIn;
  expectPositionals(args, 2, "zipmoe verify STORE HF_DIR");
  TerminalProgress bar("verifying");
  const VerifyReport r = verifyStore(args[0], args[1], [&](size_t done, size_t total) { bar.update(done, total); });
  bar.finish();
  std::printf("verified %s against %s: %zu expert and %zu dense tensors, %.1f MiB, bit-exact\n", args[0].c_str(),
              args[1].c_str(), r.expertTensors, r.denseTensors, static_cast<double>(r.bytesCompared) / (1 << 20));
  return 0;
}

int runInfo(const Args& argsIn) {
  Args args = argsIn;
  expectPositionals(args, 0, "zipmoe info");
  std::fputs(buildInfo().c_str(), stdout);
  return 0;
}

}  // namespace zipmoe::cli
