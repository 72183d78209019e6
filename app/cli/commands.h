// The `zipmoe` subcommands. Each takes its arguments (after the subcommand name) and returns the
// process exit status; errors are thrown as zipmoe::Error and reported by main().
#pragma once

#include <string>
#include <vector>

namespace zipmoe::cli {

using Args = std::vector<std::string>;

int runConvert(const Args& args);     // convert HF_DIR OUT_DIR [--codec C] [--level N] [--shards K]
int runInspect(const Args& args);     // inspect STORE
int runVerify(const Args& args);      // verify STORE HF_DIR
int runMakeModel(const Args& args);   // make-model --family F --preset P [--layers N] ... OUT_DIR
int runBenchCodec(const Args& args);  // bench codec STORE
int runInfo(const Args& args);        // info: build and CPU facts
int runGenerate(const Args& args);    // generate MODEL --prompt TEXT [sampling options]
int runChat(const Args& args);        // chat MODEL [sampling options]: interactive
int runTrainDemo(const Args& args);
int runPlan(const Args& args);          // plan STORE --budgets PCT,...: predicted TPOT/TTFT per budget
int runProfile(const Args& args);       // profile STORE: measure u, v, c, recovery, expert compute
int runBenchRuntime(const Args& args);  // bench runtime: ZipMoE vs full-tensor offloading, TPOT per budget
int runBenchSuite(const Args& args);    // bench suite NAME: the paper's evaluation, JSON + PNG figures
int runBenchReport(const Args& args);   // bench report DIR: the suites' results as Markdown tables
int runBenchCompare(const Args& args);  // bench compare DIR_A DIR_B: a rerun beside an earlier run
int runBenchTokenizer(const Args& args);
int runBenchConstrain(const Args& args);
int runBenchPrefetchAccuracy(const Args& args);  // bench prefetch-accuracy MODEL --text FILE  // bench tokenizer MODEL --text FILE: encode/decode speed
int runBenchPlanner(const Args& args);    // bench planner: time to plan every layer at several budgets
int runBenchChat(const Args& args);       // bench chat MODEL: TTFT per turn with and without KV-cache reuse
int runBenchKernels(const Args& args);    // bench kernels: read bandwidth and BF16 GEMV kernels
int runServe(const Args& args);           // serve MODEL: the OpenAI-compatible HTTP server
int runBenchServe(const Args& args);      // bench serve MODEL: load generator against the server on loopback
int runNode(const Args& args);            // node STORE --listen ADDR: serve experts to other machines
int runBenchDist(const Args& args);       // bench dist --trace TSV: experts shared by 3 node processes

// Small argument helpers, kept for commands that read their own arguments (bench report/compare;
// main() checks their command lines against a CommandSpec first). New commands declare a
// CommandSpec and use CommandLine (command_line.h).
// Removes "--name VALUE" (or "--name=VALUE") from args and returns VALUE; throws when VALUE is missing.
bool takeOption(Args& args, const std::string& name, std::string& value);
bool takeFlag(Args& args, const std::string& name);
// Parses a whole-text integer / a finite decimal number; throws zipmoe::Error naming the option and the text.
long long parseInteger(const std::string& option, const std::string& text);
double parseNumber(const std::string& option, const std::string& text);
// "25 %": a percentage as the benchmarks print it.
std::string percentText(double percent);
// Throws when unknown options remain or the positional count is wrong.
void expectPositionals(const Args& args, size_t count, const std::string& usage);

}  // namespace zipmoe::cli
