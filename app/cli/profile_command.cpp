// `zipmoe profile STORE [--buffered] [--out FILE] [--samples N] [--dtype auto|bf16|fp32] [--threads N]`
// measures this machine's costs on the store — SM-chunk read (u), E-chunk read (v), E-chunk
// decompression (c), tensor recovery, whole-tensor read, and the expert FFN as a + b·tokens — prints
// them and saves them (default STORE/profile.json), where the runtime finds them.
#include <cstdio>

#include "commands.h"
#include "zipmoe/engine.h"
#include "zipmoe/error.h"

namespace zipmoe::cli {

int runProfile(const Args& arguments) {
  Args args = arguments;
  const std::string usage =
      "zipmoe profile STORE [--buffered] [--out FILE] [--samples N] [--dtype auto|bf16|fp32] [--threads N]";
  std::string v, out;
  const ReadMode mode = takeFlag(args, "--buffered") ? ReadMode::Buffered : ReadMode::Direct;
  takeOption(args, "--out", out);
  int samples = 24, threads = 0;
  ComputeDtype dtype = ComputeDtype::Auto;
  if (takeOption(args, "--samples", v)) {
    const long long n = parseInteger("--samples", v);
    if (n < 1 || n > 100000) throw Error("option --samples must be in 1..100000, got " + v);
    samples = static_cast<int>(n);
  }
  if (takeOption(args, "--dtype", v)) {
    if (v == "bf16") dtype = ComputeDtype::BFloat16;
    else if (v == "fp32") dtype = ComputeDtype::Float32;
    else if (v != "auto") throw Error("option --dtype must be auto, bf16 or fp32, got '" + v + "'");
  }
  if (takeOption(args, "--threads", v)) {
    const long long n = parseInteger("--threads", v);
    if (n < 0 || n > 4096) throw Error("option --threads must be in 0..4096, got " + v);
    threads = static_cast<int>(n);
  }
  expectPositionals(args, 1, usage);
  const std::filesystem::path dir = args[0];
  const auto store = Store::open(dir);
  const CostProfile p = profileStore(*store, mode, dtype, threads, samples);
  const std::filesystem::path path = out.empty() ? dir / "profile.json" : std::filesystem::path(out);
  saveCostProfile(p, path);
  std::printf("host           %s\nstore          %s\nread mode      %s\n", p.host.c_str(), p.storeId.c_str(), p.readMode.c_str());
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
