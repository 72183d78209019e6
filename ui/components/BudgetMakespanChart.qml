// BudgetMakespanChart — a small line chart of the per-layer makespan history: the scheduler's
// prediction, the measured makespan and the lower bound max{I, C/L, P, Z} (ms per layer), one
// sample per monitor tick in which layers ran, newest on the right. Dotted vertical marks show where
// the memory budget changed. Repaints whenever `history` changes (every App.runtime.updated).
pragma ComponentBehavior: Bound

import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

ColumnLayout {
    id: root

    // App.runtime.makespanHistory: [{predicted, measured, lowerBound, budget}], oldest first.
    required property var history

    readonly property color predictedColor: Style.dark ? "#60a5fa" : "#2563eb"
    readonly property color measuredColor: Style.dark ? "#fb7185" : "#e11d48"
    readonly property color lowerBoundColor: Style.dark ? "#94a3b8" : "#64748b"
    readonly property int sampleCount: (root.history ?? []).length

    function repaint() {
        canvas.requestPaint();
    }

    spacing: Style.rowSpacing
    // App.runtime.updated replaces the list every tick, also when no layer ran: repaint only when
    // the samples moved on (or the size, palette or language changed).
    onHistoryChanged: {
        const h = root.history ?? [];
        const n = h.length;
        const signature = n === 0 ? "0" : n + JSON.stringify(h[0]) + JSON.stringify(h[n - 1]);
        if (signature !== canvas.drawn) {
            canvas.drawn = signature;
            canvas.requestPaint();
        }
    }
    onPaletteChanged: canvas.requestPaint()

    component LegendEntry: Row {
        id: legendEntry

        required property string label
        required property color lineColor
        property bool dashed: false

        spacing: Style.rowSpacing

        Row {
            anchors.verticalCenter: parent.verticalCenter
            spacing: 2

            Repeater {
                model: legendEntry.dashed ? 3 : 1

                delegate: Rectangle {
                    width: legendEntry.dashed ? 5 : 18
                    height: 2
                    color: legendEntry.lineColor
                }
            }
        }

        Label {
            anchors.verticalCenter: parent.verticalCenter
            text: legendEntry.label
        }
    }

    Flow {
        Layout.fillWidth: true
        spacing: Style.groupSpacing

        LegendEntry {
            label: qsTr("Predicted")
            lineColor: root.predictedColor
        }

        LegendEntry {
            label: qsTr("Measured")
            lineColor: root.measuredColor
        }

        LegendEntry {
            label: qsTr("Lower bound")
            lineColor: root.lowerBoundColor
            dashed: true
        }

        LegendEntry {
            label: qsTr("Budget changed")
            lineColor: root.palette.mid
            dashed: true
        }
    }

    Canvas {
        id: canvas

        objectName: "budgetMakespanCanvas"
        Layout.fillWidth: true
        Layout.preferredHeight: 200
        Layout.minimumHeight: 140

        // Axis texts are drawn here, so they are translated here.
        readonly property string yTitle: qsTr("ms per layer")
        readonly property string xTitle: qsTr("samples, newest →")
        readonly property string unitMs: qsTr("%1 ms")
        readonly property string samplesText: qsTr("samples: %1")
        property string drawn: ""

        function niceMax(v: real): real {
            if (!(v > 0))
                return 1;
            const p = Math.pow(10, Math.floor(Math.log(v) / Math.LN10));
            const steps = [1, 2, 2.5, 5, 10];
            for (let i = 0; i < steps.length; ++i) {
                if (steps[i] * p >= v)
                    return steps[i] * p;
            }
            return 10 * p;
        }

        // As many decimals as the tick step needs (2.5 ms steps: one).
        function formatMs(v: real, step: real): string {
            let d = 0;
            while (d < 3 && Math.abs(step * Math.pow(10, d) - Math.round(step * Math.pow(10, d))) > 1e-6)
                ++d;
            return unitMs.arg(v.toFixed(d));
        }

        onYTitleChanged: requestPaint() // retranslated
        onWidthChanged: requestPaint()
        onHeightChanged: requestPaint()
        onVisibleChanged: if (visible)
            requestPaint()
        onPaint: {
            const ctx = getContext("2d");
            ctx.reset();
            const data = root.history ?? [];
            const n = data.length;
            const left = 58, right = 10, top = 26, bottom = 26;
            const w = Math.max(1, width - left - right);
            const h = Math.max(1, height - top - bottom);
            let peak = 0;
            for (let i = 0; i < n; ++i)
                peak = Math.max(peak, data[i].predicted, data[i].measured, data[i].lowerBound);
            const yMax = niceMax(peak * 1.08);
            const ticks = 4;
            ctx.font = "11px sans-serif";
            ctx.lineWidth = 1;
            // Grid and y axis labels.
            ctx.textAlign = "right";
            ctx.textBaseline = "middle";
            for (let t = 0; t <= ticks; ++t) {
                const y = Math.round(top + h - t / ticks * h) + 0.5;
                ctx.strokeStyle = canvas.palette.midlight;
                ctx.beginPath();
                ctx.moveTo(left, y);
                ctx.lineTo(left + w, y);
                ctx.stroke();
                ctx.fillStyle = canvas.palette.text;
                ctx.fillText(formatMs(yMax * t / ticks, yMax / ticks), left - 6, y);
            }
            // Axes.
            ctx.strokeStyle = canvas.palette.mid;
            ctx.beginPath();
            ctx.moveTo(left + 0.5, top);
            ctx.lineTo(left + 0.5, top + h + 0.5);
            ctx.lineTo(left + w, top + h + 0.5);
            ctx.stroke();
            ctx.fillStyle = canvas.palette.text;
            ctx.textAlign = "left";
            ctx.textBaseline = "bottom";
            ctx.fillText(yTitle, 4, top - 12);
            ctx.textAlign = "right";
            ctx.textBaseline = "top";
            ctx.fillText(xTitle, left + w, top + h + 6);
            if (n < 2)
                return;
            const xAt = i => left + i / (n - 1) * w;
            const yAt = v => top + h - Math.min(1, Math.max(0, v / yMax)) * h;
            ctx.textAlign = "left";
            ctx.fillText(samplesText.arg(n), left + 4, top + h + 6);
            // Budget changes.
            ctx.strokeStyle = canvas.palette.mid;
            ctx.setLineDash([2, 3]);
            for (let i = 1; i < n; ++i) {
                if (data[i].budget !== data[i - 1].budget) {
                    const x = Math.round(xAt(i)) + 0.5;
                    ctx.beginPath();
                    ctx.moveTo(x, top);
                    ctx.lineTo(x, top + h);
                    ctx.stroke();
                }
            }
            const series = [["lowerBound", root.lowerBoundColor, [5, 4]], ["predicted", root.predictedColor, []], ["measured", root.measuredColor, []]];
            ctx.lineWidth = 1.75;
            ctx.lineJoin = "round";
            for (let s = 0; s < series.length; ++s) {
                const key = series[s][0];
                ctx.strokeStyle = series[s][1];
                ctx.setLineDash(series[s][2]);
                ctx.beginPath();
                for (let i = 0; i < n; ++i) {
                    const x = xAt(i), y = yAt(Number(data[i][key]) || 0);
                    if (i === 0)
                        ctx.moveTo(x, y);
                    else
                        ctx.lineTo(x, y);
                }
                ctx.stroke();
            }
            ctx.setLineDash([]);
        }

        Label {
            anchors.centerIn: parent
            visible: root.sampleCount < 2
            text: qsTr("No layers measured yet: send a message to see the makespan.")
            opacity: Style.captionOpacity
        }
    }
}
