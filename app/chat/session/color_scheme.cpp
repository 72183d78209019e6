#include "color_scheme.h"

#include <QGuiApplication>
#include <QProcess>
#include <QStandardPaths>

namespace zipmoe::app {

bool systemPrefersDark() {
  const QByteArray forced = qgetenv("ZIPMOE_COLOR_SCHEME").trimmed().toLower();
  if (forced == "dark") return true;
  if (forced == "light") return false;
  // A platform theme that already gives a dark palette (KDE, a Qt platform theme plugin).
  if (QGuiApplication::palette().color(QPalette::Window).lightness() < 128) return true;
  const QByteArray gtkTheme = qgetenv("GTK_THEME").toLower();
  if (gtkTheme.endsWith(":dark") || gtkTheme.endsWith("-dark")) return true;
  const QString gsettings = QStandardPaths::findExecutable(QStringLiteral("gsettings"));
  if (!gsettings.isEmpty() && !qEnvironmentVariableIsEmpty("DBUS_SESSION_BUS_ADDRESS")) {
    QProcess p;
    p.start(gsettings, {QStringLiteral("get"), QStringLiteral("org.gnome.desktop.interface"), QStringLiteral("color-scheme")});
    if (p.waitForFinished(1500) && p.exitCode() == 0) return p.readAllStandardOutput().contains("prefer-dark");
  }
  return false;
}

QPalette darkPalette() {
  QPalette p;
  const QColor window(0x20, 0x23, 0x28), base(0x17, 0x19, 0x1d), text(0xe6, 0xe8, 0xeb), button(0x2b, 0x2f, 0x36);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, QColor(0x1e, 0x21, 0x26));
  p.setColor(QPalette::ToolTipBase, QColor(0x30, 0x34, 0x3b));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, QColor(0x8b, 0x93, 0x9e));
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, button);
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x6b));
  p.setColor(QPalette::Light, QColor(0x3a, 0x3f, 0x47));
  p.setColor(QPalette::Midlight, QColor(0x33, 0x37, 0x3e));
  p.setColor(QPalette::Mid, QColor(0x4a, 0x50, 0x59));
  p.setColor(QPalette::Dark, QColor(0x12, 0x14, 0x17));
  p.setColor(QPalette::Shadow, QColor(0, 0, 0));
  p.setColor(QPalette::Highlight, QColor(0x3b, 0x82, 0xf6));
  p.setColor(QPalette::HighlightedText, QColor(0xff, 0xff, 0xff));
  p.setColor(QPalette::Link, QColor(0x7c, 0xb4, 0xff));
  p.setColor(QPalette::LinkVisited, QColor(0xb4, 0x9c, 0xff));
  for (QPalette::ColorRole role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, QColor(0x7a, 0x80, 0x88));
  return p;
}

bool applyColorScheme(bool dark) {
  static const QPalette original = QGuiApplication::palette();  // the platform's, before any change
  const bool platformDark = original.color(QPalette::Window).lightness() < 128;
  QGuiApplication::setPalette(dark && !platformDark ? darkPalette() : original);
  return dark;
}

}  // namespace zipmoe::app
