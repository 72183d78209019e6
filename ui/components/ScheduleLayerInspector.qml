// ScheduleLayerInspector — one MoE layer of one token, the schedule the scheduler predicted above
// the one the runtime measured, on one time scale: a row per lane, the operations on the critical
// path outlined, each lane's idle time beside it; under them the token's summary (stall, I/O busy,
// decompression busy, recovery, compute, dense; expert layers predicted vs measured). Its buttons
// inspect the newest layer or the token/layer chosen in the page's toolbar, and export the chart's
// visible range as Chrome-trace JSON. Data: App.inspector (ScheduleInspector).
pragma ComponentBehavior: Bound

import QtQuick
import QtQuick.Controls
import QtQuick.Dialogs
import QtQuick.Layouts
import ZipMoE.Chat

ColumnLayout {
    id: root

    required property ScheduleInspector inspector
    required property int chosenToken
    required property int chosenLayer      // -1: the token's last layer
    required property real viewStartNs
    required property real viewEndNs
    property string exportMessage: ""
    readonly property real scaleNs: Math.max(1, root.inspector.predictedMakespanNs, root.inspector.measuredMakespanNs)
    readonly property int laneCount: root.inspector.laneNames.length
    readonly property real rowHeight: 14
    readonly property real labelWidth: Style.laneLabelWidth
    readonly property real idleWidth: 150

    function ms(ns: real): string {
        return qsTr("%1 ms").arg(Number(ns / 1e6).toLocaleString(Qt.locale(), "f", ns < 1e7 ? 2 : 1));
    }
    function inspectChosen() {
        if (root.chosenLayer < 0) {
            for (let layer = 255; layer >= 0; --layer) {
                if (root.inspector.inspect(root.chosenToken, layer))
                    return;
            }
            return;
        }
        root.inspector.inspect(root.chosenToken, root.chosenLayer);
    }

    spacing: Style.rowSpacing

    // The heading on its own line (it wraps in a narrow window), its actions below it.
    Label {
        objectName: "inspectorTitle"
        Layout.fillWidth: true
        font.bold: true
        wrapMode: Text.Wrap
        text: root.inspector.valid ? qsTr("Layer %1 of token %2: predicted %3, measured %4").arg(root.inspector.layer).arg(root.inspector.token).arg(root.ms(root.inspector.predictedMakespanNs)).arg(root.ms(root.inspector.measuredMakespanNs)) : qsTr("Predicted vs measured schedule of one layer")
    }

    Flow {
        Layout.fillWidth: true
        spacing: Style.itemSpacing

        Button {
            objectName: "inspectLatestButton"
            text: qsTr("Newest layer")
            onClicked: root.inspector.inspectLatest()
        }
        Button {
            objectName: "inspectChosenButton"
            text: qsTr("Inspect token/layer")
            onClicked: root.inspectChosen()
        }
        Button {
            objectName: "exportTraceButton"
            text: qsTr("Export visible range…")
            enabled: root.viewEndNs > root.viewStartNs
            onClicked: exportDialog.open()
        }
    }

    Label {
        objectName: "inspectorMessage"
        Layout.fillWidth: true
        visible: text !== ""
        wrapMode: Text.Wrap
        text: root.exportMessage !== "" ? root.exportMessage : root.inspector.error
        color: root.exportMessage !== "" ? root.palette.text : Style.error
    }

    component Gantt: RowLayout {
        id: gantt

        required property string caption
        required property var ops
        required property string idleKey

        Layout.fillWidth: true
        spacing: 0

        Column {
            Layout.preferredWidth: root.labelWidth
            Label {
                width: root.labelWidth - 8
                height: 18
                horizontalAlignment: Text.AlignRight
                font.bold: true
                text: gantt.caption
            }
            Repeater {
                model: root.inspector.laneNames
                delegate: Label {
                    required property string modelData
                    width: root.labelWidth - 8
                    height: root.rowHeight + 2
                    horizontalAlignment: Text.AlignRight
                    verticalAlignment: Text.AlignVCenter
                    font.pixelSize: Style.captionSize
                    elide: Text.ElideRight
                    text: modelData
                }
            }
        }
        Item {
            id: lanesArea

            Layout.fillWidth: true
            Layout.preferredHeight: 18 + root.laneCount * (root.rowHeight + 2)

            Rectangle {
                y: 18
                width: parent.width
                height: parent.height - 18
                color: root.palette.base
                border.color: root.palette.mid
            }
            Repeater {
                model: gantt.ops
                delegate: Rectangle {
                    required property var modelData
                    x: modelData.startNs / root.scaleNs * lanesArea.width
                    y: 18 + modelData.lane * (root.rowHeight + 2) + 1
                    width: Math.max(1, (modelData.endNs - modelData.startNs) / root.scaleNs * lanesArea.width)
                    height: root.rowHeight
                    color: modelData.color
                    border.width: modelData.critical ? 2 : 0
                    border.color: root.palette.windowText
                }
            }
        }
        Column {
            Layout.preferredWidth: root.idleWidth
            Label {
                x: 8
                height: 18
                font.bold: true
                text: qsTr("idle")
            }
            Repeater {
                model: root.inspector.laneIdle
                delegate: Label {
                    required property var modelData
                    x: 8
                    height: root.rowHeight + 2
                    verticalAlignment: Text.AlignVCenter
                    font.pixelSize: Style.captionSize
                    text: modelData[gantt.idleKey] < 0 ? qsTr("–") : root.ms(modelData[gantt.idleKey])
                }
            }
        }
    }

    Gantt {
        objectName: "predictedGantt"
        visible: root.inspector.valid
        caption: qsTr("Predicted")
        ops: root.inspector.predictedOps
        idleKey: "predictedIdleNs"
    }
    Gantt {
        objectName: "measuredGantt"
        visible: root.inspector.valid
        caption: qsTr("Measured")
        ops: root.inspector.measuredOps
        idleKey: "measuredIdleNs"
    }

    Label {
        objectName: "tokenSummary"
        Layout.fillWidth: true
        Layout.leftMargin: root.labelWidth
        visible: root.inspector.valid
        wrapMode: Text.Wrap
        font.pixelSize: Style.captionSize
        readonly property var s: root.inspector.tokenSummary
        text: root.inspector.valid ? qsTr("Token %1 (%2 layers): stall %3 · I/O busy %4 · decompression busy %5 · recovery %6 · expert compute %7 · dense %8 · expert layers predicted %9, measured %10").arg(s.token).arg(s.layers).arg(root.ms(s.stallNs)).arg(root.ms(s.ioBusyNs)).arg(root.ms(s.decompressBusyNs)).arg(root.ms(s.recoveryBusyNs)).arg(root.ms(s.computeNs)).arg(root.ms(s.denseNs)).arg(s.predictedExpertNs < 0 ? qsTr("–") : root.ms(s.predictedExpertNs)).arg(root.ms(s.measuredExpertNs)) : ""
    }
    Label {
        Layout.fillWidth: true
        Layout.leftMargin: root.labelWidth
        visible: root.inspector.valid
        opacity: Style.captionOpacity
        font.pixelSize: Style.captionSize
        wrapMode: Text.Wrap
        text: qsTr("Outlined: the critical path (each operation waited for the one before it on its lane or in its tensor's DAG).")
    }

    FileDialog {
        id: exportDialog

        title: qsTr("Export the visible range as Chrome trace")
        fileMode: FileDialog.SaveFile
        defaultSuffix: "json"
        nameFilters: [qsTr("Chrome trace (*.json)")]
        onAccepted: {
            const n = root.inspector.exportChromeTrace(selectedFile, root.viewStartNs, root.viewEndNs);
            root.exportMessage = n >= 0 ? qsTr("Wrote %n event(s); open the file in ui.perfetto.dev or chrome://tracing.", "", n) : "";
        }
    }
}
