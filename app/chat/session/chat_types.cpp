#include "chat_types.h"

#include <QJsonDocument>
#include <QJsonArray>
#include <QJsonObject>

namespace zipmoe::app {

QString SamplingSettings::toJson() const {
  QJsonObject o;
  o[QStringLiteral("temperature")] = temperature;
  o[QStringLiteral("topK")] = topK;
  o[QStringLiteral("topP")] = topP;
  o[QStringLiteral("minP")] = minP;
  o[QStringLiteral("repetitionPenalty")] = repetitionPenalty;
  o[QStringLiteral("maxTokens")] = maxTokens;
  o[QStringLiteral("seed")] = QString::number(seed);  // 64-bit: a JSON number would lose digits
  return QString::fromUtf8(QJsonDocument(o).toJson(QJsonDocument::Compact));
}

SamplingSettings SamplingSettings::fromJson(const QString& json, QString* problem) {
  SamplingSettings s;
  if (json.trimmed().isEmpty()) return s;
  QJsonParseError error{};
  const QJsonDocument doc = QJsonDocument::fromJson(json.toUtf8(), &error);
  QStringList problems;
  if (!doc.isObject()) {
    if (problem) *problem = QStringLiteral("sampling settings are not a JSON object (%1); defaults used").arg(error.errorString());
    return s;
  }
  const QJsonObject o = doc.object();
  auto number = [&](const char* name, double lo, double hi, double& out) {
    const QJsonValue v = o.value(QLatin1String(name));
    if (v.isUndefined()) return;
    if (!v.isDouble() || v.toDouble() < lo || v.toDouble() > hi) {
      // The value as JSON text (a number, "text", true…): an array of one, without its brackets.
      const QByteArray asArray = QJsonDocument(QJsonArray{v}).toJson(QJsonDocument::Compact);
      problems << QStringLiteral("%1 = %2 is out of range [%3, %4]")
                      .arg(QLatin1String(name), QString::fromUtf8(asArray.mid(1, asArray.size() - 2)))
                      .arg(lo)
                      .arg(hi);
      return;
    }
    out = v.toDouble();
  };
  double topK = s.topK, maxTokens = s.maxTokens;
  number("temperature", 0, 5, s.temperature);
  number("topK", 0, 100000, topK);
  number("topP", 0.01, 1, s.topP);
  number("minP", 0, 1, s.minP);
  number("repetitionPenalty", 0.1, 10, s.repetitionPenalty);
  number("maxTokens", 1, 1 << 20, maxTokens);
  s.topK = static_cast<int>(topK);
  s.maxTokens = static_cast<int>(maxTokens);
  const QJsonValue seed = o.value(QStringLiteral("seed"));
  if (seed.isString()) {
    bool ok = false;
    const quint64 v = seed.toString().toULongLong(&ok);
    if (ok) s.seed = v;
    else problems << QStringLiteral("seed = \"%1\" is not a number").arg(seed.toString());
  }
  if (problem) *problem = problems.join(QStringLiteral("; "));
  return s;
}

}  // namespace zipmoe::app
