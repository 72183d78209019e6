// The distributed-experts simulator of `zipmoe bench dist` (DanceMoE §IV-C's idea): per token and
// MoE layer, the experts a trace prompt routes to are drawn (TraceRouting), computed by their origin
// when it holds them and otherwise by the first node that does (as DistributedExperts routes); the
// layer takes the longest of the local compute and each called node's call (α + β · bytes + its
// experts' compute), plus the dense part. The costs come from the real 3-node runs of the bench.
// Thread-safety: pure. Cost: O(prompts × tokens × layers × k).
#pragma once

#include <memory>
#include <vector>

#include "zipmoe/trace/activation_trace.h"
#include "zipmoe/plan/expert_placement.h"

namespace zipmoe::cli {

struct SimulatedCosts {
  double callBase = 0;        // α: a remote call's fixed seconds (measured)
  double callPerByte = 0;     // β: seconds per byte on the wire (the shaped bandwidth)
  double expertCompute = 0;   // one expert for one row, seconds (measured)
  double densePerLayer = 0;   // the rest of a layer, seconds (measured)
  int64_t rowBytes = 0;       // one row of activations (hidden × element size), each way
};

struct SimulatedRun {
  double localShare = 0;      // expert activations computed by their origin
  double callsPerToken = 0;   // remote calls per decoded token
  double bytesPerToken = 0;   // on the wire, both ways
  double tpotSeconds = 0;     // mean per decoded token
};

// Prompts [0, prompts) with origin p % nodes; `tokens` decode tokens each. `moeLayers` and `k` are
// the model's. origins hold placement.held[origin].
SimulatedRun simulateDistributed(std::shared_ptr<const ActivationTrace> trace, const ExpertPlacement& placement,
                                 int prompts, int tokens, int moeLayers, int k, const SimulatedCosts& costs);

}  // namespace zipmoe::cli
