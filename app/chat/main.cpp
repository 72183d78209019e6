// zipmoe-chat — the Qt Quick chat app. It opens the last model used (the built-in demo model on
// first start, converted to a store in the user's data directory), keeps chats in SQLite, and shows
// the expert runtime live (memory budget, schedule). Scripted modes for tests and packaging checks:
// --smoke-test exits 0 once the model is ready (1 if it fails); --send TEXT sends a message once
// the model is ready; --quit-after-reply exits when that reply ends. Every option is checked before
// the window opens: a --model that is missing or is neither an HF MoE directory nor a store is an
// error (exit 1), never a silent fallback to the demo model.
#include <QCommandLineParser>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGuiApplication>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>
#include <QQmlApplicationEngine>
#include <QQuickStyle>
#include <QStandardPaths>
#include <QTimer>
#include <QtQml/qqmlextensionplugin.h>

#include <cstdio>
#include <memory>

#include "chat_controller.h"
#include "chat_database.h"
#include "color_scheme.h"
#include "zipmoe/hf/model_family.h"
#include "zipmoe/generation/reply.h"

Q_IMPORT_QML_PLUGIN(ZipMoE_ChatPlugin)

namespace {

// Installed: <prefix>/bin/zipmoe-chat and <prefix>/share/zipmoe/demo-model. Built: the source tree's.
QString demoModelDir() {
  const QString installed = QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("../share/zipmoe/demo-model"));
  if (QFileInfo::exists(installed + QStringLiteral("/config.json"))) return QDir::cleanPath(installed);
  return QStringLiteral(ZIPMOE_DEMO_MODEL_DIR);
}

// Why `dir` cannot be opened as a model, or an empty string. Cheap checks of the files only (no
// model is loaded): a ZipMoE store has manifest.json; an HF MoE directory has config.json naming a
// supported family and its *.safetensors weights.
QString modelDirProblem(const QString& dir) {
  const QFileInfo info(dir);
  if (!info.exists()) return QStringLiteral("--model %1: not found").arg(dir);
  if (!info.isDir()) return QStringLiteral("--model %1: not a directory (give an HF model directory or a ZipMoE store)").arg(dir);
  const QDir d(dir);
  if (d.exists(QStringLiteral("manifest.json"))) return {};
  if (!d.exists(QStringLiteral("config.json")))
    return QStringLiteral("--model %1: not an HF MoE directory (no config.json) nor a ZipMoE store (no manifest.json)").arg(dir);
  if (d.entryList({QStringLiteral("*.safetensors")}, QDir::Files).isEmpty())
    return QStringLiteral("--model %1: not an HF MoE directory: config.json but no *.safetensors weights").arg(dir);
  QFile config(d.filePath(QStringLiteral("config.json")));
  if (!config.open(QIODevice::ReadOnly)) return QStringLiteral("--model %1: cannot read config.json").arg(dir);
  QJsonParseError error{};
  const QJsonDocument doc = QJsonDocument::fromJson(config.readAll(), &error);
  if (!doc.isObject())
    return QStringLiteral("--model %1: config.json is not a JSON object (%2)").arg(dir, error.errorString());
  const QString type = doc.object().value(QStringLiteral("model_type")).toString();
  if (!zipmoe::familyFromName(type.toStdString()))
    return QStringLiteral("--model %1: not an HF MoE directory: config.json's model_type '%2' is not a supported family (%3)")
        .arg(dir, type, QString::fromStdString(zipmoe::supportedFamilyList()));
  return {};
}

// Checks every option before anything is shown or opened; an empty string when all are good.
QString commandLineProblem(const QCommandLineParser& parser, const QCommandLineOption& model, const QCommandLineOption& database,
                           const QCommandLineOption& data, const QCommandLineOption& language, const QCommandLineOption& send,
                           const QCommandLineOption& quit, const QCommandLineOption& hold,
                           const QCommandLineOption& overflow) {
  if (!parser.positionalArguments().isEmpty())
    return QStringLiteral("unexpected argument '%1' (options: --help)").arg(parser.positionalArguments().first());
  for (const auto* option : {&model, &database, &data, &language, &send, &overflow})
    if (parser.values(*option).size() > 1)
      return QStringLiteral("--%1 is given more than once").arg(option->names().first());
  if (parser.isSet(model))
    if (QString problem = modelDirProblem(parser.value(model)); !problem.isEmpty()) return problem;
  if (parser.isSet(language)) {
    const QString code = parser.value(language);
    if (code != QStringLiteral("en") && code != QStringLiteral("zh_CN"))
      return QStringLiteral("--language '%1': the languages are en and zh_CN").arg(code);
  }
  if (parser.isSet(database)) {
    const QFileInfo file(parser.value(database));
    if (file.isDir()) return QStringLiteral("--database %1: is a directory; give a file").arg(parser.value(database));
    if (!file.absoluteDir().exists())
      return QStringLiteral("--database %1: its folder %2 does not exist").arg(parser.value(database), file.absolutePath());
  }
  if (parser.isSet(data) && QFileInfo(parser.value(data)).exists() && !QFileInfo(parser.value(data)).isDir())
    return QStringLiteral("--data-dir %1: is not a directory").arg(parser.value(data));
  if (parser.isSet(send) && parser.value(send).trimmed().isEmpty()) return QStringLiteral("--send: the message is empty");
  if (parser.isSet(quit) && !parser.isSet(send)) return QStringLiteral("--quit-after-reply needs --send TEXT");
  if (parser.isSet(overflow) && parser.value(overflow) != QStringLiteral("drop-oldest") &&
      parser.value(overflow) != QStringLiteral("error"))
    return QStringLiteral("--context-overflow '%1': the policies are drop-oldest and error").arg(parser.value(overflow));
  if (parser.isSet(hold) && !parser.isSet(send)) return QStringLiteral("--hold-after-first-commit needs --send TEXT");
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  QGuiApplication app(argc, argv);
  QGuiApplication::setOrganizationName(QStringLiteral("ZipMoE"));
  QGuiApplication::setApplicationName(QStringLiteral("zipmoe-chat"));
  QGuiApplication::setApplicationDisplayName(QStringLiteral("ZipMoE"));
  QGuiApplication::setApplicationVersion(QStringLiteral(ZIPMOE_APP_VERSION));
  QGuiApplication::setDesktopFileName(QStringLiteral("io.github.zipmoe.ZipMoE"));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("ZipMoE chat: Mixture-of-Experts models under a memory budget, losslessly."));
  parser.addHelpOption();
  parser.addVersionOption();
  const QCommandLineOption modelOption(QStringLiteral("model"), QStringLiteral("Open this HF directory or ZipMoE store."), QStringLiteral("path"));
  const QCommandLineOption databaseOption(QStringLiteral("database"), QStringLiteral("Use this SQLite file for chats and statistics."), QStringLiteral("file"));
  const QCommandLineOption dataOption(QStringLiteral("data-dir"), QStringLiteral("Keep converted stores here."), QStringLiteral("dir"));
  const QCommandLineOption languageOption(QStringLiteral("language"), QStringLiteral("User interface language: en or zh_CN."), QStringLiteral("code"));
  const QCommandLineOption smokeOption(QStringLiteral("smoke-test"), QStringLiteral("Exit 0 once the model is ready, 1 if it fails."));
  const QCommandLineOption sendOption(QStringLiteral("send"), QStringLiteral("Send this message once the model is ready."), QStringLiteral("text"));
  const QCommandLineOption quitOption(QStringLiteral("quit-after-reply"), QStringLiteral("Exit when the reply to --send ends."));
  const QCommandLineOption holdOption(
      QStringLiteral("hold-after-first-commit"),
      QStringLiteral("With --send: hold the reply once part of it is committed to the database and print "
                     "\"committed N characters\" on stdout (for tests that kill the app mid-reply)."));
  const QCommandLineOption overflowOption(
      QStringLiteral("context-overflow"),
      QStringLiteral("A conversation longer than the model's context: leave out its oldest turns (drop-oldest, the "
                     "default) or refuse the reply (error)."),
      QStringLiteral("policy"));
  parser.addOptions(
      {modelOption, databaseOption, dataOption, languageOption, smokeOption, sendOption, quitOption, holdOption, overflowOption});
  parser.process(app);
  if (const QString problem = commandLineProblem(parser, modelOption, databaseOption, dataOption, languageOption, sendOption,
                                                 quitOption, holdOption, overflowOption);
      !problem.isEmpty()) {
    std::fprintf(stderr, "zipmoe-chat: error: %s\n", qPrintable(problem));
    return 1;
  }

  QQuickStyle::setStyle(QStringLiteral("Fusion"));
  const QString dataDir = parser.isSet(dataOption)
                              ? parser.value(dataOption)
                              : QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
  if (!QDir().mkpath(dataDir)) {
    std::fprintf(stderr, "zipmoe-chat: error: cannot create the data directory %s\n", qPrintable(dataDir));
    return 1;
  }

  zipmoe::app::ControllerOptions options;
  try {
    options.databasePath = parser.isSet(databaseOption) ? parser.value(databaseOption)
                                                        : zipmoe::app::ChatDatabase::defaultPath();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zipmoe-chat: %s\n", e.what());
  }
  options.storesDir = QDir(dataDir).filePath(QStringLiteral("stores"));
  options.demoModelDir = demoModelDir();
  if (parser.isSet(overflowOption)) options.contextOverflow = zipmoe::parseContextOverflow(parser.value(overflowOption).toStdString());
  auto controller = std::make_unique<zipmoe::app::ChatController>(options);
  zipmoe::app::ChatController::setInstance(controller.get());
  if (!controller->databaseError().isEmpty())
    std::fprintf(stderr, "zipmoe-chat: chats are not saved: %s\n", qPrintable(controller->databaseError()));
  if (parser.isSet(languageOption)) controller->setLanguage(parser.value(languageOption));
  controller->setDarkMode(zipmoe::app::systemPrefersDark());

  int exitCode = 0;
  {
    QQmlApplicationEngine engine;
    controller->setQmlEngine(&engine);
    engine.addImportPath(QStringLiteral("qrc:/"));  // the ZipMoE.Chat module lives in the resources
    engine.load(QUrl(QStringLiteral("qrc:/ZipMoE/Chat/Main.qml")));
    if (engine.rootObjects().isEmpty()) {
      std::fprintf(stderr, "zipmoe-chat: the user interface failed to load\n");
      return 1;
    }

    auto* c = controller.get();
    const bool smoke = parser.isSet(smokeOption);
    const QString toSend = parser.value(sendOption);
    const bool quitAfterReply = parser.isSet(quitOption);
    QObject::connect(c, &zipmoe::app::ChatController::modelChanged, &app, [c, smoke, toSend, quitAfterReply] {
      if (c->modelState() == QStringLiteral("failed")) {
        std::fprintf(stderr, "zipmoe-chat: the model did not open: %s\n", qPrintable(c->modelError()));
        if (smoke || quitAfterReply) QCoreApplication::exit(1);
      } else if (c->modelState() == QStringLiteral("ready")) {
        std::fprintf(stderr, "zipmoe-chat: model ready: %s\n", qPrintable(c->modelInfo().value(QStringLiteral("name")).toString()));
        if (smoke) QTimer::singleShot(200, qApp, [] { QCoreApplication::exit(0); });
        static bool sent = false;
        if (!toSend.isEmpty() && !sent) {
          sent = true;
          c->newChat();
          if (!c->send(toSend) && quitAfterReply) QCoreApplication::exit(1);
        }
      }
    });
    if (quitAfterReply)
      QObject::connect(c, &zipmoe::app::ChatController::replyFinished, &app, [] { QCoreApplication::exit(0); });
    if (parser.isSet(holdOption))
      QObject::connect(c, &zipmoe::app::ChatController::streamCommitted, &app, [c](qint64, int characters) {
        static bool held = false;
        if (held) return;
        held = true;
        c->setGenerationPaused(true);
        std::printf("committed %d characters\n", characters);
        std::fflush(stdout);
      });

    QString model = parser.value(modelOption);  // checked above: an HF MoE directory or a store
    if (model.isEmpty() && c->database()) {
      try {
        model = c->database()->setting(QStringLiteral("lastModel")).toString();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "zipmoe-chat: cannot read the last model from the database: %s\n", e.what());
      }
      if (!model.isEmpty() && !QFileInfo::exists(model)) model.clear();  // the last model moved away: the demo again
    }
    c->openModel(model);
    exitCode = QGuiApplication::exec();
  }
  controller.reset();  // joins the engine thread before the application object goes
  return exitCode;
}
