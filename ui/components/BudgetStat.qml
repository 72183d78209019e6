// BudgetStat — one figure of the memory-budget page: a caption, the value, an optional detail line.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

ColumnLayout {
    id: stat

    required property string caption
    required property string value
    property string detail: ""

    spacing: 2

    Label {
        text: stat.caption
        opacity: Style.captionOpacity
        font.pixelSize: Style.captionSize
    }

    Label {
        text: stat.value
        font.pixelSize: Style.figureSize
        font.bold: true
    }

    Label {
        visible: text !== ""
        text: stat.detail
        opacity: Style.captionOpacity
        font.pixelSize: Style.captionSize
    }
}
