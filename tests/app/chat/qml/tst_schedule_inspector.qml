import QtQuick
import QtQuick.Controls
import QtTest
import ZipMoE.Chat

// The layer inspector under the schedule chart, on a real generation: the newest layer's predicted
// and measured schedules are drawn lane by lane with the critical path outlined, per-lane idle time
// and the token's summary row are shown, and a layer that is not there is refused with a reason.
Item {
    id: root
    width: 1100
    height: 900

    Component {
        id: pageComponent
        SchedulePage {
            width: root.width
            height: root.height
            timeline: App.timeline
        }
    }

    TestCase {
        name: "ScheduleInspector"
        when: windowShown

        function test_predictedNextToMeasured() {
            const page = createTemporaryObject(pageComponent, root)
            App.newChat()
            App.setSamplingValue("maxTokens", 8)
            verify(App.send("ROMEO:"))
            tryCompare(App, "generating", false, 120000)
            App.runtime.refresh()
            mouseClick(findChild(page, "inspectLatestButton"))
            tryVerify(() => App.inspector.valid, 60000)
            const predicted = findChild(page, "predictedGantt"), measured = findChild(page, "measuredGantt")
            verify(predicted.visible && measured.visible)
            verify(App.inspector.predictedOps.length > 0 && App.inspector.measuredOps.length > 0)
            verify(App.inspector.measuredOps.some(o => o.critical), "the measured critical path")
            verify(App.inspector.predictedOps.some(o => o.critical), "the predicted critical path")
            compare(App.inspector.laneIdle.length, App.timeline.laneCount)
            const summary = findChild(page, "tokenSummary")
            verify(summary.visible && summary.text.indexOf(String(App.inspector.token)) >= 0)
            verify(findChild(page, "inspectorTitle").text.indexOf(String(App.inspector.layer)) >= 0)
            verify(findChild(page, "exportTraceButton").enabled)
        }

        function test_aMissingLayerIsRefused() {
            const page = createTemporaryObject(pageComponent, root)
            verify(!App.inspector.inspect(App.timeline.lastToken, 998))
            const message = findChild(page, "inspectorMessage")
            tryVerify(() => message.visible && message.text.indexOf("998") >= 0, 60000)
        }
    }
}
