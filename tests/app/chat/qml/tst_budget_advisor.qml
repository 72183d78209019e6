import QtQuick
import QtQuick.Controls
import QtTest
import ZipMoE.Chat

// The budget advisor on the memory-budget page, on the live engine: the predicted curve arrives
// (computed off the GUI thread) and is drawn, the knee and the free memory are shown, a measured
// reply appears as a point, and a click on the chart asks for that budget.
Item {
    id: root
    width: 1000
    height: 900

    Component {
        id: pageComponent
        BudgetPage {
            width: root.width
            height: root.height
        }
    }

    TestCase {
        name: "BudgetAdvisor"
        when: windowShown

        function test_curveKneeMemoryAndMeasuredReply() {
            const page = createTemporaryObject(pageComponent, root)
            App.runtime.refresh()
            App.advisor.recompute()
            tryVerify(() => App.advisor.curve.length >= 2 && !App.advisor.busy, 120000)
            compare(App.advisor.error, "")
            const chart = findChild(page, "budgetAdvisorChart")
            verify(chart !== null && chart.visible)
            verify(findChild(page, "budgetAdvisorCanvas").height > 100)
            const knee = findChild(page, "budgetAdvisorKnee")
            verify(App.advisor.kneeBytes > 0)
            verify(knee.visible && knee.text.length > 0, "the knee is pointed out")
            verify(findChild(page, "budgetAdvisorMemory").visible, "free memory is shown")
            tryVerify(() => findChild(page, "budgetAdvisorSummary").text.indexOf(App.formatBytes(App.runtime.budgetBytes)) >= 0, 60000)

            // A measured reply becomes a point on the chart.
            const pointsBefore = App.advisor.measured.length
            App.newChat()
            App.setSamplingValue("maxTokens", 16)
            verify(App.send("ROMEO:"))
            tryCompare(App, "generating", false, 120000)
            tryVerify(() => App.advisor.measured.length === pointsBefore + 1, 60000)
            tryVerify(() => App.advisor.denseMs > 0 && !App.advisor.busy, 120000)
        }

        function test_clickingTheChartAsksForThatBudget() {
            const page = createTemporaryObject(pageComponent, root)
            tryVerify(() => App.advisor.curve.length >= 2, 120000)
            const canvas = findChild(page, "budgetAdvisorCanvas")
            tryVerify(() => canvas.width > 200, 60000)
            // Near the right end: a budget close to every expert in F.
            mouseClick(canvas, canvas.width - canvas.padRight - 1, canvas.height / 2)
            const last = App.advisor.curve[App.advisor.curve.length - 1].budget
            tryVerify(() => { App.runtime.refresh(); return Math.abs(App.runtime.budgetBytes - last) < 1024 * 1024 }, 60000)
        }
    }
}
