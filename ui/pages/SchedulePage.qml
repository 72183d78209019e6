// SchedulePage — the expert runtime's schedule as a Gantt chart: one row per lane (I/O thread,
// decompression workers, recovery stream, compute), one box per operation, coloured by kind.
// Ctrl+wheel zooms around the cursor, the wheel or a drag pans, hovering shows an operation's
// details. The data is `timeline` (TimelineModel, fed by the app every ~100 ms while capturing); the
// chart is a TimelineView, which draws through the scene graph and keeps 100k intervals smooth.
// Under it, ScheduleLayerInspector: one layer's predicted schedule next to the measured one, the
// critical path, per-lane idle time, the token's summary, and the Chrome-trace export.
pragma ComponentBehavior: Bound

import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

Page {
    id: page

    // The page's margin on the shared scale (narrower in a small window).
    readonly property int margin: Style.marginFor(width)

    required property TimelineModel timeline
    // The operation under the mouse (TimelineModel.eventAt's map); empty when there is none.
    property var hoveredEvent: ({})
    property string jumpError: ""
    readonly property real labelWidth: Style.laneLabelWidth
    readonly property real rowPitch: chart.laneHeight + chart.rowSpacing
    // Time-axis ticks: about every 100 px, at 1, 2 or 5 times a power of ten nanoseconds.
    readonly property real tickStepNs: page.niceStep(chart.nsPerPixel * 100)
    readonly property var ticks: {
        const result = [];
        if (!(chart.nsPerPixel > 0) || !(page.tickStepNs > 0))
            return result;
        for (let t = Math.ceil(chart.viewStartNs / page.tickStepNs) * page.tickStepNs;
             t <= chart.viewEndNs && result.length < 200; t += page.tickStepNs)
            result.push(t);
        return result;
    }

    function zoomToFit() {
        chart.zoomToFit();
    }
    function niceStep(ns: real): real {
        if (!(ns > 0))
            return 0;
        const power = Math.pow(10, Math.floor(Math.log10(ns)));
        const m = ns / power;
        return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * power;
    }
    function tickLabel(ns: real): string {
        // As many decimals as the step needs, in ms since the runtime started.
        const decimals = Math.max(0, Math.ceil(-Math.log10(page.tickStepNs / 1e6) - 1e-9));
        return qsTr("%1 ms").arg(Number(ns / 1e6).toLocaleString(Qt.locale(), "f", decimals));
    }
    function duration(ns: real): string {
        if (ns >= 1e6)
            return qsTr("%1 ms").arg(Number(ns / 1e6).toLocaleString(Qt.locale(), "f", 3));
        if (ns >= 1e3)
            return qsTr("%1 µs").arg(Number(ns / 1e3).toLocaleString(Qt.locale(), "f", 1));
        return qsTr("%1 ns").arg(Number(ns).toLocaleString(Qt.locale(), "f", 0));
    }
    function bytes(n: real): string {
        if (n >= 1048576)
            return qsTr("%1 MiB").arg(Number(n / 1048576).toLocaleString(Qt.locale(), "f", 2));
        if (n >= 1024)
            return qsTr("%1 KiB").arg(Number(n / 1024).toLocaleString(Qt.locale(), "f", 1));
        return qsTr("%1 B").arg(Number(n).toLocaleString(Qt.locale(), "f", 0));
    }
    // -1 in an event's field means "does not apply".
    function field(value: int): string {
        return value < 0 ? qsTr("–") : Number(value).toLocaleString(Qt.locale(), "f", 0);
    }
    function jump() {
        const ok = layerBox.value < 0 ? chart.jumpToToken(tokenBox.value)
                                      : chart.jumpToLayer(tokenBox.value, layerBox.value);
        page.jumpError = ok ? "" : layerBox.value < 0 ? qsTr("Token %1 is not in the capture.").arg(tokenBox.value)
                                                      : qsTr("Layer %1 of token %2 is not in the capture.").arg(layerBox.value).arg(tokenBox.value);
    }

    title: qsTr("Schedule")
    onVisibleChanged: if (visible && !App.inspector.valid && page.timeline.eventCount > 0)
        App.inspector.inspectLatest()

    header: ToolBar {
        implicitWidth: 0  // the page's width comes from the window; the Flow wraps to fit it
        leftPadding: page.margin - Style.rowSpacing
        rightPadding: page.margin

        // Wraps onto a second row in a narrow window rather than clipping its controls.
        Flow {
            width: parent.width
            spacing: Style.rowSpacing

            ToolButton {
                objectName: "captureButton"
                text: page.timeline.capturing ? qsTr("Pause capture") : qsTr("Resume capture")
                onClicked: page.timeline.capturing = !page.timeline.capturing
            }
            Switch {
                objectName: "followSwitch"
                text: qsTr("Follow live")
                checked: chart.followLive
                onToggled: chart.followLive = checked
            }
            ToolSeparator {}
            Label {
                height: tokenBox.height
                verticalAlignment: Text.AlignVCenter
                text: qsTr("Token")
            }
            SpinBox {
                id: tokenBox
                objectName: "tokenBox"
                editable: true
                from: Math.max(0, page.timeline.firstToken)
                to: Math.max(from, page.timeline.lastToken)
            }
            Label {
                height: tokenBox.height
                verticalAlignment: Text.AlignVCenter
                text: qsTr("Layer")
            }
            SpinBox {
                id: layerBox
                objectName: "layerBox"
                editable: true
                from: -1
                to: 999
                value: -1
                textFromValue: (value, locale) => value < 0 ? qsTr("any") : Number(value).toLocaleString(locale, "f", 0)
                valueFromText: (text, locale) => text === qsTr("any") ? -1 : Number.fromLocaleString(locale, text)
            }
            ToolButton {
                text: qsTr("Go")
                enabled: page.timeline.tokenCount > 0
                onClicked: page.jump()
            }
            ToolSeparator {}
            ToolButton {
                text: qsTr("Zoom to fit")
                enabled: page.timeline.eventCount > 0
                onClicked: chart.zoomToFit()
            }
            ToolButton {
                text: qsTr("Clear")
                enabled: page.timeline.eventCount > 0
                onClicked: {
                    page.hoveredEvent = {};
                    page.timeline.clear();
                }
            }
            Label {
                objectName: "eventCountLabel"
                height: tokenBox.height
                leftPadding: Style.itemSpacing
                verticalAlignment: Text.AlignVCenter
                text: qsTr("%n event(s)", "", page.timeline.eventCount)
            }
        }
    }

    // The chart takes the height the window gives; in a small window the page scrolls instead of
    // squeezing the chart's rows or clipping the inspector below it.
    Flickable {
        id: scroll

        anchors.fill: parent
        clip: true
        boundsBehavior: Flickable.StopAtBounds
        contentWidth: width
        contentHeight: body.height + 2 * Style.itemSpacing
        ScrollBar.vertical: ScrollBar {}

        ColumnLayout {
            id: body

            x: page.margin
            y: Style.itemSpacing
            width: scroll.width - 2 * page.margin
            height: Math.max(scroll.height - 2 * Style.itemSpacing, implicitHeight)
            spacing: Style.itemSpacing

            Label {
                Layout.fillWidth: true
                visible: page.jumpError.length > 0
                text: page.jumpError
                color: Style.error
            }

            RowLayout {
                Layout.fillWidth: true
                Layout.fillHeight: true
                // Rows of at most 40 px: the room left goes to the layer inspector below.
                Layout.maximumHeight: Math.max(100, page.timeline.laneCount * 44)
                Layout.minimumHeight: Math.max(90, page.timeline.laneCount * 22)
                spacing: 0

                // Lane names, each beside its row.
                Item {
                    Layout.preferredWidth: page.labelWidth
                    Layout.fillHeight: true
                    clip: true

                    Repeater {
                        model: page.timeline.laneNames
                        delegate: Label {
                            required property int index
                            required property string modelData
                            y: index * page.rowPitch
                            width: page.labelWidth - 8
                            height: page.rowPitch
                            verticalAlignment: Text.AlignVCenter
                            horizontalAlignment: Text.AlignRight
                            elide: Text.ElideRight
                            text: modelData
                        }
                    }
                }

                Item {
                    id: chartArea
                    Layout.fillWidth: true
                    Layout.fillHeight: true
                    clip: true

                    Rectangle {
                        anchors.fill: parent
                        color: page.palette.base
                        border.color: page.palette.mid
                    }
                    Repeater {
                        // Alternate row backgrounds, so that a box is read against its own lane.
                        model: page.timeline.laneCount
                        delegate: Rectangle {
                            required property int index
                            y: index * page.rowPitch
                            width: chartArea.width
                            height: page.rowPitch
                            color: index % 2 ? page.palette.alternateBase : page.palette.base
                        }
                    }
                    Repeater {
                        model: page.ticks
                        delegate: Rectangle {
                            required property real modelData
                            x: Math.round((modelData - chart.viewStartNs) / chart.nsPerPixel)
                            width: 1
                            height: chartArea.height
                            color: page.palette.midlight
                        }
                    }

                    TimelineView {
                        id: chart
                        objectName: "timelineView"
                        width: chartArea.width
                        height: Math.max(implicitHeight, 1)
                        model: page.timeline
                        followLive: true
                        // Rows share the height, between readable and not absurdly tall.
                        laneHeight: page.timeline.laneCount > 0
                                    ? Math.max(14, Math.min(40, Math.floor(chartArea.height / page.timeline.laneCount) - rowSpacing))
                                    : 18
                    }

                    Label {
                        anchors.centerIn: parent
                        visible: page.timeline.eventCount === 0
                        text: page.timeline.capturing ? qsTr("No operations yet: the schedule appears while the model generates.")
                                                      : qsTr("Capture is paused.")
                        color: page.palette.placeholderText
                    }

                    MouseArea {
                        id: mouse
                        property real lastX: 0

                        anchors.fill: parent
                        hoverEnabled: true
                        preventStealing: true  // a drag pans the chart, never scrolls the page
                        acceptedButtons: Qt.LeftButton
                        cursorShape: pressed ? Qt.ClosedHandCursor : Qt.ArrowCursor
                        onPressed: event => mouse.lastX = event.x
                        onPositionChanged: event => {
                            if (mouse.pressed) {
                                chart.panBy(event.x - mouse.lastX);
                                mouse.lastX = event.x;
                            }
                            page.hoveredEvent = chart.eventAtPoint(event.x, event.y);
                        }
                        onExited: page.hoveredEvent = {}
                        onWheel: wheel => {
                            if (wheel.modifiers & Qt.ControlModifier) {
                                chart.zoomAt(Math.pow(2, wheel.angleDelta.y / 480), wheel.x);
                            } else {
                                const pixels = wheel.pixelDelta.x !== 0 || wheel.pixelDelta.y !== 0;
                                const d = pixels ? wheel.pixelDelta : Qt.point(wheel.angleDelta.x / 2, wheel.angleDelta.y / 2);
                                chart.panBy(d.x + d.y);
                            }
                            page.hoveredEvent = chart.eventAtPoint(wheel.x, wheel.y);
                        }
                    }

                    // The hovered operation's details, beside the cursor and kept inside the chart.
                    Rectangle {
                        id: details
                        objectName: "eventDetails"
                        visible: page.hoveredEvent.op !== undefined && mouse.containsMouse
                        x: Math.min(mouse.mouseX + 14, chartArea.width - width - 2)
                        y: Math.min(mouse.mouseY + 14, chartArea.height - height - 2)
                        width: detailsText.implicitWidth + 16
                        height: detailsText.implicitHeight + 12
                        color: page.palette.toolTipBase
                        border.color: page.palette.dark
                        radius: 3

                        Label {
                            id: detailsText
                            x: 8
                            y: 6
                            color: page.palette.toolTipText
                            textFormat: Text.PlainText
                            text: details.visible ? [
                                qsTr("%1 on %2").arg(page.hoveredEvent.opName).arg(page.hoveredEvent.laneName),
                                qsTr("Token %1, layer %2, expert %3").arg(page.field(page.hoveredEvent.token)).arg(page.field(page.hoveredEvent.layer)).arg(page.field(page.hoveredEvent.expert)),
                                qsTr("Tensor %1, shard %2").arg(page.field(page.hoveredEvent.tensor)).arg(page.field(page.hoveredEvent.shard)),
                                qsTr("Duration: %1").arg(page.duration(page.hoveredEvent.durationNs)),
                                qsTr("Starts at: %1").arg(page.duration(page.hoveredEvent.startNs)),
                                qsTr("Bytes: %1").arg(page.bytes(page.hoveredEvent.bytes))
                            ].join("\n") : ""
                        }
                    }
                }
            }

            // Time axis, under the chart.
            Item {
                Layout.fillWidth: true
                Layout.leftMargin: page.labelWidth
                Layout.preferredHeight: 20
                clip: true

                Repeater {
                    id: tickLabels
                    model: page.ticks
                    delegate: Label {
                        required property real modelData
                        // Centred under its tick, but kept whole at the edges.
                        x: Math.max(0, Math.min(tickLabels.parent.width - width,
                                                Math.round((modelData - chart.viewStartNs) / chart.nsPerPixel - width / 2)))
                        font.pixelSize: Style.captionSize
                        text: page.tickLabel(modelData)
                    }
                }
            }

            // Legend: one coloured square and name per operation.
            Flow {
                objectName: "scheduleLegend"
                Layout.fillWidth: true
                Layout.leftMargin: page.labelWidth
                spacing: Style.groupSpacing

                Repeater {
                    model: page.timeline.legend()
                    delegate: Row {
                        id: entry
                        required property var modelData
                        spacing: Style.rowSpacing

                        Rectangle {
                            anchors.verticalCenter: parent.verticalCenter
                            width: 12
                            height: 12
                            color: entry.modelData.color
                        }
                        Label {
                            text: entry.modelData.name
                        }
                    }
                }
            }
    
            ToolSeparator {
                Layout.fillWidth: true
                orientation: Qt.Horizontal
            }

            ScheduleLayerInspector {
                objectName: "layerInspector"
                Layout.fillWidth: true
                inspector: App.inspector
                chosenToken: tokenBox.value
                chosenLayer: layerBox.value
                viewStartNs: chart.viewStartNs
                viewEndNs: chart.viewEndNs
            }
        }
    }
}
