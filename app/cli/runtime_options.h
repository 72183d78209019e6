// Command-line options of the expert runtime, shared by generate, chat and bench:
//   --budget SIZE|PCT%   expert memory budget: bytes with an optional KiB/MiB/GiB suffix, or a
//                        percentage of the model's expert bytes (BF16). Without it, every expert is
//                        resident (no runtime).
//   --pools FCSE         enabled ZipMoE pools (any non-empty subset of the letters F, C, S, E)
//   --offload zipmoe|full   ZipMoE (default) or full-tensor offloading (needs --checkpoint HF_DIR)
//   --eviction zipmoe|lru|fifo|lfu|marking   --no-plan (fixed equal split)   --fifo-schedule
//   --workers L   --buffered (page-cache reads instead of O_DIRECT)   --profile FILE
//   --replay-trace TSV [--trace-prompt N]   force routing from a real activation trace
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "commands.h"
#include "zipmoe/engine.h"

namespace zipmoe::cli {

struct BudgetSpec {
  bool percent = false;
  double value = 0;  // bytes, or percent of expert bytes
  uint64_t resolve(uint64_t expertBytes, uint64_t minimum) const;
};
BudgetSpec parseBudget(const std::string& option, const std::string& text);
unsigned parsePools(const std::string& text);
std::string poolsText(unsigned mask);

// Takes the runtime options out of args into `engine` (runtime set only with --budget). Returns the
// budget to apply once the runtime exists (percentages need the model's size).
std::optional<BudgetSpec> parseRuntimeOptions(Args& args, EngineOptions& engine);
// Opens the engine; applies a percentage budget (the runtime opens at its minimum, then the budget is set).
std::unique_ptr<Engine> openEngine(const std::filesystem::path& dir, EngineOptions options,
                                   const std::optional<BudgetSpec>& budget);
// A one-paragraph summary of the runtime's state after a run (pools, hits, bytes, makespans).
std::string describeRuntime(const ExpertRuntime& runtime);

constexpr const char* kRuntimeUsage =
    "[--budget SIZE|PCT%] [--pools FCSE] [--offload zipmoe|full --checkpoint HF_DIR] "
    "[--eviction zipmoe|lru|fifo|lfu|marking] [--no-plan] [--fifo-schedule] [--workers L] [--buffered] "
    "[--profile FILE] [--replay-trace TSV [--trace-prompt N]]";

}  // namespace zipmoe::cli
