// The cache-affinity scheduler of one sparse layer (ZipMoE paper §3.3, Algorithm 1, Appendix A–B):
// per-tensor DAGs by compression state, the type I / type II partition, block construction with the
// compute-dominance condition (Definition A.1), a plain FIFO order for comparison, the lower bound
// max{I, C/L, P, Z} (Lemma B.3), and a discrete-event simulation of work-conserving execution.
//
// Model. Resources: one I/O thread, L decompression workers, one recovery lane, one compute lane.
// A task is one expert tensor; its DAG (docs/ARCHITECTURE.md, "The path of one chunk") by state:
//   Miss: K × ReadE → K × Decompress; ReadSM; Recover after all of them          (type I)
//   C:    K × Decompress; Recover                                                (type II)
//   S:    K × ReadE → K × Decompress; Recover                                    (type II)
//   E:    K × Decompress; ReadSM; Recover                                        (type I)
// An expert's compute (duration p of its expert) starts when all its tensors are recovered and the
// compute lane is free. Experts whose tensors are all in the F pool have no tasks: they are passed
// as `readyExperts` and compute first.
// Thread-safety: pure functions. Cost: buildSchedule simulates a block once per tried insertion
// position, O(b · K · L) each for a block of b ≤ kMaxBlockTasks tasks: O(T · b² · K · L) in all
// (test_schedule prints the time for a prefill-shaped layer of 126 tasks). simulate is
// O(ops · (log ops + L)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace zipmoe::sched {

enum class TaskState : uint8_t { Miss, C, S, E };
bool isTypeI(TaskState s);  // Miss, E: needs an SM read

struct TaskSpec {
  int expert = 0;  // expert id (tasks of one expert share its compute)
  int tensor = 0;  // tensor kind within the expert
  TaskState state = TaskState::Miss;
};

struct Costs {
  double u = 0;        // SM-chunk read
  double v = 0;        // E-chunk read (ρu/K in the paper)
  double c = 0;        // E-chunk decompression
  double recover = 0;  // one tensor's recovery
  int shards = 1;      // K
  int workers = 1;     // L
};

enum class OpKind : uint8_t { ReadE, ReadSM, Decompress, Recover, Compute };
const char* opKindName(OpKind k);

struct Op {
  OpKind kind = OpKind::ReadE;
  int task = -1;   // index into the tasks span (-1 for Compute)
  int shard = -1;  // E-chunk index for ReadE / Decompress, else -1
  int expert = -1; // for Compute (and filled for every op)
};

// The priority order the executor follows: each resource takes the first op in its list whose
// predecessors are done (work-conserving).
struct Schedule {
  std::vector<std::vector<int>> blocks;  // task indices, in priority order within each block
  std::vector<int> taskOrder;            // blocks concatenated
  std::vector<Op> io;                    // per block: its tasks' ReadE in task order, then their ReadSM
  std::vector<Op> decompress;            // Decompress ops in task order, shards in order
  std::vector<Op> recover;               // one Recover per task, in task order
  std::vector<int> computeOrder;         // experts: readyExperts first, then in order of first task
};

// Algorithm 1. `expertCompute[e]` is p_e (time of expert e's FFN for its tokens), indexed by expert
// id (size > every expert id used). Type I and type II tasks are each sorted by non-increasing p of
// their expert (ties: lower expert id first), tasks of one expert consecutive (tensor order). A block
// starts with the next type-I task; candidates come from U = (σ_II, σ_I) in that order; a candidate
// goes to the earliest position in the block that adds no idle time on any decompression worker
// (simulated with the costs), else after the block's type-II tasks (type-I if it has none) whose
// expert has p ≥ its p;
// the block closes when it is compute-dominant: for l = 1..min(L, K), the l-th earliest worker
// completion minus the I/O completion ≥ l · v, or when it holds kMaxBlockTasks tasks (our addition,
// below). When no type-I task remains, the remaining type-II tasks form the last block (in σ_II order).
// Precisely: each block is simulated alone from time 0 (idle I/O thread and workers) with the same
// work-conserving rules as `simulate`; its idle time is Σ over workers of the gaps before the worker's
// last decompression in the block. A candidate is inserted at the earliest position 1..|B| (the base
// stays first) whose block's idle time is not larger (within 1e-9 of the layer's total work); failing
// that (Algorithm 1 lines 15-19) right after the block's last type-II task — type-I if the block has
// none — whose expert has p ≥ the candidate's, or right after the base when no such task exists.
// The cap: an I/O-bound layer (reads slower than decompression, as on this machine) never becomes
// compute-dominant, so without a cap one block took every task, each insertion probed every position
// (cubic in T), and a prefill layer of 42 experts waited 22–31 ms for its schedule before its first
// read (docs/RUNTIME.md, "A prefill layer that starts reading at once"). On such layers the capped
// blocks' simulated makespan was the same or shorter. Layers of at most kMaxBlockTasks tasks (decoding
// at batch 1) are scheduled exactly as before.
inline constexpr size_t kMaxBlockTasks = 32;
Schedule buildSchedule(std::span<const TaskSpec> tasks, std::span<const double> expertCompute, const Costs& costs,
                       std::span<const int> readyExperts = {});

// The same operations in request order: tasks as given, one block, I/O reads in task order (each
// task's E-chunks then its SM-chunk), no reordering. For comparing scheduler quality. `costs` is
// validated like elsewhere, but only costs.shards (K), the number of E-chunks, is used.
Schedule fifoSchedule(std::span<const TaskSpec> tasks, const Costs& costs, std::span<const int> readyExperts = {});

// Lemma B.3, max{I, C/L, P, Z}, each term made valid and tightened (every term is a true lower bound on
// any schedule's makespan; R = costs.recover, T tasks, p_min = smallest p among the task experts):
//   I-term: I + R + (smallest p among experts with I/O), I = Σ I/O — after the last read its task still
//           recovers and its expert computes.
//   C-term: d + ⌈T·K/L⌉·c + R + p_min, d = v if every task reads its E-chunks, else 0 (≥ C/L + …).
//   R-term: (earliest any task can start its recovery) + T·R + p_min — the recovery lane is one resource.
//   P/Z-term: the compute lane as one machine with release dates, solved exactly (release order): ready
//           experts at 0; expert e at r_e = max of (a) its slowest task's exact single-task critical path
//           (eq. 3 corrected, see below), (b) its own I/O + R, (c) its first possible decompression +
//           ⌈n_e·K/L⌉·c + R, (d) its earliest recovery start + n_e·R. This is ≥ P = Σ p and ≥ r_e + p_e.
// Eq. 3 as printed (ρu·1[M,S] + max{Kc/min(K,L), u·1[M,E]} + p) is not a lower bound: it serialises the
// E-chunk reads before all decompressions, which in fact overlap (K = 4, L = 1, v = c = 1, u = 0, an S
// task: eq. 3 gives 8 + p, the task finishes at 5 + p). (a) uses the exact single-task optimum instead.
double lowerBound(std::span<const TaskSpec> tasks, std::span<const double> expertCompute, const Costs& costs,
                  std::span<const int> readyExperts = {});

struct SimulatedOp {
  Op op;
  int lane = 0;  // 0 = I/O, 1..L = decompression workers, L+1 = recovery, L+2 = compute
  double start = 0, end = 0;
};
struct Simulation {
  double makespan = 0;  // end of the last compute (0 if nothing to do)
  std::vector<SimulatedOp> ops;
};

// Runs the schedule in simulated time with fixed durations (costs, expertCompute), each resource
// work-conserving in its list's priority order. Workers are identical; a free worker takes the first
// ready decompression (when several are free, the one free longest, then the lowest index). An
// expert's compute is ready when all its tasks are recovered (at once for experts without tasks); the
// compute lane takes the first ready expert of computeOrder. Deterministic. Throws zipmoe::Error when
// the lists lack an operation of a task's DAG, hold one twice, or hold one its state does not have.
Simulation simulate(std::span<const TaskSpec> tasks, std::span<const double> expertCompute, const Costs& costs,
                    const Schedule& schedule);

}  // namespace zipmoe::sched
