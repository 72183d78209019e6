// Fuzzes expert placement: a placement file (the first byte even) must parse into a placement that
// serialises and parses back to itself, or throw zipmoe::Error; a small cluster decoded from the
// bytes (the first byte odd: nodes, layers, experts, memory, frequencies) must be placed so that
// every expert is held and every node fits its memory, or be refused with zipmoe::Error — never a
// crash, a hang or an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "zipmoe/base/error.h"
#include "zipmoe/plan/expert_placement.h"

namespace {

void placementFile(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return;
  try {
    std::vector<std::string> names;
    const zipmoe::ExpertPlacement p = zipmoe::placementFromJson(j, "fuzz placement", &names);
    if (!(zipmoe::placementFromJson(zipmoe::placementToJson(p, names), "fuzz placement (again)") == p)) __builtin_trap();
  } catch (const zipmoe::Error&) {
  }
}

void cluster(const uint8_t* data, size_t size) {
  size_t at = 0;
  const auto next = [&]() -> unsigned { return at < size ? data[at++] : 0u; };
  zipmoe::PlacementInput in;
  const int nodes = 1 + static_cast<int>(next() % 4), layers = static_cast<int>(next() % 5);
  for (int l = 0; l < layers; ++l) in.expertsPerLayer.push_back(static_cast<int>(next() % 9));
  in.expertBytes = 1 + next() % 4;
  for (int n = 0; n < nodes; ++n) {
    in.memoryBytes.push_back(next() % 64);
    std::vector<std::vector<double>> f;
    for (const int e : in.expertsPerLayer) {
      std::vector<double> row;
      for (int i = 0; i < e; ++i) row.push_back(static_cast<double>(next() % 16));
      f.push_back(row);
    }
    in.frequency.push_back(f);
  }
  try {
    const zipmoe::ExpertPlacement p = zipmoe::placeExperts(in);
    zipmoe::checkPlacement(in, p);  // throws (a bug here) if coverage or memory does not hold
    (void)zipmoe::uniformPlacement(in);
    (void)zipmoe::globalFrequencyPlacement(in);
  } catch (const zipmoe::Error& e) {
    if (std::string_view(e.what()).find("infeasible") == std::string_view::npos) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) placementFile(data + 1, size - 1);
  else cluster(data + 1, size - 1);
  return 0;
}
