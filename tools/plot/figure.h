#pragma once
// A benchmark figure as data: the JSON "figure spec" that the `zipmoe` benchmark suites write, parsed
// and validated into plain structs that the chart painter (chart_painter.h) draws without further
// checks. Two kinds: a line chart (series of [x, y] points, optional percentile bands) and a grouped
// bar chart (one group per category). Every check happens here, so a malformed spec fails with the
// file, the JSON path, what was expected and what was found — e.g.
//   fig.json: series[2].points[5]: expected [x, y] numbers, found "abc"
// Parsing is pure (no Qt GUI classes, no global state) and therefore safe from any thread; it costs
// O(size of the spec).
//
// The spec as accepted (keys not listed here are rejected, so a typo never silently does nothing):
//   kind             "line" | "bar"                                                       required
//   title            string                                                               required
//   subtitle         string (the settings line, drawn in grey)
//   x                axis; required for "line", optional for "bar" (label under the categories)
//   y                axis; required
//     axis keys:     label (required), unit, log (bool), log_base (2 | 10, needs log), from_zero
//                    (bool, linear only), min / max (numbers: fix that end of the axis)
//   series           non-empty array of objects, each with name (required) and color ("#rrggbb")
//     line:          points [[x, y | null], …] (null: a gap), band [[x, low, high], …],
//                    style "solid" | "dashed", markers (bool; default: true up to 50 points)
//     bar:           values [number | null, …] (one per category), errors [[low, high] | null, …]
//                    (absolute ends of the error bar, like a line's band)
//   categories       non-empty array of strings (bar only, required)
//   legend           "top-right" (default) | "top-left" | "bottom-right" | "bottom-left" |
//                    "outside-right" | "best" (the inside corner that covers the least data) | "none"
//   reference_lines  [{"y": number, "label": string (optional)}, …] horizontal dashed lines
//   meta             anything; ignored (room for the benchmark's raw settings next to the figure)

#include <QColor>
#include <QJsonObject>
#include <QString>
#include <QStringList>

#include <optional>
#include <stdexcept>
#include <vector>

namespace zipmoe::plot {

// A malformed figure spec. what() is the full message, starting with the source file's name.
class FigureError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ChartKind { Line, Bar };
enum class LineStyle { Solid, Dashed };
enum class LegendPosition { TopRight, TopLeft, BottomRight, BottomLeft, OutsideRight, Best, None };

struct Axis {
  QString label;
  QString unit;
  bool log = false;
  double logBase = 10.0;  // 2 or 10; meaningful only when log
  bool fromZero = false;
  std::optional<double> min;  // fixes the low end instead of fitting the data
  std::optional<double> max;

  // "Label (unit)", or just the label when there is no unit.
  QString title() const;
};

struct LinePoint {
  double x = 0.0;
  std::optional<double> y;  // nullopt: a missing value, drawn as a gap in the line
};

struct BandPoint {
  double x = 0.0;
  double low = 0.0;
  double high = 0.0;
};

struct LineSeries {
  QString name;
  std::vector<LinePoint> points;
  std::vector<BandPoint> band;  // empty: no band
  LineStyle style = LineStyle::Solid;
  bool markers = true;
  std::optional<QColor> color;  // nullopt: the palette's colour for this series' index
};

struct ErrorBar {
  double low = 0.0;
  double high = 0.0;
};

struct BarSeries {
  QString name;
  std::vector<std::optional<double>> values;   // one per category; nullopt: no bar
  std::vector<std::optional<ErrorBar>> errors;  // empty, or one per category
  std::optional<QColor> color;
};

struct ReferenceLine {
  double y = 0.0;
  QString label;
};

struct Figure {
  ChartKind kind = ChartKind::Line;
  QString title;
  QString subtitle;
  Axis x;  // for bar charts only the label and unit are used
  Axis y;
  std::vector<LineSeries> lines;  // kind == Line
  QStringList categories;         // kind == Bar
  std::vector<BarSeries> bars;    // kind == Bar
  LegendPosition legend = LegendPosition::TopRight;
  std::vector<ReferenceLine> referenceLines;

  int seriesCount() const { return static_cast<int>(kind == ChartKind::Line ? lines.size() : bars.size()); }
};

// Validates `spec` and returns the figure. sourceName (usually the file's name) starts every error
// message. Throws FigureError on the first problem found.
Figure parseFigure(const QJsonObject& spec, const QString& sourceName);

// Reads the JSON file at `path` and returns its top-level object; a syntax error names the line and
// column. Errors start with `path` as given. Throws FigureError.
QJsonObject readFigureJson(const QString& path);

// readFigureJson + parseFigure, with `path` as the source name. Throws FigureError.
Figure loadFigure(const QString& path);

// Whether a parsed JSON object is meant as a figure spec (it has "kind"); `zipmoe-plot --all` uses
// this to skip the other JSON files that benchmarks leave in the same folder.
bool looksLikeFigureSpec(const QJsonObject& object);

}  // namespace zipmoe::plot
