// Schedule prediction — the schedule the ZipMoE scheduler predicts for one MoE layer of one token,
// as trace events, to draw next to the events the runtime measured for that layer.
//
// The runtime, for each layer, builds every expert tensor's DAG from where its parts were found,
// orders the operations with Algorithm 1 (or request order with fifoSchedule) and simulates their
// work-conserving execution with the profile's costs (sched::simulate; the sum of those makespans is
// RuntimeStats::predictedMakespan). predictLayerSchedule redoes that from the layer's measured trace
// events: each (expert, tensor) with an E-chunk read and an SM-chunk read (or one coalesced tensor
// read) was a miss, with E-chunk reads only an S hit, with an SM-chunk read only an E hit, with
// decompressions and no read a C hit; an expert computed without any such operation was an F hit
// (ready at once). Raw whole-tensor reads are not scheduled by Algorithm 1 and are left out. Each
// expert's FFN is priced for one token (a decode step). The events start at the layer's first
// measured event, on the same lanes (I/O, decompression workers, recovery, compute) as the measured
// ones.
// Thread-safety: a pure function. Cost: Algorithm 1 and one simulation, O(T² · K · L) for T tasks.
#pragma once

#include <span>
#include <vector>

#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/trace/trace_events.h"

namespace zipmoe {

struct LayerSchedulePrediction {
  std::vector<TraceEvent> events;  // the simulated operations, measured-clock nanoseconds
  double makespanSeconds = 0;      // the simulation's makespan (0: nothing to schedule)
  int tasks = 0;                   // expert tensors scheduled
  int readyExperts = 0;            // F hits
};

// `measured`: the events of one (token, layer), any order, any lanes (other tokens' or layers'
// events are ignored: the token and layer are those of the first ExpertCompute or chunk operation).
// `workers`: L, the runtime's decompression workers (TraceLanes::workers). Throws zipmoe::Error when
// an event names a lane outside the layout or an expert tensor index that is negative.
LayerSchedulePrediction predictLayerSchedule(std::span<const TraceEvent> measured, const CostProfile& profile,
                                             int workers, bool fifoSchedule = false);

}  // namespace zipmoe
