// PrometheusText — writes metrics in the Prometheus text exposition format, version 0.0.4: per
// family a `# HELP` and a `# TYPE` line, then its samples `name{label="value",…} value`; a
// histogram as cumulative `_bucket{le="…"}` samples ending with le="+Inf", then `_sum` and `_count`.
// Label values are escaped (backslash, double quote, newline), HELP texts too (backslash, newline);
// values print as integers when they are whole (up to 2^53), else in the shortest form that reads
// back the same, and as +Inf, -Inf, NaN. Names are the caller's: metricName checks them.
// Dependency-free: GET /metrics (serve/serve_metrics.cpp) renders with it.
// Thread-safety: a writer is used by one thread; the free functions are pure. Cost: appends to one
// string, O(size of the text).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zipmoe::serve {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// One histogram's observations: counts[i] of those ≤ bounds[i] and > bounds[i-1] (not cumulative);
// counts has one more entry than bounds, for those above the last bound.
struct HistogramSnapshot {
  std::vector<double> bounds;    // ascending, finite
  std::vector<uint64_t> counts;  // bounds.size() + 1
  double sum = 0;
};

enum class MetricType { Counter, Gauge, Histogram };

std::string escapeLabelValue(std::string_view value);
std::string escapeHelp(std::string_view help);
std::string formatMetricValue(double value);
// True for a valid metric or label name ([a-zA-Z_:][a-zA-Z0-9_:]*; labels without ':').
bool validMetricName(std::string_view name, bool label = false);

class PrometheusText {
 public:
  // Starts a family: its HELP and TYPE lines. Throws zipmoe::Error naming an invalid name.
  void family(std::string_view name, MetricType type, std::string_view help);
  // One sample of the family begun last: a counter's or a gauge's (`name` is the family's).
  void sample(std::string_view name, const MetricLabels& labels, double value);
  // A whole histogram family member: its buckets (cumulative, le="+Inf" last), _sum and _count.
  void histogram(std::string_view name, const MetricLabels& labels, const HistogramSnapshot& h);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace zipmoe::serve
