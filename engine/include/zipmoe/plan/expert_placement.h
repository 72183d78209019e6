// Expert placement across machines (DanceMoE, seed 002 §III): which node holds which routed experts,
// so that the experts a node's own requests activate most are local to it, every expert is held
// somewhere, and no node holds more than its memory.
//
// placeExperts runs the paper's two stages: Algorithm 1 gives each node a per-layer expert count in
// proportion to the normalised entropy of that node's activations of the layer (more diverse use,
// more experts), then repairs the counts so that every layer can be covered; Algorithm 2 fills each
// node's counts with its most frequently activated experts and repairs coverage by replacing
// duplicates. remoteInvocationCost is the proxy objective (Eq. 2); migrationSeconds (Eq. 3) and
// decideMigration (Eq. 4) decide whether a candidate placement is worth moving to.
//
// Where the paper slips, this follows the intent and says so:
//  * Algorithm 1's ⌊M_n/m_e · v_{n,l}/Σv⌋ can exceed the layer's E_l experts: counts are clamped to
//    E_l and the capacity freed goes to the node's other layers (largest remainder first).
//  * The paper's ⌊·⌋ leaves up to L slots of a node's memory unused: they are handed out too.
//  * Its borrowing loop (take one from the most provisioned layer) can find no donor on the node that
//    lacks the layer; coverage is repaired here by shortest chains of such moves (always found when
//    the nodes' memory can hold every expert once; otherwise an Error names the numbers).
//  * Algorithm 2 repairs coverage one swap at a time; a swap can be the wrong one, so the repair here
//    takes the cheapest chain of swaps (see assignExperts), which makes the assignment optimal.
//  * A layer with no experts (a dense layer) or with no observed activations (all-zero counts) has
//    entropy 0; a node that saw nothing at all shares its slots in proportion to the layers' sizes.
//  * Eq. 4 compares a count (Eq. 2) with seconds (Eq. 3): here C(·) is in seconds, the expected
//    remote invocations over the decision horizon times the measured extra seconds of one remote
//    call (MigrationInputs).
// Thread-safety: pure functions and plain values. Cost: Algorithm 1 O(N·L·E) plus the repair's
// O(L²·N) per moved slot; Algorithm 2 O(N·L·E log E).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zipmoe {

struct PlacementInput {
  std::vector<int> expertsPerLayer;  // E_l; 0 = a dense layer (nothing to place)
  // f_n^l(e): activations (counts or shares, ≥ 0) of expert e of layer l by node n's own requests;
  // [node][layer][expert], each layer's vector of size E_l.
  std::vector<std::vector<std::vector<double>>> frequency;
  std::vector<uint64_t> memoryBytes;  // M_n: what node n may hold of routed experts
  uint64_t expertBytes = 0;           // m_e: one expert (all its tensors), the same for every expert
  std::vector<std::string> nodeNames;  // for messages; empty = "node 0", "node 1", ...
};

// The nodes' expert sets: held[node][layer] is ascending.
struct ExpertPlacement {
  std::vector<int> expertsPerLayer;
  std::vector<std::vector<std::vector<int>>> held;

  int nodes() const { return static_cast<int>(held.size()); }
  int layers() const { return static_cast<int>(expertsPerLayer.size()); }
  bool holds(int node, int layer, int expert) const;
  int expertsHeld(int node) const;
  // The nodes holding (layer, expert), ascending.
  std::vector<int> holders(int layer, int expert) const;
  bool operator==(const ExpertPlacement&) const = default;
};

// Throws zipmoe::Error naming the field when the input is inconsistent (shapes, negative or
// non-finite frequencies, zero expert size, no node).
void validatePlacementInput(const PlacementInput& input);

// Algorithm 1: N[n][l], with Σ_l N[n][l]·m_e ≤ M_n, N[n][l] ≤ E_l and Σ_n N[n][l] ≥ E_l. Throws
// zipmoe::Error naming the experts, their bytes and each node's memory when the nodes together cannot
// hold every expert once.
std::vector<std::vector<int>> allocateExpertCounts(const PlacementInput& input);

// Algorithm 2 for given counts (as allocateExpertCounts returns): each node's top-N[n][l] experts by
// its own frequency (ties: lower id), then, while an expert of a layer is held nowhere, the cheapest
// chain of replacements that places it (the paper's swap of a duplicate is the chain of length one;
// longer chains matter when uncovered experts compete for the same duplicate). The result is the
// least Eq. 2 cost over every covering assignment with these counts (the tests check it by brute force).
ExpertPlacement assignExperts(const PlacementInput& input, const std::vector<std::vector<int>>& counts);

// Both stages; the result satisfies coverage and memory (checked).
ExpertPlacement placeExperts(const PlacementInput& input);

// Baselines for comparison: `uniform` deals each layer's experts round-robin over the nodes and fills
// the rest of each node's memory round-robin too; `globalFrequency` gives every node the experts most
// used by all nodes together (then repairs coverage like Algorithm 2), i.e. ignores where requests come from.
ExpertPlacement uniformPlacement(const PlacementInput& input);
ExpertPlacement globalFrequencyPlacement(const PlacementInput& input);

// Throws zipmoe::Error naming the first expert held nowhere or the node over its memory.
void checkPlacement(const PlacementInput& input, const ExpertPlacement& placement);

// Eq. 2: Σ_n Σ_l Σ_e f_n^l(e) · 1[node n does not hold e].
double remoteInvocationCost(const PlacementInput& input, const ExpertPlacement& placement);
// The share of activation mass computed where it was requested: 1 − Eq. 2 / Σ f.
double localShare(const PlacementInput& input, const ExpertPlacement& placement);

// Eq. 3: Σ over (node, expert) whose holding changes from `from` to `to` of m_e / speed_n. Only
// experts a node gains cost transfer time (dropping is free); bytesPerSecond[n] is node n's measured
// load speed. Throws zipmoe::Error for mismatched shapes or a speed ≤ 0.
double migrationSeconds(const ExpertPlacement& from, const ExpertPlacement& to, uint64_t expertBytes,
                        const std::vector<double>& bytesPerSecond);

struct MigrationInputs {
  std::vector<double> bytesPerSecond;  // per node, measured (load speed)
  double secondsPerRemoteCall = 0;     // measured: a remote call's time over computing it locally
  // How many times the observed frequencies will recur before the next decision (the horizon): C(P)
  // is remote invocations × this × secondsPerRemoteCall.
  double horizonRepeats = 1;
};

struct MigrationDecision {
  bool migrate = false;
  double currentSeconds = 0;    // C(P)
  double candidateSeconds = 0;  // C(P')
  double migrationSeconds = 0;  // T_mig(P, P')
  std::string reason;           // one line with the three figures
};

// Eq. 4: migrate iff C(P') + T_mig(P, P') < C(P).
MigrationDecision decideMigration(const PlacementInput& input, const ExpertPlacement& current,
                                  const ExpertPlacement& candidate, const MigrationInputs& measured);

// JSON: {"experts_per_layer": [..], "nodes": [{"name": .., "layers": [[ids], ..]}, ..]}. parse throws
// zipmoe::Error naming `what` and the field.
nlohmann::json placementToJson(const ExpertPlacement& placement, const std::vector<std::string>& nodeNames);
ExpertPlacement placementFromJson(const nlohmann::json& json, const std::string& what,
                                  std::vector<std::string>* nodeNames = nullptr);

}  // namespace zipmoe
