// Algorithm 1 (block construction), the FIFO order, the lower bound and the discrete-event simulation
// declared in schedule.h. Symbols follow the paper inside the functions that implement a formula:
// K shards, L workers, u (SM-chunk read), v (E-chunk read, ρu/K), c (E-chunk decompression), p_e.
#include "sched/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "zipmoe/base/error.h"

namespace zipmoe::sched {

bool isTypeI(TaskState s) { return s == TaskState::Miss || s == TaskState::E; }

const char* opKindName(OpKind k) {
  switch (k) {
    case OpKind::ReadE: return "ReadE";
    case OpKind::ReadSM: return "ReadSM";
    case OpKind::Decompress: return "Decompress";
    case OpKind::Recover: return "Recover";
    case OpKind::Compute: return "Compute";
  }
  return "?";
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Miss and S tasks read their K E-chunks; C and E tasks have them in memory.
bool readsE(TaskState s) { return s == TaskState::Miss || s == TaskState::S; }

const char* stateName(TaskState s) {
  switch (s) {
    case TaskState::Miss: return "Miss";
    case TaskState::C: return "C";
    case TaskState::S: return "S";
    case TaskState::E: return "E";
  }
  return "?";
}

std::string num(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

[[noreturn]] void fail(const std::string& what) { throw Error("schedule: " + what); }

std::string describe(const Op& op) {
  std::string s = std::string(opKindName(op.kind)) + " of task " + std::to_string(op.task);
  if (op.shard >= 0) s += " shard " + std::to_string(op.shard);
  return s;
}

void checkCosts(const Costs& costs) {
  const std::pair<const char*, double> fields[] = {
      {"u", costs.u}, {"v", costs.v}, {"c", costs.c}, {"recover", costs.recover}};
  for (const auto& [name, value] : fields)
    if (!std::isfinite(value) || value < 0)
      fail(std::string("Costs.") + name + " must be finite and >= 0, got " + num(value));
  if (costs.shards < 1) fail("Costs.shards (K) must be >= 1, got " + std::to_string(costs.shards));
  if (costs.workers < 1) fail("Costs.workers (L) must be >= 1, got " + std::to_string(costs.workers));
}

// Expert ids in range (when expertCompute is known), non-negative finite p, no (expert, tensor)
// twice, readyExperts in range, distinct and without tasks.
void checkTasks(std::span<const TaskSpec> tasks, const std::span<const double>* expertCompute,
                std::span<const int> readyExperts) {
  if (expertCompute) {
    for (size_t e = 0; e < expertCompute->size(); ++e)
      if (!std::isfinite((*expertCompute)[e]) || (*expertCompute)[e] < 0)
        fail("expertCompute[" + std::to_string(e) + "] must be finite and >= 0, got " + num((*expertCompute)[e]));
  }
  const auto inRange = [&](int expert) {
    return expert >= 0 && (!expertCompute || static_cast<size_t>(expert) < expertCompute->size());
  };
  const std::string range =
      expertCompute ? "outside expertCompute (size " + std::to_string(expertCompute->size()) + ")" : "negative";
  std::map<std::pair<int, int>, size_t> seen;
  std::set<int> taskExperts;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskSpec& t = tasks[i];
    if (!inRange(t.expert))
      fail("task " + std::to_string(i) + " has expert id " + std::to_string(t.expert) + ", " + range);
    const auto [it, fresh] = seen.emplace(std::make_pair(t.expert, t.tensor), i);
    if (!fresh)
      fail("tasks " + std::to_string(it->second) + " and " + std::to_string(i) + " are both (expert " +
           std::to_string(t.expert) + ", tensor " + std::to_string(t.tensor) + ")");
    taskExperts.insert(t.expert);
  }
  std::set<int> ready;
  for (const int e : readyExperts) {
    if (!inRange(e)) fail("ready expert id " + std::to_string(e) + " is " + range);
    if (!ready.insert(e).second) fail("ready expert " + std::to_string(e) + " is listed twice");
    if (taskExperts.count(e)) fail("ready expert " + std::to_string(e) + " also has tasks (a ready expert needs none)");
  }
}

// I/O time of one task: K E-chunk reads (Miss, S) and one SM-chunk read (Miss, E).
double ioCost(TaskState s, const Costs& costs) {
  return (readsE(s) ? costs.shards * costs.v : 0.0) + (isTypeI(s) ? costs.u : 0.0);
}

// Task indices of one type, sorted by non-increasing p of their expert, ties by lower expert id, tasks
// of one expert consecutive in tensor order (σ_I / σ_II of Algorithm 1, lines 4-5).
std::vector<int> sortedByCompute(std::span<const TaskSpec> tasks, std::span<const double> p, bool typeI) {
  std::vector<int> out;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (isTypeI(tasks[i].state) == typeI) out.push_back(static_cast<int>(i));
  std::sort(out.begin(), out.end(), [&](int a, int b) {
    const TaskSpec& x = tasks[static_cast<size_t>(a)];
    const TaskSpec& y = tasks[static_cast<size_t>(b)];
    const double px = p[static_cast<size_t>(x.expert)], py = p[static_cast<size_t>(y.expert)];
    if (px != py) return px > py;
    if (x.expert != y.expert) return x.expert < y.expert;
    return x.tensor < y.tensor;
  });
  return out;
}

// One block run alone from time 0 (I/O thread and workers idle), as Algorithm 1 sees it while building
// the block. The I/O thread reads the block's E-chunks in task order, then its SM-chunks; the workers
// take decompressions work-conserving in the block's priority order, exactly as `simulate` does: a
// worker that becomes free takes the first decompression (task order, shards in order) whose E-chunk is
// in memory — C/E chunks from time 0, Miss/S chunks when read; if none is, the worker that has been
// free longest takes the next chunk when it arrives.
struct BlockProbe {
  double ioEnd = 0;  // F_I/O(B): the block's reads back to back
  // Idle time of the decompression workers: Σ over workers of (end of its last decompression − its busy
  // time), i.e. every gap before a worker's last decompression in the block, counting the gap at time 0;
  // a worker given no decompression contributes 0. "No additional idle period" (line 13) means that
  // inserting the candidate does not increase this sum.
  double idle = 0;
  std::vector<double> workerEnd;  // F_c^(l)(B): each worker's last completion (0 if none), ascending
};

BlockProbe probeBlock(std::span<const TaskSpec> tasks, const std::vector<int>& block, const Costs& costs) {
  const int K = costs.shards;
  const size_t L = static_cast<size_t>(costs.workers);
  BlockProbe probe;
  // The decompressions by list index (priority): fromMemory are ready at 0; afterRead (ready time, index)
  // wait for their E-chunk, and since E-chunks are read in the same task order their ready times ascend.
  std::vector<int> fromMemory;
  std::vector<std::pair<double, int>> afterRead;
  double eClock = 0;
  int index = 0;
  for (const int t : block) {
    const TaskState s = tasks[static_cast<size_t>(t)].state;
    for (int k = 0; k < K; ++k) {
      if (readsE(s)) {
        eClock += costs.v;
        afterRead.emplace_back(eClock, index++);
      } else {
        fromMemory.push_back(index++);
      }
    }
    probe.ioEnd += ioCost(s, costs);
  }
  std::vector<double> freeAt(L, 0.0), busy(L, 0.0);
  size_t a = 0, b = 0;
  while (a < fromMemory.size() || b < afterRead.size()) {
    const size_t w = static_cast<size_t>(std::min_element(freeAt.begin(), freeAt.end()) - freeAt.begin());
    double start = freeAt[w];
    const bool aReady = a < fromMemory.size();
    const bool bReady = b < afterRead.size() && afterRead[b].first <= start;
    if (aReady && (!bReady || fromMemory[a] < afterRead[b].second)) {
      ++a;
    } else {
      start = std::max(start, afterRead[b].first);
      ++b;
    }
    freeAt[w] = start + costs.c;
    busy[w] += costs.c;
  }
  for (size_t w = 0; w < L; ++w) probe.idle += freeAt[w] - busy[w];
  std::sort(freeAt.begin(), freeAt.end());
  probe.workerEnd = std::move(freeAt);
  return probe;
}

// Definition A.1 as stated in schedule.h: for l = 1..min(L, K), the l-th earliest worker completion
// minus the I/O completion is at least l·v.
bool computeDominant(const BlockProbe& probe, const Costs& costs, double eps) {
  const int m = std::min(costs.workers, costs.shards);
  for (int l = 1; l <= m; ++l)
    if (probe.workerEnd[static_cast<size_t>(l - 1)] - probe.ioEnd < l * costs.v - eps) return false;
  return true;
}

// Algorithm 1 lines 15-19, when no insertion point adds no idle time: the anchor class is the block's
// type-II tasks if it has any, else its type-I tasks; the candidate goes right after the last task of the
// anchor class whose expert has p ≥ the candidate's, or right after the block's base when there is none.
size_t fallbackPosition(std::span<const TaskSpec> tasks, std::span<const double> p, const std::vector<int>& block,
                        int candidate) {
  const auto typeOf = [&](int t) { return isTypeI(tasks[static_cast<size_t>(t)].state); };
  const auto pOf = [&](int t) { return p[static_cast<size_t>(tasks[static_cast<size_t>(t)].expert)]; };
  const bool anchorTypeI = std::all_of(block.begin(), block.end(), typeOf);
  size_t pos = 1;
  for (size_t i = 0; i < block.size(); ++i)
    if (typeOf(block[i]) == anchorTypeI && pOf(block[i]) >= pOf(candidate)) pos = i + 1;
  return pos;
}

// Lists of a schedule from its blocks. Block-style I/O: per block, its tasks' E-chunks in task order, then
// their SM-chunks; FIFO-style: per task, its E-chunks then its SM-chunk.
Schedule assemble(std::span<const TaskSpec> tasks, std::vector<std::vector<int>> blocks, int K,
                  std::span<const int> readyExperts, bool readsGroupedByBlock) {
  Schedule s;
  s.blocks = std::move(blocks);
  const auto op = [&](OpKind kind, int t, int shard) {
    return Op{kind, t, shard, tasks[static_cast<size_t>(t)].expert};
  };
  for (const auto& block : s.blocks) {
    for (const int t : block) {
      const TaskState st = tasks[static_cast<size_t>(t)].state;
      s.taskOrder.push_back(t);
      if (readsE(st))
        for (int k = 0; k < K; ++k) s.io.push_back(op(OpKind::ReadE, t, k));
      if (!readsGroupedByBlock && isTypeI(st)) s.io.push_back(op(OpKind::ReadSM, t, -1));
      for (int k = 0; k < K; ++k) s.decompress.push_back(op(OpKind::Decompress, t, k));
      s.recover.push_back(op(OpKind::Recover, t, -1));
    }
    if (readsGroupedByBlock)
      for (const int t : block)
        if (isTypeI(tasks[static_cast<size_t>(t)].state)) s.io.push_back(op(OpKind::ReadSM, t, -1));
  }
  std::set<int> placed;
  for (const int e : readyExperts)
    if (placed.insert(e).second) s.computeOrder.push_back(e);
  for (const int t : s.taskOrder) {
    const int e = tasks[static_cast<size_t>(t)].expert;
    if (placed.insert(e).second) s.computeOrder.push_back(e);
  }
  return s;
}

}  // namespace

Schedule buildSchedule(std::span<const TaskSpec> tasks, std::span<const double> expertCompute, const Costs& costs,
                       std::span<const int> readyExperts) {
  checkCosts(costs);
  checkTasks(tasks, &expertCompute, readyExperts);
  const std::vector<int> sigmaI = sortedByCompute(tasks, expertCompute, true);
  const std::vector<int> sigmaII = sortedByCompute(tasks, expertCompute, false);

  // Tolerance for comparing simulated times, relative to the total work of the layer.
  double totalWork = 0;
  for (const TaskSpec& t : tasks) totalWork += ioCost(t.state, costs) + costs.shards * costs.c;
  const double eps = 1e-9 * std::max(1.0, totalWork);

  std::vector<bool> used(tasks.size(), false);
  size_t headI = 0, headII = 0;
  const auto nextUnused = [&](const std::vector<int>& seq, size_t& head) {
    while (head < seq.size() && used[static_cast<size_t>(seq[head])]) ++head;
    return head < seq.size() ? seq[head] : -1;
  };

  std::vector<std::vector<int>> blocks;
  for (int base = nextUnused(sigmaI, headI); base >= 0; base = nextUnused(sigmaI, headI)) {
    used[static_cast<size_t>(base)] = true;
    std::vector<int> block{base};
    BlockProbe probe = probeBlock(tasks, block, costs);
    while (block.size() < kMaxBlockTasks && !computeDominant(probe, costs, eps)) {
      int j = nextUnused(sigmaII, headII);  // U = (σ_II, σ_I): type II first
      if (j < 0) j = nextUnused(sigmaI, headI);
      if (j < 0) break;
      used[static_cast<size_t>(j)] = true;
      bool inserted = false;
      // Earliest position after the base that adds no idle time (line 13).
      for (size_t pos = 1; pos <= block.size() && !inserted; ++pos) {
        std::vector<int> trial = block;
        trial.insert(trial.begin() + static_cast<std::ptrdiff_t>(pos), j);
        BlockProbe next = probeBlock(tasks, trial, costs);
        if (next.idle <= probe.idle + eps) {
          block = std::move(trial);
          probe = std::move(next);
          inserted = true;
        }
      }
      if (!inserted) {
        const size_t pos = fallbackPosition(tasks, expertCompute, block, j);
        block.insert(block.begin() + static_cast<std::ptrdiff_t>(pos), j);
        probe = probeBlock(tasks, block, costs);
      }
    }
    blocks.push_back(std::move(block));
  }
  std::vector<int> rest;
  for (int j = nextUnused(sigmaII, headII); j >= 0; j = nextUnused(sigmaII, headII)) {
    used[static_cast<size_t>(j)] = true;
    rest.push_back(j);
  }
  if (!rest.empty()) blocks.push_back(std::move(rest));
  return assemble(tasks, std::move(blocks), costs.shards, readyExperts, true);
}

Schedule fifoSchedule(std::span<const TaskSpec> tasks, const Costs& costs, std::span<const int> readyExperts) {
  checkCosts(costs);
  checkTasks(tasks, nullptr, readyExperts);
  std::vector<std::vector<int>> blocks;
  if (!tasks.empty()) {
    blocks.emplace_back();
    for (size_t i = 0; i < tasks.size(); ++i) blocks.back().push_back(static_cast<int>(i));
  }
  return assemble(tasks, std::move(blocks), costs.shards, readyExperts, false);
}

namespace {

// Earliest end of the recovery of one task in state s if the task had the machine to itself: its
// E-chunks read first (ending at v, 2v, ..., Kv), then its SM-chunk (ending at Kv + u for Miss, u for E);
// its K decompressions in release order on the earliest-free of min(K, L) workers (optimal for equal
// lengths and release dates); recovery after both. Reading the SM-chunk earlier only delays the
// E-chunks, so this is the exact single-task optimum, hence a lower bound on that task in any schedule.
double aloneRecoveryEnd(TaskState s, const Costs& costs) {
  const int K = costs.shards;
  std::vector<double> freeAt(static_cast<size_t>(std::min(K, costs.workers)), 0.0);
  double decompressed = 0;
  for (int k = 0; k < K; ++k) {
    const auto w = std::min_element(freeAt.begin(), freeAt.end());
    const double ready = readsE(s) ? (k + 1) * costs.v : 0.0;
    *w = std::max(*w, ready) + costs.c;
    decompressed = std::max(decompressed, *w);
  }
  const double smRead = s == TaskState::Miss ? K * costs.v + costs.u : s == TaskState::E ? costs.u : 0.0;
  return std::max(decompressed, smRead) + costs.recover;
}

double ceilDiv(size_t n, int d) {
  const size_t dd = static_cast<size_t>(d);
  return static_cast<double>((n + dd - 1) / dd);
}

}  // namespace

double lowerBound(std::span<const TaskSpec> tasks, std::span<const double> expertCompute, const Costs& costs,
                  std::span<const int> readyExperts) {
  checkCosts(costs);
  checkTasks(tasks, &expertCompute, readyExperts);
  const int K = costs.shards, L = costs.workers;
  const double c = costs.c, recover = costs.recover;
  const auto p = [&](int e) { return expertCompute[static_cast<size_t>(e)]; };

  struct ExpertLoad {
    double io = 0;                      // I/O of its tasks
    double latestAlone = 0;             // max over its tasks of aloneRecoveryEnd
    double earliestRecoveryStart = kInf;  // min over its tasks of aloneRecoveryEnd − recover
    double firstDecompress = kInf;      // earliest time any of its decompressions can start (0 or v)
    size_t tasks = 0;
  };
  std::map<int, ExpertLoad> load;
  double I = 0, firstDecompress = kInf, earliestRecoveryStart = kInf;
  double minP = kInf, minPWithIo = kInf;
  for (const TaskSpec& t : tasks) {
    const double io = ioCost(t.state, costs);
    const double alone = aloneRecoveryEnd(t.state, costs);
    const double decompressFrom = readsE(t.state) ? costs.v : 0.0;
    ExpertLoad& x = load[t.expert];
    x.io += io;
    x.latestAlone = std::max(x.latestAlone, alone);
    x.earliestRecoveryStart = std::min(x.earliestRecoveryStart, alone - recover);
    x.firstDecompress = std::min(x.firstDecompress, decompressFrom);
    ++x.tasks;
    I += io;
    firstDecompress = std::min(firstDecompress, decompressFrom);
    earliestRecoveryStart = std::min(earliestRecoveryStart, alone - recover);
    minP = std::min(minP, p(t.expert));
    if (io > 0) minPWithIo = std::min(minPWithIo, p(t.expert));
  }

  double bound = 0;
  if (!tasks.empty()) {
    // I: the I/O thread; after its last read that read's task still recovers and its expert computes.
    if (I > 0) bound = std::max(bound, I + recover + minPWithIo);
    // C/L: no decompression starts before firstDecompress, some worker does ⌈TK/L⌉ of them.
    bound = std::max(bound, firstDecompress + ceilDiv(tasks.size() * static_cast<size_t>(K), L) * c + recover + minP);
    // The recovery lane is one resource: T recoveries back to back, none before the earliest possible.
    bound = std::max(bound, earliestRecoveryStart + static_cast<double>(tasks.size()) * recover + minP);
  }
  // P and Z: the compute lane as one machine with release dates (1|r_e|C_max, solved exactly by release
  // order). Expert e is released no earlier than r_e, the largest of: any of its tasks alone
  // (Z, eq. 3 corrected), its I/O then a recovery, its decompressions on L workers then a recovery,
  // its recoveries back to back. Ready experts are released at 0. With every r_e = 0 this is P.
  std::vector<std::pair<double, double>> jobs;  // (r_e, p_e)
  for (const int e : readyExperts) jobs.emplace_back(0.0, p(e));
  for (const auto& [e, x] : load) {
    const double r = std::max({x.latestAlone, x.io > 0 ? x.io + recover : 0.0,
                               x.firstDecompress + ceilDiv(x.tasks * static_cast<size_t>(K), L) * c + recover,
                               x.earliestRecoveryStart + static_cast<double>(x.tasks) * recover});
    jobs.emplace_back(r, p(e));
  }
  std::sort(jobs.begin(), jobs.end());
  double computeEnd = 0;
  for (const auto& [r, pe] : jobs) computeEnd = std::max(computeEnd, r) + pe;
  return std::max(bound, computeEnd);
}

Simulation simulate(std::span<const TaskSpec> tasks, std::span<const double> expertCompute, const Costs& costs,
                    const Schedule& schedule) {
  checkCosts(costs);
  checkTasks(tasks, &expertCompute, {});
  const size_t K = static_cast<size_t>(costs.shards);
  const size_t L = static_cast<size_t>(costs.workers);
  const size_t T = tasks.size();
  constexpr size_t npos = std::numeric_limits<size_t>::max();

  // One node per operation; the lists are added in resource order, so within one resource node ids ascend
  // with list position and a std::set of ready node ids yields the first ready op in priority order.
  enum Resource : int { Io = 0, Workers = 1, Recovery = 2, ComputeLane = 3 };
  struct Node {
    Op op;
    Resource resource = Io;
    double duration = 0;
    int pending = 0;  // predecessors not yet complete
    std::vector<size_t> next;
  };
  std::vector<Node> nodes;
  std::vector<size_t> readE(T * K, npos), decompress(T * K, npos), readSM(T, npos), recover(T, npos);
  std::map<int, size_t> compute;

  const auto addList = [&](const std::vector<Op>& list, Resource resource, const char* name) {
    for (size_t pos = 0; pos < list.size(); ++pos) {
      const Op& op = list[pos];
      const std::string where = std::string("simulate: ") + name + " list entry " + std::to_string(pos) + " (" +
                                describe(op) + ")";
      if (op.task < 0 || static_cast<size_t>(op.task) >= T)
        fail(where + " names a task outside 0.." + std::to_string(static_cast<long>(T) - 1));
      const size_t t = static_cast<size_t>(op.task);
      const TaskState st = tasks[t].state;
      const bool shardOk = op.shard >= 0 && static_cast<size_t>(op.shard) < K;
      std::vector<size_t>* slot = nullptr;
      size_t index = t;
      double duration = 0;
      bool belongs = false;
      switch (op.kind) {
        case OpKind::ReadE:
          belongs = resource == Io && readsE(st) && shardOk;
          slot = &readE, index = t * K + static_cast<size_t>(op.shard), duration = costs.v;
          break;
        case OpKind::ReadSM:
          belongs = resource == Io && isTypeI(st);
          slot = &readSM, duration = costs.u;
          break;
        case OpKind::Decompress:
          belongs = resource == Workers && shardOk;
          slot = &decompress, index = t * K + static_cast<size_t>(op.shard), duration = costs.c;
          break;
        case OpKind::Recover:
          belongs = resource == Recovery;
          slot = &recover, duration = costs.recover;
          break;
        case OpKind::Compute: break;
      }
      if (!belongs)
        fail(where + " does not belong in this list for a task in state " + stateName(st) + " with K = " +
             std::to_string(K));
      if ((*slot)[index] != npos) fail(where + " appears twice");
      (*slot)[index] = nodes.size();
      Op full = op;
      full.expert = tasks[t].expert;
      nodes.push_back(Node{full, resource, duration, 0, {}});
    }
  };
  addList(schedule.io, Io, "io");
  addList(schedule.decompress, Workers, "decompress");
  addList(schedule.recover, Recovery, "recover");
  for (size_t pos = 0; pos < schedule.computeOrder.size(); ++pos) {
    const int e = schedule.computeOrder[pos];
    if (e < 0 || static_cast<size_t>(e) >= expertCompute.size())
      fail("simulate: computeOrder entry " + std::to_string(pos) + " is expert " + std::to_string(e) +
           ", outside expertCompute (size " + std::to_string(expertCompute.size()) + ")");
    if (!compute.emplace(e, nodes.size()).second)
      fail("simulate: computeOrder lists expert " + std::to_string(e) + " twice");
    nodes.push_back(Node{Op{OpKind::Compute, -1, -1, e}, ComputeLane, expertCompute[static_cast<size_t>(e)], 0, {}});
  }

  // The DAG of each task (schedule.h) and the edge from its recovery to its expert's compute.
  const auto need = [&](size_t id, OpKind kind, size_t t, size_t shard) {
    if (id == npos)
      fail("simulate: the schedule lacks " + describe(Op{kind, static_cast<int>(t), static_cast<int>(shard), -1}) +
           " (state " + stateName(tasks[t].state) + ")");
    return id;
  };
  const auto edge = [&](size_t from, size_t to) {
    nodes[from].next.push_back(to);
    ++nodes[to].pending;
  };
  constexpr size_t noShard = static_cast<size_t>(-1);
  for (size_t t = 0; t < T; ++t) {
    const TaskState st = tasks[t].state;
    const size_t rec = need(recover[t], OpKind::Recover, t, noShard);
    for (size_t k = 0; k < K; ++k) {
      const size_t dec = need(decompress[t * K + k], OpKind::Decompress, t, k);
      if (readsE(st)) edge(need(readE[t * K + k], OpKind::ReadE, t, k), dec);
      edge(dec, rec);
    }
    if (isTypeI(st)) edge(need(readSM[t], OpKind::ReadSM, t, noShard), rec);
    const auto it = compute.find(tasks[t].expert);
    if (it == compute.end())
      fail("simulate: computeOrder lacks expert " + std::to_string(tasks[t].expert) + " of task " + std::to_string(t));
    edge(rec, it->second);
  }

  // Discrete events. At each event time every completion is applied first, then the resources take the
  // first ready op of their lists in DAG order (I/O, workers, recovery, compute), so that a zero-length op
  // — completed on the spot — makes its successors ready for the later resources at the same instant. An
  // idle worker that has been free longest goes first (lowest index on ties).
  struct Event {
    double time;
    size_t seq;
    size_t node;
    int lane;
  };
  const auto later = [](const Event& a, const Event& b) { return a.time != b.time ? a.time > b.time : a.seq > b.seq; };
  std::priority_queue<Event, std::vector<Event>, decltype(later)> events(later);
  std::set<size_t> ready[4];
  bool laneBusy[4] = {false, false, false, false};
  std::vector<double> workerFreeAt(L, 0.0);
  std::vector<bool> workerBusy(L, false);
  const int laneOf[4] = {0, -1, static_cast<int>(L) + 1, static_cast<int>(L) + 2};

  Simulation sim;
  sim.ops.reserve(nodes.size());
  size_t seq = 0, done = 0;
  double now = 0;
  const auto complete = [&](size_t id) {
    ++done;
    for (const size_t succ : nodes[id].next)
      if (--nodes[succ].pending == 0) ready[nodes[succ].resource].insert(succ);
  };
  const auto takeFirstReady = [&](Resource r) {
    const size_t id = *ready[r].begin();
    ready[r].erase(ready[r].begin());
    return id;
  };
  // Starts op `id` on `lane` now; returns whether it occupies the lane (a zero-length op completes at once).
  const auto start = [&](size_t id, int lane) {
    const double end = now + nodes[id].duration;
    sim.ops.push_back(SimulatedOp{nodes[id].op, lane, now, end});
    if (end == now) {
      complete(id);
      return false;
    }
    events.push(Event{end, seq++, id, lane});
    return true;
  };
  for (size_t id = 0; id < nodes.size(); ++id)
    if (nodes[id].pending == 0) ready[nodes[id].resource].insert(id);

  for (;;) {
    for (const Resource r : {Io, Workers, Recovery, ComputeLane}) {
      if (r != Workers) {
        while (!laneBusy[r] && !ready[r].empty()) laneBusy[r] = start(takeFirstReady(r), laneOf[r]);
        continue;
      }
      while (!ready[Workers].empty()) {
        size_t w = npos;
        for (size_t i = 0; i < L; ++i)
          if (!workerBusy[i] && (w == npos || workerFreeAt[i] < workerFreeAt[w])) w = i;
        if (w == npos) break;
        if (start(takeFirstReady(Workers), static_cast<int>(w) + 1))
          workerBusy[w] = true;
        else
          workerFreeAt[w] = now;
      }
    }
    if (events.empty()) break;
    now = events.top().time;
    while (!events.empty() && events.top().time == now) {
      const Event ev = events.top();
      events.pop();
      if (nodes[ev.node].resource == Workers) {
        workerBusy[static_cast<size_t>(ev.lane - 1)] = false;
        workerFreeAt[static_cast<size_t>(ev.lane - 1)] = now;
      } else {
        laneBusy[nodes[ev.node].resource] = false;
      }
      complete(ev.node);
    }
  }
  if (done != nodes.size())
    fail("simulate: " + std::to_string(nodes.size() - done) + " operations never became ready");
  for (const SimulatedOp& op : sim.ops)
    if (op.op.kind == OpKind::Compute) sim.makespan = std::max(sim.makespan, op.end);
  return sim;
}

}  // namespace zipmoe::sched
