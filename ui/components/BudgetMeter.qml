// BudgetMeter — a thin occupancy bar: `fraction` (clamped to 0..1) of the track filled with `fill`.
import QtQuick

Rectangle {
    id: meter

    property real fraction: 0
    property color fill: meter.palette.highlight

    implicitWidth: 80
    implicitHeight: 8
    radius: 4
    color: meter.palette.alternateBase
    border.color: meter.palette.midlight

    Rectangle {
        width: Math.min(1, Math.max(0, meter.fraction)) * meter.width
        height: meter.height
        radius: meter.radius
        color: meter.fill

        Behavior on width {
            NumberAnimation {
                duration: 180
            }
        }
    }
}
