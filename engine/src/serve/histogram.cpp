// Histogram (see histogram.h).
#include "serve/histogram.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "zipmoe/base/error.h"

namespace zipmoe::serve {

Histogram::Histogram(std::vector<double> bounds) {
  for (size_t i = 0; i < bounds.size(); ++i)
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i])))
      throw Error("metrics: histogram bound " + std::to_string(i) + " (" + formatMetricValue(bounds[i]) +
                  ") is not finite and above the one before");
  state_.counts.assign(bounds.size() + 1, 0);
  state_.bounds = std::move(bounds);
}

void Histogram::observe(double value, uint64_t times) {
  if (std::isnan(value) || times == 0) return;
  // The first bucket whose bound is ≥ value (le: less than or equal).
  const auto bucket = static_cast<size_t>(
      std::lower_bound(state_.bounds.begin(), state_.bounds.end(), value) - state_.bounds.begin());
  std::lock_guard lock(mutex_);
  state_.counts[bucket] += times;
  state_.sum += value * static_cast<double>(times);
}

HistogramSnapshot Histogram::snapshot() const {
  std::lock_guard lock(mutex_);
  return state_;
}

}  // namespace zipmoe::serve
