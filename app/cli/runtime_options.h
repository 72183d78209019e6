// Command-line options of the expert runtime, shared by generate, chat and bench:
//   --budget SIZE|PCT%   expert memory budget: bytes with an optional K/M/G (KiB/MiB/GiB) suffix,
//                        or PCT% (0 < PCT <= 100) of the model's expert bytes in BF16. Either way it
//                        is the whole budget, the runtime's working set included (budgetBytes()).
//                        Without it, every expert is resident (no runtime).
//   --pools FCSE         enabled ZipMoE pools (any non-empty subset of the letters F, C, S, E)
//   --offload zipmoe|full   ZipMoE (default) or full-tensor offloading (needs --checkpoint HF_DIR)
//   --eviction zipmoe|lru|fifo|lfu|marking|usage   --no-plan (fixed equal split)   --fifo-schedule
//   --workers L   --buffered (page-cache reads instead of O_DIRECT)   --profile FILE
//   --budget auto [--free-margin SIZE]   the budget follows the machine's free memory (BudgetFollower)
//   --no-history         no persisted activation statistics (by default planned from and added to)
//   --warm-start         wait for the pools to fill from the history before the first prompt (by
//                        default they fill in the background until it comes)   --no-warm-start
//   --replay-trace TSV [--trace-prompt N]   force routing from a real activation trace
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "command_line.h"
#include "commands.h"
#include "zipmoe/engine.h"
#include "zipmoe/generation/reply.h"

namespace zipmoe::cli {

// What `--budget N%` means, everywhere (generate, chat, bench runtime, bench suite): N % of the
// model's routed expert bytes in BF16 (ExpertRuntime::expertBytes()), as the whole budget — the
// working set (staging and output slots) comes out of it, it is not added (MemoryBudget::
// shareOfExperts; budgetBytes is MemoryBudget::shareBytes). The same figure the
// bench suites and docs/BENCHMARKS.md report, and the app's first budget for a model (a fraction of
// the expert bytes); the app's budget page names its presets by the pools' share instead.
uint64_t budgetBytes(double percent, uint64_t expertBytes);
// The percentage text of bench's --budget/--budgets items: "25" or "25%", 0 < N <= 100.
double parseBudgetPercent(const std::string& option, const std::string& text);

// MemoryBudget::parse with the option named in its error ("option --budget: '150%' is not …").
MemoryBudget parseBudget(const std::string& option, const std::string& text);
// The same for an option that takes bytes only (a node's memory, a body's size): a percentage is refused.
uint64_t parseByteSize(const std::string& option, const std::string& text);

// The runtime options, one OptionSpec each, for a command's spec.
const std::vector<OptionSpec>& runtimeOptionSpecs();
// Reads the runtime options into `engine` (the runtime, and its MemoryBudget, are set only with
// --budget). Returns --budget's text as given, for messages; nullopt without it.
std::optional<std::string> parseRuntimeOptions(const CommandLine& line, EngineOptions& engine);
// Opens the engine (its runtime resolves the budget); a budget below the runtime's minimum is
// refused (the message names the option, the minimum in bytes and as a share of the expert bytes).
// With `awaitWarmStart` (--warm-start) it waits for the warm start and prints what it did.
std::unique_ptr<Engine> openEngine(const std::filesystem::path& dir, EngineOptions options,
                                   const std::optional<std::string>& budgetText, bool awaitWarmStart = false);
// --context-overflow drop-oldest|error, taken by every door (generate, chat, serve): what happens to
// a conversation that outgrows the model's context window (zipmoe/generation/conversation.h).
OptionSpec contextOverflowOptionSpec();
ContextOverflow parseContextOverflowOption(const CommandLine& line);  // default drop-oldest
// A one-paragraph summary of the runtime's state after a run (pools, hits, bytes, makespans).
std::string describeRuntime(const ExpertRuntime& runtime);
// "[prefetch predictor router: exact 41.2%, recall 70.3%, precision 70.3% over N predictions]", or
// empty when the model has made no prediction.
std::string describePrefetchAccuracy(const MoeModel& model, PrefetchPredictor predictor);

}  // namespace zipmoe::cli
