// BudgetPage — tune the expert runtime's memory budget live (also while a reply streams) and watch
// what the planner does with it: the F/C/S/E pool split, occupancy and hit rates, the miss rate and
// the predicted vs measured layer makespan. Everything comes from App.runtime (RuntimeMonitor,
// refreshed every 250 ms); setBudget / setPools return at once, the runtime replans on its thread.
// The budget advisor on top (App.advisor) shows what the planner predicts for every budget before
// it is moved, with the measured replies, the knee and the free memory.
// "Follow free memory" hands the budget to the engine's follower (App.runtime.following): the
// slider and the figures move with it, a status line says what it saw and did, and a budget the
// user sets turns it off.
pragma ComponentBehavior: Bound

import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

Page {
    id: page

    // The page's margin on the shared scale (narrower in a small window).
    readonly property int margin: Style.marginFor(width)

    readonly property real mib: 1048576
    readonly property var poolColors: ({ "F": "#3b82f6", "C": "#10b981", "S": "#f59e0b", "E": "#8b5cf6" })
    readonly property var poolNames: ({ "F": qsTr("full BF16 tensors"), "C": qsTr("compressed (E-chunks + SM-chunk)"), "S": qsTr("sign-mantissa only"), "E": qsTr("exponents only") })
    readonly property var pools: App.runtime.pools
    readonly property real budgetFrom: App.runtime.minimumBudget
    readonly property real budgetTo: App.runtime.minimumBudget + App.runtime.expertBytes
    // What the page shows as "the budget": the slider's value while the user drags it.
    readonly property real shownBudget: budgetSlider.dragging || settle.running ? budgetSlider.value : App.runtime.budgetBytes
    property string fieldError: ""

    function pct(x: real): string {
        return qsTr("%1 %").arg((100 * (Number(x) || 0)).toFixed(1));
    }
    function ms(x: real): string {
        const v = Number(x) || 0;
        return qsTr("%1 ms").arg(v.toFixed(v < 10 ? 2 : 1));
    }
    function bytes(x: real): string {
        return App.formatBytes(Number(x) || 0);
    }
    function requestBudget(value: real): bool {
        page.fieldError = "";
        return App.runtime.setBudget(Math.round(value));
    }
    // The follower's one-line status: the memory available, the margin it leaves to other programs,
    // its last move with the reason and when; or why following is off.
    function followStatus(): string {
        const r = App.runtime;
        if (!r.following)
            return r.followStoppedByUser ? qsTr("Following free memory stopped: you set the budget yourself. Switch it on to follow again.") : qsTr("Off: the budget stays where you set it.");
        if (r.followError !== "")
            return qsTr("Following free memory, but the last reading or move failed: %1").arg(r.followError);
        if (r.availableMemoryBytes <= 0)
            return qsTr("Following free memory: waiting for the first reading…");
        const head = qsTr("%1 available, %2 left to other programs.").arg(page.bytes(r.availableMemoryBytes)).arg(page.bytes(r.followMarginBytes));
        const move = r.lastFollowMove;
        const last = move.time ? qsTr("Last move at %1: %2 → %3 (%4).").arg(move.time).arg(page.bytes(move.fromBytes)).arg(page.bytes(move.toBytes)).arg(move.reason) : qsTr("No move yet.");
        return head + " " + last;
    }
    function applyField() {
        const v = parseFloat(budgetField.text.replace(",", "."));
        if (isNaN(v)) {
            page.fieldError = qsTr("Enter the budget in MiB, e.g. 2048.");
            return;
        }
        if (page.requestBudget(v * page.mib))
            budgetField.focus = false;
    }

    title: qsTr("Memory budget")
    objectName: "budgetPage"
    onVisibleChanged: if (visible) {
        App.advisor.refreshMeasured();
        App.advisor.recompute();
    }

    Timer {
        // After a drag, keep showing the dragged value until the monitor's next ticks report it.
        id: settle

        interval: 700
    }

    ColumnLayout {
        objectName: "budgetInactive"
        anchors.centerIn: parent
        width: Math.min(parent.width - 48, 460)
        visible: !App.runtime.active
        spacing: Style.itemSpacing

        Label {
            Layout.fillWidth: true
            horizontalAlignment: Text.AlignHCenter
            text: App.modelState === "loading" ? qsTr("Opening the model…") : qsTr("No expert runtime")
            font.pixelSize: Style.titleSize
        }
        BusyIndicator {
            Layout.alignment: Qt.AlignHCenter
            visible: App.modelState === "loading"
            running: visible
        }
        Label {
            Layout.fillWidth: true
            horizontalAlignment: Text.AlignHCenter
            wrapMode: Text.Wrap
            opacity: Style.captionOpacity
            text: App.modelState === "loading" ? qsTr("The memory budget can be set as soon as the expert runtime is open.") : qsTr("No model with an expert runtime is open. Open a converted Mixture-of-Experts model (or the demo model) to set its memory budget and watch the F/C/S/E pools.")
        }
    }

    ScrollView {
        id: scroll

        anchors.fill: parent
        visible: App.runtime.active
        contentWidth: availableWidth

        ColumnLayout {
            x: Math.max(page.margin, (scroll.availableWidth - width) / 2)
            width: Math.min(scroll.availableWidth - 2 * page.margin, Style.maxContentWidth)
            spacing: Style.groupSpacing

            Item {
                implicitHeight: page.margin - Style.groupSpacing
            }

            GroupBox {
                objectName: "budgetAdvisor"
                Layout.fillWidth: true
                title: qsTr("Budget advisor")

                ColumnLayout {
                    id: advisorBox

                    anchors.fill: parent
                    spacing: Style.itemSpacing

                    readonly property real predictedNow: App.advisor.revision >= 0 ? App.advisor.predictedTpotAt(App.runtime.budgetBytes) : -1
                    readonly property real swapFrom: App.advisor.freeMemoryBytes > 0 ? App.runtime.heldBytes + App.advisor.freeMemoryBytes : 0

                    Label {
                        objectName: "budgetAdvisorSummary"
                        Layout.fillWidth: true
                        wrapMode: Text.Wrap
                        text: advisorBox.predictedNow > 0 ? qsTr("At the current budget of %1 the planner predicts %2 per output token (%3 tokens/s).").arg(page.bytes(App.runtime.budgetBytes)).arg(page.ms(advisorBox.predictedNow)).arg((1000 / advisorBox.predictedNow).toFixed(1)) : qsTr("The planner's prediction for every budget, computed from this machine's cost profile and the model's expert statistics.")
                    }
                    Label {
                        objectName: "budgetAdvisorKnee"
                        Layout.fillWidth: true
                        wrapMode: Text.Wrap
                        visible: App.advisor.kneeBytes > 0
                        color: Style.warning
                        font.bold: true
                        text: App.advisor.kneeBytes >= App.advisor.maxBudget ? qsTr("Every byte up to %1 (every expert in memory) still makes tokens faster.").arg(page.bytes(App.advisor.maxBudget)) : qsTr("Beyond %1 you gain less than %2 % per token.").arg(page.bytes(App.advisor.kneeBytes)).arg(Math.round(App.advisor.kneeGain * 100))
                    }
                    Label {
                        objectName: "budgetAdvisorMemory"
                        Layout.fillWidth: true
                        wrapMode: Text.Wrap
                        visible: App.advisor.freeMemoryBytes > 0
                        text: advisorBox.swapFrom > 0 && advisorBox.swapFrom < page.budgetTo ? qsTr("Free memory: %1 of %2. A budget above %3 would make the system swap.").arg(page.bytes(App.advisor.freeMemoryBytes)).arg(page.bytes(App.advisor.totalMemoryBytes)).arg(page.bytes(advisorBox.swapFrom)) : qsTr("Free memory: %1 of %2; every budget fits without swapping.").arg(page.bytes(App.advisor.freeMemoryBytes)).arg(page.bytes(App.advisor.totalMemoryBytes))
                    }
                    BudgetAdvisorChart {
                        objectName: "budgetAdvisorChart"
                        Layout.fillWidth: true
                        curve: App.advisor.curve
                        measured: App.advisor.measured
                        budget: App.runtime.budgetBytes
                        minBudget: App.advisor.minBudget > 0 ? App.advisor.minBudget : page.budgetFrom
                        maxBudget: App.advisor.maxBudget > 0 ? App.advisor.maxBudget : page.budgetTo
                        kneeBytes: App.advisor.kneeBytes
                        swapFrom: advisorBox.swapFrom
                        formatBytes: page.bytes
                        onBudgetPicked: bytes => page.requestBudget(bytes)
                    }
                    RowLayout {
                        Layout.fillWidth: true
                        spacing: Style.itemSpacing

                        Label {
                            objectName: "budgetAdvisorNote"
                            Layout.fillWidth: true
                            wrapMode: Text.Wrap
                            opacity: Style.captionOpacity
                            font.pixelSize: Style.captionSize
                            text: (App.advisor.denseMs > 0 ? qsTr("TPOT = %1 for the model outside the experts (measured) + the planned expert layers; TTFT for a %2-token prompt.").arg(page.ms(App.advisor.denseMs)).arg(App.advisor.promptTokens) : qsTr("The dense part of the model is not measured yet: the curve shows the expert layers alone until a reply is measured.")) + " " + qsTr("%n measured reply(s) shown. Click the chart to use that budget.", "", App.advisor.measured.length)
                        }
                        BusyIndicator {
                            objectName: "budgetAdvisorBusy"
                            implicitWidth: Style.busySize
                            implicitHeight: Style.busySize
                            running: App.advisor.busy
                            visible: running
                        }
                        Button {
                            objectName: "budgetAdvisorKneeButton"
                            visible: App.advisor.kneeBytes > 0 && App.advisor.kneeBytes < App.advisor.maxBudget
                            text: qsTr("Use the knee")
                            onClicked: page.requestBudget(App.advisor.kneeBytes)
                        }
                    }
                    Label {
                        objectName: "budgetAdvisorError"
                        Layout.fillWidth: true
                        visible: text !== ""
                        text: App.advisor.error
                        color: Style.error
                        wrapMode: Text.Wrap
                    }
                }
            }

            GroupBox {
                Layout.fillWidth: true
                title: qsTr("Budget")

                ColumnLayout {
                    anchors.fill: parent
                    spacing: Style.itemSpacing

                    Flow {
                        Layout.fillWidth: true
                        spacing: Style.statSpacing

                        BudgetStat {
                            caption: qsTr("Budget")
                            value: page.bytes(page.shownBudget)
                            detail: App.runtime.expertBytes > 0 ? qsTr("pools: %1 of the experts' BF16 bytes").arg(page.pct(Math.max(0, page.shownBudget - page.budgetFrom) / App.runtime.expertBytes)) : ""
                        }
                        BudgetStat {
                            caption: qsTr("Held")
                            value: page.bytes(App.runtime.heldBytes)
                            detail: qsTr("of %1 budget").arg(page.bytes(App.runtime.budgetBytes))
                        }
                        BudgetStat {
                            caption: qsTr("Working set")
                            value: page.bytes(App.runtime.workingSetBytes)
                            detail: qsTr("staging + output slots")
                        }
                        BudgetStat {
                            caption: qsTr("All experts (BF16)")
                            value: page.bytes(App.runtime.expertBytes)
                        }
                    }

                    RowLayout {
                        Layout.fillWidth: true
                        spacing: Style.itemSpacing

                        Label {
                            text: qsTr("Held / budget")
                            opacity: Style.captionOpacity
                        }
                        BudgetMeter {
                            objectName: "budgetHeldMeter"
                            Layout.fillWidth: true
                            fraction: App.runtime.budgetBytes > 0 ? App.runtime.heldBytes / App.runtime.budgetBytes : 0
                            fill: App.runtime.heldBytes > App.runtime.budgetBytes ? Style.error : page.palette.highlight
                        }
                        Label {
                            text: page.pct(App.runtime.budgetBytes > 0 ? App.runtime.heldBytes / App.runtime.budgetBytes : 0)
                            opacity: Style.captionOpacity
                        }
                    }

                    Switch {
                        id: followSwitch

                        objectName: "budgetFollowSwitch"
                        Layout.topMargin: Style.rowSpacing
                        text: qsTr("Follow free memory")
                        checked: App.runtime.following
                        ToolTip.visible: hovered
                        ToolTip.delay: 400
                        ToolTip.text: qsTr("The budget moves with the memory the machine has free, leaving a margin to other programs. Setting a budget yourself turns this off.")
                        onToggled: {
                            page.fieldError = "";
                            App.runtime.setFollowing(checked);
                            // The switch shows what the runtime does (a refused switch goes back).
                            checked = Qt.binding(() => App.runtime.following);
                        }
                    }
                    Label {
                        objectName: "budgetFollowStatus"
                        Layout.fillWidth: true
                        Layout.topMargin: Style.tightSpacing - Style.itemSpacing  // the status sits under its switch
                        wrapMode: Text.Wrap
                        opacity: Style.captionOpacity
                        text: page.followStatus()
                    }

                    Label {
                        Layout.topMargin: Style.rowSpacing
                        text: qsTr("Set the budget (applies at once, also while a reply streams)")
                        font.bold: true
                    }

                    Slider {
                        id: budgetSlider

                        // True from press to release: the slider shows the user's value.
                        property bool dragging: false

                        objectName: "budgetSlider"
                        Layout.fillWidth: true
                        from: page.budgetFrom
                        to: Math.max(page.budgetTo, page.budgetFrom + 1)
                        enabled: page.budgetTo > page.budgetFrom
                        onMoved: page.requestBudget(value) // live; the runtime coalesces replans
                        onPressedChanged: {
                            if (pressed) {
                                dragging = true;
                            } else {
                                settle.restart();
                                dragging = false;
                            }
                        }

                        Binding {
                            target: budgetSlider
                            property: "value"
                            value: App.runtime.budgetBytes
                            when: !budgetSlider.dragging && !settle.running
                            restoreMode: Binding.RestoreNone
                        }
                    }

                    RowLayout {
                        Layout.fillWidth: true
                        Layout.topMargin: Style.tightSpacing - Style.itemSpacing  // the range sits under its slider

                        Label {
                            text: qsTr("%1 (minimum)").arg(page.bytes(page.budgetFrom))
                            opacity: Style.captionOpacity
                            font.pixelSize: Style.captionSize
                        }
                        Item {
                            Layout.fillWidth: true
                        }
                        Label {
                            text: qsTr("%1 (every expert in BF16)").arg(page.bytes(page.budgetTo))
                            opacity: Style.captionOpacity
                            font.pixelSize: Style.captionSize
                        }
                    }

                    Flow {
                        Layout.fillWidth: true
                        spacing: Style.itemSpacing

                        TextField {
                            id: budgetField

                            objectName: "budgetField"
                            width: Style.valueWidth
                            horizontalAlignment: TextInput.AlignRight
                            selectByMouse: true
                            placeholderText: qsTr("MiB")
                            validator: RegularExpressionValidator {
                                regularExpression: /^\d{0,8}([.,]\d{0,2})?$/
                            }
                            onAccepted: page.applyField()
                            onTextEdited: page.fieldError = ""

                            Binding {
                                target: budgetField
                                property: "text"
                                value: (page.shownBudget / page.mib).toFixed(1)
                                when: !budgetField.activeFocus
                                restoreMode: Binding.RestoreNone
                            }
                        }
                        Label {
                            height: budgetField.height
                            verticalAlignment: Text.AlignVCenter
                            text: qsTr("MiB")
                        }
                        Button {
                            objectName: "budgetApply"
                            text: qsTr("Apply")
                            onClicked: page.applyField()
                        }
                        Item {
                            width: 16
                            height: 1
                        }
                        Repeater {
                            model: [0.1, 0.25, 0.5, 1.0]

                            delegate: Button {
                                required property real modelData

                                objectName: "budgetQuick" + Math.round(modelData * 100)
                                text: qsTr("%1 %").arg(Math.round(modelData * 100))
                                flat: false
                                ToolTip.visible: hovered
                                ToolTip.delay: 400
                                ToolTip.text: qsTr("Pools for %1 % of the experts' BF16 bytes: %2").arg(Math.round(modelData * 100)).arg(page.bytes(page.budgetFrom + modelData * App.runtime.expertBytes))
                                onClicked: page.requestBudget(page.budgetFrom + modelData * App.runtime.expertBytes)
                            }
                        }
                    }

                    Label {
                        objectName: "budgetSwapWarning"
                        Layout.fillWidth: true
                        visible: App.advisor.freeMemoryBytes > 0 && page.shownBudget > App.runtime.heldBytes + App.advisor.freeMemoryBytes
                        text: qsTr("This budget is more than the memory free now (%1 besides what the experts hold): the system would swap.").arg(page.bytes(App.advisor.freeMemoryBytes))
                        color: Style.error
                        wrapMode: Text.Wrap
                    }

                    Label {
                        objectName: "budgetError"
                        Layout.fillWidth: true
                        visible: text !== ""
                        text: page.fieldError !== "" ? page.fieldError : App.runtime.error
                        color: Style.error
                        wrapMode: Text.Wrap
                    }
                }
            }

            GroupBox {
                Layout.fillWidth: true
                title: qsTr("Pool split")

                ColumnLayout {
                    anchors.fill: parent
                    spacing: Style.itemSpacing

                    BudgetPoolBar {
                        objectName: "budgetPoolBar"
                        Layout.fillWidth: true
                        pools: page.pools
                        colors: page.poolColors
                        names: page.poolNames
                    }

                    BudgetPoolTable {
                        objectName: "budgetPoolTable"
                        Layout.fillWidth: true
                        pools: page.pools
                        colors: page.poolColors
                    }

                    Flow {
                        Layout.fillWidth: true
                        spacing: Style.statSpacing

                        BudgetStat {
                            caption: qsTr("Miss rate")
                            value: page.pct(App.runtime.missRate)
                            detail: qsTr("of %1 expert activations").arg(Math.round(App.runtime.activations))
                        }
                        BudgetStat {
                            caption: qsTr("Expert bytes read")
                            value: page.bytes(App.runtime.bytesRead)
                            detail: qsTr("from the store since the model opened")
                        }
                    }
                }
            }

            GroupBox {
                Layout.fillWidth: true
                title: qsTr("Pools and threads")

                BudgetRuntimeOptions {
                    anchors.fill: parent
                    names: page.poolNames
                }
            }

            GroupBox {
                Layout.fillWidth: true
                title: qsTr("Layer makespan: predicted vs measured")

                ColumnLayout {
                    anchors.fill: parent
                    spacing: Style.itemSpacing

                    Flow {
                        Layout.fillWidth: true
                        spacing: Style.statSpacing

                        BudgetStat {
                            objectName: "budgetPredicted"
                            caption: qsTr("Predicted")
                            value: page.ms(App.runtime.predictedLayerMs)
                            detail: qsTr("scheduler's simulation")
                        }
                        BudgetStat {
                            objectName: "budgetMeasured"
                            caption: qsTr("Measured")
                            value: page.ms(App.runtime.measuredLayerMs)
                            detail: qsTr("acquire → last expert released")
                        }
                        BudgetStat {
                            objectName: "budgetLowerBound"
                            caption: qsTr("Lower bound")
                            value: page.ms(App.runtime.lowerBoundLayerMs)
                            detail: qsTr("max{I, C/L, P, Z}")
                        }
                        BudgetStat {
                            caption: qsTr("Replans")
                            value: Number(App.runtime.replans).toString()
                            detail: App.runtime.replans > 0 ? qsTr("last took %1").arg(page.ms(App.runtime.lastReplanMs)) : qsTr("none yet")
                        }
                    }

                    BudgetMakespanChart {
                        objectName: "budgetMakespanChart"
                        Layout.fillWidth: true
                        history: App.runtime.makespanHistory
                    }
                }
            }

            Item {
                implicitHeight: page.margin - Style.groupSpacing
            }
        }
    }
}
