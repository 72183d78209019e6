// Histogram — a thread-safe count of observations in fixed buckets (a Prometheus histogram's state):
// observe() from any thread, snapshot() a consistent copy for GET /metrics (its buckets add up to
// its count at every instant, which a scrape checks).
// Thread-safety: every function from any thread (one mutex). Cost: observe is a lock and a binary
// search over the bounds; snapshot copies them.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "serve/prometheus_text.h"

namespace zipmoe::serve {

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, ascending and finite (+Inf is implied). Throws
  // zipmoe::Error for bounds out of order.
  explicit Histogram(std::vector<double> bounds);
  // `times` equal observations of `value` (NaN is ignored).
  void observe(double value, uint64_t times = 1);
  HistogramSnapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  HistogramSnapshot state_;
};

}  // namespace zipmoe::serve
