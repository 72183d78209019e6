// `zipmoe profile STORE [--buffered] [--out FILE] [--samples N] [--dtype auto|bf16|fp32] [--threads N]`
// measures this machine's costs on the store — SM-chunk read (u), E-chunk read (v), E-chunk
// decompression (c), tensor recovery, whole-tensor read, and the expert FFN as a + b·tokens — prints
// them and saves them (default STORE/profile.json), where the runtime finds them.
#include <cstdio>

#include "command_line.h"
#include "commands.h"
#include "zipmoe/engine.h"
#include "zipmoe/base/error.h"

namespace zipmoe::cli {

int runProfile(const Args& arguments) {
  static const CommandSpec spec{
      "zipmoe profile STORE [OPTIONS]",
      "Measures this machine's costs on STORE (u, v, c, recovery, whole-tensor read, expert FFN) and saves them.",
      {{"--buffered", "", "page-cache reads instead of O_DIRECT"},
       {"--out", "FILE", "where to save the profile (default STORE/profile.json)"},
       {"--samples", "N", "expert tensors measured (1-100000, default 24)"},
       {"--dtype", "auto|bf16|fp32", "compute type of the FFN measurement"},
       {"--threads", "N", "compute threads (0 = every CPU this process may use, up to 4096)"}},
      1, 1, ""};
  const CommandLine line = CommandLine::parse(spec, arguments);
  if (line.help()) return printUsage(spec);
  const ReadMode mode = line.has("--buffered") ? ReadMode::Buffered : ReadMode::Direct;
  const std::string out = line.text("--out", "");
  const int samples = line.integer<int>("--samples", 1, 100000, 24);
  const int threads = line.integer<int>("--threads", 0, 4096, 0);
  ComputeDtype dtype = ComputeDtype::Auto;
  if (const auto v = line.text("--dtype")) {
    if (*v == "bf16") dtype = ComputeDtype::BFloat16;
    else if (*v == "fp32") dtype = ComputeDtype::Float32;
    else if (*v != "auto") throw Error("option --dtype must be auto, bf16 or fp32, got '" + *v + "'");
  }
  const Args& args = line.positionals();
  const std::filesystem::path dir = args[0];
  const auto store = Store::open(dir);
  const CostProfile p = profileStore(*store, mode, dtype, threads, samples);
  const std::filesystem::path path = out.empty() ? dir / "profile.json" : std::filesystem::path(out);
  saveCostProfile(p, path);
  std::printf("host           %s\nstore          %s\nread mode      %s\nkernels        %s\n", p.host.c_str(),
              p.storeId.c_str(), p.readMode.c_str(), p.kernels.c_str());
  std::printf("u  SM-chunk read          %9.3f ms\n", p.smRead * 1e3);
  std::printf("v  E-chunk read           %9.3f ms\n", p.eRead * 1e3);
  std::printf("c  E-chunk decompression  %9.3f ms\n", p.decompress * 1e3);
  std::printf("   tensor recovery        %9.3f ms\n", p.recover * 1e3);
  std::printf("   whole BF16 tensor read %9.3f ms\n", p.fullRead * 1e3);
  std::printf("   expert FFN             %9.3f ms + %.3f ms per token\n", p.computeBase * 1e3, p.computePerToken * 1e3);
  std::printf("saved to %s\n", path.string().c_str());
  return 0;
}

}  // namespace zipmoe::cli
