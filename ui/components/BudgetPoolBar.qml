// BudgetPoolBar — the pool split the planner chose, as one stacked horizontal bar (the F, C, S and
// E shares of the pool budget) with a legend. Pure view: it reads `pools` and never writes.
pragma ComponentBehavior: Bound

import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

ColumnLayout {
    id: root

    // App.runtime.pools: four maps {key, enabled, ratio, capacityBytes, usedBytes, ...}, F C S E.
    required property var pools
    required property var colors // key → colour
    required property var names // key → description

    readonly property real total: {
        let t = 0;
        const list = root.pools ?? [];
        for (let i = 0; i < list.length; ++i)
            t += Math.max(0, Number(list[i].ratio) || 0);
        return t;
    }

    function poolAt(i: int): var {
        const list = root.pools ?? [];
        return i < list.length ? list[i] : ({ "key": "", "enabled": false, "ratio": 0 });
    }

    spacing: Style.itemSpacing

    Rectangle {
        id: track

        objectName: "budgetPoolTrack"
        Layout.fillWidth: true
        implicitHeight: 26
        radius: 4
        color: root.palette.alternateBase
        border.color: root.palette.mid

        Row {
            x: 1
            y: 1
            width: track.width - 2
            height: track.height - 2

            Repeater {
                model: 4

                delegate: Rectangle {
                    id: segment

                    required property int index
                    readonly property var pool: root.poolAt(index)
                    readonly property real share: root.total > 0 ? Math.max(0, Number(pool.ratio) || 0) / root.total : 0

                    width: share * (track.width - 2)
                    height: track.height - 2
                    color: root.colors[pool.key] ?? "transparent"

                    Behavior on width {
                        NumberAnimation {
                            duration: 180
                            easing.type: Easing.OutCubic
                        }
                    }

                    Label {
                        anchors.centerIn: parent
                        visible: segment.width > implicitWidth + 8
                        text: qsTr("%1 %2 %").arg(segment.pool.key).arg(Math.round(segment.share * 100))
                        color: "white"
                        font.bold: true
                        font.pixelSize: Style.chartLabelSize
                    }

                    HoverHandler {
                        id: hover
                    }

                    ToolTip.visible: hover.hovered
                    ToolTip.delay: 300
                    ToolTip.text: qsTr("%1 — %2: %3 % of the pool budget").arg(pool.key).arg(root.names[pool.key] ?? "").arg((share * 100).toFixed(1))
                }
            }
        }

        Label {
            anchors.centerIn: parent
            visible: root.total <= 0
            text: qsTr("No plan yet")
            opacity: Style.captionOpacity
        }
    }

    Flow {
        Layout.fillWidth: true
        spacing: Style.groupSpacing

        Repeater {
            model: 4

            delegate: Row {
                id: entry

                required property int index
                readonly property var pool: root.poolAt(index)

                spacing: Style.rowSpacing
                opacity: pool.enabled ? 1 : 0.45

                Rectangle {
                    anchors.verticalCenter: parent.verticalCenter
                    width: 12
                    height: 12
                    radius: 3
                    color: root.colors[entry.pool.key] ?? "transparent"
                }

                Label {
                    anchors.verticalCenter: parent.verticalCenter
                    text: entry.pool.enabled ? qsTr("<b>%1</b> = %2").arg(entry.pool.key).arg(root.names[entry.pool.key] ?? "") : qsTr("<b>%1</b> = %2 (off)").arg(entry.pool.key).arg(root.names[entry.pool.key] ?? "")
                    textFormat: Text.StyledText
                }
            }
        }
    }
}
