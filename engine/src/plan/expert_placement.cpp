// Expert placement across machines: DanceMoE's Algorithms 1-2 and Eqs. 2-4 (see expert_placement.h).
// Thread-safety: pure functions. Cost: see the header.
#include "zipmoe/plan/expert_placement.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

std::string nodeName(const PlacementInput& in, int n) {
  if (static_cast<size_t>(n) < in.nodeNames.size()) return in.nodeNames[static_cast<size_t>(n)];
  return "node " + std::to_string(n);
}

int totalExperts(const std::vector<int>& perLayer) { return std::accumulate(perLayer.begin(), perLayer.end(), 0); }

// A node's expert slots: what its memory holds, at most every expert once.
int slotsOf(const PlacementInput& in, int n) {
  const uint64_t fit = in.memoryBytes[static_cast<size_t>(n)] / in.expertBytes;
  return static_cast<int>(std::min<uint64_t>(fit, static_cast<uint64_t>(totalExperts(in.expertsPerLayer))));
}

double freq(const PlacementInput& in, int n, int l, int e) {
  return in.frequency[static_cast<size_t>(n)][static_cast<size_t>(l)][static_cast<size_t>(e)];
}

// v_{n,l}: Shannon entropy (bits) of node n's activations of layer l; 0 without any.
double entropy(const std::vector<double>& f) {
  const double total = std::accumulate(f.begin(), f.end(), 0.0);
  if (!(total > 0)) return 0;
  double v = 0;
  for (const double x : f)
    if (x > 0) v -= (x / total) * std::log2(x / total);
  return v;
}

std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

void requireFeasible(const PlacementInput& in) {
  const int experts = totalExperts(in.expertsPerLayer);
  int slots = 0;
  std::string each;
  for (int n = 0; n < static_cast<int>(in.memoryBytes.size()); ++n) {
    slots += slotsOf(in, n);
    each += (n ? ", " : "") + nodeName(in, n) + " " + std::to_string(in.memoryBytes[static_cast<size_t>(n)]) + " bytes (" +
            std::to_string(in.memoryBytes[static_cast<size_t>(n)] / in.expertBytes) + " experts)";
  }
  if (slots < experts)
    throw Error("expert placement is infeasible: " + std::to_string(experts) + " experts of " +
                std::to_string(in.expertBytes) + " bytes each need " +
                std::to_string(static_cast<uint64_t>(experts) * in.expertBytes) + " bytes (" +
                mib(static_cast<uint64_t>(experts) * in.expertBytes) + ") to be held once, but the nodes have " + each +
                ": room for " + std::to_string(slots) + " experts");
}

// Step 2 of Algorithm 1: moves one slot into layer `target` by the shortest chain of moves
// "on node n, one slot from layer a to layer b" that starts at a layer with more slots than experts.
// Donor layers are tried most provisioned first and nodes by memory, descending (the paper's order).
bool borrowSlot(const PlacementInput& in, std::vector<std::vector<int>>& N, int target) {
  const int nodes = static_cast<int>(N.size()), layers = static_cast<int>(in.expertsPerLayer.size());
  std::vector<int> total(static_cast<size_t>(layers), 0);
  for (int l = 0; l < layers; ++l)
    for (int n = 0; n < nodes; ++n) total[static_cast<size_t>(l)] += N[static_cast<size_t>(n)][static_cast<size_t>(l)];
  std::vector<int> byMemory(static_cast<size_t>(nodes));
  std::iota(byMemory.begin(), byMemory.end(), 0);
  std::stable_sort(byMemory.begin(), byMemory.end(), [&](int a, int b) {
    return in.memoryBytes[static_cast<size_t>(a)] > in.memoryBytes[static_cast<size_t>(b)];
  });
  std::vector<int> byTotal(static_cast<size_t>(layers));
  std::iota(byTotal.begin(), byTotal.end(), 0);
  std::stable_sort(byTotal.begin(), byTotal.end(),
                   [&](int a, int b) { return total[static_cast<size_t>(a)] > total[static_cast<size_t>(b)]; });
  // parent[a] = (b, n): a gives one slot to b on node n.
  std::vector<std::optional<std::pair<int, int>>> parent(static_cast<size_t>(layers));
  std::vector<bool> seen(static_cast<size_t>(layers), false);
  std::deque<int> queue{target};
  seen[static_cast<size_t>(target)] = true;
  while (!queue.empty()) {
    const int b = queue.front();
    queue.pop_front();
    for (const int n : byMemory) {
      const auto& row = N[static_cast<size_t>(n)];
      if (row[static_cast<size_t>(b)] >= in.expertsPerLayer[static_cast<size_t>(b)]) continue;
      for (const int a : byTotal) {
        if (seen[static_cast<size_t>(a)] || row[static_cast<size_t>(a)] == 0) continue;
        seen[static_cast<size_t>(a)] = true;
        parent[static_cast<size_t>(a)] = std::make_pair(b, n);
        if (total[static_cast<size_t>(a)] > in.expertsPerLayer[static_cast<size_t>(a)]) {
          for (int from = a; from != target;) {
            const auto [to, node] = *parent[static_cast<size_t>(from)];
            --N[static_cast<size_t>(node)][static_cast<size_t>(from)];
            ++N[static_cast<size_t>(node)][static_cast<size_t>(to)];
            from = to;
          }
          return true;
        }
        queue.push_back(a);
      }
    }
  }
  return false;
}

// The first `count` experts of a layer by node n's frequency, descending (ties: lower id).
std::vector<int> topExperts(const PlacementInput& in, int n, int l, int count) {
  std::vector<int> order(static_cast<size_t>(in.expertsPerLayer[static_cast<size_t>(l)]));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return freq(in, n, l, a) > freq(in, n, l, b); });
  order.resize(static_cast<size_t>(count));
  return order;
}

// Algorithm 2's coverage repair for one layer (see assignExperts). The paper replaces one duplicate
// per uncovered expert; a single swap can be the wrong one when two uncovered experts compete for the
// same cheap duplicate, so each step here takes the cheapest *chain* of replacements — node n1 takes
// the uncovered expert and gives up d1, n2 takes d1 and gives up d2, …, until the expert given up still
// has a copy elsewhere; the paper's swap is the chain of length one. The chain's cost is the frequency
// the nodes lose, Σ f_n(dropped) − f_n(taken). Seen as a min-cost flow (experts → nodes, N_{n,l}
// units into each node), the top-N sets are a cheapest flow and each chain a shortest augmenting path
// from "covered" to "extra copy", so the result is the cheapest covering assignment for the counts
// (successive shortest paths); Bellman-Ford finds the chain (there is no negative cycle).
void repairCoverage(const PlacementInput& in, int l, std::vector<std::vector<int>>& sets) {
  const int E = in.expertsPerLayer[static_cast<size_t>(l)], nodes = static_cast<int>(sets.size());
  std::vector<std::vector<bool>> holds(static_cast<size_t>(nodes), std::vector<bool>(static_cast<size_t>(E), false));
  std::vector<int> copies(static_cast<size_t>(E), 0);
  for (int n = 0; n < nodes; ++n)
    for (const int e : sets[static_cast<size_t>(n)]) {
      holds[static_cast<size_t>(n)][static_cast<size_t>(e)] = true;
      ++copies[static_cast<size_t>(e)];
    }
  constexpr double kInf = 1e300;
  for (;;) {
    bool anyUncovered = false;
    // Distances: to expert e (the chain would next place e somewhere) and to node n (n takes one more).
    std::vector<double> toExpert(static_cast<size_t>(E), kInf), toNode(static_cast<size_t>(nodes), kInf);
    std::vector<int> expertFrom(static_cast<size_t>(E), -1), nodeFrom(static_cast<size_t>(nodes), -1);
    for (int e = 0; e < E; ++e)
      if (copies[static_cast<size_t>(e)] == 0) {
        toExpert[static_cast<size_t>(e)] = 0;
        anyUncovered = true;
      }
    if (!anyUncovered) return;
    for (int round = 0; round <= E + nodes; ++round) {
      bool changed = false;
      for (int e = 0; e < E; ++e) {
        if (toExpert[static_cast<size_t>(e)] >= kInf) continue;
        for (int n = 0; n < nodes; ++n) {
          if (holds[static_cast<size_t>(n)][static_cast<size_t>(e)]) continue;
          const double d = toExpert[static_cast<size_t>(e)] - freq(in, n, l, e);
          if (d < toNode[static_cast<size_t>(n)] - 1e-9) {
            toNode[static_cast<size_t>(n)] = d;
            nodeFrom[static_cast<size_t>(n)] = e;
            changed = true;
          }
        }
      }
      for (int n = 0; n < nodes; ++n) {
        if (toNode[static_cast<size_t>(n)] >= kInf) continue;
        for (const int d : sets[static_cast<size_t>(n)]) {
          const double v = toNode[static_cast<size_t>(n)] + freq(in, n, l, d);
          if (v < toExpert[static_cast<size_t>(d)] - 1e-9) {
            toExpert[static_cast<size_t>(d)] = v;
            expertFrom[static_cast<size_t>(d)] = n;
            changed = true;
          }
        }
      }
      if (!changed) break;
    }
    // The chain ends at an expert given up that keeps another copy.
    int end = -1;
    for (int d = 0; d < E; ++d)
      if (copies[static_cast<size_t>(d)] >= 2 && expertFrom[static_cast<size_t>(d)] >= 0 &&
          (end < 0 || toExpert[static_cast<size_t>(d)] < toExpert[static_cast<size_t>(end)] - 1e-9))
        end = d;
    if (end < 0)
      throw Error("expert placement: layer " + std::to_string(l) +
                  " has experts held nowhere and no duplicate to replace (the counts do not cover the layer)");
    for (int dropped = end; expertFrom[static_cast<size_t>(dropped)] >= 0 && copies[static_cast<size_t>(dropped)] > 0;) {
      const int n = expertFrom[static_cast<size_t>(dropped)];
      const int taken = nodeFrom[static_cast<size_t>(n)];
      auto& s = sets[static_cast<size_t>(n)];
      *std::find(s.begin(), s.end(), dropped) = taken;
      holds[static_cast<size_t>(n)][static_cast<size_t>(dropped)] = false;
      holds[static_cast<size_t>(n)][static_cast<size_t>(taken)] = true;
      --copies[static_cast<size_t>(dropped)];
      const bool wasUncovered = copies[static_cast<size_t>(taken)]++ == 0;
      if (wasUncovered) break;
      dropped = taken;
    }
  }
}

PlacementInput withGlobalFrequency(const PlacementInput& in) {
  PlacementInput g = in;
  for (size_t l = 0; l < in.expertsPerLayer.size(); ++l)
    for (int e = 0; e < in.expertsPerLayer[l]; ++e) {
      double sum = 0;
      for (const auto& node : in.frequency) sum += node[l][static_cast<size_t>(e)];
      for (auto& node : g.frequency) node[l][static_cast<size_t>(e)] = sum;
    }
  return g;
}

}  // namespace

bool ExpertPlacement::holds(int node, int layer, int expert) const {
  const auto& s = held.at(static_cast<size_t>(node)).at(static_cast<size_t>(layer));
  return std::binary_search(s.begin(), s.end(), expert);
}

int ExpertPlacement::expertsHeld(int node) const {
  int n = 0;
  for (const auto& s : held.at(static_cast<size_t>(node))) n += static_cast<int>(s.size());
  return n;
}

std::vector<int> ExpertPlacement::holders(int layer, int expert) const {
  std::vector<int> out;
  for (int n = 0; n < nodes(); ++n)
    if (holds(n, layer, expert)) out.push_back(n);
  return out;
}

void validatePlacementInput(const PlacementInput& in) {
  if (in.memoryBytes.empty()) throw Error("expert placement: no nodes (memoryBytes is empty)");
  if (in.frequency.size() != in.memoryBytes.size())
    throw Error("expert placement: frequency has " + std::to_string(in.frequency.size()) + " nodes, memoryBytes " +
                std::to_string(in.memoryBytes.size()));
  if (in.expertBytes == 0) throw Error("expert placement: expertBytes is 0");
  for (size_t l = 0; l < in.expertsPerLayer.size(); ++l)
    if (in.expertsPerLayer[l] < 0)
      throw Error("expert placement: layer " + std::to_string(l) + " has " + std::to_string(in.expertsPerLayer[l]) + " experts");
  for (size_t n = 0; n < in.frequency.size(); ++n) {
    if (in.frequency[n].size() != in.expertsPerLayer.size())
      throw Error("expert placement: " + nodeName(in, static_cast<int>(n)) + " has frequencies for " +
                  std::to_string(in.frequency[n].size()) + " layers, the model has " +
                  std::to_string(in.expertsPerLayer.size()));
    for (size_t l = 0; l < in.expertsPerLayer.size(); ++l) {
      if (in.frequency[n][l].size() != static_cast<size_t>(in.expertsPerLayer[l]))
        throw Error("expert placement: " + nodeName(in, static_cast<int>(n)) + ", layer " + std::to_string(l) + ": " +
                    std::to_string(in.frequency[n][l].size()) + " frequencies for " +
                    std::to_string(in.expertsPerLayer[l]) + " experts");
      for (size_t e = 0; e < in.frequency[n][l].size(); ++e)
        if (!(in.frequency[n][l][e] >= 0) || !std::isfinite(in.frequency[n][l][e]))
          throw Error("expert placement: " + nodeName(in, static_cast<int>(n)) + ", layer " + std::to_string(l) +
                      ", expert " + std::to_string(e) + ": frequency " + std::to_string(in.frequency[n][l][e]) +
                      " is not a finite number ≥ 0");
    }
  }
}

std::vector<std::vector<int>> allocateExpertCounts(const PlacementInput& in) {
  validatePlacementInput(in);
  requireFeasible(in);
  const int nodes = static_cast<int>(in.memoryBytes.size()), layers = static_cast<int>(in.expertsPerLayer.size());
  std::vector<std::vector<int>> N(static_cast<size_t>(nodes), std::vector<int>(static_cast<size_t>(layers), 0));
  // Step 1: N_{n,l} ∝ v_{n,l}, clamped to E_l; the slots left (the floors, the clamps) go by largest remainder.
  for (int n = 0; n < nodes; ++n) {
    std::vector<double> weight(static_cast<size_t>(layers));
    for (int l = 0; l < layers; ++l) weight[static_cast<size_t>(l)] = entropy(in.frequency[static_cast<size_t>(n)][static_cast<size_t>(l)]);
    if (!(std::accumulate(weight.begin(), weight.end(), 0.0) > 0))
      for (int l = 0; l < layers; ++l) weight[static_cast<size_t>(l)] = in.expertsPerLayer[static_cast<size_t>(l)];
    const double sum = std::accumulate(weight.begin(), weight.end(), 0.0);
    const int slots = slotsOf(in, n);
    std::vector<double> share(static_cast<size_t>(layers), 0);
    auto& row = N[static_cast<size_t>(n)];
    int used = 0;
    for (int l = 0; l < layers; ++l) {
      const auto li = static_cast<size_t>(l);
      share[li] = sum > 0 ? slots * weight[li] / sum : 0;
      row[li] = std::min(static_cast<int>(std::floor(share[li])), in.expertsPerLayer[li]);
      used += row[li];
    }
    for (; used < slots; ++used) {
      int pick = -1;
      for (int l = 0; l < layers; ++l) {
        const auto li = static_cast<size_t>(l);
        if (row[li] >= in.expertsPerLayer[li]) continue;
        if (pick < 0 || share[li] - row[li] > share[static_cast<size_t>(pick)] - row[static_cast<size_t>(pick)]) pick = l;
      }
      ++row[static_cast<size_t>(pick)];  // exists: slots ≤ Σ E_l
    }
  }
  // Step 2: every layer gets at least E_l slots over the nodes.
  for (int l = 0; l < layers; ++l)
    for (;;) {
      int total = 0;
      for (int n = 0; n < nodes; ++n) total += N[static_cast<size_t>(n)][static_cast<size_t>(l)];
      if (total >= in.expertsPerLayer[static_cast<size_t>(l)]) break;
      if (!borrowSlot(in, N, l))
        throw Error("expert placement: layer " + std::to_string(l) + " cannot be covered (" + std::to_string(total) +
                    " of " + std::to_string(in.expertsPerLayer[static_cast<size_t>(l)]) + " experts placed)");
    }
  return N;
}

ExpertPlacement assignExperts(const PlacementInput& in, const std::vector<std::vector<int>>& counts) {
  validatePlacementInput(in);
  const int nodes = static_cast<int>(in.memoryBytes.size()), layers = static_cast<int>(in.expertsPerLayer.size());
  if (counts.size() != static_cast<size_t>(nodes))
    throw Error("expert placement: counts for " + std::to_string(counts.size()) + " nodes, expected " + std::to_string(nodes));
  ExpertPlacement p;
  p.expertsPerLayer = in.expertsPerLayer;
  p.held.assign(static_cast<size_t>(nodes), std::vector<std::vector<int>>(static_cast<size_t>(layers)));
  for (int l = 0; l < layers; ++l) {
    std::vector<std::vector<int>> sets(static_cast<size_t>(nodes));
    for (int n = 0; n < nodes; ++n) {
      if (counts[static_cast<size_t>(n)].size() != static_cast<size_t>(layers))
        throw Error("expert placement: counts of " + nodeName(in, n) + " cover " +
                    std::to_string(counts[static_cast<size_t>(n)].size()) + " layers, expected " + std::to_string(layers));
      const int c = counts[static_cast<size_t>(n)][static_cast<size_t>(l)];
      if (c < 0 || c > in.expertsPerLayer[static_cast<size_t>(l)])
        throw Error("expert placement: count " + std::to_string(c) + " for " + nodeName(in, n) + ", layer " +
                    std::to_string(l) + " is outside 0.." + std::to_string(in.expertsPerLayer[static_cast<size_t>(l)]));
      sets[static_cast<size_t>(n)] = topExperts(in, n, l, c);
    }
    repairCoverage(in, l, sets);
    for (int n = 0; n < nodes; ++n) {
      auto& s = sets[static_cast<size_t>(n)];
      std::sort(s.begin(), s.end());
      p.held[static_cast<size_t>(n)][static_cast<size_t>(l)] = std::move(s);
    }
  }
  return p;
}

ExpertPlacement placeExperts(const PlacementInput& in) {
  ExpertPlacement p = assignExperts(in, allocateExpertCounts(in));
  checkPlacement(in, p);
  return p;
}

ExpertPlacement uniformPlacement(const PlacementInput& in) {
  validatePlacementInput(in);
  requireFeasible(in);
  const int nodes = static_cast<int>(in.memoryBytes.size()), layers = static_cast<int>(in.expertsPerLayer.size());
  ExpertPlacement p;
  p.expertsPerLayer = in.expertsPerLayer;
  p.held.assign(static_cast<size_t>(nodes), std::vector<std::vector<int>>(static_cast<size_t>(layers)));
  std::vector<int> room(static_cast<size_t>(nodes));
  for (int n = 0; n < nodes; ++n) room[static_cast<size_t>(n)] = slotsOf(in, n);
  // Coverage: each expert to the node with the most room left (ties: the next in turn).
  int turn = 0;
  for (int l = 0; l < layers; ++l)
    for (int e = 0; e < in.expertsPerLayer[static_cast<size_t>(l)]; ++e) {
      int pick = -1;
      for (int i = 0; i < nodes; ++i) {
        const int n = (turn + i) % nodes;
        if (pick < 0 || room[static_cast<size_t>(n)] > room[static_cast<size_t>(pick)]) pick = n;
      }
      turn = (pick + 1) % nodes;
      --room[static_cast<size_t>(pick)];
      p.held[static_cast<size_t>(pick)][static_cast<size_t>(l)].push_back(e);
    }
  // The rest of each node's memory: the experts it lacks, dealt in (layer, expert) order from an offset.
  for (int n = 0; n < nodes; ++n) {
    std::vector<std::pair<int, int>> missing;
    for (int l = 0; l < layers; ++l)
      for (int e = 0; e < in.expertsPerLayer[static_cast<size_t>(l)]; ++e)
        if (!std::binary_search(p.held[static_cast<size_t>(n)][static_cast<size_t>(l)].begin(),
                                p.held[static_cast<size_t>(n)][static_cast<size_t>(l)].end(), e))
          missing.emplace_back(l, e);
    // Interleave layers so that a node's extra experts spread over the model.
    std::stable_sort(missing.begin(), missing.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    for (size_t i = 0; i < missing.size() && room[static_cast<size_t>(n)] > 0; ++i, --room[static_cast<size_t>(n)])
      p.held[static_cast<size_t>(n)][static_cast<size_t>(missing[i].first)].push_back(missing[i].second);
    for (auto& s : p.held[static_cast<size_t>(n)]) std::sort(s.begin(), s.end());
  }
  checkPlacement(in, p);
  return p;
}

ExpertPlacement globalFrequencyPlacement(const PlacementInput& in) {
  validatePlacementInput(in);
  return placeExperts(withGlobalFrequency(in));
}

void checkPlacement(const PlacementInput& in, const ExpertPlacement& p) {
  if (p.expertsPerLayer != in.expertsPerLayer || p.held.size() != in.memoryBytes.size())
    throw Error("expert placement: the placement's shape (" + std::to_string(p.held.size()) + " nodes, " +
                std::to_string(p.expertsPerLayer.size()) + " layers) is not the model's and cluster's (" +
                std::to_string(in.memoryBytes.size()) + " nodes, " + std::to_string(in.expertsPerLayer.size()) + " layers)");
  for (int l = 0; l < p.layers(); ++l)
    for (int e = 0; e < p.expertsPerLayer[static_cast<size_t>(l)]; ++e)
      if (p.holders(l, e).empty())
        throw Error("expert placement: expert " + std::to_string(e) + " of layer " + std::to_string(l) + " is held by no node");
  for (int n = 0; n < p.nodes(); ++n) {
    const uint64_t bytes = static_cast<uint64_t>(p.expertsHeld(n)) * in.expertBytes;
    if (bytes > in.memoryBytes[static_cast<size_t>(n)])
      throw Error("expert placement: " + nodeName(in, n) + " holds " + std::to_string(p.expertsHeld(n)) + " experts (" +
                  std::to_string(bytes) + " bytes), more than its " + std::to_string(in.memoryBytes[static_cast<size_t>(n)]) +
                  " bytes");
  }
}

double remoteInvocationCost(const PlacementInput& in, const ExpertPlacement& p) {
  double cost = 0;
  for (int n = 0; n < p.nodes(); ++n)
    for (int l = 0; l < p.layers(); ++l)
      for (int e = 0; e < p.expertsPerLayer[static_cast<size_t>(l)]; ++e)
        if (!p.holds(n, l, e)) cost += freq(in, n, l, e);  // Eq. 2
  return cost;
}

double localShare(const PlacementInput& in, const ExpertPlacement& p) {
  double total = 0;
  for (const auto& node : in.frequency)
    for (const auto& layer : node) total += std::accumulate(layer.begin(), layer.end(), 0.0);
  return total > 0 ? 1.0 - remoteInvocationCost(in, p) / total : 1.0;
}

double migrationSeconds(const ExpertPlacement& from, const ExpertPlacement& to, uint64_t expertBytes,
                        const std::vector<double>& bytesPerSecond) {
  if (from.expertsPerLayer != to.expertsPerLayer || from.nodes() != to.nodes() ||
      bytesPerSecond.size() != static_cast<size_t>(to.nodes()))
    throw Error("migration cost: the placements or the node speeds differ in shape (" + std::to_string(from.nodes()) +
                " and " + std::to_string(to.nodes()) + " nodes, " + std::to_string(bytesPerSecond.size()) + " speeds)");
  double seconds = 0;
  for (int n = 0; n < to.nodes(); ++n) {
    const double speed = bytesPerSecond[static_cast<size_t>(n)];
    if (!(speed > 0) || !std::isfinite(speed))
      throw Error("migration cost: node " + std::to_string(n) + " has load speed " + std::to_string(speed) + " bytes/s");
    for (int l = 0; l < to.layers(); ++l)
      for (const int e : to.held[static_cast<size_t>(n)][static_cast<size_t>(l)])
        if (!from.holds(n, l, e)) seconds += static_cast<double>(expertBytes) / speed;  // Eq. 3
  }
  return seconds;
}

MigrationDecision decideMigration(const PlacementInput& in, const ExpertPlacement& current,
                                  const ExpertPlacement& candidate, const MigrationInputs& m) {
  if (!(m.secondsPerRemoteCall >= 0) || !(m.horizonRepeats > 0))
    throw Error("migration decision: secondsPerRemoteCall " + std::to_string(m.secondsPerRemoteCall) +
                " and horizonRepeats " + std::to_string(m.horizonRepeats) + " must be ≥ 0 and > 0");
  MigrationDecision d;
  const double scale = m.secondsPerRemoteCall * m.horizonRepeats;
  d.currentSeconds = remoteInvocationCost(in, current) * scale;
  d.candidateSeconds = remoteInvocationCost(in, candidate) * scale;
  d.migrationSeconds = migrationSeconds(current, candidate, in.expertBytes, m.bytesPerSecond);
  d.migrate = current != candidate && d.candidateSeconds + d.migrationSeconds < d.currentSeconds;  // Eq. 4
  char buf[256];
  std::snprintf(buf, sizeof buf, "C(P') %.4f s + T_mig %.4f s %s C(P) %.4f s", d.candidateSeconds, d.migrationSeconds,
                d.migrate ? "<" : ">=", d.currentSeconds);
  d.reason = buf;
  return d;
}

nlohmann::json placementToJson(const ExpertPlacement& p, const std::vector<std::string>& names) {
  nlohmann::json j;
  j["experts_per_layer"] = p.expertsPerLayer;
  j["nodes"] = nlohmann::json::array();
  for (int n = 0; n < p.nodes(); ++n)
    j["nodes"].push_back({{"name", static_cast<size_t>(n) < names.size() ? names[static_cast<size_t>(n)] : "node " + std::to_string(n)},
                          {"layers", p.held[static_cast<size_t>(n)]}});
  return j;
}

namespace {

// An integer within int's range: a float or a larger number (JSON allows any) is an error naming it,
// never a conversion out of range.
int intOf(const nlohmann::json& v, const std::string& what) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int>::max())) return static_cast<int>(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max()) return static_cast<int>(x);
  }
  throw Error(what + ": " + v.dump() + " is not an integer in " + std::to_string(std::numeric_limits<int>::min()) + ".." +
              std::to_string(std::numeric_limits<int>::max()));
}

std::vector<int> intsOf(const nlohmann::json& v, const std::string& what) {
  if (!v.is_array()) throw Error(what + " must be an array of integers");
  std::vector<int> out;
  for (const auto& x : v) out.push_back(intOf(x, what));
  return out;
}

}  // namespace

ExpertPlacement placementFromJson(const nlohmann::json& j, const std::string& what, std::vector<std::string>* names) {
  ExpertPlacement p;
  try {
    if (!j.is_object() || !j.contains("experts_per_layer") || !j.contains("nodes"))
      throw Error(what + ": a placement needs \"experts_per_layer\" and \"nodes\"");
    p.expertsPerLayer = intsOf(j.at("experts_per_layer"), what + ": \"experts_per_layer\"");
    const auto& nodes = j.at("nodes");
    if (!nodes.is_array() || nodes.empty()) throw Error(what + ": \"nodes\" must be a non-empty array");
    for (size_t n = 0; n < nodes.size(); ++n) {
      const std::string name = nodes[n].value("name", "node " + std::to_string(n));
      if (names) names->push_back(name);
      const auto& layersJson = nodes[n].at("layers");
      if (!layersJson.is_array()) throw Error(what + ": node \"" + name + "\": \"layers\" must be an array");
      std::vector<std::vector<int>> layers;
      for (const auto& l : layersJson) layers.push_back(intsOf(l, what + ": node \"" + name + "\", a layer"));
      if (layers.size() != p.expertsPerLayer.size())
        throw Error(what + ": node \"" + name + "\" lists " + std::to_string(layers.size()) + " layers, experts_per_layer " +
                    std::to_string(p.expertsPerLayer.size()));
      for (size_t l = 0; l < layers.size(); ++l) {
        auto& s = layers[l];
        std::sort(s.begin(), s.end());
        for (size_t i = 0; i < s.size(); ++i)
          if (s[i] < 0 || s[i] >= p.expertsPerLayer[l] || (i > 0 && s[i] == s[i - 1]))
            throw Error(what + ": node \"" + name + "\", layer " + std::to_string(l) + ": expert " + std::to_string(s[i]) +
                        (s[i] < 0 || s[i] >= p.expertsPerLayer[l] ? " is outside 0.." + std::to_string(p.expertsPerLayer[l] - 1)
                                                                  : " is listed twice"));
      }
      p.held.push_back(std::move(layers));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + ": not a placement: " + e.what());
  }
  return p;
}

}  // namespace zipmoe
