// --nodes and its companions (see distributed_options.h).
#include "distributed_options.h"

#include <cstdio>
#include <mutex>
#include <sstream>

#include "runtime_options.h"
#include "zipmoe/dist/distributed_experts.h"
#include "zipmoe/base/error.h"
#include "zipmoe/dist/expert_node.h"

namespace zipmoe::cli {
namespace {

// The cluster state of the engine this process opened last: its provider and, with
// --rebalance-every, the coordinator's thread (stopped and joined when the process exits).
struct Cluster {
  std::mutex mutex;
  std::shared_ptr<DistributedExperts> experts;
  std::unique_ptr<PeriodicRebalancer> rebalancer;
  ~Cluster() { rebalancer.reset(); }
};

Cluster& cluster() {
  static Cluster c;
  return c;
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

const std::vector<OptionSpec>& distributedOptionSpecs() {
  static const std::vector<OptionSpec> specs = {
      {"--nodes", "ADDR,...", "expert nodes (zipmoe node) that compute the experts this machine does not hold, host:port each"},
      {"--node-token-file", "FILE", "the cluster's shared token (default: $ZIPMOE_NODE_TOKEN)"},
      {"--node-deadline", "MS", "deadline of each call to a node, in ms (1-600000, default 5000)"},
      {"--node-failure", "local|fail", "a node that fails or stalls: compute its experts here (default) or fail the request"},
      {"--rebalance-every", "S", "re-place experts by DanceMoE every S seconds, migrating when it pays (0 = never, default)"},
      {"--local-memory", "SIZE", "expert bytes this machine may hold in that placement (K/M/G; default: as a node)"},
  };
  return specs;
}

void parseDistributedOptions(const CommandLine& line, EngineOptions& engine) {
  const auto nodes = line.text("--nodes");
  if (!nodes) {
    for (const auto& spec : distributedOptionSpecs())
      if (line.has(spec.name)) throw Error("option " + spec.name + " is for --nodes ADDR,...: give that too");
    return;
  }
  DistributedOptions d;
  d.nodes = splitList(*nodes);
  if (d.nodes.empty()) throw Error("option --nodes: '" + *nodes + "' names no node");
  for (const auto& n : d.nodes) checkNodeAddress(n, "option --nodes", false);
  d.token = loadNodeToken(line.text("--node-token-file", ""));
  d.deadline = std::chrono::milliseconds(line.integer<int>("--node-deadline", 1, 600000, 5000));
  const std::string failure = line.text("--node-failure", "local");
  if (failure == "local") d.onFailure = NodeFailurePolicy::Local;
  else if (failure == "fail") d.onFailure = NodeFailurePolicy::Fail;
  else throw Error("option --node-failure must be local or fail, got '" + failure + "'");
  const double every = line.number("--rebalance-every", 0, 86400, 0);
  CoordinatorOptions c;
  if (const auto m = line.text("--local-memory")) {
    c.localMemoryBytes = parseByteSize("--local-memory", *m);
  }
  if (line.has("--local-memory") && !(every > 0)) throw Error("option --local-memory is for --rebalance-every S: give that too");
  engine.wrapExperts = [d, c, every](std::shared_ptr<ExpertProvider> local, const std::filesystem::path& dir) {
    std::shared_ptr<ExpertProvider> fallback;
    if (local) {
      fallback = makeStoreReaderExperts(dir);  // the runtime's own batches are the model's alone
    } else if (std::filesystem::exists(dir / "manifest.json")) {
      local = makeStoreReaderExperts(dir, true);  // holds only what this machine computes
      fallback = local;
    } else {
      local = makeResidentExperts(dir);  // an HF directory: every expert (convert it to hold a share)
      fallback = local;
    }
    auto experts = DistributedExperts::connect(local, fallback, d);
    std::fprintf(stderr, "zipmoe: %zu expert nodes connected; this machine computes %d of %d experts of each layer on average\n",
                 d.nodes.size(), experts->placement().expertsHeld(0) / std::max(1, experts->numLayers()), experts->numExperts());
    Cluster& state = cluster();
    std::lock_guard lock(state.mutex);
    state.rebalancer.reset();
    state.experts = experts;
    if (every > 0)
      state.rebalancer = std::make_unique<PeriodicRebalancer>(
          std::make_shared<Coordinator>(experts, c), std::chrono::milliseconds(static_cast<int64_t>(every * 1000)));
    return std::static_pointer_cast<ExpertProvider>(experts);
  };
}

RemoteExpertCalls remoteExpertCalls() {
  Cluster& state = cluster();
  std::lock_guard lock(state.mutex);
  if (!state.experts) return {};
  const DistributedStats s = state.experts->stats();
  return {s.remoteCalls, s.failedCalls};
}

std::string describeDistributed() {
  Cluster& state = cluster();
  std::lock_guard lock(state.mutex);
  if (!state.experts) return {};
  const DistributedStats s = state.experts->stats();
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "[distributed: %.1f%% of expert activations computed here, %llu by nodes, %llu fallbacks here; %llu calls "
                "(%.2f per layer step, %llu failed), %.2f ms per call; %.1f MB sent, %.1f MB received; epoch %llu, %llu migrations",
                100.0 * s.localShare(), static_cast<unsigned long long>(s.remoteExperts),
                static_cast<unsigned long long>(s.fallbackExperts), static_cast<unsigned long long>(s.remoteCalls),
                s.steps ? static_cast<double>(s.remoteCalls) / static_cast<double>(s.steps) : 0.0,
                static_cast<unsigned long long>(s.failedCalls), s.remoteCalls ? 1e3 * s.remoteSeconds / static_cast<double>(s.remoteCalls) : 0.0,
                static_cast<double>(s.bytesSent) / 1e6, static_cast<double>(s.bytesReceived) / 1e6,
                static_cast<unsigned long long>(s.epoch), static_cast<unsigned long long>(s.migrations));
  std::string out = buf;
  for (const auto& d : s.downNodes) out += "; down: " + d;
  if (state.rebalancer && !state.rebalancer->lastError().empty()) out += "; last rebalance failed: " + state.rebalancer->lastError();
  return out + "]";
}

}  // namespace zipmoe::cli
