// zipmoe-plot — renders the benchmark suites' figure specs (JSON, see figure.h) to PNG:
//   zipmoe-plot FIGURE.json OUT.png [--size 1200x750]
//   zipmoe-plot --all DIR [--size WxH]   every *.json in DIR that has "kind", next to it as .png
// Exit codes: 0 done, 1 a figure failed (the message names the file), 2 bad command line. A PNG is
// written to a temporary name and renamed only when complete, so a failure never leaves half a file.
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QGuiApplication>
#include <QRegularExpression>
#include <QSaveFile>

#include <cstdio>
#include <cstdlib>

#include "chart_painter.h"
#include "figure.h"

namespace {

void printError(const QString& message) { std::fprintf(stderr, "zipmoe-plot: %s\n", qPrintable(message)); }

// Renders the figure at `specPath` to `pngPath`; prints why and returns false on any failure.
bool renderFile(const QString& specPath, const QString& pngPath, QSize size) {
  try {
    const QImage image = zipmoe::plot::renderFigure(zipmoe::plot::loadFigure(specPath), size);
    QSaveFile out(pngPath);
    if (!out.open(QIODevice::WriteOnly) || !image.save(&out, "PNG") || !out.commit()) {
      printError(QStringLiteral("%1: cannot write the PNG: %2").arg(pngPath, out.errorString()));
      return false;
    }
    return true;
  } catch (const zipmoe::plot::FigureError& e) {
    printError(QString::fromStdString(e.what()));
    return false;
  }
}

// `--all DIR`: every figure spec in DIR; other JSON files (benchmark results) are left alone, but
// one that does not even parse is reported, since it may be a broken figure.
int renderDirectory(const QString& dirPath, QSize size) {
  const QDir dir(dirPath);
  if (!dir.exists()) {
    printError(QStringLiteral("%1: no such directory").arg(dirPath));
    return 1;
  }
  int rendered = 0, failed = 0;
  for (const QString& name : dir.entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name)) {
    const QString specPath = dir.filePath(name);
    try {
      if (!zipmoe::plot::looksLikeFigureSpec(zipmoe::plot::readFigureJson(specPath))) continue;
    } catch (const zipmoe::plot::FigureError& e) {
      printError(QString::fromStdString(e.what()));
      ++failed;
      continue;
    }
    const QString pngPath = dir.filePath(QFileInfo(name).completeBaseName() + QStringLiteral(".png"));
    if (renderFile(specPath, pngPath, size)) ++rendered;
    else ++failed;
  }
  std::printf("zipmoe-plot: %d figure(s) rendered in %s%s\n", rendered, qPrintable(QDir::toNativeSeparators(dirPath)),
              failed ? qPrintable(QStringLiteral(", %1 failed").arg(failed)) : "");
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Rendering needs no display; without one, Qt's default platform plugin would abort the program.
  if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") &&
      qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
    qputenv("QT_QPA_PLATFORM", "offscreen");
  QGuiApplication app(argc, argv);
  QGuiApplication::setApplicationName(QStringLiteral("zipmoe-plot"));
  QGuiApplication::setApplicationVersion(QStringLiteral(ZIPMOE_APP_VERSION));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Renders ZipMoE benchmark figure specs (JSON) to PNG."));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption sizeOption(QStringLiteral("size"),
                                      QStringLiteral("Image size in pixels (default 1200x750)."), QStringLiteral("WxH"),
                                      QStringLiteral("1200x750"));
  const QCommandLineOption allOption(
      QStringLiteral("all"),
      QStringLiteral("Render every figure spec (*.json with \"kind\") in this directory next to it."),
      QStringLiteral("dir"));
  parser.addOptions({sizeOption, allOption});
  parser.addPositionalArgument(QStringLiteral("figure"), QStringLiteral("The figure spec (JSON)."),
                               QStringLiteral("[FIGURE.json"));
  parser.addPositionalArgument(QStringLiteral("out"), QStringLiteral("The PNG to write."), QStringLiteral("OUT.png]"));
  if (!parser.parse(QCoreApplication::arguments())) {
    printError(parser.errorText());
    return 2;
  }
  if (parser.isSet(QStringLiteral("help"))) parser.showHelp(0);
  if (parser.isSet(QStringLiteral("version"))) parser.showVersion();

  static const QRegularExpression kSize(QStringLiteral("^(\\d{3,5})x(\\d{3,5})$"));
  const QRegularExpressionMatch m = kSize.match(parser.value(sizeOption));
  const QSize size = m.hasMatch() ? QSize(m.captured(1).toInt(), m.captured(2).toInt()) : QSize();
  if (!m.hasMatch() || size.width() < 200 || size.height() < 150 || size.width() > 16000 || size.height() > 16000) {
    printError(QStringLiteral("--size: expected WIDTHxHEIGHT between 200x150 and 16000x16000, found \"%1\"")
                   .arg(parser.value(sizeOption)));
    return 2;
  }

  const QStringList args = parser.positionalArguments();
  if (parser.isSet(allOption)) {
    if (!args.isEmpty()) {
      printError(
          QStringLiteral("--all takes no FIGURE.json or OUT.png; found \"%1\"").arg(args.join(QLatin1Char(' '))));
      return 2;
    }
    return renderDirectory(parser.value(allOption), size);
  }
  if (args.size() != 2) {
    printError(QStringLiteral("expected FIGURE.json OUT.png (or --all DIR), found %1 argument(s); see --help")
                   .arg(args.size()));
    return 2;
  }
  return renderFile(args[0], args[1], size) ? 0 : 1;
}
