import QtQuick
import QtQuick.Controls
import QtTest
import ZipMoE.Chat

// The schedule page on a real generation: lanes of the runtime, events captured while a reply
// streams, pause stops the capture, and hovering an interval shows its details.
Item {
    id: root
    width: 1000
    height: 600

    Component {
        id: pageComponent
        SchedulePage {
            width: root.width
            height: root.height
            timeline: App.timeline
        }
    }

    TestCase {
        name: "SchedulePage"
        when: windowShown

        function generate(tokens) {
            App.newChat()
            App.setSamplingValue("maxTokens", tokens)
            verify(App.send("ROMEO:"))
            tryCompare(App, "generating", false, 120000)
            App.runtime.refresh()
        }

        function test_capturesARealGenerationAndPauses() {
            const page = createTemporaryObject(pageComponent, root)
            App.timeline.clear()
            generate(12)
            verify(App.timeline.eventCount > 0)
            compare(App.timeline.laneCount, App.runtime.workers + 3)
            verify(App.timeline.laneNames.indexOf("I/O") >= 0)

            App.timeline.capturing = false
            const frozen = App.timeline.eventCount
            generate(6)
            compare(App.timeline.eventCount, frozen)
            App.timeline.capturing = true
            generate(6)
            verify(App.timeline.eventCount > frozen)
        }

        function test_hoverShowsDetails() {
            const page = createTemporaryObject(pageComponent, root)
            page.zoomToFit()
            const view = findChild(page, "timelineView")
            verify(view !== null)
            tryVerify(() => view.width > 0 && view.height > 0 && view.nsPerPixel > 0, 60000)  // laid out, fitted
            // Find a point on the compute lane that has an event, then hover it.
            const lane = App.timeline.laneCount - 1
            let y = -1
            for (let yy = 0; yy < view.height && y < 0; yy += 2)
                if (view.laneAtY(yy) === lane)
                    y = yy + 4
            verify(y >= 0, "the compute lane is on screen")
            let found = null, fx = 0
            for (let x = 1; x < view.width && !found; x += 2) {
                const e = view.eventAtPoint(x, y)
                if (e.opName !== undefined) { found = e; fx = x }
            }
            verify(found !== null, "an event on the compute lane")
            mouseMove(view, Math.max(0, fx - 3), y)
            mouseMove(view, fx, y)
            tryVerify(() => page.hoveredEvent.opName === found.opName, 60000)
        }
    }
}
