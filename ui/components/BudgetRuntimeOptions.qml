// BudgetRuntimeOptions — the runtime's pool subset (F, C, S, E check boxes bound to the bits of
// App.runtime.poolMask; the last enabled pool cannot be switched off) and its decompression thread
// count (App.decompressWorkers: a change reopens the runtime, so it is applied once the user stops
// clicking, and the engine's worker runs it after the reply in progress).
pragma ComponentBehavior: Bound

import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

GridLayout {
    id: root

    required property var names // pool key → description

    columns: 2
    columnSpacing: 16
    rowSpacing: 8

    Label {
        Layout.alignment: Qt.AlignLeft | Qt.AlignTop
        Layout.topMargin: Style.tightSpacing
        text: qsTr("Enabled pools")
    }
    Flow {
        Layout.fillWidth: true
        spacing: Style.itemSpacing

        Repeater {
            model: ["F", "C", "S", "E"]

            delegate: CheckBox {
                id: poolBox

                required property string modelData
                required property int index
                readonly property int bit: 1 << index
                // Never let the last enabled pool be switched off.
                readonly property bool last: (App.runtime.poolMask & ~bit & 0xF) === 0

                objectName: "pool" + modelData
                text: qsTr("%1 — %2").arg(modelData).arg(root.names[modelData])
                checked: (App.runtime.poolMask & bit) !== 0
                enabled: !(checked && last)
                ToolTip.visible: hovered && !enabled
                ToolTip.text: qsTr("At least one pool must stay enabled.")
                onToggled: {
                    const mask = checked ? (App.runtime.poolMask | bit) : (App.runtime.poolMask & ~bit);
                    if ((mask & 0xF) !== 0)
                        App.runtime.setPools(mask & 0xF);
                    // Follow the runtime again, whether it took the mask or not.
                    checked = Qt.binding(() => (App.runtime.poolMask & poolBox.bit) !== 0);
                }
            }
        }
    }

    Label {
        text: qsTr("Decompression threads")
    }
    RowLayout {
        spacing: Style.itemSpacing

        SpinBox {
            id: workersSpin

            objectName: "workersSpin"
            from: 1
            to: Math.max(1, App.cpuCores)
            editable: true
            value: Math.max(1, App.decompressWorkers > 0 ? App.decompressWorkers : App.runtime.workers)
            // Each change reopens the runtime: apply once the user stops clicking.
            onValueModified: applyWorkers.restart()

            Timer {
                id: applyWorkers

                interval: 900
                onTriggered: App.decompressWorkers = workersSpin.value
            }
        }
        Label {
            Layout.fillWidth: true
            wrapMode: Text.Wrap
            opacity: Style.captionOpacity
            text: qsTr("Applies after the current reply: the runtime reopens with the new thread count (running with %1 now).").arg(App.runtime.workers)
            font.italic: App.generating
        }
    }
}
