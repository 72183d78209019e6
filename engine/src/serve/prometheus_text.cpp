// PrometheusText (see prometheus_text.h).
#include "serve/prometheus_text.h"

#include <charconv>
#include <cmath>

#include "zipmoe/base/error.h"

namespace zipmoe::serve {
namespace {

void appendLabels(std::string& out, const MetricLabels& labels, const std::pair<std::string, std::string>* extra) {
  if (labels.empty() && !extra) return;
  out += '{';
  bool first = true;
  const auto add = [&](const std::pair<std::string, std::string>& l) {
    if (!first) out += ',';
    first = false;
    if (!validMetricName(l.first, true)) throw Error("metrics: invalid label name '" + l.first + "'");
    out += l.first;
    out += "=\"";
    out += escapeLabelValue(l.second);
    out += '"';
  };
  for (const auto& l : labels) add(l);
  if (extra) add(*extra);
  out += '}';
}

void appendSample(std::string& out, std::string_view name, const MetricLabels& labels, double value,
                  const std::pair<std::string, std::string>* extra = nullptr) {
  out += name;
  appendLabels(out, labels, extra);
  out += ' ';
  out += formatMetricValue(value);
  out += '\n';
}

const char* typeName(MetricType t) {
  switch (t) {
    case MetricType::Counter: return "counter";
    case MetricType::Gauge: return "gauge";
    case MetricType::Histogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string escapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (const char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string formatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  if (value == std::trunc(value) && std::fabs(value) <= kExactIntegers)
    return std::to_string(static_cast<int64_t>(value));
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);  // shortest that reads back the same
  return std::string(buf, r.ptr);
}

bool validMetricName(std::string_view name, bool label) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!label && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

void PrometheusText::family(std::string_view name, MetricType type, std::string_view help) {
  if (!validMetricName(name)) throw Error("metrics: invalid metric name '" + std::string(name) + "'");
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  text_ += escapeHelp(help);
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += typeName(type);
  text_ += '\n';
}

void PrometheusText::sample(std::string_view name, const MetricLabels& labels, double value) {
  appendSample(text_, name, labels, value);
}

void PrometheusText::histogram(std::string_view name, const MetricLabels& labels, const HistogramSnapshot& h) {
  const std::string base(name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    const std::pair<std::string, std::string> le{"le", i < h.bounds.size() ? formatMetricValue(h.bounds[i]) : "+Inf"};
    appendSample(text_, base + "_bucket", labels, static_cast<double>(cumulative), &le);
  }
  appendSample(text_, base + "_sum", labels, h.sum);
  appendSample(text_, base + "_count", labels, static_cast<double>(cumulative));
}

}  // namespace zipmoe::serve
