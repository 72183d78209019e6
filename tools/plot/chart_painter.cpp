#include "chart_painter.h"

#include <QFontMetricsF>
#include <QGuiApplication>
#include <QPainter>
#include <QPainterPath>
#include <QPolygonF>
#include <QTransform>

#include <algorithm>
#include <cmath>
#include <limits>

namespace zipmoe::plot {

namespace {

const QColor kText(0x22, 0x22, 0x22);
const QColor kTickText(0x44, 0x44, 0x44);
const QColor kSubtitle(0x6b, 0x6b, 0x6b);
const QColor kAxisLine(0x55, 0x55, 0x55);
const QColor kGrid(0xe4, 0xe4, 0xe4);
const QColor kReference(0x60, 0x60, 0x60);
constexpr double kCategoryAngle = 45.0;  // degrees, for category labels too wide to lie flat
const double kSin45 = std::sqrt(0.5);

// i·m·10^e rounded once: dividing by an exact power of ten (rather than multiplying by 0.1, which
// is not exact) is what makes 3 steps of 0.1 read 0.3.
double tickValue(double i, int m, int e) {
  const double im = i * m;
  return e >= 0 ? im * std::pow(10.0, e) : im / std::pow(10.0, -e);
}

QString withRealMinus(QString s) {
  s.replace(QLatin1Char('-'), QChar(0x2212));
  return s;
}

// QString::number's 'g' output with the exponent cleaned up: "1e-05" → "1e-5", "2e+20" → "2e20".
QString shortNumber(double v, int significant) {
  QString s = QString::number(v, 'g', significant);
  if (const qsizetype e = s.indexOf(QLatin1Char('e')); e >= 0)
    s = s.left(e + 1) + QString::number(s.mid(e + 1).toInt());
  return withRealMinus(s);
}

// Compact with a k/M/G/T suffix from `threshold` up (1e3 for ticks, 1e4 for value labels).
QString compactNumber(double v, int significant, double threshold) {
  if (v == 0.0) return QStringLiteral("0");
  const double a = std::abs(v);
  static const std::pair<double, const char*> kUnits[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  if (a >= threshold && a < 1e15) {
    for (const auto& [scale, suffix] : kUnits)
      if (a >= scale) return shortNumber(v / scale, significant) + QLatin1String(suffix);
  }
  return shortNumber(v, significant);
}

QString superscript(int n) {
  static const char16_t kDigits[] = u"⁰¹²³⁴⁵⁶⁷⁸⁹";
  QString out = n < 0 ? QString(QChar(0x207B)) : QString();
  for (const QChar c : QString::number(std::abs(n))) out += QChar(kDigits[c.digitValue()]);
  return out;
}

struct Extent {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) { lo = std::min(lo, v); hi = std::max(hi, v); }
  bool empty() const { return lo > hi; }
};

Extent dataExtentX(const Figure& f) {
  Extent e;
  for (const LineSeries& s : f.lines) {
    for (const LinePoint& p : s.points) e.add(p.x);
    for (const BandPoint& b : s.band) e.add(b.x);
  }
  return e;
}

Extent dataExtentY(const Figure& f) {
  Extent e;
  for (const LineSeries& s : f.lines) {
    for (const LinePoint& p : s.points) if (p.y) e.add(*p.y);
    for (const BandPoint& b : s.band) { e.add(b.low); e.add(b.high); }
  }
  for (const BarSeries& s : f.bars) {
    for (const auto& v : s.values) if (v) e.add(*v);
    for (const auto& err : s.errors) if (err) { e.add(err->low); e.add(err->high); }
  }
  for (const ReferenceLine& r : f.referenceLines) e.add(r.y);
  return e;
}

// The axis' data range: the data padded a little (not below a zero baseline), then the spec's
// explicit min/max. Log axes pad in log space.
void fitRange(AxisScale& s, const Axis& axis, Extent e, bool zeroBaseline, double padFraction) {
  s.log = axis.log;
  s.logBase = axis.logBase;
  if (e.empty()) e = s.log ? Extent{1.0, 10.0} : Extent{0.0, 1.0};
  if (zeroBaseline) e.add(0.0);
  auto fwd = [&](double v) { return s.log ? std::log(v) : v; };
  auto back = [&](double v) { return s.log ? std::exp(v) : v; };
  double lo = fwd(e.lo), hi = fwd(e.hi);
  if (hi - lo <= std::abs(hi) * 1e-12) {  // one value: a range around it (all zeros on a baseline: 0 to 1)
    const double d = s.log ? std::log(axis.logBase) / 2 : (lo == 0.0 ? 1.0 : std::abs(lo) * 0.1);
    lo -= zeroBaseline ? 0.0 : d;
    hi += d;
  }
  const double pad = (hi - lo) * padFraction;
  if (!(zeroBaseline && e.lo == 0.0)) lo -= pad;
  if (!(zeroBaseline && e.hi == 0.0)) hi += pad;
  s.lo = axis.min ? *axis.min : back(lo);
  s.hi = axis.max ? *axis.max : back(hi);
  if (s.lo >= s.hi) s.hi = s.log ? s.lo * 10.0 : s.lo + std::max(1.0, std::abs(s.lo));
}

// Ticks within [lo, hi] and their labels. Log axes label powers of the base, thinned when there
// are too many and filled with 2 and 5 times a power (base 10) when the range holds fewer than two.
void placeTicks(AxisScale& s, int maxTicks) {
  s.ticks.clear();
  s.minorTicks.clear();
  s.labels.clear();
  const double eps = (s.log ? std::log(s.hi / s.lo) : s.hi - s.lo) * 1e-9;
  auto inside = [&](double v) {
    return s.log ? (std::log(v / s.lo) >= -eps && std::log(s.hi / v) >= -eps) : (v >= s.lo - eps && v <= s.hi + eps);
  };
  bool powerLabels = false;
  if (s.log) {
    const double lb = std::log(s.logBase);
    const int k0 = static_cast<int>(std::ceil(std::log(s.lo) / lb - 1e-9));
    const int k1 = static_cast<int>(std::floor(std::log(s.hi) / lb + 1e-9));
    const int count = k1 - k0 + 1;
    if (count >= 2) {
      const int stride = (count + maxTicks - 1) / std::max(1, maxTicks);
      for (int k = k0; k <= k1; ++k) {
        if (((k % stride) + stride) % stride == 0) s.ticks.push_back(std::pow(s.logBase, k));
        if (stride == 1 && s.logBase == 10.0)
          for (int m = 2; m <= 9; ++m) s.minorTicks.push_back(m * std::pow(10.0, k));
      }
      if (s.logBase == 10.0 && stride == 1)  // the minor ticks below the first decade
        for (int m = 2; m <= 9; ++m) s.minorTicks.push_back(m * std::pow(10.0, k0 - 1));
      std::erase_if(s.minorTicks, [&](double v) { return !inside(v); });
      powerLabels = s.logBase == 2.0;
    } else if (s.logBase == 10.0) {
      for (int k = k0 - 2; k <= k1 + 1; ++k)
        for (int m : {1, 2, 5}) if (inside(tickValue(1, m, k))) s.ticks.push_back(tickValue(1, m, k));
    }
    if (s.ticks.size() < 2) s.ticks.clear();
  }
  if (s.ticks.empty()) {
    for (double t : niceTicks(s.lo, s.hi, maxTicks)) if (inside(t) && (!s.log || t > 0)) s.ticks.push_back(t);
  }
  // Base-2 powers read best as plain numbers (0.5, 1, 2, … 4096; not 1.024k) unless they get long.
  if (powerLabels) {
    const bool plain = s.ticks.front() >= 1.0 / 64 && s.ticks.back() <= 8192;
    for (double t : s.ticks)
      s.labels.push_back(plain ? shortNumber(t, 6)
                               : QStringLiteral("2") + superscript(static_cast<int>(std::lround(std::log2(t)))));
    return;
  }
  // Enough significant digits to tell neighbouring ticks apart even on a narrow range far from 0.
  double largest = 0.0, step = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < s.ticks.size(); ++i) {
    largest = std::max(largest, std::abs(s.ticks[i]));
    if (i > 0) step = std::min(step, s.ticks[i] - s.ticks[i - 1]);
  }
  const int digits = std::isfinite(step) && step > 0 ? static_cast<int>(std::ceil(std::log10(largest / step))) + 2 : 6;
  for (double t : s.ticks) s.labels.push_back(compactNumber(t, std::clamp(digits, 6, 15), 1e3));
}

double widest(const QFontMetricsF& fm, const std::vector<QString>& texts) {
  double w = 0.0;
  for (const QString& t : texts) w = std::max(w, fm.horizontalAdvance(t));
  return w;
}

// The bounds of a category label drawn rotated, its end at `anchor` (the top of the label area).
QRectF rotatedLabelBounds(QPointF anchor, double width, double height) {
  return QTransform()
      .translate(anchor.x(), anchor.y())
      .rotate(-kCategoryAngle)
      .mapRect(QRectF(-width, 0, width, height));
}

double legendRowHeight(const ChartLayout& l) {
  return std::max(QFontMetricsF(l.legendFont).height(), 16 * l.unit) + 6 * l.unit;
}
double legendSwatchWidth(const Figure& f, const ChartLayout& l) {
  return (f.kind == ChartKind::Line ? 36 : 16) * l.unit;
}

// Calls visit(point) for points every few pixels along the drawn data: lines, band edges, and the
// area of each bar with its error bar and value label. What a legend may not cover.
template <typename Visit>
void forEachDataSample(const Figure& f, const ChartLayout& l, Visit&& visit) {
  const double step = 4 * l.unit;
  auto segment = [&](QPointF a, QPointF b) {
    const int n = std::max(1, static_cast<int>(std::hypot(b.x() - a.x(), b.y() - a.y()) / step));
    for (int i = 0; i <= n; ++i) visit(a + (b - a) * (static_cast<double>(i) / n));
  };
  for (const LineSeries& s : f.lines) {
    for (size_t i = 0; i < s.points.size(); ++i) {
      if (!s.points[i].y) continue;
      const QPointF a = l.toPixel(s.points[i].x, *s.points[i].y);
      segment(a, i + 1 < s.points.size() && s.points[i + 1].y ? l.toPixel(s.points[i + 1].x, *s.points[i + 1].y) : a);
    }
    for (size_t i = 0; i + 1 < s.band.size(); ++i) {
      segment(l.toPixel(s.band[i].x, s.band[i].high), l.toPixel(s.band[i + 1].x, s.band[i + 1].high));
      segment(l.toPixel(s.band[i].x, s.band[i].low), l.toPixel(s.band[i + 1].x, s.band[i + 1].low));
    }
  }
  const double labelHeight = QFontMetricsF(l.valueFont).height() + 3 * l.unit;
  for (int c = 0; c < l.categoryCount; ++c)
    for (int s = 0; s < static_cast<int>(f.bars.size()); ++s) {
      QRectF r = l.barRect(f, c, s);
      if (r.isEmpty()) continue;
      const auto& err = f.bars[size_t(s)].errors;
      if (!err.empty() && err[size_t(c)])
        r = r.united(QRectF(QPointF(r.left(), l.y.toPixel(err[size_t(c)]->high)), QSizeF(r.width(), 1)));
      r.setTop(r.top() - labelHeight);
      for (double y = r.top(); y <= r.bottom(); y += step)
        for (double x = r.left(); x <= r.right(); x += step) visit(QPointF(x, y));
    }
}

double legendCost(const Figure& f, const ChartLayout& l, const QRectF& r) {
  double cost = 0.0;
  forEachDataSample(f, l, [&](QPointF p) { cost += r.contains(p) ? 1.0 : 0.0; });
  return cost;
}

// Puts the legend where the spec says. A legend at the top that would hide data gets headroom
// instead: the y axis grows (by up to its own height) until the data passes below the legend.
void placeLegend(const Figure& f, ChartLayout& l, QSizeF legendSize, int maxYTicks) {
  const double u = l.unit;
  const QRectF inner = l.plotArea.adjusted(10 * u, 10 * u, -10 * u, -10 * u);
  const QRectF corners[] = {
      QRectF(QPointF(inner.right() - legendSize.width(), inner.top()), legendSize),
      QRectF(inner.topLeft(), legendSize),
      QRectF(QPointF(inner.right() - legendSize.width(), inner.bottom() - legendSize.height()), legendSize),
      QRectF(QPointF(inner.left(), inner.bottom() - legendSize.height()), legendSize)};
  switch (f.legend) {
    case LegendPosition::TopRight: l.legendRect = corners[0]; break;
    case LegendPosition::TopLeft: l.legendRect = corners[1]; break;
    case LegendPosition::BottomRight: l.legendRect = corners[2]; break;
    case LegendPosition::BottomLeft: l.legendRect = corners[3]; break;
    case LegendPosition::OutsideRight:
      l.legendRect = QRectF(QPointF(l.plotArea.right() + 18 * u, l.plotArea.top()), legendSize);
      return;
    case LegendPosition::Best: {
      double best = std::numeric_limits<double>::infinity();
      for (const QRectF& r : corners) {  // in order of preference, so ties go to the top right
        const double cost = legendCost(f, l, r);
        if (cost < best) { best = cost; l.legendRect = r; }
      }
      break;
    }
    case LegendPosition::None: return;
  }
  if (f.y.max || l.legendRect.top() != inner.top()) return;
  double dataTop = std::numeric_limits<double>::infinity();
  const double x0 = l.legendRect.left() - 4 * u, x1 = l.legendRect.right() + 4 * u;
  forEachDataSample(f, l, [&](QPointF p) { if (p.x() >= x0 && p.x() <= x1) dataTop = std::min(dataTop, p.y()); });
  const double wanted = l.legendRect.bottom() + 8 * u;
  if (!(dataTop < wanted)) return;
  // In axis units (log space on a log axis), the data's top t = (v − lo)/(hi − lo) must shrink to
  // the fraction of the height left under the legend.
  const double height = l.plotArea.height();
  const double tData = (l.plotArea.bottom() - dataTop) / height, tRoom = (l.plotArea.bottom() - wanted) / height;
  if (tRoom <= 0.2) return;
  const double grow = std::min(2.0, tData / tRoom);
  l.y.hi = l.y.log ? l.y.lo * std::pow(l.y.hi / l.y.lo, grow) : l.y.lo + (l.y.hi - l.y.lo) * grow;
  placeTicks(l.y, maxYTicks);
}

}  // namespace

std::vector<double> niceTicks(double lo, double hi, int maxTicks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (lo > hi) std::swap(lo, hi);
  maxTicks = std::max(maxTicks, 2);  // one interval cannot cover a range around zero
  if (hi - lo <= std::max(std::abs(lo), std::abs(hi)) * 1e-12) {  // one value: make a small range around it
    const double d = lo == 0.0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  // The smallest 1-2-5 step that needs at most maxTicks intervals; the 1e-9 keeps a bound that is
  // itself a tick (0.3 / 0.1 = 2.9999999999999996) from pulling in one more.
  for (int e = static_cast<int>(std::floor(std::log10((hi - lo) / maxTicks))) - 1;; ++e) {
    for (int m : {1, 2, 5}) {
      const double step = m * std::pow(10.0, e);
      const double first = std::floor(lo / step + 1e-9);
      const double last = std::ceil(hi / step - 1e-9);
      if (last - first <= maxTicks) {
        std::vector<double> ticks;
        for (double i = first; i <= last; i += 1.0) ticks.push_back(tickValue(i, m, e) + 0.0);  // + 0.0: no "-0"
        return ticks;
      }
    }
  }
}

QString formatTick(double value) { return compactNumber(value, 6, 1e3); }

QString formatValue(double value) {
  const double a = std::abs(value);
  if (a >= 1e4) return compactNumber(value, 3, 1e4);
  if (a >= 1e3) return withRealMinus(QString::number(std::llround(value)));  // 'g' would write 1e+04 for 9999.7
  return compactNumber(value, 4, 1e4);
}

QColor paletteColor(int index) {
  // Okabe & Ito (2008), yellow last: it is the hardest to see on white.
  static const QRgb kColors[] = {0x0072B2, 0xE69F00, 0x009E73, 0xD55E00, 0xCC79A7, 0x56B4E9, 0x000000, 0xF0E442};
  constexpr int n = static_cast<int>(std::size(kColors));
  return QColor(kColors[((index % n) + n) % n]);
}

QColor seriesColor(const Figure& f, int index) {
  const auto& own = f.kind == ChartKind::Line ? f.lines.at(static_cast<size_t>(index)).color
                                              : f.bars.at(static_cast<size_t>(index)).color;
  return own ? *own : paletteColor(index);
}

double AxisScale::toPixel(double value) const {
  double t = 0.0;
  if (log) t = value > 0 ? std::log(value / lo) / std::log(hi / lo) : -10.0;
  else t = (value - lo) / (hi - lo);
  return pixelLo + t * (pixelHi - pixelLo);
}

double ChartLayout::categoryWidth() const { return plotArea.width() / std::max(1, categoryCount); }
double ChartLayout::categoryCenter(int category) const { return plotArea.left() + categoryWidth() * (category + 0.5); }

QRectF ChartLayout::barRect(const Figure& f, int category, int series) const {
  const auto& v = f.bars.at(static_cast<size_t>(series)).values.at(static_cast<size_t>(category));
  if (!v) return {};
  const double n = static_cast<double>(f.bars.size());
  const double group = categoryWidth() * (n == 1 ? 0.6 : 0.8);
  const double barWidth = group / n;
  const double inset = barWidth > 8 * unit ? unit : 0.0;  // a hairline of white between touching bars
  const double left = categoryCenter(category) - group / 2 + series * barWidth + inset;
  // Whole pixels: crisp edges, and a bar's height in pixels is its value's to within one pixel.
  return QRectF(QPointF(std::round(left), std::round(y.toPixel(std::max(*v, 0.0)))),
                QPointF(std::round(left + barWidth - 2 * inset), std::round(y.toPixel(std::min(*v, 0.0)))));
}

ChartLayout layoutChart(const Figure& f, QSize size) {
  ChartLayout l;
  l.size = size;
  const double W = size.width(), H = size.height();
  const double u = std::max(0.5, std::min(W / 1200.0, H / 750.0));
  l.unit = u;
  const bool line = f.kind == ChartKind::Line;
  l.categoryCount = static_cast<int>(f.categories.size());
  const double textUnit = std::max(u, 0.75);  // text shrinks less than the rest: it must stay legible
  auto font = [&](double px, bool bold) {
    QFont ft = QGuiApplication::font();  // the platform's default family: present on any install
    ft.setPixelSize(static_cast<int>(std::lround(px * textUnit)));
    ft.setBold(bold);
    return ft;
  };
  l.titleFont = font(24, true);
  l.subtitleFont = font(16, false);
  l.axisLabelFont = font(17, false);
  l.tickFont = font(15, false);
  l.legendFont = font(15, false);
  l.valueFont = font(14, false);
  const QFontMetricsF tickFm(l.tickFont), axisFm(l.axisLabelFont), legendFm(l.legendFont);
  const double margin = 18 * u, tickLength = 6 * u, tickGap = 5 * u;

  auto wrappedHeight = [&](const QFont& ft, const QString& text) {
    return QFontMetricsF(ft)
        .boundingRect(QRectF(0, 0, W - 2 * margin, 1e6), Qt::TextWordWrap | Qt::AlignLeft, text)
        .height();
  };
  l.titleRect = QRectF(margin, margin, W - 2 * margin, wrappedHeight(l.titleFont, f.title));
  double top = l.titleRect.bottom();
  if (!f.subtitle.isEmpty()) {
    l.subtitleRect = QRectF(margin, top + 4 * u, W - 2 * margin, wrappedHeight(l.subtitleFont, f.subtitle));
    top = l.subtitleRect.bottom();
  }
  top += 18 * u + tickFm.height() / 2;  // the top y tick label is centred on the plot's top edge

  const int n = f.seriesCount();
  QSizeF legendSize;
  if (f.legend != LegendPosition::None) {
    double textWidth = 0.0;
    for (int i = 0; i < n; ++i)
      textWidth =
          std::max(textWidth, legendFm.horizontalAdvance(line ? f.lines[size_t(i)].name : f.bars[size_t(i)].name));
    textWidth = std::ceil(std::min(textWidth, W * 0.3)) + 1;  // longer names are elided; +1: no eliding by rounding
    legendSize = QSizeF(20 * u + legendSwatchWidth(f, l) + 8 * u + textWidth, 14 * u + n * legendRowHeight(l));
  }
  const double right = margin + (f.legend == LegendPosition::OutsideRight ? legendSize.width() + 18 * u : 0.0);
  const double left = margin + (f.y.label.isEmpty() ? 0.0 : axisFm.height() + 10 * u);
  const double bottom = margin + (f.x.label.isEmpty() ? 0.0 : axisFm.height() + 8 * u);
  QStringList categoryTexts = f.categories;

  // Tick labels decide the margins and the margins decide the ticks: iterate to a fixed point,
  // letting the measured sizes only grow so that the loop cannot oscillate.
  double yTickWidth = tickFm.horizontalAdvance(QStringLiteral("000")), xTickBlock = tickFm.height();
  double extraLeft = 0.0, extraRight = 0.0;
  for (int pass = 0; pass < 4; ++pass) {
    // Whole pixels, so that the axis lines and the bars' edges are crisp.
    l.plotArea =
        QRectF(QPointF(std::round(left + extraLeft + yTickWidth + tickLength + tickGap), std::round(top)),
               QPointF(std::round(W - right - extraRight), std::round(H - bottom - xTickBlock - tickLength - tickGap)));
    if (l.plotArea.width() < 20 || l.plotArea.height() < 20)
      l.plotArea.setSize(QSizeF(std::max(20.0, l.plotArea.width()), std::max(20.0, l.plotArea.height())));
    fitRange(l.y, f.y, dataExtentY(f), !line || f.y.fromZero, line ? 0.05 : 0.1);
    l.y.pixelLo = l.plotArea.bottom();
    l.y.pixelHi = l.plotArea.top();
    const int maxYTicks = std::clamp(static_cast<int>(l.plotArea.height() / (70 * u)), 2, 10);
    placeTicks(l.y, maxYTicks);
    double newBlock = xTickBlock, newLeft = extraLeft, newRight = extraRight;
    if (line) {
      fitRange(l.x, f.x, dataExtentX(f), f.x.fromZero, 0.03);
      l.x.pixelLo = l.plotArea.left();
      l.x.pixelHi = l.plotArea.right();
      const double labelWidth = std::max(widest(tickFm, l.x.labels), tickFm.horizontalAdvance(QStringLiteral("0000")));
      placeTicks(l.x, std::clamp(static_cast<int>(l.plotArea.width() / (labelWidth + 40 * u)), 2, 12));
      if (!l.x.ticks.empty()) {  // the outer labels are centred on their ticks and must not leave the image
        const double overRight =
            l.x.toPixel(l.x.ticks.back()) + tickFm.horizontalAdvance(l.x.labels.back()) / 2 - (W - margin / 2);
        const double overLeft =
            margin / 2 - (l.x.toPixel(l.x.ticks.front()) - tickFm.horizontalAdvance(l.x.labels.front()) / 2);
        newRight = std::max(extraRight, extraRight + overRight);
        newLeft = std::max(extraLeft, extraLeft + overLeft);
      }
    } else {
      const double maxTextWidth = 220 * u;  // longer category names are elided
      categoryTexts.clear();
      double widestCategory = 0.0;
      for (const QString& c : f.categories) {
        categoryTexts << tickFm.elidedText(c, Qt::ElideMiddle, maxTextWidth);  // names often share a prefix
        widestCategory = std::max(widestCategory, tickFm.horizontalAdvance(categoryTexts.back()));
      }
      l.rotatedCategories = widestCategory > l.categoryWidth() - 8 * u;
      if (l.rotatedCategories) {
        newBlock = std::max(xTickBlock, (widestCategory + tickFm.height()) * kSin45);
        const double firstLeft = l.categoryCenter(0) - tickFm.horizontalAdvance(categoryTexts.front()) * kSin45;
        newLeft = std::max(extraLeft, extraLeft + margin / 2 - firstLeft);
      }
    }
    if (f.legend != LegendPosition::None) placeLegend(f, l, legendSize, maxYTicks);  // may grow the y axis
    const double newYTickWidth = std::max(yTickWidth, widest(tickFm, l.y.labels));
    if (newYTickWidth == yTickWidth && newBlock == xTickBlock && newLeft == extraLeft && newRight == extraRight) break;
    yTickWidth = newYTickWidth;
    xTickBlock = newBlock;
    extraLeft = newLeft;
    extraRight = newRight;
  }

  // Label rectangles, from the final scales.
  const double xLabelTop = l.plotArea.bottom() + tickLength + tickGap;
  if (line) {
    for (size_t i = 0; i < l.x.ticks.size(); ++i) {
      const double w = tickFm.horizontalAdvance(l.x.labels[i]);
      l.xTickLabelRects.emplace_back(l.x.toPixel(l.x.ticks[i]) - w / 2, xLabelTop, w, tickFm.height());
    }
  } else {
    for (int c = 0; c < categoryTexts.size(); ++c) {
      const double w = tickFm.horizontalAdvance(categoryTexts[c]);
      l.xTickLabelRects.push_back(l.rotatedCategories
                                      ? rotatedLabelBounds({l.categoryCenter(c), xLabelTop}, w, tickFm.height())
                                      : QRectF(l.categoryCenter(c) - w / 2, xLabelTop, w, tickFm.height()));
    }
  }
  for (size_t i = 0; i < l.y.ticks.size(); ++i) {
    const double w = tickFm.horizontalAdvance(l.y.labels[i]);
    l.yTickLabelRects.emplace_back(l.plotArea.left() - tickLength - tickGap - w,
                                   l.y.toPixel(l.y.ticks[i]) - tickFm.height() / 2, w, tickFm.height());
  }
  if (!f.x.label.isEmpty()) {
    const double w = std::min(axisFm.horizontalAdvance(f.x.title()), W - 2 * margin);
    const double cx = std::clamp(l.plotArea.center().x(), margin + w / 2, W - margin - w / 2);
    l.xLabelRect = QRectF(cx - w / 2, H - margin - axisFm.height(), w, axisFm.height());
  }
  if (!f.y.label.isEmpty()) {
    const double h = std::min(axisFm.horizontalAdvance(f.y.title()), H - 2 * margin);
    const double cy = std::clamp(l.plotArea.center().y(), margin + h / 2, H - margin - h / 2);
    l.yLabelRect = QRectF(margin, cy - h / 2, axisFm.height(), h);
  }

  if (f.legend != LegendPosition::None) {
    const double rowHeight = legendRowHeight(l), swatchWidth = legendSwatchWidth(f, l);
    for (int i = 0; i < n; ++i) {
      const double cy = l.legendRect.top() + 7 * u + (i + 0.5) * rowHeight;
      const double h = line ? 14 * u : swatchWidth;
      l.legendSwatches.emplace_back(l.legendRect.left() + 10 * u, cy - h / 2, swatchWidth, h);
    }
  }
  return l;
}

QRectF plotArea(const Figure& figure, QSize size) { return layoutChart(figure, size).plotArea; }

namespace {

// Pixel-crisp coordinate for a 1-pixel line: the centre of a pixel row instead of the edge between two.
double crisp(double v) { return std::floor(v) + 0.5; }

void drawMarker(QPainter& p, QPointF c, int seriesIndex, double r) {
  switch (seriesIndex % 5) {  // the shape repeats the colour's message for grey-scale prints
    case 0: p.drawEllipse(c, r, r); break;
    case 1: p.drawRect(QRectF(c.x() - r * 0.9, c.y() - r * 0.9, r * 1.8, r * 1.8)); break;
    case 2:
      p.drawPolygon(
          QPolygonF({c + QPointF(0, -r * 1.2), c + QPointF(r * 1.1, r * 0.75), c + QPointF(-r * 1.1, r * 0.75)}));
      break;
    case 3:
      p.drawPolygon(QPolygonF(
          {c + QPointF(0, -r * 1.25), c + QPointF(r * 1.1, 0), c + QPointF(0, r * 1.25), c + QPointF(-r * 1.1, 0)}));
      break;
    default:
      p.drawPolygon(
          QPolygonF({c + QPointF(0, r * 1.2), c + QPointF(r * 1.1, -r * 0.75), c + QPointF(-r * 1.1, -r * 0.75)}));
      break;
  }
}

QPen seriesPen(const LineSeries& s, const QColor& color, double u) {
  QPen pen(color, 2.5 * u, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin);
  if (s.style == LineStyle::Dashed) {
    pen.setCapStyle(Qt::FlatCap);
    pen.setDashPattern({3.0, 2.0});  // in pen widths
  }
  return pen;
}

void paintLines(QPainter& p, const Figure& f, const ChartLayout& l) {
  const double u = l.unit;
  for (size_t i = 0; i < f.lines.size(); ++i) {
    const LineSeries& s = f.lines[i];
    QColor tint = seriesColor(f, static_cast<int>(i));
    tint.setAlphaF(0.18f);
    QPolygonF band;
    for (const BandPoint& b : s.band) band << l.toPixel(b.x, b.low);
    for (auto b = s.band.rbegin(); b != s.band.rend(); ++b) band << l.toPixel(b->x, b->high);
    p.setPen(Qt::NoPen);
    p.setBrush(tint);
    p.drawPolygon(band);
  }
  for (size_t i = 0; i < f.lines.size(); ++i) {
    const LineSeries& s = f.lines[i];
    const QColor color = seriesColor(f, static_cast<int>(i));
    QPainterPath path;
    bool penDown = false;
    for (const LinePoint& pt : s.points) {
      if (!pt.y) { penDown = false; continue; }  // a missing value breaks the line
      const QPointF px = l.toPixel(pt.x, *pt.y);
      if (penDown) path.lineTo(px); else path.moveTo(px);
      penDown = true;
    }
    p.setPen(seriesPen(s, color, u));
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
    p.setPen(QPen(Qt::white, 1.0 * u));
    p.setBrush(color);
    for (size_t k = 0; k < s.points.size(); ++k) {
      if (!s.points[k].y) continue;
      // A point with gaps on both sides has no line through it, so it gets a marker regardless.
      const bool isolated = (k == 0 || !s.points[k - 1].y) && (k + 1 == s.points.size() || !s.points[k + 1].y);
      if (s.markers || isolated) drawMarker(p, l.toPixel(s.points[k].x, *s.points[k].y), static_cast<int>(i), 4.5 * u);
    }
  }
}

void paintBars(QPainter& p, const Figure& f, const ChartLayout& l) {
  const double u = l.unit;
  const QFontMetricsF valueFm(l.valueFont);
  p.setFont(l.valueFont);
  const double barSlot = l.categoryWidth() * (f.bars.size() == 1 ? 0.6 : 0.8) / static_cast<double>(f.bars.size());
  for (int c = 0; c < l.categoryCount; ++c) {
    for (int s = 0; s < static_cast<int>(f.bars.size()); ++s) {
      const BarSeries& series = f.bars[size_t(s)];
      const auto& value = series.values[size_t(c)];
      const double cx = l.categoryCenter(c) - barSlot * (static_cast<double>(f.bars.size()) / 2 - s - 0.5);
      QString text = value ? formatValue(*value) : QStringLiteral("n/a");  // n/a: a run that produced nothing
      double labelEdge = l.y.toPixel(value.value_or(0.0));
      if (value) {
        p.fillRect(l.barRect(f, c, s), seriesColor(f, s));
        if (!series.errors.empty() && series.errors[size_t(c)]) {
          const ErrorBar& e = *series.errors[size_t(c)];
          const double y0 = l.y.toPixel(e.low), y1 = l.y.toPixel(e.high), cap = std::min(barSlot * 0.25, 6 * u);
          p.setPen(QPen(kText, 1.4 * u));
          p.drawLine(QPointF(cx, y0), QPointF(cx, y1));
          p.drawLine(QPointF(cx - cap, y0), QPointF(cx + cap, y0));
          p.drawLine(QPointF(cx - cap, y1), QPointF(cx + cap, y1));
          labelEdge = *value >= 0 ? std::min(labelEdge, y1) : std::max(labelEdge, y0);
        }
      }
      // The value on top of its bar (below it when negative), only when it fits the bar's width.
      const double w = valueFm.horizontalAdvance(text), h = valueFm.height();
      const bool up = !value || *value >= 0;
      const QRectF r(cx - w / 2, up ? labelEdge - 3 * u - h : labelEdge + 3 * u, w, h);
      if (w <= barSlot + 2 * u && l.plotArea.contains(r)) {
        p.setPen(value ? kText : kSubtitle);
        p.drawText(r, Qt::AlignCenter, text);
      }
    }
  }
}

void paintLegend(QPainter& p, const Figure& f, const ChartLayout& l) {
  if (l.legendRect.isEmpty()) return;
  const double u = l.unit;
  p.setPen(QPen(QColor(0xcc, 0xcc, 0xcc), 1.0 * u));
  p.setBrush(QColor(255, 255, 255, 230));
  p.drawRoundedRect(l.legendRect, 4 * u, 4 * u);
  p.setFont(l.legendFont);
  const QFontMetricsF fm(l.legendFont);
  for (int i = 0; i < f.seriesCount(); ++i) {
    const QRectF sw = l.legendSwatches[size_t(i)];
    const QColor color = seriesColor(f, i);
    if (f.kind == ChartKind::Line) {
      const LineSeries& s = f.lines[size_t(i)];
      if (!s.band.empty()) {
        QColor tint = color;
        tint.setAlphaF(0.18f);
        p.fillRect(sw, tint);
      }
      p.setPen(seriesPen(s, color, u));
      p.drawLine(QPointF(sw.left() + 2 * u, sw.center().y()), QPointF(sw.right() - 2 * u, sw.center().y()));
      p.setPen(QPen(Qt::white, 1.0 * u));
      p.setBrush(color);
      if (s.markers) drawMarker(p, sw.center(), i, 4.5 * u);
    } else {
      p.fillRect(sw, color);
    }
    const double textLeft = sw.right() + 8 * u;
    const QString name = f.kind == ChartKind::Line ? f.lines[size_t(i)].name : f.bars[size_t(i)].name;
    p.setPen(kText);
    p.drawText(
        QRectF(textLeft, sw.center().y() - fm.height() / 2, l.legendRect.right() - 10 * u - textLeft, fm.height()),
        Qt::AlignLeft | Qt::AlignVCenter,
        fm.elidedText(name, Qt::ElideRight, l.legendRect.right() - 10 * u - textLeft));
  }
}

}  // namespace

void paintChart(QPainter& p, const Figure& f, const ChartLayout& l) {
  p.setRenderHint(QPainter::Antialiasing);
  p.setRenderHint(QPainter::TextAntialiasing);
  const double u = l.unit;
  const QRectF plot = l.plotArea;
  const bool line = f.kind == ChartKind::Line;
  const double hairline = std::max(1.0, std::round(u));

  p.setPen(QPen(kGrid, hairline));
  for (double t : l.y.ticks)
    p.drawLine(QPointF(plot.left(), crisp(l.y.toPixel(t))), QPointF(plot.right(), crisp(l.y.toPixel(t))));
  if (line)
    for (double t : l.x.ticks)
      p.drawLine(QPointF(crisp(l.x.toPixel(t)), plot.top()), QPointF(crisp(l.x.toPixel(t)), plot.bottom()));

  const QFontMetricsF tickFm(l.tickFont);
  p.save();
  p.setClipRect(plot.adjusted(-6 * u, -6 * u, 6 * u, 6 * u));  // room for markers on the edge, nothing beyond
  if (line) paintLines(p, f, l);
  else paintBars(p, f, l);
  p.setFont(l.tickFont);
  for (const ReferenceLine& r : f.referenceLines) {
    const double y = l.y.toPixel(r.y);
    QPen pen(kReference, 1.3 * u, Qt::CustomDashLine);
    pen.setDashPattern({5.0, 4.0});
    p.setPen(pen);
    p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
    if (!r.label.isEmpty()) {  // on a white patch: it may cross bars or lines
      const QString text = tickFm.elidedText(r.label, Qt::ElideRight, plot.width() - 12 * u);
      const QRectF box(plot.left() + 6 * u, y - tickFm.height() - 3 * u, tickFm.horizontalAdvance(text) + 6 * u,
                       tickFm.height());
      p.setPen(Qt::NoPen);
      p.setBrush(QColor(255, 255, 255, 210));
      p.drawRoundedRect(box, 3 * u, 3 * u);
      p.setPen(kReference);
      p.drawText(box, Qt::AlignCenter, text);
    }
  }
  p.restore();

  // Axes: left and bottom lines just outside the (whole-pixel) plot area, the zero line too when
  // bars go negative, ticks pointing out.
  const double tickLength = 6 * u;
  p.setPen(QPen(kAxisLine, hairline));
  p.drawLine(QPointF(plot.left() - hairline / 2, plot.top()),
             QPointF(plot.left() - hairline / 2, plot.bottom() + hairline));
  p.drawLine(QPointF(plot.left() - hairline, plot.bottom() + hairline / 2),
             QPointF(plot.right(), plot.bottom() + hairline / 2));
  if (!line && l.y.lo < 0 && l.y.hi > 0)
    p.drawLine(QPointF(plot.left(), crisp(l.y.toPixel(0))), QPointF(plot.right(), crisp(l.y.toPixel(0))));
  for (double t : l.y.ticks)
    p.drawLine(QPointF(plot.left() - tickLength, crisp(l.y.toPixel(t))), QPointF(plot.left(), crisp(l.y.toPixel(t))));
  for (double t : l.y.minorTicks)
    p.drawLine(QPointF(plot.left() - tickLength * 0.6, crisp(l.y.toPixel(t))),
               QPointF(plot.left(), crisp(l.y.toPixel(t))));
  if (line) {
    for (double t : l.x.ticks)
      p.drawLine(QPointF(crisp(l.x.toPixel(t)), plot.bottom()),
                 QPointF(crisp(l.x.toPixel(t)), plot.bottom() + tickLength));
    for (double t : l.x.minorTicks)
      p.drawLine(QPointF(crisp(l.x.toPixel(t)), plot.bottom()),
                 QPointF(crisp(l.x.toPixel(t)), plot.bottom() + tickLength * 0.6));
  } else {
    for (int c = 0; c < l.categoryCount; ++c)
      p.drawLine(QPointF(crisp(l.categoryCenter(c)), plot.bottom()),
                 QPointF(crisp(l.categoryCenter(c)), plot.bottom() + tickLength));
  }

  p.setPen(kTickText);
  p.setFont(l.tickFont);
  for (size_t i = 0; i < l.yTickLabelRects.size(); ++i)
    p.drawText(l.yTickLabelRects[i], Qt::AlignRight | Qt::AlignVCenter, l.y.labels[i]);
  if (line) {
    for (size_t i = 0; i < l.xTickLabelRects.size(); ++i)
      p.drawText(l.xTickLabelRects[i], Qt::AlignCenter, l.x.labels[i]);
  } else {
    const double labelTop = plot.bottom() + tickLength + 5 * u;
    for (int c = 0; c < l.categoryCount; ++c) {
      const QString text = tickFm.elidedText(f.categories[c], Qt::ElideMiddle, 220 * u);
      const double w = tickFm.horizontalAdvance(text);
      if (!l.rotatedCategories) {
        p.drawText(QRectF(l.categoryCenter(c) - w / 2, labelTop, w, tickFm.height()), Qt::AlignCenter, text);
        continue;
      }
      p.save();
      p.translate(l.categoryCenter(c), labelTop);
      p.rotate(-kCategoryAngle);
      p.drawText(QRectF(-w, 0, w, tickFm.height()), Qt::AlignRight | Qt::AlignTop, text);
      p.restore();
    }
  }

  p.setPen(kText);
  p.setFont(l.axisLabelFont);
  const QFontMetricsF axisFm(l.axisLabelFont);
  if (!l.xLabelRect.isEmpty())
    p.drawText(l.xLabelRect, Qt::AlignCenter, axisFm.elidedText(f.x.title(), Qt::ElideRight, l.xLabelRect.width() + 1));
  if (!l.yLabelRect.isEmpty()) {
    p.save();
    p.translate(l.yLabelRect.center());
    p.rotate(-90);
    const QRectF r(-l.yLabelRect.height() / 2, -l.yLabelRect.width() / 2, l.yLabelRect.height(), l.yLabelRect.width());
    p.drawText(r, Qt::AlignCenter, axisFm.elidedText(f.y.title(), Qt::ElideRight, r.width() + 1));
    p.restore();
  }

  p.setFont(l.titleFont);
  p.drawText(l.titleRect, Qt::TextWordWrap | Qt::AlignLeft | Qt::AlignTop, f.title);
  if (!f.subtitle.isEmpty()) {
    p.setPen(kSubtitle);
    p.setFont(l.subtitleFont);
    p.drawText(l.subtitleRect, Qt::TextWordWrap | Qt::AlignLeft | Qt::AlignTop, f.subtitle);
  }
  paintLegend(p, f, l);
}

QImage renderFigure(const Figure& figure, QSize size) {
  QImage image(size, QImage::Format_ARGB32);
  image.fill(Qt::white);
  image.setDotsPerMeterX(3780);  // 96 dpi in the PNG's header; sizes themselves are in pixels
  image.setDotsPerMeterY(3780);
  QPainter painter(&image);
  paintChart(painter, figure, layoutChart(figure, size));
  painter.end();
  return image;
}

}  // namespace zipmoe::plot
