// Command-line options that share a model's experts with other machines (docs/DISTRIBUTED.md), part
// of the runtime options every engine-opening command takes (generate, chat, serve, bench chat):
//   --nodes ADDR,...          expert nodes (zipmoe node) that compute the experts this machine does not hold
//   --node-token-file FILE    the cluster's shared token (default $ZIPMOE_NODE_TOKEN)
//   --node-deadline MS        per remote call (default 5000)
//   --node-failure local|fail a node that fails: compute its experts here (default) or fail the request
//   --rebalance-every S       the coordinator's DanceMoE placement and migration, every S seconds (0: off)
//   --local-memory SIZE       what this machine may hold of experts in that placement
// Thread-safety: called from the command's thread. Cost: connecting asks every node once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "command_line.h"
#include "zipmoe/engine.h"
#include "zipmoe/serve/serve_metrics.h"

namespace zipmoe::cli {

const std::vector<OptionSpec>& distributedOptionSpecs();
// With --nodes, sets engine.wrapExperts so that the engine opens with DistributedExperts around its
// provider (and a coordinator when --rebalance-every is given). Throws zipmoe::Error naming the option.
void parseDistributedOptions(const CommandLine& line, EngineOptions& engine);
// "[distributed: …]" — what the last engine opened with --nodes did; empty when none was.
std::string describeDistributed();
// The calls the last engine opened with --nodes made to its nodes, and those that failed (for GET
// /metrics); zeros when none was. From any thread.
RemoteExpertCalls remoteExpertCalls();

}  // namespace zipmoe::cli
