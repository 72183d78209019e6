// A synthetic runtime trace for measuring and testing the schedule chart: lanes clustered at every
// scale as the runtime's are — bursts of 1-80 intervals (50 ns to 5 µs, one in fifty 50-500 µs long)
// with small gaps or overlaps, separated by idle gaps of up to 400 µs, and one in three by up to
// 20 ms. Deterministic for a seed. Thread-safety: a pure function. Cost: linear in the events.
#pragma once

#include <cstdint>
#include <vector>

#include "zipmoe/trace/trace_events.h"

namespace zipmoe::app {

std::vector<TraceEvent> syntheticBurstyTrace(uint32_t seed, int lanes, int intervalsPerLane);

}  // namespace zipmoe::app
