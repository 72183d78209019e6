// zipmoe-plot: niceTicks gives 1-2-5 steps that cover the range without float noise; the spec
// parser rejects bad input with the file, the JSON path, what was expected and what was found; the
// rendered pixels agree with the layout (a data point, a band, legend swatches, bar heights, log
// decades) and no label leaves the image; the executable writes a PNG of the requested size, or
// fails with a message naming the file and writes nothing. Two example PNGs go to the artifacts
// folder for a human eye.
#include <QtTest>

#include <QFontMetricsF>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

#include <cmath>
#include <random>

#include "test_support.h"
#include "chart_painter.h"
#include "figure.h"

using namespace zipmoe::plot;

namespace {

QString artifactsDir() { return zipmoe::testing::artifactsDir(QStringLiteral(ZIPMOE_DEFAULT_ARTIFACTS_DIR)); }

QJsonObject json(const char* text) {
  QJsonParseError error{};
  const QJsonDocument doc = QJsonDocument::fromJson(QByteArray(text), &error);
  if (error.error != QJsonParseError::NoError) qFatal("test JSON does not parse: %s", qPrintable(error.errorString()));
  return doc.object();
}

// The largest difference of one colour channel.
int colourDistance(QRgb a, const QColor& b) {
  return std::max({std::abs(qRed(a) - b.red()), std::abs(qGreen(a) - b.green()), std::abs(qBlue(a) - b.blue())});
}

QRgb pixelAt(const QImage& image, QPointF p) {
  return image.pixel(static_cast<int>(std::floor(p.x())), static_cast<int>(std::floor(p.y())));
}

// Whether some pixel within `radius` of p is within `tolerance` of the colour (antialiasing and
// grid lines make single pixels unreliable for translucent fills).
bool colourNear(const QImage& image, QPointF p, const QColor& c, int tolerance, int radius = 3) {
  for (int dy = -radius; dy <= radius; ++dy)
    for (int dx = -radius; dx <= radius; ++dx)
      if (colourDistance(pixelAt(image, p + QPointF(dx, dy)), c) <= tolerance) return true;
  return false;
}

bool inside(const QRectF& r, QSize size) {
  return r.isEmpty() || QRectF(QPointF(0, 0), size).adjusted(-0.5, -0.5, 0.5, 0.5).contains(r);
}

const char* kLineSpec = R"json({
  "kind": "line",
  "title": "TPOT vs memory budget — Qwen1.5-MoE-shaped, 8 layers",
  "subtitle": "2 vCPUs, O_DIRECT, 28 tokens after 4 warm-up, trace prompts 0,1; bands: 10th–90th percentiles",
  "x": {"label": "Memory budget", "unit": "% of expert bytes"},
  "y": {"label": "Time per output token", "unit": "ms", "from_zero": true},
  "series": [
    {"name": "ZipMoE",
     "points": [[5, 310.2], [10, 280.0], [20, 231.5], [30, 190.4], [50, 150.0], [75, 121.0], [100, 104.3]],
     "band": [[5, 290.0, 335.0], [10, 258.0, 302.0], [20, 212.0, 250.0], [30, 175.0, 207.0],
              [50, 139.0, 163.0], [75, 112.0, 131.0], [100, 98.0, 111.0]]},
    {"name": "LRU offloading",
     "points": [[5, 520.0], [10, 470.5], [20, 400.0], [30, null], [50, 260.0], [75, 190.0], [100, 140.0]],
     "style": "dashed"},
    {"name": "All experts in memory", "points": [[5, 95.0], [100, 95.0]], "markers": false}
  ],
  "reference_lines": [{"y": 60, "label": "decode lower bound (memory bandwidth)"}]
})json";

const char* kBarSpec = R"json({
  "kind": "bar",
  "title": "Cache policies at a 30% memory budget",
  "subtitle": "Qwen1.5-MoE-shaped, 8 layers, 2 vCPUs; error bars: 10th–90th percentiles of 5 runs",
  "x": {"label": "Eviction policy"},
  "y": {"label": "Time per output token", "unit": "ms"},
  "categories": ["LRU", "FIFO", "Marking", "ZipMoE"],
  "series": [
    {"name": "TPOT", "values": [300, 320, 310, 250], "errors": [[285, 318], [300, 345], [296, 322], [241, 262]]},
    {"name": "TPOT, cold cache", "values": [410, 436.5, null, 330]}
  ],
  "legend": "outside-right"
})json";

}  // namespace

class TestPlot : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void niceTicksCoverRangesIn125Steps() {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
    std::uniform_int_distribution<int> exponent(-8, 9), ticks(1, 12);
    std::vector<std::tuple<double, double, int>> cases = {
        {0, 1, 5},           {0, 1, 10},        {0.1, 0.3, 4}, {-3.7, 12.2, 6}, {1e-6, 3e-6, 5}, {0, 1e9, 5},
        {123456, 123457, 5}, {-1, -0.5, 3},     {5, 5, 5},     {0, 0, 4},       {0, 310.2, 8},   {-1e5, 1e5, 7},
        {0.001, 1000, 8},    {1, 1.0000001, 4}, {0.3, 0.1, 3}, {-0.8, 0.6, 1}};
    for (int i = 0; i < 3000; ++i) {
      const double scale = std::pow(10.0, exponent(rng));
      cases.emplace_back(mantissa(rng) * scale, mantissa(rng) * scale, ticks(rng));
    }
    for (const auto& [lo0, hi0, maxTicks] : cases) {
      const double lo = std::min(lo0, hi0), hi = std::max(lo0, hi0);
      const std::vector<double> t = niceTicks(lo0, hi0, maxTicks);
      const QString what =
          QStringLiteral("niceTicks(%1, %2, %3)").arg(lo0, 0, 'g', 17).arg(hi0, 0, 'g', 17).arg(maxTicks);
      QVERIFY2(t.size() >= 2 && t.size() <= size_t(std::max(maxTicks, 2)) + 1,
               qPrintable(what + QStringLiteral(": %1 ticks").arg(t.size())));
      const double step = t[1] - t[0];
      QVERIFY2(t.front() <= lo + step * 1e-6 && t.back() >= hi - step * 1e-6,
               qPrintable(what + QStringLiteral(": does not cover")));
      const double decade = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
      const double m = step / decade;
      QVERIFY2(std::abs(m - 1) < 1e-6 || std::abs(m - 2) < 1e-6 || std::abs(m - 5) < 1e-6,
               qPrintable(what + QStringLiteral(": step %1").arg(step)));
      for (size_t i = 1; i < t.size(); ++i) {
        QVERIFY2(t[i] > t[i - 1], qPrintable(what + QStringLiteral(": not increasing")));
        QVERIFY2(std::abs((t[i] - t[i - 1]) - step) <= step * 1e-6,
                 qPrintable(what + QStringLiteral(": uneven steps")));
      }
      for (double v : t) {  // the tick is exactly the decimal it reads as: no 0.30000000000000004
        QCOMPARE(QString::number(v, 'g', 12).toDouble(), v);
        QVERIFY2(!formatTick(v).contains(QStringLiteral("0000")) && !formatTick(v).contains(QStringLiteral("9999")),
                 qPrintable(what + QStringLiteral(": label ") + formatTick(v)));
      }
    }
    QVERIFY(niceTicks(0, qInf(), 5).empty());
    QVERIFY(niceTicks(qQNaN(), 1, 5).empty());
    QCOMPARE(niceTicks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1.0}));
    QCOMPARE(niceTicks(0.1, 0.3, 4), (std::vector<double>{0.1, 0.15, 0.2, 0.25, 0.3}));
  }

  void tickAndValueLabelsAreCompact() {
    QCOMPARE(formatTick(0), QStringLiteral("0"));
    QCOMPARE(formatTick(1500), QStringLiteral("1.5k"));
    QCOMPARE(formatTick(1000), QStringLiteral("1k"));
    QCOMPARE(formatTick(2e6), QStringLiteral("2M"));
    QCOMPARE(formatTick(3.5e9), QStringLiteral("3.5G"));
    QCOMPARE(formatTick(250), QStringLiteral("250"));
    QCOMPARE(formatTick(0.1 + 0.2), QStringLiteral("0.3"));
    QCOMPARE(formatTick(-2), QString(QChar(0x2212)) + QStringLiteral("2"));
    QCOMPARE(formatTick(1e-5), QStringLiteral("1e") + QChar(0x2212) + QStringLiteral("5"));
    QCOMPARE(formatValue(312.5), QStringLiteral("312.5"));
    QCOMPARE(formatValue(0.30419), QStringLiteral("0.3042"));
    QCOMPARE(formatValue(1234.4), QStringLiteral("1234"));
    QCOMPARE(formatValue(9999.7), QStringLiteral("10000"));
    QCOMPARE(formatValue(12345), QStringLiteral("12.3k"));
  }

  void parseErrorsNameThePath_data() {
    QTest::addColumn<QString>("spec");
    QTest::addColumn<QString>("message");
    const QString line = QStringLiteral(R"("kind": "line", "title": "T", "x": {"label": "x"}, "y": {"label": "y"})");
    const QString bar =
        QStringLiteral(R"("kind": "bar", "title": "T", "y": {"label": "y"}, "categories": ["a", "b", "c", "d"])");
    auto row = [](const char* name, const QString& spec, const char* message) {
      QTest::newRow(name) << spec << QString::fromUtf8(message);
    };
    row("bad kind", QStringLiteral(R"({"kind": "pie", "title": "T"})"),
        R"(fig.json: kind: expected "line" or "bar", found "pie")");
    row("no kind", QStringLiteral(R"({"title": "T"})"),
        R"(fig.json: kind: expected "line" or "bar", found nothing (the key is missing))");
    row("missing series", QStringLiteral("{%1}").arg(line),
        "fig.json: series: expected a non-empty array of series objects, found nothing");
    row("empty series", QStringLiteral(R"({%1, "series": []})").arg(line),
        "fig.json: series: expected a non-empty array of series objects, found []");
    row("ragged points", QStringLiteral(R"({%1, "series": [{"name": "s", "points": [[1, 2], [3]]}]})").arg(line),
        "fig.json: series[0].points[1]: expected [x, y] numbers (y may be null), found [3]");
    row("string point",
        QStringLiteral(
            R"({%1, "series": [{"name": "a", "points": [[1, 2]]}, {"name": "s", "points": [[1, 2], "abc"]}]})")
            .arg(line),
        R"(fig.json: series[1].points[1]: expected [x, y] numbers (y may be null), found "abc")");
    row("series name", QStringLiteral(R"({%1, "series": [{"points": [[1, 2]]}]})").arg(line),
        "fig.json: series[0].name: expected a non-empty string");
    row("bar count",
        QStringLiteral(R"({%1, "series": [{"name": "a", "values": [1, 2, 3, 4]}, {"name": "b", "values": [1, 2, 3]}]})")
            .arg(bar),
        "fig.json: series[1].values: expected 4 values (one per category), found 3");
    row("bar value", QStringLiteral(R"({%1, "series": [{"name": "a", "values": [1, 2, "3", 4]}]})").arg(bar),
        R"(fig.json: series[0].values[2]: expected a finite number or null, found "3")");
    row("bar errors",
        QStringLiteral(
            R"({%1, "series": [{"name": "a", "values": [1, 2, 3, 4], "errors": [[0, 2], [3, 1], null, null]}]})")
            .arg(bar),
        "fig.json: series[0].errors[1]: expected [low, high] finite numbers with low <= high, or null, found [3, 1]");
    row("no categories",
        QStringLiteral(
            R"({"kind": "bar", "title": "T", "y": {"label": "y"}, "series": [{"name": "a", "values": [1]}]})"),
        "fig.json: categories: expected a non-empty array of strings, found nothing");
    row("typo key",
        QStringLiteral(
            R"({"kind": "line", "title": "T", "x": {"label": "x"}, "y": {"label": "y", "form_zero": true}})"),
        "fig.json: y.form_zero: unknown key; expected one of label, unit, log");
    row("log zero",
        QStringLiteral(R"({"kind": "line", "title": "T", "x": {"label": "x"}, "y": {"label": "y", "log": true},
                           "series": [{"name": "s", "points": [[1, 0]]}]})"),
        "fig.json: series[0].points[0]: expected y > 0 on the logarithmic y axis, found [1, 0]");
    row("log base",
        QStringLiteral(
            R"({"kind": "line", "title": "T", "x": {"label": "x", "log": true, "log_base": 3}, "y": {"label": "y"}})"),
        "fig.json: x.log_base: expected 2 or 10, found 3");
    row("band order",
        QStringLiteral(R"({%1, "series": [{"name": "s", "points": [[1, 2]], "band": [[1, 3, 1]]}]})").arg(line),
        "fig.json: series[0].band[0]: expected low <= high, found [1, 3, 1]");
    row("legend",
        QStringLiteral(R"({%1, "legend": "middle", "series": [{"name": "s", "points": [[1, 2]]}]})").arg(line),
        R"(fig.json: legend: expected one of "top-right")");
    // (Plain strings: moc's preprocessor mistakes a "#" in a raw string for a directive.)
    row("colour",
        QStringLiteral("{%1, \"series\": [{\"name\": \"s\", \"points\": [[1, 2]], \"color\": \"#12345\"}]}").arg(line),
        "fig.json: series[0].color: expected a colour such as \"#0072b2\", found \"#12345\"");
    row("title", QStringLiteral(R"({"kind": "line", "title": "", "x": {"label": "x"}, "y": {"label": "y"}})"),
        R"(fig.json: title: expected a non-empty string, found "")");
    row("reference",
        QStringLiteral(R"({%1, "series": [{"name": "s", "points": [[1, 2]]}], "reference_lines": [{"y": "1"}]})")
            .arg(line),
        R"(fig.json: reference_lines[0].y: expected a finite number, found "1")");
  }
  void parseErrorsNameThePath() {
    QFETCH(QString, spec);
    QFETCH(QString, message);
    try {
      parseFigure(json(spec.toUtf8().constData()), QStringLiteral("fig.json"));
      QFAIL("no error");
    } catch (const FigureError& e) {
      QVERIFY2(QString::fromUtf8(e.what()).startsWith(message), e.what());
    }
  }

  // JSON text cannot spell NaN or infinity, but a spec built in code (or a parser that allows them) can.
  void nonFiniteNumbersAreRejected() {
    QJsonObject spec = json(R"({"kind": "line", "title": "T", "x": {"label": "x"}, "y": {"label": "y"}})");
    for (double bad : {qInf(), -qInf(), qQNaN()}) {
      spec[QStringLiteral("series")] =
          QJsonArray{QJsonObject{{QStringLiteral("name"), QStringLiteral("s")},
                                 {QStringLiteral("points"), QJsonArray{QJsonArray{1, 2}, QJsonArray{2, bad}}}}};
      if (!QJsonValue(bad).isDouble()) continue;  // this Qt stores NaN as null: a gap, which is fine
      try {
        parseFigure(spec, QStringLiteral("fig.json"));
        QFAIL(qPrintable(QStringLiteral("no error for %1").arg(bad)));
      } catch (const FigureError& e) {
        QVERIFY2(QString::fromUtf8(e.what()).startsWith(
                     QStringLiteral("fig.json: series[0].points[1]: expected [x, y] finite numbers")),
                 e.what());
      }
    }
  }

  void jsonSyntaxErrorsNameLineAndColumn() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("broken.json"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{\n  \"kind\": \"line\",\n  \"title\": NaN\n}\n");
    f.close();
    try {
      loadFigure(path);
      QFAIL("no error");
    } catch (const FigureError& e) {
      QVERIFY2(QString::fromUtf8(e.what()).startsWith(path + QStringLiteral(": line 3, column")), e.what());
    }
  }

  void lineChartPixelsFollowTheLayout() {
    const Figure f = parseFigure(json(kLineSpec), QStringLiteral("line.json"));
    const QSize size(1200, 750);
    const ChartLayout l = layoutChart(f, size);
    const QImage image = renderFigure(f, size);
    QCOMPARE(image.size(), size);
    QCOMPARE(image.format(), QImage::Format_ARGB32);
    QCOMPARE(plotArea(f, size), l.plotArea);
    // Markers at known data points, in each series' colour.
    QVERIFY(colourDistance(pixelAt(image, l.toPixel(20, 231.5)), paletteColor(0)) <= 12);
    QVERIFY(colourDistance(pixelAt(image, l.toPixel(50, 150.0)), paletteColor(0)) <= 12);
    QVERIFY(colourDistance(pixelAt(image, l.toPixel(50, 260.0)), paletteColor(1)) <= 12);
    // The line between two markers, and the gap where a value is missing.
    QVERIFY(colourNear(image, (l.toPixel(75, 121.0) + l.toPixel(100, 104.3)) / 2, paletteColor(0), 12, 1));
    QVERIFY(!colourNear(image, (l.toPixel(20, 400.0) + l.toPixel(50, 260.0)) / 2, paletteColor(1), 60, 2));
    // The band: white under an 18% tint of the series' colour, between the line and the band's edge.
    const QColor c = paletteColor(0);
    const QColor tint(qRound(255 * 0.82 + c.red() * 0.18), qRound(255 * 0.82 + c.green() * 0.18),
                      qRound(255 * 0.82 + c.blue() * 0.18));
    QVERIFY(colourNear(image, l.toPixel(40, 180.0), tint, 6));
    QVERIFY(colourDistance(pixelAt(image, l.toPixel(40, 240.0)), QColor(Qt::white)) == 0 ||
            colourNear(image, l.toPixel(40, 240.0), QColor(0xe4, 0xe4, 0xe4), 4, 0));
    // Legend swatches, one per series, in the series' colours.
    QCOMPARE(l.legendSwatches.size(), size_t(3));
    for (int i = 0; i < 3; ++i)
      QVERIFY2(colourNear(image, l.legendSwatches[size_t(i)].center(), paletteColor(i), 12, 1),
               qPrintable(QString::number(i)));
    // y starts at zero as asked; the ticks are nice.
    QCOMPARE(l.y.lo, 0.0);
    QCOMPARE(l.y.labels.front(), QStringLiteral("0"));
  }

  // Every label's rectangle is inside the image at small, reference and large sizes, with long
  // labels and a legend outside; and nothing but white touches the image's border.
  void labelsStayInsideTheImage() {
    QJsonObject longLabels = json(kLineSpec);
    longLabels[QStringLiteral("legend")] = QStringLiteral("outside-right");
    QJsonObject y = longLabels[QStringLiteral("y")].toObject();
    y[QStringLiteral("min")] = -123456.0;
    y[QStringLiteral("max")] = 9876543.0;
    longLabels[QStringLiteral("y")] = y;
    for (const QJsonObject& spec : {json(kLineSpec), json(kBarSpec), longLabels}) {
      const Figure f = parseFigure(spec, QStringLiteral("fig.json"));
      for (const QSize size : {QSize(480, 300), QSize(1200, 750), QSize(2400, 1500)}) {
        const ChartLayout l = layoutChart(f, size);
        const QString what = QStringLiteral("%1 at %2x%3").arg(f.title).arg(size.width()).arg(size.height());
        for (const QRectF& r : {l.titleRect, l.subtitleRect, l.plotArea, l.xLabelRect, l.yLabelRect, l.legendRect})
          QVERIFY2(inside(r, size), qPrintable(what));
        for (const QRectF& r : l.xTickLabelRects) QVERIFY2(inside(r, size), qPrintable(what));
        for (const QRectF& r : l.yTickLabelRects)
          QVERIFY2(inside(r, size) && r.right() < l.plotArea.left(), qPrintable(what));
        for (size_t i = 1; i < l.xTickLabelRects.size(); ++i)
          QVERIFY2(!l.xTickLabelRects[i].intersects(l.xTickLabelRects[i - 1]) || l.rotatedCategories, qPrintable(what));
        QVERIFY2(l.plotArea.top() > l.subtitleRect.bottom() && l.plotArea.bottom() < l.xLabelRect.top(),
                 qPrintable(what));
        const QImage image = renderFigure(f, size);
        for (int x = 0; x < size.width(); ++x)
          QVERIFY2(image.pixel(x, 0) == qRgb(255, 255, 255) && image.pixel(x, size.height() - 1) == qRgb(255, 255, 255),
                   qPrintable(what));
        for (int yy = 0; yy < size.height(); ++yy)
          QVERIFY2(
              image.pixel(0, yy) == qRgb(255, 255, 255) && image.pixel(size.width() - 1, yy) == qRgb(255, 255, 255),
              qPrintable(what));
      }
    }
  }

  void logAxesPlaceDecadesEvenly() {
    const Figure f =
        parseFigure(json(R"({"kind": "line", "title": "Log", "x": {"label": "Batch", "log": true, "log_base": 2},
      "y": {"label": "Latency", "unit": "µs", "log": true},
      "series": [{"name": "s", "points": [[1, 10], [4, 100], [16, 1000], [64, 20000]]}]})"),
                    QStringLiteral("log.json"));
    const ChartLayout l = layoutChart(f, QSize(1200, 750));
    const double decade = l.y.toPixel(10) - l.y.toPixel(100);
    QVERIFY(decade > 50);
    QVERIFY(std::abs((l.y.toPixel(100) - l.y.toPixel(1000)) - decade) < 1e-6);
    QVERIFY(std::abs(l.x.toPixel(4) - l.x.toPixel(1) - (l.x.toPixel(16) - l.x.toPixel(4))) < 1e-6);
    QVERIFY(std::find(l.y.ticks.begin(), l.y.ticks.end(), 100.0) != l.y.ticks.end());
    const auto at100 = std::find(l.y.ticks.begin(), l.y.ticks.end(), 100.0) - l.y.ticks.begin();
    QCOMPARE(l.y.labels[size_t(at100)], QStringLiteral("100"));
    QCOMPARE(l.y.labels.back(), QStringLiteral("10k"));
    QVERIFY(!l.y.minorTicks.empty());
    for (double t : l.x.ticks) QCOMPARE(std::exp2(std::round(std::log2(t))), t);  // powers of two
    const QImage image = renderFigure(f, QSize(1200, 750));
    QVERIFY(colourDistance(pixelAt(image, l.toPixel(4, 100)), paletteColor(0)) <= 12);
    QVERIFY(colourDistance(pixelAt(image, l.toPixel(16, 1000)), paletteColor(0)) <= 12);
  }

  void barHeightsMatchValues() {
    const Figure f = parseFigure(json(kBarSpec), QStringLiteral("bar.json"));
    const QSize size(1200, 750);
    const ChartLayout l = layoutChart(f, size);
    const QImage image = renderFigure(f, size);
    QCOMPARE(l.y.lo, 0.0);
    QVERIFY(!l.rotatedCategories);
    for (int s = 0; s < 2; ++s) {
      for (int c = 0; c < 4; ++c) {
        const auto value = f.bars[size_t(s)].values[size_t(c)];
        const QRectF r = l.barRect(f, c, s);
        if (!value) { QVERIFY(r.isEmpty()); continue; }
        const double expected = l.y.toPixel(0) - l.y.toPixel(*value);
        QVERIFY(std::abs(r.height() - expected) <= 1.0);
        // Count the bar's pixels up a column a quarter in (the centre carries the error bar).
        const int x = static_cast<int>(r.left() + r.width() / 4);
        int run = 0;
        for (int yy = static_cast<int>(l.plotArea.bottom()); yy >= 0; --yy) {
          if (colourDistance(image.pixel(x, yy), seriesColor(f, s)) <= 4) ++run;
          else if (run > 0) break;
        }
        QVERIFY2(std::abs(run - expected) <= 1.0,
                 qPrintable(QStringLiteral("bar %1/%2: %3 px, expected %4").arg(s).arg(c).arg(run).arg(expected)));
      }
    }
    for (int i = 0; i < 2; ++i) QVERIFY(colourNear(image, l.legendSwatches[size_t(i)].center(), paletteColor(i), 4, 0));
    QVERIFY(l.legendRect.left() > l.plotArea.right());  // outside-right

    // The default legend (top right) gets headroom instead of covering the last bars or their labels.
    QJsonObject headroomSpec = json(kBarSpec);
    headroomSpec.remove(QStringLiteral("legend"));
    QJsonArray series = headroomSpec[QStringLiteral("series")].toArray();
    QJsonObject cold = series[1].toObject();
    cold[QStringLiteral("values")] = QJsonArray{410, 436.5, QJsonValue(), 480};  // the tallest bar on the right
    series[1] = cold;
    headroomSpec[QStringLiteral("series")] = series;
    const Figure g = parseFigure(headroomSpec, QStringLiteral("bar.json"));
    const ChartLayout roomy = layoutChart(g, size);
    QVERIFY(roomy.legendRect.right() < roomy.plotArea.right());
    QVERIFY(roomy.y.hi > 480 * 1.1 + 1);  // more than the usual 10% headroom
    const double labelHeight = QFontMetricsF(roomy.valueFont).height();
    for (int s = 0; s < 2; ++s)
      for (int c = 0; c < 4; ++c)
        QVERIFY(!roomy.barRect(g, c, s).adjusted(0, -labelHeight, 0, 0).intersects(roomy.legendRect));

    // Many long category names do not fit flat: they turn, and still stay inside the image.
    QJsonObject crowded = json(kBarSpec);
    QJsonArray cats, values;
    for (int i = 0; i < 12; ++i) {
      cats.append(QStringLiteral("Policy with a long name #%1").arg(i));
      values.append(100 + i * 10);
    }
    crowded[QStringLiteral("categories")] = cats;
    crowded[QStringLiteral("series")] =
        QJsonArray{QJsonObject{{QStringLiteral("name"), QStringLiteral("TPOT")}, {QStringLiteral("values"), values}}};
    const ChartLayout turned = layoutChart(parseFigure(crowded, QStringLiteral("crowded.json")), size);
    QVERIFY(turned.rotatedCategories);
    for (const QRectF& r : turned.xTickLabelRects) QVERIFY(inside(r, size));
    QVERIFY(turned.xLabelRect.top() >= turned.xTickLabelRects.front().bottom());
  }

  void bestLegendAvoidsTheData() {
    QJsonObject spec =
        json(R"({"kind": "line", "title": "Rising", "x": {"label": "x"}, "y": {"label": "y"}, "legend": "best",
      "series": [{"name": "up", "points": [[0, 0], [1, 1], [2, 2], [3, 3], [4, 4], [5, 5], [6, 6], [7, 7], [8, 8],
                                          [9, 9], [10, 10]]}]})");
    const ChartLayout l = layoutChart(parseFigure(spec, QStringLiteral("best.json")), QSize(1200, 750));
    // The diagonal crosses the top-right and bottom-left corners; top-left is the first free one.
    QVERIFY(l.legendRect.left() < l.plotArea.center().x() && l.legendRect.top() < l.plotArea.center().y());
  }

  void examplesForTheEye() {
    const QString dir = artifactsDir();
    for (const auto& [name, spec] :
         {std::pair{"plot_line_example.png", kLineSpec}, std::pair{"plot_bar_example.png", kBarSpec}}) {
      const QImage image = renderFigure(parseFigure(json(spec), QString::fromLatin1(name)), QSize(1200, 750));
      QVERIFY(image.save(dir + QLatin1Char('/') + QLatin1String(name)));
      qInfo("example: %s/%s", qPrintable(dir), name);
    }
  }

  void executableEndToEnd() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    auto write = [&](const QString& name, const QByteArray& bytes) {
      QFile f(dir.filePath(name));
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(bytes);
    };
    write(QStringLiteral("line.json"), kLineSpec);
    write(QStringLiteral("bar.json"), kBarSpec);
    write(QStringLiteral("broken.json"), "{\"kind\": \"line\", ");
    write(QStringLiteral("invalid.json"), R"({"kind": "bar", "title": "T", "y": {"label": "y"}, "categories": ["a"],
                                               "series": [{"name": "s", "values": [1, 2]}]})");
    write(QStringLiteral("results.json"), R"({"tpot_ms": [1, 2, 3]})");
    // Without any platform in the environment, the tool picks the offscreen one itself.
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const char* key : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"}) env.remove(QString::fromLatin1(key));
    auto run = [&](const QStringList& args, QString* errors = nullptr) {
      QProcess p;
      p.setProcessEnvironment(env);
      p.start(QStringLiteral(ZIPMOE_PLOT_PATH), args);
      if (!p.waitForFinished(60000)) return -1;
      if (errors) *errors = QString::fromUtf8(p.readAllStandardError());
      return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    };
    QString errors;
    QCOMPARE(run({dir.filePath(QStringLiteral("line.json")), dir.filePath(QStringLiteral("line.png")),
                  QStringLiteral("--size"), QStringLiteral("800x500")},
                 &errors),
             0);
    QVERIFY2(!errors.contains(QStringLiteral("zipmoe-plot")), qPrintable(errors));
    const QImage png(dir.filePath(QStringLiteral("line.png")));
    QCOMPARE(png.size(), QSize(800, 500));

    QCOMPARE(run({dir.filePath(QStringLiteral("broken.json")), dir.filePath(QStringLiteral("broken.png"))}, &errors),
             1);
    QVERIFY2(errors.contains(QStringLiteral("broken.json: line 1, column")), qPrintable(errors));
    QVERIFY(!QFile::exists(dir.filePath(QStringLiteral("broken.png"))));
    QCOMPARE(run({dir.filePath(QStringLiteral("invalid.json")), dir.filePath(QStringLiteral("invalid.png"))}, &errors),
             1);
    QVERIFY2(errors.contains(QStringLiteral("invalid.json: series[0].values: expected 1 values")), qPrintable(errors));
    QVERIFY(!QFile::exists(dir.filePath(QStringLiteral("invalid.png"))));
    QCOMPARE(run({dir.filePath(QStringLiteral("line.json")), dir.filePath(QStringLiteral("x.png")),
                  QStringLiteral("--size"), QStringLiteral("big")},
                 &errors),
             2);
    QVERIFY2(errors.contains(QStringLiteral("--size")), qPrintable(errors));
    QCOMPARE(run({dir.filePath(QStringLiteral("line.json"))}, &errors), 2);
    QCOMPARE(
        run({dir.filePath(QStringLiteral("line.json")), dir.filePath(QStringLiteral("no/such/dir/x.png"))}, &errors),
        1);
    QVERIFY2(errors.contains(QStringLiteral("x.png: cannot write")), qPrintable(errors));

    // --all: every figure spec, not the results file; the broken ones make the exit code non-zero.
    QFile::remove(dir.filePath(QStringLiteral("line.png")));
    QCOMPARE(run({QStringLiteral("--all"), dir.path()}, &errors), 1);
    QVERIFY(errors.contains(QStringLiteral("broken.json")) && errors.contains(QStringLiteral("invalid.json")));
    QCOMPARE(QImage(dir.filePath(QStringLiteral("line.png"))).size(), QSize(1200, 750));
    QCOMPARE(QImage(dir.filePath(QStringLiteral("bar.png"))).size(), QSize(1200, 750));
    QVERIFY(!QFile::exists(dir.filePath(QStringLiteral("results.png"))));
    QVERIFY(!QFile::exists(dir.filePath(QStringLiteral("broken.png"))));
    QFile::remove(dir.filePath(QStringLiteral("broken.json")));
    QFile::remove(dir.filePath(QStringLiteral("invalid.json")));
    QCOMPARE(run({QStringLiteral("--all"), dir.path()}, &errors), 0);
  }
};

QTEST_MAIN(TestPlot)
#include "test_plot.moc"
