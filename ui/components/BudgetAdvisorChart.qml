// BudgetAdvisorChart — the budget advisor's figure: the planner's predicted time per output token
// over the whole budget range (solid) and its time to the first token (dashed, right axis), the
// measured TPOT of past replies at their budgets (dots), the current budget (a vertical line), the
// knee of the curve (a ring and a note) and the budgets the machine's free memory cannot hold
// without swapping (shaded). Hovering shows the prediction at that budget; a click asks for it.
// Repaints when the curve, the points, the budget or the palette change.
pragma ComponentBehavior: Bound

import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

ColumnLayout {
    id: root

    required property var curve        // App.advisor.curve
    required property var measured     // App.advisor.measured
    required property real budget      // the current budget, bytes
    required property real minBudget
    required property real maxBudget
    required property real kneeBytes
    property real swapFrom: 0          // budgets above this would make the system swap; 0 = unknown
    property var formatBytes: function (b) {
        return (b / 1048576).toFixed(1) + " MiB";
    }

    readonly property color tpotColor: Style.dark ? "#60a5fa" : "#2563eb"
    readonly property color ttftColor: Style.dark ? "#2dd4bf" : "#0d9488"
    readonly property color measuredColor: Style.dark ? "#fb7185" : "#e11d48"
    readonly property color kneeColor: Style.dark ? "#fbbf24" : "#d97706"
    readonly property color swapColor: Style.error
    property real hoverX: -1

    signal budgetPicked(real bytes)

    spacing: Style.rowSpacing
    onCurveChanged: canvas.requestPaint()
    onMeasuredChanged: canvas.requestPaint()
    onBudgetChanged: canvas.requestPaint()
    onSwapFromChanged: canvas.requestPaint()
    onPaletteChanged: canvas.requestPaint()

    component LegendEntry: Row {
        id: legendEntry

        required property string label
        required property color mark
        property bool dot: false
        property bool dashed: false

        spacing: Style.rowSpacing

        Rectangle {
            anchors.verticalCenter: parent.verticalCenter
            width: legendEntry.dot ? 8 : 18
            height: legendEntry.dot ? 8 : 2
            radius: legendEntry.dot ? 4 : 0
            color: legendEntry.mark
            opacity: legendEntry.dashed ? 0.6 : 1
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
            label: qsTr("Predicted TPOT")
            mark: root.tpotColor
        }
        LegendEntry {
            label: qsTr("Predicted TTFT (right axis)")
            mark: root.ttftColor
            dashed: true
        }
        LegendEntry {
            label: qsTr("Measured replies")
            mark: root.measuredColor
            dot: true
        }
        LegendEntry {
            label: qsTr("Current budget")
            mark: root.palette.text
        }
        LegendEntry {
            label: qsTr("Would swap")
            mark: root.swapColor
            dashed: true
        }
    }

    Canvas {
        id: canvas

        objectName: "budgetAdvisorCanvas"
        Layout.fillWidth: true
        Layout.preferredHeight: 240
        Layout.minimumHeight: 160

        readonly property string yTitle: qsTr("ms per token")
        readonly property string y2Title: qsTr("first token, ms")
        readonly property string kneeText: qsTr("knee")
        readonly property string hoverText: qsTr("%1: %2 ms per token, first token %3 ms")
        readonly property real padLeft: 58
        readonly property real padRight: 58
        readonly property real padTop: 26
        readonly property real padBottom: 30

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
        function xAt(b: real): real {
            const span = Math.max(1, root.maxBudget - root.minBudget);
            return padLeft + (b - root.minBudget) / span * Math.max(1, width - padLeft - padRight);
        }
        function budgetAt(x: real): real {
            const span = Math.max(1, root.maxBudget - root.minBudget);
            return root.minBudget + (x - padLeft) / Math.max(1, width - padLeft - padRight) * span;
        }
        function nearest(x: real): var {
            const c = root.curve ?? [];
            let best = null, d = 1e9;
            for (let i = 0; i < c.length; ++i) {
                const dx = Math.abs(xAt(c[i].budget) - x);
                if (dx < d) {
                    d = dx;
                    best = c[i];
                }
            }
            return best;
        }

        onYTitleChanged: requestPaint()
        onWidthChanged: requestPaint()
        onHeightChanged: requestPaint()
        onVisibleChanged: if (visible)
            requestPaint()
        onPaint: {
            const ctx = getContext("2d");
            ctx.reset();
            const c = root.curve ?? [];
            const pts = root.measured ?? [];
            const w = Math.max(1, width - padLeft - padRight), h = Math.max(1, height - padTop - padBottom);
            let peak = 0, peak2 = 0;
            for (let i = 0; i < c.length; ++i) {
                peak = Math.max(peak, c[i].tpotMs);
                peak2 = Math.max(peak2, c[i].ttftMs);
            }
            for (let i = 0; i < pts.length; ++i)
                peak = Math.max(peak, pts[i].tpotMs);
            const yMax = niceMax(peak * 1.08), y2Max = niceMax(peak2 * 1.08);
            const yAt = v => padTop + h - Math.min(1, Math.max(0, v / yMax)) * h;
            const y2At = v => padTop + h - Math.min(1, Math.max(0, v / y2Max)) * h;
            ctx.font = "11px sans-serif";
            ctx.lineWidth = 1;
            // Budgets that would swap.
            if (root.swapFrom > 0 && root.swapFrom < root.maxBudget) {
                const x0 = Math.max(padLeft, xAt(root.swapFrom));
                ctx.fillStyle = Qt.rgba(0.86, 0.15, 0.15, 0.12);
                ctx.fillRect(x0, padTop, padLeft + w - x0, h);
            }
            const ticks = 4;
            ctx.textBaseline = "middle";
            for (let t = 0; t <= ticks; ++t) {
                const y = Math.round(padTop + h - t / ticks * h) + 0.5;
                ctx.strokeStyle = canvas.palette.midlight;
                ctx.beginPath();
                ctx.moveTo(padLeft, y);
                ctx.lineTo(padLeft + w, y);
                ctx.stroke();
                ctx.fillStyle = canvas.palette.text;
                ctx.textAlign = "right";
                ctx.fillText((yMax * t / ticks).toFixed(yMax >= 40 ? 0 : 1), padLeft - 6, y);
                ctx.fillStyle = root.ttftColor;
                ctx.textAlign = "left";
                ctx.fillText((y2Max * t / ticks).toFixed(y2Max >= 40 ? 0 : 1), padLeft + w + 6, y);
            }
            ctx.strokeStyle = canvas.palette.mid;
            ctx.beginPath();
            ctx.moveTo(padLeft + 0.5, padTop);
            ctx.lineTo(padLeft + 0.5, padTop + h + 0.5);
            ctx.lineTo(padLeft + w, padTop + h + 0.5);
            ctx.stroke();
            ctx.fillStyle = canvas.palette.text;
            ctx.textAlign = "left";
            ctx.textBaseline = "bottom";
            ctx.fillText(yTitle, 4, padTop - 10);
            ctx.textAlign = "right";
            ctx.fillStyle = root.ttftColor;
            ctx.fillText(y2Title, width - 4, padTop - 10);
            ctx.fillStyle = canvas.palette.text;
            ctx.textBaseline = "top";
            ctx.textAlign = "left";
            ctx.fillText(root.formatBytes(root.minBudget), padLeft, padTop + h + 8);
            ctx.textAlign = "right";
            ctx.fillText(root.formatBytes(root.maxBudget), padLeft + w, padTop + h + 8);
            if (c.length < 2)
                return;
            // TTFT, dashed.
            ctx.lineWidth = 1.5;
            ctx.strokeStyle = root.ttftColor;
            ctx.setLineDash([5, 4]);
            ctx.beginPath();
            for (let i = 0; i < c.length; ++i) {
                if (i === 0)
                    ctx.moveTo(xAt(c[i].budget), y2At(c[i].ttftMs));
                else
                    ctx.lineTo(xAt(c[i].budget), y2At(c[i].ttftMs));
            }
            ctx.stroke();
            ctx.setLineDash([]);
            // TPOT.
            ctx.lineWidth = 2.25;
            ctx.lineJoin = "round";
            ctx.strokeStyle = root.tpotColor;
            ctx.beginPath();
            for (let i = 0; i < c.length; ++i) {
                if (i === 0)
                    ctx.moveTo(xAt(c[i].budget), yAt(c[i].tpotMs));
                else
                    ctx.lineTo(xAt(c[i].budget), yAt(c[i].tpotMs));
            }
            ctx.stroke();
            // Measured replies.
            ctx.fillStyle = root.measuredColor;
            for (let i = 0; i < pts.length; ++i) {
                if (pts[i].budget < root.minBudget || pts[i].budget > root.maxBudget)
                    continue;
                ctx.beginPath();
                ctx.arc(xAt(pts[i].budget), yAt(pts[i].tpotMs), 3.5, 0, 2 * Math.PI);
                ctx.fill();
            }
            // The knee.
            if (root.kneeBytes > 0) {
                const kneePoint = nearest(xAt(root.kneeBytes));
                if (kneePoint) {
                    const kx = xAt(kneePoint.budget), ky = yAt(kneePoint.tpotMs);
                    ctx.strokeStyle = root.kneeColor;
                    ctx.lineWidth = 2;
                    ctx.beginPath();
                    ctx.arc(kx, ky, 7, 0, 2 * Math.PI);
                    ctx.stroke();
                    ctx.fillStyle = root.kneeColor;
                    ctx.textAlign = kx > padLeft + w * 0.8 ? "right" : "left";
                    ctx.textBaseline = "bottom";
                    ctx.fillText(kneeText, kx + (ctx.textAlign === "left" ? 9 : -9), ky - 6);
                }
            }
            // The current budget.
            if (root.budget >= root.minBudget && root.budget <= root.maxBudget) {
                const bx = Math.round(xAt(root.budget)) + 0.5;
                ctx.strokeStyle = canvas.palette.text;
                ctx.lineWidth = 1.5;
                ctx.beginPath();
                ctx.moveTo(bx, padTop);
                ctx.lineTo(bx, padTop + h);
                ctx.stroke();
            }
            if (root.hoverX >= padLeft && root.hoverX <= padLeft + w) {
                const p = nearest(root.hoverX);
                if (p) {
                    const px = xAt(p.budget);
                    ctx.strokeStyle = canvas.palette.mid;
                    ctx.lineWidth = 1;
                    ctx.setLineDash([2, 3]);
                    ctx.beginPath();
                    ctx.moveTo(px, padTop);
                    ctx.lineTo(px, padTop + h);
                    ctx.stroke();
                    ctx.setLineDash([]);
                }
            }
        }

        MouseArea {
            anchors.fill: parent
            hoverEnabled: true
            cursorShape: Qt.CrossCursor
            onPositionChanged: mouse => {
                root.hoverX = mouse.x;
                canvas.requestPaint();
            }
            onExited: {
                root.hoverX = -1;
                canvas.requestPaint();
            }
            onClicked: mouse => {
                const p = canvas.nearest(mouse.x);
                if (p)
                    root.budgetPicked(p.budget);
            }
        }

        Label {
            objectName: "budgetAdvisorHover"
            x: Math.min(canvas.width - width - 4, Math.max(canvas.padLeft, root.hoverX + 8))
            y: canvas.padTop + 2
            visible: root.hoverX >= 0 && text !== ""
            padding: 4
            background: Rectangle {
                color: root.palette.base
                border.color: root.palette.mid
                radius: 3
            }
            text: {
                const p = root.hoverX >= 0 ? canvas.nearest(root.hoverX) : null;
                return p ? canvas.hoverText.arg(root.formatBytes(p.budget)).arg(p.tpotMs.toFixed(1)).arg(p.ttftMs.toFixed(0)) : "";
            }
        }

        Label {
            anchors.centerIn: parent
            visible: (root.curve ?? []).length < 2
            text: qsTr("Computing the prediction…")
            opacity: Style.captionOpacity
        }
    }
}
