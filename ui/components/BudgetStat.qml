// BudgetStat — one figure of the memory-budget page: a caption, the value, an optional detail line.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ColumnLayout {
    id: stat

    required property string caption
    required property string value
    property string detail: ""

    spacing: 2

    Label {
        text: stat.caption
        opacity: 0.7
        font.pixelSize: 12
    }

    Label {
        text: stat.value
        font.pixelSize: 17
        font.bold: true
    }

    Label {
        visible: text !== ""
        text: stat.detail
        opacity: 0.7
        font.pixelSize: 11
    }
}
