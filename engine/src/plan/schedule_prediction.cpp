// predictLayerSchedule (see zipmoe/plan/schedule_prediction.h): the runtime's Algorithm 1 and simulation,
// redone from what a layer's trace shows.
#include "zipmoe/plan/schedule_prediction.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "sched/schedule.h"
#include "zipmoe/base/error.h"

namespace zipmoe {

namespace {

struct TensorSeen {
  bool readE = false, readSM = false, decompress = false, recover = false, raw = false;
};

bool isLayerOp(TraceOp op) {
  switch (op) {
    case TraceOp::ReadSM:
    case TraceOp::ReadE:
    case TraceOp::Decompress:
    case TraceOp::Recover:
    case TraceOp::ReadFull:
    case TraceOp::ReadTensor:
    case TraceOp::ExpertCompute: return true;
    case TraceOp::Dense:
    case TraceOp::Stall:
    case TraceOp::Prefetch: return false;
  }
  return false;
}

TraceOp traceOp(sched::OpKind kind) {
  switch (kind) {
    case sched::OpKind::ReadE: return TraceOp::ReadE;
    case sched::OpKind::ReadSM: return TraceOp::ReadSM;
    case sched::OpKind::Decompress: return TraceOp::Decompress;
    case sched::OpKind::Recover: return TraceOp::Recover;
    case sched::OpKind::Compute: return TraceOp::ExpertCompute;
  }
  return TraceOp::ExpertCompute;
}

}  // namespace

LayerSchedulePrediction predictLayerSchedule(std::span<const TraceEvent> measured, const CostProfile& profile,
                                             int workers, bool fifoSchedule) {
  LayerSchedulePrediction out;
  if (workers < 1) throw Error("schedule prediction: workers = " + std::to_string(workers) + ", expected >= 1");
  const TraceLanes lanes{workers};
  int token = 0, layer = -1;
  for (const TraceEvent& e : measured)
    if (isLayerOp(e.op) && e.layer >= 0) {
      token = e.token;
      layer = e.layer;
      break;
    }
  if (layer < 0) return out;

  int64_t layerStart = 0;
  bool haveStart = false;
  int shards = 1;
  std::map<std::pair<int, int>, TensorSeen> tensors;  // (expert, tensor kind)
  std::map<int, bool> computed;                       // experts the model computed
  for (const TraceEvent& e : measured) {
    if (e.token != token || e.layer != layer || !isLayerOp(e.op)) continue;
    if (e.lane >= lanes.count())
      throw Error("schedule prediction: an event on lane " + std::to_string(e.lane) + ", but " +
                  std::to_string(workers) + " workers make " + std::to_string(lanes.count()) + " lanes");
    if (!haveStart || e.startNs < layerStart) layerStart = e.startNs;
    haveStart = true;
    if (e.op == TraceOp::ExpertCompute) {
      if (e.expert >= 0) computed[e.expert] = true;
      continue;
    }
    if (e.expert < 0 || e.tensor < 0)
      throw Error(std::string("schedule prediction: a ") + traceOpName(e.op) + " event of token " + std::to_string(token) +
                  ", layer " + std::to_string(layer) + " names no expert tensor (expert " + std::to_string(e.expert) +
                  ", tensor " + std::to_string(e.tensor) + ")");
    TensorSeen& t = tensors[{e.expert, e.tensor}];
    switch (e.op) {
      case TraceOp::ReadE: t.readE = true; break;
      case TraceOp::ReadSM: t.readSM = true; break;
      case TraceOp::ReadTensor: t.readE = t.readSM = true; break;
      case TraceOp::Decompress:
        t.decompress = true;
        if (e.shard >= 0) shards = std::max(shards, e.shard + 1);
        break;
      case TraceOp::Recover: t.recover = true; break;
      case TraceOp::ReadFull: t.raw = true; break;
      default: break;
    }
    computed.try_emplace(e.expert, false);
  }

  std::vector<sched::TaskSpec> specs;
  std::map<int, bool> hasTask, raw;
  for (const auto& [key, seen] : tensors) {
    if (seen.raw) {
      raw[key.first] = true;
      continue;
    }
    sched::TaskSpec spec;
    spec.expert = key.first;
    spec.tensor = key.second;
    if (seen.readE && seen.readSM) spec.state = sched::TaskState::Miss;
    else if (seen.readE) spec.state = sched::TaskState::S;
    else if (seen.readSM) spec.state = sched::TaskState::E;
    else if (seen.decompress || seen.recover) spec.state = sched::TaskState::C;
    else continue;
    specs.push_back(spec);
    hasTask[key.first] = true;
  }
  std::vector<int> ready;
  int maxExpert = 0;
  for (const auto& [expert, unused] : computed) {
    maxExpert = std::max(maxExpert, expert);
    if (!hasTask.count(expert) && !raw.count(expert)) ready.push_back(expert);
  }
  if (specs.empty() && ready.empty()) return out;
  std::vector<double> compute(static_cast<size_t>(maxExpert) + 1, 0.0);
  const double p = profile.expertCompute(1);
  for (const auto& [expert, unused] : computed) compute[static_cast<size_t>(expert)] = p > 0 ? p : 1e-4;

  // As the runtime prices a layer: with recovery fused into the model's compute (decoding), its
  // tensors are handed split and none is recovered — then the schedule has no recovery to price.
  const bool anyRecovery = std::any_of(tensors.begin(), tensors.end(), [](const auto& t) { return t.second.recover; });
  const sched::Costs costs{profile.smRead, profile.eRead, profile.decompress, anyRecovery ? profile.recover : 0.0,
                           shards, workers};
  const sched::Schedule schedule = fifoSchedule ? sched::fifoSchedule(specs, costs, ready)
                                                : sched::buildSchedule(specs, compute, costs, ready);
  const sched::Simulation sim = sched::simulate(specs, compute, costs, schedule);
  out.makespanSeconds = sim.makespan;
  out.tasks = static_cast<int>(specs.size());
  out.readyExperts = static_cast<int>(ready.size());
  for (const sched::SimulatedOp& op : sim.ops) {
    if (op.op.kind == sched::OpKind::Recover && !anyRecovery) continue;  // split tensors: not recovered
    TraceEvent e;
    e.startNs = layerStart + static_cast<int64_t>(std::llround(op.start * 1e9));
    e.endNs = layerStart + static_cast<int64_t>(std::llround(op.end * 1e9));
    e.token = token;
    e.layer = static_cast<int16_t>(layer);
    e.expert = static_cast<int16_t>(op.op.expert);
    if (op.op.task >= 0) e.tensor = static_cast<int8_t>(specs[static_cast<size_t>(op.op.task)].tensor);
    e.shard = static_cast<int8_t>(op.op.shard);
    e.op = traceOp(op.op.kind);
    e.lane = static_cast<uint8_t>(op.lane);
    out.events.push_back(e);
  }
  std::sort(out.events.begin(), out.events.end(),
            [](const TraceEvent& a, const TraceEvent& b) { return a.startNs < b.startNs; });
  return out;
}

}  // namespace zipmoe
