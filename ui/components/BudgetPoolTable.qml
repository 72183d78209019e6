// BudgetPoolTable — one row per pool (F, C, S, E): its share of the pool budget, capacity, the
// bytes in use (an occupancy bar), the experts resident in it over all layers and its hit rate
// (the fraction of all expert activations it served). Disabled pools are dimmed.
// The cells read `pools` by index: the list is replaced on every monitor tick, the cells stay.
pragma ComponentBehavior: Bound

import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

GridLayout {
    id: root

    // App.runtime.pools: four maps {key, enabled, ratio, capacityBytes, usedBytes, residentExperts,
    // hitRate}, in the order F C S E.
    required property var pools
    required property var colors // key → colour

    readonly property var keys: ["F", "C", "S", "E"]
    readonly property real ratioTotal: {
        let t = 0;
        const list = root.pools ?? [];
        for (let i = 0; i < list.length; ++i)
            t += Math.max(0, Number(list[i].ratio) || 0);
        return t;
    }

    function poolAt(i: int): var {
        const list = root.pools ?? [];
        return i < list.length ? list[i] : ({ "key": root.keys[i], "enabled": false, "ratio": 0, "capacityBytes": 0, "usedBytes": 0, "residentExperts": 0, "hitRate": 0 });
    }
    function pct(x: real): string {
        return qsTr("%1 %").arg((100 * (Number(x) || 0)).toFixed(1));
    }
    function bytes(x: real): string {
        return App.formatBytes(Number(x) || 0);
    }

    columns: 6
    columnSpacing: 18
    rowSpacing: 6

    Repeater {
        model: [qsTr("Pool"), qsTr("Share"), qsTr("Capacity"), qsTr("Used"), qsTr("Resident experts"), qsTr("Hit rate")]

        delegate: Label {
            required property string modelData
            required property int index

            Layout.fillWidth: index === 3
            horizontalAlignment: index === 0 || index === 3 ? Text.AlignLeft : Text.AlignRight
            text: modelData
            font.bold: true
            opacity: 0.8
        }
    }

    Repeater {
        model: 24 // 4 pools × 6 columns, row by row

        delegate: Item {
            id: cell

            required property int index
            readonly property int column: index % 6
            readonly property int row: Math.floor(index / 6)
            readonly property var pool: root.poolAt(row)
            readonly property Item shown: column === 0 ? keyCell : column === 3 ? usedCell : textCell

            objectName: "pool" + root.keys[row] + "Cell" + column
            Layout.fillWidth: column === 3
            Layout.alignment: (column === 0 || column === 3 ? Qt.AlignLeft : Qt.AlignRight) | Qt.AlignVCenter
            implicitWidth: shown.implicitWidth
            implicitHeight: shown.implicitHeight
            opacity: pool.enabled ? 1 : 0.45

            Row {
                id: keyCell

                visible: cell.column === 0
                anchors.verticalCenter: parent.verticalCenter
                spacing: Style.rowSpacing

                Rectangle {
                    anchors.verticalCenter: parent.verticalCenter
                    width: 12
                    height: 12
                    radius: 3
                    color: root.colors[cell.pool.key] ?? "transparent"
                }

                Label {
                    anchors.verticalCenter: parent.verticalCenter
                    text: cell.pool.enabled ? cell.pool.key : qsTr("%1 (off)").arg(cell.pool.key)
                    font.bold: true
                }
            }

            RowLayout {
                id: usedCell

                visible: cell.column === 3
                anchors.verticalCenter: parent.verticalCenter
                width: parent.width
                spacing: Style.itemSpacing

                BudgetMeter {
                    Layout.fillWidth: true
                    Layout.minimumWidth: 60
                    fraction: cell.pool.capacityBytes > 0 ? cell.pool.usedBytes / cell.pool.capacityBytes : 0
                    fill: root.colors[cell.pool.key] ?? root.palette.highlight
                }

                Label {
                    text: qsTr("%1 of %2").arg(root.bytes(cell.pool.usedBytes)).arg(root.bytes(cell.pool.capacityBytes))
                }
            }

            Label {
                id: textCell

                visible: cell.column !== 0 && cell.column !== 3
                anchors.right: parent.right
                anchors.verticalCenter: parent.verticalCenter
                text: {
                    const p = cell.pool;
                    switch (cell.column) {
                    case 1:
                        return root.ratioTotal > 0 ? root.pct(Math.max(0, Number(p.ratio) || 0) / root.ratioTotal) : "–";
                    case 2:
                        return root.bytes(p.capacityBytes);
                    case 4:
                        return Number(p.residentExperts || 0).toString();
                    case 5:
                        return root.pct(p.hitRate);
                    default:
                        return "";
                    }
                }
            }
        }
    }
}
