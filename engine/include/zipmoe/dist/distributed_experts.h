// DistributedExperts — an ExpertProvider for an engine that shares its model's experts with other
// machines (DanceMoE, seed 002; docs/DISTRIBUTED.md): experts this machine holds are computed here
// from its own provider's weights; the others are sent, with the rows routed to them, to a node that
// holds them (ExpertNode), through the compute seam of expert_provider.h.
//
// Per MoE layer step, every remote node involved gets one call, all calls in parallel, each with a
// deadline. A node that fails a call (down, stalled past the deadline, refusing) is marked down and no
// longer called; the experts it should have computed are then computed here from this machine's own
// store (`fallback` = Local, counted in DistributedStats::fallbackExperts) or the request fails with an
// Error that names the node, the layer and what happened (`fallback` = Fail). Nothing waits longer
// than the deadline for a node.
//
// Which machine computes what comes from a placement (zipmoe/plan/expert_placement.h): member 0 is this
// engine ("local"), members 1.. the nodes, in the order given. Without one, the nodes' own holdings
// (Describe) decide and this machine computes what no node holds. A Coordinator moves the placement
// by epochs while generation goes on (see below).
// Thread-safety: the model's thread calls the ExpertProvider functions; stats(), placement() and the
// coordinator's functions may be called from other threads. Cost: one gather of the rows and, per
// node, a round trip carrying rows × hidden values each way.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zipmoe/plan/expert_placement.h"
#include "zipmoe/experts/expert_provider.h"

namespace zipmoe {

enum class NodeFailurePolicy { Local, Fail };

struct DistributedOptions {
  std::vector<std::string> nodes;  // host:port each (checkNodeAddress)
  std::string token;               // the cluster's shared secret
  std::string origin = "local";    // this engine's name in the nodes' activation counts
  std::chrono::milliseconds deadline{5000};  // per call
  NodeFailurePolicy onFailure = NodeFailurePolicy::Local;
  // Added to every remote call's round trip (its output is used that much later: a slower network,
  // for benchmarks; this kernel has no netem). 0 = none.
  std::chrono::microseconds injectedLatency{0};
  // Who computes what from the start: member 0 this engine, then the nodes in `nodes` order; each
  // node must hold (at least) its part. Default: the nodes' own holdings, the rest here.
  std::optional<ExpertPlacement> placement;
};

struct DistributedStats {
  uint64_t steps = 0;            // layer steps (calls to computedElsewhere)
  uint64_t localExperts = 0;     // expert activations computed here as placed
  uint64_t remoteExperts = 0;    // computed by a node
  uint64_t fallbackExperts = 0;  // placed on a node, computed here because it failed
  uint64_t remoteCalls = 0;      // node calls (one per node per layer step)
  uint64_t failedCalls = 0;
  uint64_t bytesSent = 0, bytesReceived = 0;  // rows and outputs on the wire
  double remoteSeconds = 0;      // summed round trips of the calls (sent → answered, + injected latency)
  uint64_t epoch = 0;            // the placement epoch in use
  uint64_t migrations = 0;
  std::vector<std::string> downNodes;  // with what happened
  std::vector<uint64_t> activations;   // [layer × experts + expert], rows routed, this engine's
  double localShare() const;     // local / (local + remote + fallback)
};

class DistributedExperts : public ExpertProvider {
 public:
  // `local`: this machine's provider (resident or an expert runtime) — the experts it holds are
  // acquired from it. `fallback`: one that can hand out any expert at any time, whatever `local` is
  // doing (the resident provider, or a direct reader of the store); null = `local`, which must then
  // be resident. Connects to every node and checks that it serves the same model (shape and the
  // checksum of an expert), throwing zipmoe::Error naming the node otherwise.
  static std::shared_ptr<DistributedExperts> connect(std::shared_ptr<ExpertProvider> local,
                                                     std::shared_ptr<ExpertProvider> fallback,
                                                     const DistributedOptions& options);
  ~DistributedExperts() override;

  // ExpertProvider
  std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) override;
  void prefetch(int layer, std::span<const int> experts) override;
  std::vector<int> computedElsewhere(int layer, std::span<const ExpertRequest> requests) override;
  std::unique_ptr<ExpertOutputs> computeElsewhere(int layer, std::span<const ExpertRows> inputs, ActivationType type,
                                                  int64_t hidden) override;
  int numLayers() const override;
  int numExperts() const override;
  std::pair<int64_t, int64_t> tensorShape(int kind) const override;

  DistributedStats stats() const;
  // The placement in use: member 0 local, then the nodes; and the members' names.
  ExpertPlacement placement() const;
  std::vector<std::string> memberNames() const;
  uint64_t expertBytes() const;

  struct Impl;

 private:
  explicit DistributedExperts(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class Coordinator;
};

// A provider that reads each requested expert from a store when first asked: the fallback of an
// engine whose `local` provider is an expert runtime (keepInMemory false: nothing kept), or the local
// provider of an engine with nodes and no budget (true: an expert read is kept, so this machine holds
// in memory only the experts it has computed — its share of the placement and any fallbacks).
// Thread-safety: acquire() may be called from several threads; batches share their buffers. Cost: one
// decompressed read per expert (kept: per expert, once).
std::shared_ptr<ExpertProvider> makeStoreReaderExperts(const std::filesystem::path& store, bool keepInMemory = false);

struct CoordinatorOptions {
  uint64_t localMemoryBytes = 0;  // what this engine may hold of experts (M_0); 0 = as many as a node
  double horizonRepeats = 4;      // Eq. 4: how often the observed pattern recurs before the next decision
  // The counts before a decision weigh this much in the next one (1 = all history alike, 0 = only the
  // last window): old patterns fade, and one noisy window cannot flip the placement back and forth.
  double historyDecay = 0.5;
};

struct MigrationReport {
  bool migrated = false;
  MigrationDecision decision;
  double localShareBefore = 0, localShareAfter = 0;  // of the observed activations, by Eq. 2
  uint64_t expertsLoaded = 0, expertsDropped = 0;
  uint64_t epoch = 0;
};

// Coordinator — gathers the activation counts (this engine's since its last decision, plus the
// earlier ones decayed; and, per origin, those the nodes computed for other engines), computes a DanceMoE placement over this engine and the nodes, and,
// when Eq. 4 says it pays (priced with the measured load speeds and remote-call time), migrates in
// one epoch: every member loads what it gains (the nodes' LoadExperts replies acknowledge), the
// engine switches its routing between two layer steps, and once no call of the old epoch is in
// flight the members drop what they lost. No request fails for it: until the switch the old holders
// still hold everything they are called for.
// Thread-safety: rebalance() runs on the caller's thread (e.g. a background one) while the model
// generates. Cost: a placement (milliseconds) plus the loads.
class Coordinator {
 public:
  Coordinator(std::shared_ptr<DistributedExperts> experts, CoordinatorOptions options);
  // One decision (and migration if it pays) from the counts gathered since the last one; `force`
  // migrates whenever the placement changes (for tests and the first placement).
  MigrationReport rebalance(bool force = false);
  // The placement input (frequencies per member) it would plan from now.
  PlacementInput gatherInput() const;

 private:
  std::shared_ptr<DistributedExperts> experts_;
  CoordinatorOptions options_;
  std::vector<uint64_t> lastLocalCounts_;  // the engine's counts at the last decision
  std::vector<double> history_;            // the decayed counts before it
};

// Runs coordinator->rebalance() every `interval` on a thread it owns, until destroyed (the destructor
// wakes and joins it). A failed rebalance leaves the placement as it was and is kept in lastError().
class PeriodicRebalancer {
 public:
  PeriodicRebalancer(std::shared_ptr<Coordinator> coordinator, std::chrono::milliseconds interval);
  ~PeriodicRebalancer();
  PeriodicRebalancer(const PeriodicRebalancer&) = delete;
  PeriodicRebalancer& operator=(const PeriodicRebalancer&) = delete;
  std::vector<MigrationReport> reports() const;
  std::string lastError() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace zipmoe
