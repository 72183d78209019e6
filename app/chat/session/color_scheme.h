// ColorScheme — light or dark, following the system: the app's palette (Fusion style) is the
// system's own when the platform theme provides a dark one, and otherwise a dark palette of ours
// when the desktop asks for dark (GNOME's and the XDG portal's "prefer-dark" color-scheme, a GTK
// theme named *:dark or *-dark); ZIPMOE_COLOR_SCHEME=light|dark overrides both. The QML pages read
// `App.darkMode` for the few colours that are not the palette's (message bubbles, chart accents).
// Thread-safety: GUI thread (it sets the application palette). Cost: systemPrefersDark() may run
// `gsettings` once (a few milliseconds); applyColorScheme sets a palette.
#pragma once

#include <QPalette>

namespace zipmoe::app {

// What the system asks for (see above).
bool systemPrefersDark();
// A dark palette for Fusion, readable at the app's text sizes (WCAG AA contrast for text).
QPalette darkPalette();
// Sets the application palette for the scheme (the platform's own when it is already dark, or for
// light) and returns whether it is dark.
bool applyColorScheme(bool dark);

}  // namespace zipmoe::app
