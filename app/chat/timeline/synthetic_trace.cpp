#include "synthetic_trace.h"

#include <algorithm>
#include <random>

#include "timeline_colors.h"

namespace zipmoe::app {

std::vector<TraceEvent> syntheticBurstyTrace(uint32_t seed, int lanes, int intervalsPerLane) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> burstSize(1, 80);
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_int_distribution<int64_t> shortLength(50, 5000);
  std::uniform_int_distribution<int64_t> longLength(50'000, 500'000);
  std::uniform_int_distribution<int64_t> idle(0, 400'000);
  std::uniform_int_distribution<int64_t> longIdle(0, 20'000'000);
  std::uniform_int_distribution<int> op(0, kTraceOpCount - 1);
  std::vector<TraceEvent> events;
  events.reserve(static_cast<size_t>(lanes) * static_cast<size_t>(std::max(0, intervalsPerLane)));
  for (int lane = 0; lane < lanes; ++lane) {
    int64_t start = 0, end = 0;
    for (int i = 0; i < intervalsPerLane;) {
      const int burst = burstSize(rng);
      for (int j = 0; j < burst && i < intervalsPerLane; ++j, ++i) {
        const int64_t length = percent(rng) < 2 ? longLength(rng) : shortLength(rng);
        start = std::max(start, end + std::uniform_int_distribution<int64_t>(-length / 8, 500)(rng));
        end = start + length;
        TraceEvent e;
        e.lane = static_cast<uint8_t>(lane);
        e.startNs = start;
        e.endNs = end;
        e.op = static_cast<TraceOp>(op(rng));
        e.token = i / 200;
        e.layer = static_cast<int16_t>((i / 20) % 10);
        events.push_back(e);
      }
      end += percent(rng) < 33 ? longIdle(rng) : idle(rng);
    }
  }
  return events;
}

}  // namespace zipmoe::app
