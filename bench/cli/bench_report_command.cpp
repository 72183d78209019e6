// `zipmoe bench report DIR` and `zipmoe bench compare DIR_A DIR_B`: read the suites' JSON results
// back. `report` prints them as the Markdown tables of docs/BENCHMARKS.md, so the tables there are
// regenerated, never typed. `compare` sets a rerun beside an earlier run, figure by figure: the
// relative change of every timing (TPOT, TTFT, throughput, latency, makespan ratio), the change of
// the counted figures (miss rate, bytes read), and whether the fastest system at each point is the
// same — which is what a reading of the figures rests on. That is how "the documented figures
// match a rerun within the noise" is checked rather than asserted.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_harness.h"
#include "commands.h"
#include "zipmoe/base/error.h"

namespace zipmoe::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::vector<std::string> kSuites = {"budget", "batch", "length", "ablation", "scheduler", "threads"};

// One suite's result file: SUITE-LABEL.json as `bench suite` writes it.
struct SuiteDoc {
  std::string suite, label;
  fs::path path;
  json doc;
};

json readJson(const fs::path& path) {
  std::ifstream f(path);
  if (!f) throw Error("cannot read " + path.string());
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    throw Error(path.string() + ": not valid JSON: " + e.what());
  }
}

// The suite result files of a directory (figure specs and other JSON files are passed over),
// ordered by workload label, then in the suites' order.
std::vector<SuiteDoc> loadSuites(const fs::path& dir, const std::string& label) {
  if (!fs::is_directory(dir)) throw Error(dir.string() + " is not a directory (expected the --out of `zipmoe bench suite`)");
  std::vector<SuiteDoc> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const std::string stem = entry.path().stem().string();
    const auto suite = std::find_if(kSuites.begin(), kSuites.end(), [&](const std::string& s) { return stem.rfind(s + "-", 0) == 0; });
    if (suite == kSuites.end()) continue;
    json doc = readJson(entry.path());
    if (!doc.is_object() || !doc.contains("suite")) continue;  // a figure spec
    if (!doc["suite"].is_string() || !doc.contains("results") || !doc["results"].is_array() || !doc.contains("workload") ||
        !doc["workload"].is_object() || !doc["workload"].contains("label") || !doc["workload"]["label"].is_string())
      throw Error(entry.path().string() + ": not a suite result (needs 'suite', 'workload.label' and a 'results' array)");
    SuiteDoc s{doc["suite"].get<std::string>(), doc["workload"]["label"].get<std::string>(), entry.path(), std::move(doc)};
    if (!label.empty() && s.label != label) continue;
    if (std::find(kSuites.begin(), kSuites.end(), s.suite) == kSuites.end())
      throw Error(entry.path().string() + ": unknown suite '" + s.suite + "'");
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const SuiteDoc& a, const SuiteDoc& b) {
    const auto rank = [](const std::string& s) { return std::find(kSuites.begin(), kSuites.end(), s) - kSuites.begin(); };
    return a.label != b.label ? a.label < b.label : rank(a.suite) < rank(b.suite);
  });
  if (out.empty())
    throw Error("no suite results in " + dir.string() + (label.empty() ? std::string() : " for workload '" + label + "'"));
  return out;
}

std::string systemOf(const json& r) {
  return r.contains("system") && r["system"].is_string() ? r["system"].get<std::string>() : std::string("?");
}
bool skipped(const json& r) { return r.value("skipped", false); }

// A number of a result; a missing or mistyped field is an error naming the file, system and field.
double field(const SuiteDoc& s, const json& r, const char* name) {
  const auto it = r.find(name);
  if (it == r.end() || !it->is_number())
    throw Error(s.path.string() + ": result '" + systemOf(r) + "' has no number '" + name + "'");
  return it->get<double>();
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
std::string general(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The systems of a suite in their first-seen order, and the points (budgets, batches) in order.
std::vector<std::string> systemsOf(const json& results) {
  std::vector<std::string> out;
  for (const auto& r : results)
    if (std::find(out.begin(), out.end(), systemOf(r)) == out.end()) out.push_back(systemOf(r));
  return out;
}
std::vector<double> pointsOf(const SuiteDoc& s, const char* name) {
  std::vector<double> out;
  for (const auto& r : s.doc["results"]) {
    const double v = field(s, r, name);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}
const json* resultAt(const SuiteDoc& s, const std::string& system, const char* name, double point) {
  for (const auto& r : s.doc["results"])
    if (systemOf(r) == system && field(s, r, name) == point) return &r;
  return nullptr;
}

// ---- report: Markdown tables --------------------------------------------------------------------

void tableHead(const std::vector<std::string>& columns) {
  std::string head = "|", rule = "|";
  for (const auto& c : columns) {
    head += " " + c + " |";
    rule += "---|";
  }
  std::printf("%s\n%s\n", head.c_str(), rule.c_str());
}
void tableRow(const std::vector<std::string>& cells) {
  std::string row = "|";
  for (const auto& c : cells) row += " " + c + " |";
  std::printf("%s\n", row.c_str());
}

// A table whose columns are a swept point (budget or batch) and whose cells are formatted by `cell`.
template <typename Cell>
void sweepTable(const SuiteDoc& s, const char* pointField, const std::string& columnPrefix, bool percentColumns, Cell cell) {
  const auto points = pointsOf(s, pointField);
  std::vector<std::string> columns = {"system"};
  for (double p : points) columns.push_back(columnPrefix + (percentColumns ? percentText(p) : general(p)));
  tableHead(columns);
  for (const auto& system : systemsOf(s.doc["results"])) {
    std::vector<std::string> cells = {system};
    for (double p : points) {
      const json* r = resultAt(s, system, pointField, p);
      cells.push_back(!r ? "" : skipped(*r) ? "—" : cell(*r));
    }
    tableRow(cells);
  }
}

void reportSuite(const SuiteDoc& s) {
  const json& results = s.doc["results"];
  const json settings = s.doc.contains("settings") && s.doc["settings"].is_object() ? s.doc["settings"] : json::object();
  const int repeat = settings.contains("repeat") && settings["repeat"].is_number_integer() ? std::max(1, settings["repeat"].get<int>()) : 1;
  const double budget = s.doc.value("budget_percent", 0.0);
  if (s.suite == "budget") {
    std::printf("**Responsiveness vs budget** (Fig. 7): TPOT / TTFT in ms, miss rate; `—` = below the minimum budget (the working set)\n\n");
    sweepTable(s, "budget_percent", "", true, [&](const json& r) {
      return fixed(field(s, r, "tpot_ms"), 1) + " / " + fixed(field(s, r, "ttft_ms"), 0) + ", miss " +
             fixed(field(s, r, "miss_percent"), 0) + " %" +
             (r.contains("stall_ms_per_token") ? ", stall " + fixed(field(s, r, "stall_ms_per_token"), 1) : std::string());
    });
  } else if (s.suite == "batch") {
    std::printf("**Throughput vs batch size** (Fig. 8), budget %g %%: decode tokens/s (time per decode step)\n\n", budget);
    sweepTable(s, "batch", "batch ", false, [&](const json& r) {
      return fixed(field(s, r, "throughput_tokens_per_s"), 2) + " (" + fixed(field(s, r, "tpot_ms"), 0) + " ms" + ")";
    });
  } else if (s.suite == "length") {
    const size_t requests = (settings.contains("prompts") ? settings["prompts"].size() : 0) * static_cast<size_t>(repeat);
    std::printf("**End-to-end latency vs output length** (Fig. 9), budget %g %%, %zu requests: mean [10th–90th percentile], seconds\n\n",
                budget, requests);
    std::vector<std::string> columns = {"system"};
    for (const auto& r : results)
      if (!skipped(r) && columns.size() == 1)
        for (const auto& at : r.value("latency", json::array())) columns.push_back(fixed(field(s, at, "tokens"), 0) + " tokens");
    tableHead(columns);
    for (const auto& r : results) {
      if (skipped(r)) continue;
      std::vector<std::string> cells = {systemOf(r)};
      for (const auto& at : r.value("latency", json::array()))
        cells.push_back(fixed(field(s, at, "mean_ms") / 1e3, 2) + " [" + fixed(field(s, at, "p10_ms") / 1e3, 2) + "–" +
                        fixed(field(s, at, "p90_ms") / 1e3, 2) + "]");
      tableRow(cells);
    }
  } else if (s.suite == "ablation") {
    std::printf("**Cache-policy ablation** (Fig. 10 / Table 1), budget %g %%\n\n", budget);
    tableHead({"system", "TPOT ms", "TTFT ms", "miss %", "MiB read / token", "pool split F/C/S/E %"});
    for (const auto& r : results) {
      if (skipped(r)) {
        tableRow({systemOf(r), "—", "—", "—", "—", "—"});
        continue;
      }
      std::string split = "n/a";
      if (systemOf(r).rfind("full", 0) != 0 && r.contains("pool_ratio") && r["pool_ratio"].is_array()) {
        split.clear();
        for (const auto& x : r["pool_ratio"]) {
          if (!split.empty()) split += '/';
          split += fixed(100.0 * x.get<double>(), 0);
        }
      }
      tableRow({systemOf(r), fixed(field(s, r, "tpot_ms"), 1), fixed(field(s, r, "ttft_ms"), 0),
                fixed(field(s, r, "miss_percent"), 1), fixed(field(s, r, "mib_read_per_token"), 1), split});
    }
  } else if (s.suite == "scheduler") {
    std::printf("**Scheduler quality**, budget %g %%: mean measured layer makespan, and its ratio to the layer's lower bound "
                "(Lemma B.3: mean, median, p90, max), over every MoE layer after the warm-up. The bound comes from each "
                "order's own operation times, so the ratio says how near an order gets to its own best; the makespan ranks "
                "orders\n\n", budget);
    tableHead({"order", "layers", "layer ms", "mean", "median", "p90", "max", "TPOT ms"});
    for (const auto& r : results) {
      if (skipped(r)) continue;
      tableRow({systemOf(r), fixed(field(s, r, "layers"), 0), fixed(field(s, r, "layer_makespan_ms"), 2),
                fixed(field(s, r, "ratio_mean"), 3),
                fixed(field(s, r, "ratio_median"), 3), fixed(field(s, r, "ratio_p90"), 3),
                fixed(field(s, r, "ratio_max"), 3), fixed(field(s, r, "tpot_ms"), 1)});
    }
  } else if (s.suite == "threads") {
    std::printf("**Threads**, budget %g %%, %d cores: TPOT against decompression workers L\n\n", budget, s.doc.value("cores", 0));
    tableHead({"system", "TPOT ms", "miss %"});
    for (const auto& r : results)
      tableRow({systemOf(r), skipped(r) ? "—" : fixed(field(s, r, "tpot_ms"), 1),
                skipped(r) ? "—" : fixed(field(s, r, "miss_percent"), 1)});
  }
  if (s.doc.contains("reference") && s.doc["reference"].is_object()) {
    // The all-resident reference: each result's stall per token is its TPOT minus this.
    const json& ref = s.doc["reference"];
    // Suites since run 26 take each reference's floor from the median pass measured between its two
    // runs and keep the best pass beside it; older JSON has one best-of-5 figure for the suite.
    const std::string statistic = ref.value("read_bandwidth_statistic", std::string("best of 5 passes"));
    for (const auto& r : ref.value("resident", json::array()))
      if (r.is_object()) {
        const double bandwidth = r.value("read_bandwidth_gb_per_s", ref.value("read_bandwidth_gb_per_s", 0.0));
        std::printf("\nAll experts resident (%s): TPOT %s ms, TTFT %s ms; a step reads %s MB, floor %s ms at %s GB/s "
                    "(%s; TPOT / floor %s",
                    r.value("shape", std::string("?")).c_str(), fixed(field(s, r, "tpot_ms"), 1).c_str(),
                    fixed(field(s, r, "ttft_ms"), 0).c_str(), fixed(field(s, r, "weight_mb_per_step"), 0).c_str(),
                    fixed(field(s, r, "floor_ms"), 1).c_str(), fixed(bandwidth, 1).c_str(), statistic.c_str(),
                    fixed(field(s, r, "tpot_over_floor"), 2).c_str());
        if (r.contains("tpot_over_best_pass_floor"))
          std::printf(", over the best pass's floor (%s GB/s) %s",
                      fixed(r.value("read_bandwidth_best_pass_gb_per_s", 0.0), 1).c_str(),
                      fixed(field(s, r, "tpot_over_best_pass_floor"), 2).c_str());
        std::printf("). Stall per token = TPOT - resident TPOT.\n");
      }
  }
  if (repeat > 1 && s.suite == "length")
    std::printf("\nEvery request of %d rounds pooled, the systems' order rotating between them.\n", repeat);
  else if (repeat > 1)
    std::printf("\nEach timing: the median of %d measurements, the systems' order rotating between them.\n", repeat);
  std::printf("\n");
}

// ---- compare: a rerun beside an earlier run -----------------------------------------------------

enum class Change { Relative, Points };  // timings: relative change; percentages: percentage points

// One figure of one result in both runs.
struct Pair {
  std::string where;  // "zipmoe at 25 %"
  double a = 0, b = 0;
};
struct Metric {
  std::string name;
  Change change = Change::Relative;
  std::vector<Pair> pairs;
  double delta(const Pair& p) const {
    if (change == Change::Points) return p.b - p.a;
    return p.a == 0 ? (p.b == 0 ? 0.0 : INFINITY) : 100.0 * (p.b - p.a) / p.a;
  }
};

// The figures compared for a suite, and the point a result stands at ("" when the suite has one).
struct SuiteShape {
  std::vector<std::pair<std::string, Change>> metrics;  // (JSON field, how it changes)
  const char* pointField = nullptr;                     // budget_percent, batch
  const char* fastestBy = "tpot_ms";                    // lower is better, unless throughput
};
SuiteShape shapeOf(const std::string& suite) {
  const std::pair<std::string, Change> tpot{"tpot_ms", Change::Relative}, ttft{"ttft_ms", Change::Relative},
      miss{"miss_percent", Change::Points}, mib{"mib_read_per_token", Change::Relative};
  if (suite == "budget") return {{tpot, ttft, miss, mib}, "budget_percent"};
  if (suite == "batch") return {{{"throughput_tokens_per_s", Change::Relative}, tpot, miss, mib}, "batch", "throughput_tokens_per_s"};
  if (suite == "length") return {{miss, mib}};  // latency and its fastest system per length: compareSuite
  if (suite == "ablation") return {{tpot, ttft, miss, mib}};
  if (suite == "scheduler")
    return {{{"layer_makespan_ms", Change::Relative}, {"ratio_mean", Change::Relative}, {"ratio_median", Change::Relative}, tpot}};
  return {{tpot, miss}};  // threads
}

std::string labelOf(const std::string& field) {
  static const std::map<std::string, std::string> names = {
      {"tpot_ms", "TPOT ms"}, {"ttft_ms", "TTFT ms"}, {"throughput_tokens_per_s", "throughput tok/s"}, {"miss_percent", "miss rate %"},
      {"mib_read_per_token", "MiB read / token"}, {"layer_makespan_ms", "layer makespan ms"}, {"ratio_mean", "makespan/LB mean"}, {"ratio_median", "makespan/LB median"}};
  const auto it = names.find(field);
  return it == names.end() ? field : it->second;
}

struct CompareTotals {
  int timings = 0, timingsWithin = 0;
};

void compareSuite(const SuiteDoc& a, const SuiteDoc& b, double tolerance, bool all, CompareTotals& totals) {
  const SuiteShape shape = shapeOf(a.suite);
  std::map<std::string, Metric> metrics;
  std::vector<std::string> order;
  const auto add = [&](const std::string& name, Change change, const std::string& where, double x, double y) {
    if (!metrics.count(name)) {
      metrics[name] = Metric{name, change, {}};
      order.push_back(name);
    }
    metrics[name].pairs.push_back({where, x, y});
  };
  // The fastest system at each point, in each run.
  std::map<std::string, std::pair<std::string, double>> fastestA, fastestB;
  const auto consider = [&](std::map<std::string, std::pair<std::string, double>>& best, const std::string& point,
                            const std::string& system, double value, bool higherIsBetter) {
    auto it = best.find(point);
    if (it == best.end() || (higherIsBetter ? value > it->second.second : value < it->second.second)) best[point] = {system, value};
  };

  int missing = 0;
  for (const auto& ra : a.doc["results"]) {
    if (skipped(ra)) continue;
    const std::string system = systemOf(ra);
    const double point = shape.pointField ? field(a, ra, shape.pointField) : 0;
    const json* rb = nullptr;
    for (const auto& r : b.doc["results"])
      if (systemOf(r) == system && (!shape.pointField || field(b, r, shape.pointField) == point)) rb = &r;
    if (!rb || skipped(*rb)) {
      ++missing;
      continue;
    }
    std::string at = !shape.pointField ? "" : std::string(shape.pointField) == "batch" ? "batch " + general(point) : percentText(point);
    const std::string where = system + (at.empty() ? "" : " at " + at);
    for (const auto& [name, change] : shape.metrics) add(labelOf(name), change, where, field(a, ra, name.c_str()), field(b, *rb, name.c_str()));
    if (a.suite == "length") {
      const json la = ra.value("latency", json::array()), lb = rb->value("latency", json::array());
      for (size_t i = 0; i < std::min(la.size(), lb.size()); ++i) {
        const std::string n = fixed(field(a, la[i], "tokens"), 0) + " tokens";
        add("latency ms", Change::Relative, system + " at " + n, field(a, la[i], "mean_ms"), field(b, lb[i], "mean_ms"));
        consider(fastestA, n, system, field(a, la[i], "mean_ms"), false);
        consider(fastestB, n, system, field(b, lb[i], "mean_ms"), false);
      }
    } else {
      const bool higher = std::string(shape.fastestBy) == "throughput_tokens_per_s";
      consider(fastestA, at, system, field(a, ra, shape.fastestBy), higher);
      consider(fastestB, at, system, field(b, *rb, shape.fastestBy), higher);
    }
  }

  std::printf("\n%s-%s\n", a.suite.c_str(), a.label.c_str());
  for (const auto& name : order) {
    const Metric& m = metrics[name];
    std::vector<double> size;
    const Pair* worst = nullptr;
    int within = 0;
    for (const auto& p : m.pairs) {
      const double d = std::fabs(m.delta(p));
      size.push_back(d);
      if (!worst || d > std::fabs(m.delta(*worst))) worst = &p;
      within += d <= tolerance;
    }
    std::sort(size.begin(), size.end());
    const char* unit = m.change == Change::Points ? "pp" : "%";
    std::printf("  %-20s %3zu figures  median |Δ| %5.1f %s  max |Δ| %5.1f %s  (%s: %.4g → %.4g)\n", m.name.c_str(), m.pairs.size(),
                percentile(size, 0.5), unit, size.back(), unit, worst->where.c_str(), worst->a, worst->b);
    if (m.change == Change::Relative && m.name != labelOf("mib_read_per_token")) {
      totals.timings += static_cast<int>(m.pairs.size());
      totals.timingsWithin += within;
    }
    if (all)
      for (const auto& p : m.pairs) std::printf("      %-34s %10.4g → %-10.4g %+6.1f %s\n", p.where.c_str(), p.a, p.b, m.delta(p), unit);
  }
  int same = 0;
  std::string differs;
  for (const auto& [point, best] : fastestA) {
    const auto it = fastestB.find(point);
    if (it != fastestB.end() && it->second.first == best.first) ++same;
    else differs += (differs.empty() ? "" : "; ") + (point.empty() ? std::string() : point + ": ") + best.first + " → " +
                    (it == fastestB.end() ? std::string("?") : it->second.first);
  }
  std::printf("  %-20s same at %d of %zu point%s%s\n", "fastest system", same, fastestA.size(), fastestA.size() == 1 ? "" : "s",
              differs.empty() ? "" : (" (" + differs + ")").c_str());
  if (missing) std::printf("  %d result%s of the first run not in the second (or skipped there)\n", missing, missing == 1 ? "" : "s");
}

}  // namespace

int runBenchReport(const Args& argsIn) {
  Args args = argsIn;
  std::string label;
  takeOption(args, "--workload", label);
  expectPositionals(args, 1, "zipmoe bench report DIR [--workload LABEL]");
  std::string current;
  for (const auto& s : loadSuites(args[0], label)) {
    if (s.label != current) {
      std::printf("<!-- zipmoe bench report %s --workload %s -->\n\n", args[0].c_str(), s.label.c_str());
      current = s.label;
    }
    reportSuite(s);
  }
  return 0;
}

int runBenchCompare(const Args& argsIn) {
  Args args = argsIn;
  std::string label, toleranceText;
  takeOption(args, "--workload", label);
  const double tolerance = takeOption(args, "--tolerance", toleranceText) ? parseNumber("--tolerance", toleranceText) : 20.0;
  if (!(tolerance >= 0)) throw Error("option --tolerance: '" + toleranceText + "' is not a percentage ≥ 0");
  const bool all = takeFlag(args, "--all");
  expectPositionals(args, 2, "zipmoe bench compare DIR_A DIR_B [--workload LABEL] [--tolerance PCT] [--all]");
  const auto first = loadSuites(args[0], label), second = loadSuites(args[1], label);
  std::printf("comparing %s (first) with %s (second): Δ = second − first; timings in %% of the first, rates in points\n",
              args[0].c_str(), args[1].c_str());
  CompareTotals totals;
  int compared = 0;
  for (const auto& a : first) {
    const auto b = std::find_if(second.begin(), second.end(), [&](const SuiteDoc& s) { return s.suite == a.suite && s.label == a.label; });
    if (b == second.end()) {
      std::printf("\n%s-%s: not in %s\n", a.suite.c_str(), a.label.c_str(), args[1].c_str());
      continue;
    }
    compareSuite(a, *b, tolerance, all, totals);
    ++compared;
  }
  if (!compared) throw Error("no suite is in both " + args[0] + " and " + args[1]);
  std::printf("\n%d of %d timing figures within ±%g %% of the first run\n", totals.timingsWithin, totals.timings, tolerance);
  return 0;
}

}  // namespace zipmoe::cli
