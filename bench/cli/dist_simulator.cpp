// The distributed-experts simulator (see dist_simulator.h).
#include "dist_simulator.h"

#include <algorithm>
#include <map>

namespace zipmoe::cli {

SimulatedRun simulateDistributed(std::shared_ptr<const ActivationTrace> trace, const ExpertPlacement& placement,
                                 int prompts, int tokens, int moeLayers, int k, const SimulatedCosts& costs) {
  const int nodes = placement.nodes();
  const int experts = trace->numExperts();
  TraceRouting routing(trace, moeLayers, experts, k, 1);
  // owner[(origin, layer, expert)]: the origin itself when it holds the expert, else the first holder.
  std::vector<int> firstHolder(static_cast<size_t>(moeLayers) * static_cast<size_t>(experts), -1);
  for (int l = 0; l < moeLayers; ++l)
    for (int e = 0; e < experts; ++e) {
      const auto h = placement.holders(l, e);
      if (!h.empty()) firstHolder[static_cast<size_t>(l) * static_cast<size_t>(experts) + static_cast<size_t>(e)] = h.front();
    }
  double local = 0, all = 0, calls = 0, bytes = 0, seconds = 0;
  std::vector<int64_t> chosen(static_cast<size_t>(k));
  for (int p = 0; p < prompts; ++p) {
    const int origin = p % nodes;
    routing.setPrompt(p % trace->numPrompts());
    for (int t = 0; t < tokens; ++t) {
      double token = 0;
      for (int l = 0; l < moeLayers; ++l) {
        routing.choose(l, 1, k, chosen);
        int here = 0;
        std::map<int, int> perNode;
        for (const int64_t e : chosen) {
          if (placement.holds(origin, l, static_cast<int>(e))) {
            ++here;
          } else {
            ++perNode[firstHolder[static_cast<size_t>(l) * static_cast<size_t>(experts) + static_cast<size_t>(e)]];
          }
        }
        double layer = here * costs.expertCompute;
        for (const auto& [node, count] : perNode) {
          const double wire = 2.0 * static_cast<double>(count) * static_cast<double>(costs.rowBytes);
          layer = std::max(layer, costs.callBase + costs.callPerByte * wire + count * costs.expertCompute);
          bytes += wire;
          calls += 1;
        }
        local += here;
        all += k;
        token += costs.densePerLayer + layer;
      }
      seconds += token;
    }
  }
  const double decoded = static_cast<double>(prompts) * tokens;
  SimulatedRun r;
  r.localShare = all > 0 ? local / all : 1;
  r.callsPerToken = calls / decoded;
  r.bytesPerToken = bytes / decoded;
  r.tpotSeconds = seconds / decoded;
  return r;
}

}  // namespace zipmoe::cli
