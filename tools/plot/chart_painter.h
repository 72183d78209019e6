#pragma once
// Draws a Figure (figure.h) with QPainter into a white, antialiased QImage: a clean matplotlib-like
// chart with a bold title, a grey subtitle, axes with "Label (unit)", 1-2-5 ticks (powers on log
// axes), light grid lines, a legend and, for bars, value labels and error bars. Sizes are in pixels,
// scaled with the image (the reference is 1200×750), so the picture is the same at any DPI.
//
// The work is split in two: layoutChart() measures every piece of text (QFontMetricsF) and decides
// where everything goes — margins grow until no label is clipped — and paintChart() only draws what
// the layout says. The tests use the layout to find where a data point or a bar must be in pixels.
//
// Thread-safety: no shared state; each call may run on any thread, but fonts need a live
// QGuiApplication (the `zipmoe-plot` tool makes one with the offscreen platform). Cost: a few
// milliseconds per figure, dominated by antialiased text; layout is O(points + ticks).

#include "figure.h"

#include <QColor>
#include <QFont>
#include <QImage>
#include <QPointF>
#include <QRectF>
#include <QSize>
#include <QString>

#include <vector>

class QPainter;

namespace zipmoe::plot {

// The 1-2-5 ticks that cover [lo, hi] (first <= lo, last >= hi) with at most maxTicks intervals
// (so at most maxTicks + 1 values; maxTicks below 2 counts as 2), as exact decimals: i·m·10^k
// computed so that 0.1 steps give 0.3, not 0.30000000000000004. Empty when lo or hi is not finite.
std::vector<double> niceTicks(double lo, double hi, int maxTicks);

// A tick label: compact ("1.5k", "2M", "0.25", "1e−5"), a real minus sign, no float noise.
QString formatTick(double value);

// A bar's value label: at most 4 significant digits, compact above 10 000 ("12.3k").
QString formatValue(double value);

// The series colours, in order: Okabe–Ito, readable with every common colour-vision deficiency.
QColor paletteColor(int index);
QColor seriesColor(const Figure& figure, int index);  // the series' own "color" or the palette's

// One axis' mapping from data to pixels, with its ticks.
struct AxisScale {
  double lo = 0.0, hi = 1.0;        // data values at the two ends of the axis
  double pixelLo = 0.0, pixelHi = 1.0;  // pixel coordinates of lo and hi (y: pixelLo > pixelHi)
  bool log = false;
  double logBase = 10.0;
  std::vector<double> ticks;        // labelled ticks, all within [lo, hi]
  std::vector<QString> labels;      // one per tick
  std::vector<double> minorTicks;   // unlabelled (the 2…9 between decades of a log axis)

  double toPixel(double value) const;
};

// Where everything goes, in image pixels. Every rect lies inside the image.
struct ChartLayout {
  QSize size;
  double unit = 1.0;  // the scale of all sizes: 1.0 at 1200×750
  QFont titleFont, subtitleFont, axisLabelFont, tickFont, legendFont, valueFont;
  QRectF titleRect, subtitleRect;  // subtitleRect empty when there is none
  QRectF plotArea;                 // the data rectangle, inside the axes
  QRectF xLabelRect, yLabelRect;   // axis titles (yLabelRect: the rotated text's bounds)
  std::vector<QRectF> xTickLabelRects, yTickLabelRects;  // bounds of every tick or category label
  bool rotatedCategories = false;  // bar charts: category labels at 45° when they do not fit flat
  AxisScale x, y;                  // x unused for bar charts (categories are slots)
  int categoryCount = 0;           // bar charts: one slot of equal width per category
  QRectF legendRect;               // empty when there is no legend
  std::vector<QRectF> legendSwatches;  // one per series: the swatch's bounds (centre: the marker)

  QPointF toPixel(double xValue, double yValue) const { return {x.toPixel(xValue), y.toPixel(yValue)}; }
  // A bar chart's slot for one category: its centre and width.
  double categoryCenter(int category) const;
  double categoryWidth() const;
  // The bar drawn for (category, series), from zero to the value; empty when the value is missing.
  QRectF barRect(const Figure& figure, int category, int series) const;
};

ChartLayout layoutChart(const Figure& figure, QSize size);

// The data rectangle that renderFigure would use; shorthand for layoutChart(...).plotArea.
QRectF plotArea(const Figure& figure, QSize size);

// Draws `figure` as laid out by `layout` onto `painter`'s device (which should be layout.size big).
void paintChart(QPainter& painter, const Figure& figure, const ChartLayout& layout);

// A white ARGB32 image of `size` with the figure drawn on it. REQUIRES: size at least 200×150.
QImage renderFigure(const Figure& figure, QSize size);

}  // namespace zipmoe::plot
