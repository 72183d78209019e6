// Qt Quick Test runner for the app's QML pages (tests/app/chat/qml/tst_*.qml). The setup creates the
// real controller on a temporary database, opens the demo model with the real engine, and waits
// until it is ready, so the pages are tested against live data.
#include <QDir>
#include <QElapsedTimer>
#include <QQmlEngine>
#include <QTemporaryDir>
#include <QtQml/qqmlextensionplugin.h>
#include <QtQuickTest/quicktest.h>
#include <QtTest>

#include <memory>

#include "chat_controller.h"

Q_IMPORT_QML_PLUGIN(ZipMoE_ChatPlugin)

class PagesSetup : public QObject {
  Q_OBJECT

 public Q_SLOTS:
  void applicationAvailable() {
    dir_ = std::make_unique<QTemporaryDir>();
    zipmoe::app::ControllerOptions o;
    o.databasePath = dir_->filePath(QStringLiteral("chat.sqlite"));
    o.storesDir = dir_->filePath(QStringLiteral("stores"));
    o.demoModelDir = QStringLiteral(ZIPMOE_DEMO_MODEL_DIR);
    controller_ = std::make_unique<zipmoe::app::ChatController>(o);
    zipmoe::app::ChatController::setInstance(controller_.get());
    controller_->openModel();
    QElapsedTimer t;
    t.start();
    while (controller_->modelState() == QStringLiteral("loading") && t.elapsed() < 180000)
      QTest::qWait(20);
    if (controller_->modelState() != QStringLiteral("ready"))
      qFatal("the demo model did not open: %s", qPrintable(controller_->modelError()));
  }
  void qmlEngineAvailable(QQmlEngine* engine) {
    engine->addImportPath(QStringLiteral("qrc:/"));  // the ZipMoE.Chat module lives in the resources
    controller_->setQmlEngine(engine);
  }
  void cleanupTestCase() {
    controller_.reset();
    dir_.reset();
  }

 private:
  std::unique_ptr<QTemporaryDir> dir_;
  std::unique_ptr<zipmoe::app::ChatController> controller_;
};

QUICK_TEST_MAIN_WITH_SETUP(zipmoe_chat_pages, PagesSetup)
#include "test_qml_pages.moc"
