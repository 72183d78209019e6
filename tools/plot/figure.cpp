#include "figure.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonValue>

#include <cmath>
#include <utility>

namespace zipmoe::plot {

QString Axis::title() const {
  return unit.isEmpty() ? label : QStringLiteral("%1 (%2)").arg(label, unit);
}

namespace {

// A JSON value as the user wrote it, short enough for one error line. Hand-written rather than
// QJsonDocument::toJson so that NaN and infinities (which JSON text cannot hold, but a QJsonObject
// built in code can) show up as such instead of as "null".
QString describe(const QJsonValue& v, int depth = 0) {
  switch (v.type()) {
    case QJsonValue::Null: return QStringLiteral("null");
    case QJsonValue::Bool: return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
    case QJsonValue::Double: {
      const double d = v.toDouble();
      if (std::isnan(d)) return QStringLiteral("NaN");
      if (std::isinf(d)) return d > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
      return QString::number(d, 'g', 12);
    }
    case QJsonValue::String: {
      QString s = v.toString();
      if (s.size() > 40) s = s.left(37) + QStringLiteral("...");
      return QLatin1Char('"') + s + QLatin1Char('"');
    }
    case QJsonValue::Array: {
      if (depth > 0) return QStringLiteral("[...]");
      QStringList parts;
      const QJsonArray a = v.toArray();
      for (qsizetype i = 0; i < a.size() && i < 4; ++i) parts << describe(a.at(i), depth + 1);
      if (a.size() > 4) parts << QStringLiteral("...");
      return QLatin1Char('[') + parts.join(QStringLiteral(", ")) + QLatin1Char(']');
    }
    case QJsonValue::Object: {
      const QStringList keys = v.toObject().keys();
      return keys.isEmpty() ? QStringLiteral("{}")
                            : QStringLiteral("an object with keys %1").arg(keys.join(QStringLiteral(", ")));
    }
    case QJsonValue::Undefined: break;
  }
  return QStringLiteral("nothing (the key is missing)");
}

QString child(const QString& path, const QString& key) { return path.isEmpty() ? key : path + QLatin1Char('.') + key; }
QString child(const QString& path, qsizetype index) { return QStringLiteral("%1[%2]").arg(path).arg(index); }

// Reads one spec, remembering the source name for its error messages.
class SpecReader {
 public:
  explicit SpecReader(QString source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const QString& path, const QString& message) const {
    throw FigureError(QStringLiteral("%1: %2: %3").arg(source_, path, message).toStdString());
  }
  [[noreturn]] void expected(const QString& path, const QString& what, const QJsonValue& found) const {
    fail(path, QStringLiteral("expected %1, found %2").arg(what, describe(found)));
  }

  // Rejects keys outside `allowed`: a misspelt optional key would otherwise be silently ignored.
  void checkKeys(const QJsonObject& o, const QString& path, const QStringList& allowed) const {
    for (auto it = o.begin(); it != o.end(); ++it) {
      if (!allowed.contains(it.key()))
        fail(child(path, it.key()),
             QStringLiteral("unknown key; expected one of %1").arg(allowed.join(QStringLiteral(", "))));
    }
  }

  QJsonObject object(const QJsonValue& v, const QString& path) const {
    if (!v.isObject()) expected(path, QStringLiteral("an object"), v);
    return v.toObject();
  }

  QJsonArray nonEmptyArray(const QJsonValue& v, const QString& path, const QString& of) const {
    if (!v.isArray() || v.toArray().isEmpty()) expected(path, QStringLiteral("a non-empty array of %1").arg(of), v);
    return v.toArray();
  }

  QString string(const QJsonObject& o, const QString& key, const QString& path, bool required) const {
    const QJsonValue v = o.value(key);
    if (v.isUndefined() && !required) return {};
    if (!v.isString() || (required && v.toString().trimmed().isEmpty()))
      expected(child(path, key), QStringLiteral("a non-empty string"), v);
    return v.toString();
  }

  bool boolean(const QJsonObject& o, const QString& key, const QString& path, bool fallback) const {
    const QJsonValue v = o.value(key);
    if (v.isUndefined()) return fallback;
    if (!v.isBool()) expected(child(path, key), QStringLiteral("true or false"), v);
    return v.toBool();
  }

  static bool isFinite(const QJsonValue& v) { return v.isDouble() && std::isfinite(v.toDouble()); }

  double number(const QJsonValue& v, const QString& path) const {
    if (!isFinite(v)) expected(path, QStringLiteral("a finite number"), v);
    return v.toDouble();
  }

  std::optional<double> optionalNumber(const QJsonObject& o, const QString& key, const QString& path) const {
    if (!o.contains(key)) return std::nullopt;
    return number(o.value(key), child(path, key));
  }

  std::optional<QColor> color(const QJsonObject& o, const QString& path) const {
    if (!o.contains(QStringLiteral("color"))) return std::nullopt;
    const QJsonValue v = o.value(QStringLiteral("color"));
    const QColor c = v.isString() ? QColor::fromString(v.toString()) : QColor();
    if (!c.isValid()) expected(child(path, QStringLiteral("color")), QStringLiteral("a colour such as \"#0072b2\""), v);
    return c;
  }

  Axis axis(const QJsonValue& v, const QString& path, bool allowLog) const {
    const QJsonObject o = object(v, path);
    checkKeys(o, path,
              {QStringLiteral("label"), QStringLiteral("unit"), QStringLiteral("log"), QStringLiteral("log_base"),
               QStringLiteral("from_zero"), QStringLiteral("min"), QStringLiteral("max")});
    Axis a;
    a.label = string(o, QStringLiteral("label"), path, true);
    a.unit = string(o, QStringLiteral("unit"), path, false);
    a.log = boolean(o, QStringLiteral("log"), path, false);
    if (a.log && !allowLog)
      fail(child(path, QStringLiteral("log")),
           QStringLiteral("a bar chart cannot have a logarithmic axis (bars grow from zero)"));
    if (o.contains(QStringLiteral("log_base"))) {
      const QJsonValue b = o.value(QStringLiteral("log_base"));
      if (!a.log) fail(child(path, QStringLiteral("log_base")), QStringLiteral("only meaningful with \"log\": true"));
      if (!isFinite(b) || (b.toDouble() != 2.0 && b.toDouble() != 10.0))
        expected(child(path, QStringLiteral("log_base")), QStringLiteral("2 or 10"), b);
      a.logBase = b.toDouble();
    }
    a.fromZero = boolean(o, QStringLiteral("from_zero"), path, false);
    if (a.fromZero && a.log)
      fail(child(path, QStringLiteral("from_zero")), QStringLiteral("a logarithmic axis cannot start at zero"));
    a.min = optionalNumber(o, QStringLiteral("min"), path);
    a.max = optionalNumber(o, QStringLiteral("max"), path);
    if (a.log && a.min && *a.min <= 0)
      expected(child(path, QStringLiteral("min")), QStringLiteral("a positive number on a logarithmic axis"),
               o.value(QStringLiteral("min")));
    if (a.min && a.max && *a.min >= *a.max)
      fail(path, QStringLiteral("expected min < max, found min %1 and max %2").arg(*a.min).arg(*a.max));
    return a;
  }

  LineSeries lineSeries(const QJsonValue& v, const QString& path, const Figure& f) const {
    const QJsonObject o = object(v, path);
    checkKeys(o, path,
              {QStringLiteral("name"), QStringLiteral("points"), QStringLiteral("band"), QStringLiteral("style"),
               QStringLiteral("markers"), QStringLiteral("color")});
    LineSeries s;
    s.name = string(o, QStringLiteral("name"), path, true);
    const QString pointsPath = child(path, QStringLiteral("points"));
    const QJsonArray points =
        nonEmptyArray(o.value(QStringLiteral("points")), pointsPath, QStringLiteral("[x, y] points"));
    for (qsizetype i = 0; i < points.size(); ++i) {
      const QJsonValue p = points.at(i);
      const QJsonArray a = p.toArray();
      if (!p.isArray() || a.size() != 2 || !a.at(0).isDouble() || !(a.at(1).isDouble() || a.at(1).isNull()))
        expected(child(pointsPath, i), QStringLiteral("[x, y] numbers (y may be null)"), p);
      if (!isFinite(a.at(0)) || (a.at(1).isDouble() && !isFinite(a.at(1))))
        expected(child(pointsPath, i), QStringLiteral("[x, y] finite numbers (null for a missing y)"), p);
      LinePoint lp{a.at(0).toDouble(), a.at(1).isNull() ? std::nullopt : std::optional<double>(a.at(1).toDouble())};
      if (f.x.log && lp.x <= 0) expected(child(pointsPath, i), QStringLiteral("x > 0 on the logarithmic x axis"), p);
      if (f.y.log && lp.y && *lp.y <= 0)
        expected(child(pointsPath, i), QStringLiteral("y > 0 on the logarithmic y axis"), p);
      s.points.push_back(lp);
    }
    if (o.contains(QStringLiteral("band"))) {
      const QString bandPath = child(path, QStringLiteral("band"));
      const QJsonArray band =
          nonEmptyArray(o.value(QStringLiteral("band")), bandPath, QStringLiteral("[x, low, high] triples"));
      for (qsizetype i = 0; i < band.size(); ++i) {
        const QJsonValue p = band.at(i);
        const QJsonArray a = p.toArray();
        if (!p.isArray() || a.size() != 3 || !isFinite(a.at(0)) || !isFinite(a.at(1)) || !isFinite(a.at(2)))
          expected(child(bandPath, i), QStringLiteral("[x, low, high] finite numbers"), p);
        const BandPoint b{a.at(0).toDouble(), a.at(1).toDouble(), a.at(2).toDouble()};
        if (b.low > b.high) expected(child(bandPath, i), QStringLiteral("low <= high"), p);
        if (f.x.log && b.x <= 0) expected(child(bandPath, i), QStringLiteral("x > 0 on the logarithmic x axis"), p);
        if (f.y.log && b.low <= 0) expected(child(bandPath, i), QStringLiteral("low > 0 on the logarithmic y axis"), p);
        s.band.push_back(b);
      }
    }
    const QString style =
        o.contains(QStringLiteral("style")) ? o.value(QStringLiteral("style")).toString() : QStringLiteral("solid");
    if (style == QLatin1String("dashed")) s.style = LineStyle::Dashed;
    else if (style != QLatin1String("solid"))
      expected(child(path, QStringLiteral("style")), QStringLiteral("\"solid\" or \"dashed\""),
               o.value(QStringLiteral("style")));
    // Markers on hundreds of points turn a line into a smear, hence the size-dependent default.
    s.markers = boolean(o, QStringLiteral("markers"), path, s.points.size() <= 50);
    s.color = color(o, path);
    return s;
  }

  BarSeries barSeries(const QJsonValue& v, const QString& path, qsizetype categories) const {
    const QJsonObject o = object(v, path);
    checkKeys(o, path,
              {QStringLiteral("name"), QStringLiteral("values"), QStringLiteral("errors"), QStringLiteral("color")});
    BarSeries s;
    s.name = string(o, QStringLiteral("name"), path, true);
    const QString valuesPath = child(path, QStringLiteral("values"));
    const QJsonArray values = nonEmptyArray(o.value(QStringLiteral("values")), valuesPath, QStringLiteral("numbers"));
    if (values.size() != categories)
      fail(valuesPath,
           QStringLiteral("expected %1 values (one per category), found %2").arg(categories).arg(values.size()));
    for (qsizetype i = 0; i < values.size(); ++i) {
      const QJsonValue x = values.at(i);
      if (!x.isNull() && !isFinite(x)) expected(child(valuesPath, i), QStringLiteral("a finite number or null"), x);
      s.values.push_back(x.isNull() ? std::nullopt : std::optional<double>(x.toDouble()));
    }
    if (o.contains(QStringLiteral("errors"))) {
      const QString errorsPath = child(path, QStringLiteral("errors"));
      const QJsonArray errors =
          nonEmptyArray(o.value(QStringLiteral("errors")), errorsPath, QStringLiteral("[low, high] pairs"));
      if (errors.size() != categories)
        fail(errorsPath, QStringLiteral("expected %1 [low, high] pairs (one per category), found %2")
                             .arg(categories)
                             .arg(errors.size()));
      for (qsizetype i = 0; i < errors.size(); ++i) {
        const QJsonValue e = errors.at(i);
        const QJsonArray a = e.toArray();
        if (e.isNull()) { s.errors.emplace_back(); continue; }
        if (!e.isArray() || a.size() != 2 || !isFinite(a.at(0)) || !isFinite(a.at(1)) ||
            a.at(0).toDouble() > a.at(1).toDouble())
          expected(child(errorsPath, i), QStringLiteral("[low, high] finite numbers with low <= high, or null"), e);
        s.errors.push_back(ErrorBar{a.at(0).toDouble(), a.at(1).toDouble()});
      }
    }
    s.color = color(o, path);
    return s;
  }

 private:
  QString source_;
};

LegendPosition legendPosition(const SpecReader& r, const QJsonObject& spec) {
  const QJsonValue v = spec.value(QStringLiteral("legend"));
  if (v.isUndefined()) return LegendPosition::TopRight;
  static const std::pair<const char*, LegendPosition> kNames[] = {
      {"top-right", LegendPosition::TopRight},       {"top-left", LegendPosition::TopLeft},
      {"bottom-right", LegendPosition::BottomRight}, {"bottom-left", LegendPosition::BottomLeft},
      {"outside-right", LegendPosition::OutsideRight}, {"best", LegendPosition::Best},
      {"none", LegendPosition::None}};
  for (const auto& [name, position] : kNames)
    if (v.toString() == QLatin1String(name)) return position;
  r.expected(QStringLiteral("legend"),
             QStringLiteral("one of \"top-right\", \"top-left\", \"bottom-right\", \"bottom-left\", \"outside-right\", "
                            "\"best\", \"none\""),
             v);
}

}  // namespace

Figure parseFigure(const QJsonObject& spec, const QString& sourceName) {
  const SpecReader r(sourceName);
  Figure f;
  const QJsonValue kind = spec.value(QStringLiteral("kind"));
  if (kind == QJsonValue(QStringLiteral("line"))) f.kind = ChartKind::Line;
  else if (kind == QJsonValue(QStringLiteral("bar"))) f.kind = ChartKind::Bar;
  else r.expected(QStringLiteral("kind"), QStringLiteral("\"line\" or \"bar\""), kind);
  const bool line = f.kind == ChartKind::Line;

  QStringList allowed{QStringLiteral("kind"), QStringLiteral("title"), QStringLiteral("subtitle"), QStringLiteral("x"),
                      QStringLiteral("y"), QStringLiteral("series"), QStringLiteral("legend"),
                      QStringLiteral("reference_lines"), QStringLiteral("meta")};
  if (!line) allowed << QStringLiteral("categories");
  r.checkKeys(spec, {}, allowed);

  f.title = r.string(spec, QStringLiteral("title"), {}, true);
  f.subtitle = r.string(spec, QStringLiteral("subtitle"), {}, false);
  if (line || spec.contains(QStringLiteral("x")))
    f.x = r.axis(spec.value(QStringLiteral("x")), QStringLiteral("x"), line);
  if (!line && (f.x.min || f.x.max || f.x.fromZero))
    r.fail(QStringLiteral("x"), QStringLiteral("a bar chart's x axis takes only a label and a unit"));
  f.y = r.axis(spec.value(QStringLiteral("y")), QStringLiteral("y"), line);

  if (!line) {
    const QJsonArray cats = r.nonEmptyArray(spec.value(QStringLiteral("categories")), QStringLiteral("categories"),
                                            QStringLiteral("strings"));
    for (qsizetype i = 0; i < cats.size(); ++i) {
      if (!cats.at(i).isString())
        r.expected(child(QStringLiteral("categories"), i), QStringLiteral("a string"), cats.at(i));
      f.categories << cats.at(i).toString();
    }
  }
  const QJsonArray series =
      r.nonEmptyArray(spec.value(QStringLiteral("series")), QStringLiteral("series"), QStringLiteral("series objects"));
  for (qsizetype i = 0; i < series.size(); ++i) {
    const QString path = child(QStringLiteral("series"), i);
    if (line) f.lines.push_back(r.lineSeries(series.at(i), path, f));
    else f.bars.push_back(r.barSeries(series.at(i), path, f.categories.size()));
  }

  f.legend = legendPosition(r, spec);
  if (spec.contains(QStringLiteral("reference_lines"))) {
    const QJsonValue refs = spec.value(QStringLiteral("reference_lines"));
    if (!refs.isArray())
      r.expected(QStringLiteral("reference_lines"), QStringLiteral("an array of {\"y\": number, \"label\": string}"),
                 refs);
    const QJsonArray a = refs.toArray();
    for (qsizetype i = 0; i < a.size(); ++i) {
      const QString path = child(QStringLiteral("reference_lines"), i);
      const QJsonObject o = r.object(a.at(i), path);
      r.checkKeys(o, path, {QStringLiteral("y"), QStringLiteral("label")});
      ReferenceLine ref{r.number(o.value(QStringLiteral("y")), child(path, QStringLiteral("y"))),
                        r.string(o, QStringLiteral("label"), path, false)};
      if (f.y.log && ref.y <= 0)
        r.expected(child(path, QStringLiteral("y")), QStringLiteral("a positive number on the logarithmic y axis"),
                   o.value(QStringLiteral("y")));
      f.referenceLines.push_back(ref);
    }
  }
  return f;
}

QJsonObject readFigureJson(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly))
    throw FigureError(QStringLiteral("%1: cannot read: %2").arg(path, file.errorString()).toStdString());
  const QByteArray bytes = file.readAll();
  QJsonParseError error{};
  const QJsonDocument doc = QJsonDocument::fromJson(bytes, &error);
  if (error.error != QJsonParseError::NoError) {
    // QJsonParseError gives a byte offset; people fix files by line and column.
    const QByteArray before = bytes.left(error.offset);
    const qsizetype lineNo = before.count('\n') + 1;
    const qsizetype column = error.offset - (before.lastIndexOf('\n') + 1) + 1;
    throw FigureError(QStringLiteral("%1: line %2, column %3: invalid JSON: %4")
                          .arg(path).arg(lineNo).arg(column).arg(error.errorString()).toStdString());
  }
  if (!doc.isObject())
    throw FigureError(
        QStringLiteral("%1: expected a JSON object at the top level, found an array").arg(path).toStdString());
  return doc.object();
}

Figure loadFigure(const QString& path) { return parseFigure(readFigureJson(path), path); }

bool looksLikeFigureSpec(const QJsonObject& object) { return object.contains(QStringLiteral("kind")); }

}  // namespace zipmoe::plot
