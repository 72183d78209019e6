// Runtime options for the CLI (see runtime_options.h).
#include "runtime_options.h"

#include <cmath>
#include <cstdio>

#include "zipmoe/error.h"

namespace zipmoe::cli {

uint64_t BudgetSpec::resolve(uint64_t expertBytes, uint64_t minimum) const {
  if (!percent) return static_cast<uint64_t>(value);
  return minimum + static_cast<uint64_t>(value / 100.0 * static_cast<double>(expertBytes));
}

BudgetSpec parseBudget(const std::string& option, const std::string& text) {
  BudgetSpec b;
  std::string number = text;
  double scale = 1;
  auto endsWith = [&](const std::string& suffix) {
    if (number.size() > suffix.size() && number.compare(number.size() - suffix.size(), suffix.size(), suffix) == 0) {
      number.resize(number.size() - suffix.size());
      return true;
    }
    return false;
  };
  if (endsWith("%")) b.percent = true;
  else if (endsWith("GiB") || endsWith("G")) scale = 1024.0 * 1024 * 1024;
  else if (endsWith("MiB") || endsWith("M")) scale = 1024.0 * 1024;
  else if (endsWith("KiB") || endsWith("K")) scale = 1024.0;
  const double v = parseNumber(option, number);
  if (!(v >= 0) || !std::isfinite(v) || (b.percent && v > 1000))
    throw Error("option " + option + ": '" + text + "' is not a valid budget (bytes with K/M/G suffix, or a percentage)");
  b.value = b.percent ? v : v * scale;
  return b;
}

unsigned parsePools(const std::string& text) {
  unsigned mask = 0;
  for (char c : text) {
    const std::string letters = "FCSE";
    const auto pos = letters.find(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    if (pos == std::string::npos)
      throw Error("option --pools: '" + text + "' has '" + std::string(1, c) + "'; use the letters F, C, S, E");
    mask |= 1u << pos;
  }
  if (mask == 0) throw Error("option --pools: give at least one of F, C, S, E");
  return mask;
}

std::string poolsText(unsigned mask) {
  std::string s;
  for (int p = 0; p < 4; ++p)
    if (mask & (1u << p)) s += "FCSE"[p];
  return s;
}

std::optional<BudgetSpec> parseRuntimeOptions(Args& args, EngineOptions& engine) {
  std::string v;
  RuntimeOptions r;
  std::optional<BudgetSpec> budget;
  bool any = false;
  if (takeOption(args, "--budget", v)) budget = parseBudget("--budget", v);
  if (takeOption(args, "--pools", v)) {
    r.pools = parsePools(v);
    any = true;
  }
  if (takeOption(args, "--offload", v)) {
    if (v == "zipmoe") r.mode = OffloadMode::ZipMoE;
    else if (v == "full") r.mode = OffloadMode::FullTensor;
    else throw Error("option --offload must be zipmoe or full, got '" + v + "'");
    any = true;
  }
  if (takeOption(args, "--checkpoint", v)) {
    r.checkpointDir = v;
    any = true;
  }
  if (takeOption(args, "--eviction", v)) {
    r.eviction = parseEvictionPolicy(v);
    any = true;
  }
  if (takeFlag(args, "--no-plan")) {
    r.planning = false;
    any = true;
  }
  if (takeFlag(args, "--fifo-schedule")) {
    r.fifoSchedule = true;
    any = true;
  }
  if (takeOption(args, "--workers", v)) {
    const long long n = parseInteger("--workers", v);
    if (n < 1 || n > 256) throw Error("option --workers must be in 1..256, got " + v);
    r.decompressWorkers = static_cast<int>(n);
    any = true;
  }
  if (takeFlag(args, "--buffered")) {
    r.readMode = ReadMode::Buffered;
    any = true;
  }
  if (takeOption(args, "--profile", v)) engine.profilePath = v;
  if (takeOption(args, "--replay-trace", v)) engine.replayTrace = v;
  if (takeOption(args, "--trace-prompt", v)) {
    const long long n = parseInteger("--trace-prompt", v);
    if (n < 0) throw Error("option --trace-prompt must not be negative, got " + v);
    engine.replayPrompt = static_cast<int>(n);
  }
  if (any && !budget) throw Error("runtime options need --budget SIZE|PCT% (without it every expert is resident)");
  if (r.mode == OffloadMode::FullTensor && r.checkpointDir.empty())
    throw Error("--offload full reads whole BF16 tensors from the HF checkpoint: give --checkpoint HF_DIR");
  if (budget) {
    r.budgetBytes = budget->percent ? 0 : static_cast<uint64_t>(budget->value);
    engine.runtime = r;
  }
  return budget;
}

std::unique_ptr<Engine> openEngine(const std::filesystem::path& dir, EngineOptions options,
                                   const std::optional<BudgetSpec>& budget) {
  if (options.runtime && budget && budget->percent) options.runtime->budgetBytes = UINT64_MAX / 4;
  if (!options.onStatus) options.onStatus = [](const std::string& s) { std::fprintf(stderr, "zipmoe: %s\n", s.c_str()); };
  auto engine = Engine::open(dir, options);
  if (engine->runtime() && budget && budget->percent) {
    engine->setMemoryBudget(budget->resolve(engine->runtime()->expertBytes(), engine->runtime()->minimumBudget()));
    engine->runtime()->waitForPlan();
  }
  return engine;
}

std::string describeRuntime(const ExpertRuntime& rt) {
  const RuntimeStats s = rt.stats();
  const auto mib = [](uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  char buf[1024];
  std::string out;
  const bool full = rt.options().mode == OffloadMode::FullTensor;
  std::snprintf(buf, sizeof buf, "[%s: budget %.1f MiB (%.1f%% of %.1f MiB of experts), working set %.1f MiB, held %.1f MiB",
                full ? (std::string("full-tensor ") + evictionPolicyName(rt.options().eviction)).c_str() : "zipmoe",
                mib(s.budgetBytes), 100.0 * static_cast<double>(s.budgetBytes) / static_cast<double>(rt.expertBytes()),
                mib(rt.expertBytes()), mib(s.workingSetBytes), mib(s.heldBytes));
  out += buf;
  const double acts = static_cast<double>(std::max<uint64_t>(1, s.activations));
  if (full) {
    std::snprintf(buf, sizeof buf, "; cache %.1f MiB, hit rate %.1f%%", mib(s.pools[0].capacityBytes),
                  100.0 * static_cast<double>(s.hits[0]) / acts);
    out += buf;
  } else {
    out += "; pools";
    for (int p = 0; p < 4; ++p) {
      std::snprintf(buf, sizeof buf, " %c %.0f%% %.1f MiB hit %.1f%%", "FCSE"[p], 100.0 * s.pools[static_cast<size_t>(p)].ratio,
                    mib(s.pools[static_cast<size_t>(p)].capacityBytes), 100.0 * static_cast<double>(s.hits[static_cast<size_t>(p)]) / acts);
      out += buf;
    }
  }
  std::snprintf(buf, sizeof buf, "; miss %.1f%%; read %.1f MiB; stall %.1f ms; layer makespan %.2f ms measured",
                100.0 * static_cast<double>(s.misses) / acts, mib(s.bytesRead), s.stallSeconds * 1e3,
                s.layers ? s.measuredMakespan / static_cast<double>(s.layers) * 1e3 : 0.0);
  out += buf;
  if (!full && s.layers) {
    std::snprintf(buf, sizeof buf, ", %.2f ms predicted, %.2f ms lower bound (ratio %.2f)",
                  s.predictedMakespan / static_cast<double>(s.layers) * 1e3, s.lowerBound / static_cast<double>(s.layers) * 1e3,
                  s.lowerBound > 0 ? s.measuredMakespan / s.lowerBound : 0.0);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "; %llu replans, last %.2f ms]", static_cast<unsigned long long>(s.replans),
                s.lastReplanSeconds * 1e3);
  out += buf;
  return out;
}

}  // namespace zipmoe::cli
