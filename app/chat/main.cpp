// zipmoe-chat — the Qt Quick chat app. It opens the last model used (the built-in demo model on
// first start, converted to a store in the user's data directory), keeps chats in SQLite, and shows
// the expert runtime live (memory budget, schedule). Scripted modes for tests and packaging checks:
// --smoke-test exits 0 once the model is ready (1 if it fails); --send TEXT sends a message once
// the model is ready; --quit-after-reply exits when that reply ends.
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QGuiApplication>
#include <QQmlApplicationEngine>
#include <QQuickStyle>
#include <QStandardPaths>
#include <QTimer>
#include <QtQml/qqmlextensionplugin.h>

#include <cstdio>
#include <memory>

#include "chat_controller.h"
#include "chat_database.h"

Q_IMPORT_QML_PLUGIN(ZipMoE_ChatPlugin)

namespace {

// Installed: <prefix>/bin/zipmoe-chat and <prefix>/share/zipmoe/demo-model. Built: the source tree's.
QString demoModelDir() {
  const QString installed = QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("../share/zipmoe/demo-model"));
  if (QFileInfo::exists(installed + QStringLiteral("/config.json"))) return QDir::cleanPath(installed);
  return QStringLiteral(ZIPMOE_DEMO_MODEL_DIR);
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
  parser.addOptions({modelOption, databaseOption, dataOption, languageOption, smokeOption, sendOption, quitOption});
  parser.process(app);

  QQuickStyle::setStyle(QStringLiteral("Fusion"));
  const QString dataDir = parser.isSet(dataOption)
                              ? parser.value(dataOption)
                              : QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
  QDir().mkpath(dataDir);

  zipmoe::app::ControllerOptions options;
  try {
    options.databasePath = parser.isSet(databaseOption) ? parser.value(databaseOption)
                                                        : zipmoe::app::ChatDatabase::defaultPath();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zipmoe-chat: %s\n", e.what());
  }
  options.storesDir = QDir(dataDir).filePath(QStringLiteral("stores"));
  options.demoModelDir = demoModelDir();
  auto controller = std::make_unique<zipmoe::app::ChatController>(options);
  zipmoe::app::ChatController::setInstance(controller.get());
  if (!controller->databaseError().isEmpty())
    std::fprintf(stderr, "zipmoe-chat: chats are not saved: %s\n", qPrintable(controller->databaseError()));
  if (parser.isSet(languageOption)) controller->setLanguage(parser.value(languageOption));

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

    QString model = parser.value(modelOption);
    if (model.isEmpty() && c->database()) model = c->database()->setting(QStringLiteral("lastModel")).toString();
    if (!model.isEmpty() && !QFileInfo::exists(model)) model.clear();  // moved away: the demo again
    c->openModel(model);
    exitCode = QGuiApplication::exec();
  }
  controller.reset();  // joins the engine thread before the application object goes
  return exitCode;
}
