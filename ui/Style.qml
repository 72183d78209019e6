pragma Singleton
import QtQuick
import ZipMoE.Chat

// The app's one visual scale (docs/APP.md, "Style and dark mode"): every page and component takes
// its margins, gaps, type sizes, control sizes and the few colours that are not the palette's from
// here, so the four pages look like one app. The palette itself (light or dark, following the
// system) is Qt Quick Controls'; `dark` picks the variant of the colours below. A QML singleton of
// the ZipMoE.Chat module: `Style.pageMargin` from any file that imports ZipMoE.Chat.
QtObject {
    readonly property bool dark: App.darkMode

    // Spacing: page margins, gaps between groups, gaps inside a group, tight rows (a label over its
    // hint), and the padding of banners and bars.
    readonly property int pageMargin: 20
    readonly property int pageMarginNarrow: 16      // below narrowWidth
    readonly property int narrowWidth: 1000
    // The margin of a page (or of a banner above it) that is `width` wide.
    function marginFor(width: real): int {
        return width < narrowWidth ? pageMarginNarrow : pageMargin;
    }
    readonly property int groupSpacing: 16
    readonly property int itemSpacing: 10
    readonly property int rowSpacing: 6
    readonly property int tightSpacing: 4
    readonly property int barPadding: 8
    readonly property int statSpacing: 28           // between figures in a row of BudgetStats
    readonly property int maxContentWidth: 980      // forms do not stretch across a wide window
    readonly property int sidebarWidth: 250         // the chat list
    readonly property int sidebarWidthNarrow: 200

    // Typography: the page title of an empty state, group subheadings (bold, body size), body at the
    // platform size, captions (hints, notes) and chart labels.
    readonly property int brandSize: 16             // the app's name in the model bar
    readonly property int titleSize: 20
    readonly property int figureSize: 17
    readonly property int captionSize: 12
    readonly property int chartLabelSize: 11
    readonly property real captionOpacity: 0.75

    // Controls: the width of a label column in label/value rows, of a value field, of a combo box.
    readonly property int labelWidth: 170
    readonly property int valueWidth: 160
    readonly property int fieldWidth: 76            // a number beside a slider
    readonly property int comboWidth: 200
    readonly property int laneLabelWidth: 110       // lane names beside the Gantt charts
    readonly property int iconButtonSize: 28        // a small flat button, and a label level with it
    readonly property int busySize: 24
    readonly property int radius: 8                 // message bubbles

    // Colours that are not the palette's, each with its dark variant. Red only for errors.
    readonly property color error: dark ? "#f87171" : "#dc2626"
    readonly property color errorBackground: dark ? "#4c1d1d" : "#fee2e2"
    readonly property color warning: dark ? "#fbbf24" : "#b45309"
    readonly property color warningBackground: dark ? "#4a3a0a" : "#fef3c7"
    readonly property color infoBackground: dark ? "#0c3a52" : "#e0f2fe"
    readonly property color userBubble: dark ? "#1e3a5f" : "#e0ecff"
}
