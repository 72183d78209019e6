import QtQuick
import QtQuick.Controls
import QtTest
import ZipMoE.Chat

// The memory budget page on the live runtime: the field and the quick buttons move the budget, the
// page shows the new split after the replan, pools can be switched off and on, and a budget below
// the minimum is refused with the engine's message; the "Follow free memory" switch hands the budget
// to the engine's follower and a budget typed in takes it back.
Item {
    id: root
    width: 1000
    height: 1800  // the whole page, the budget advisor on top included, without scrolling

    Component {
        id: pageComponent
        BudgetPage {
            width: root.width
            height: root.height
        }
    }

    TestCase {
        name: "BudgetPage"
        when: windowShown

        function mib(bytes) { return bytes / (1024 * 1024) }

        function test_fieldMovesTheBudget() {
            const page = createTemporaryObject(pageComponent, root)
            App.runtime.refresh()
            verify(App.runtime.active)
            const target = App.runtime.minimumBudget + App.runtime.expertBytes * 0.4
            const field = findChild(page, "budgetField")
            verify(field !== null)
            field.text = mib(target).toFixed(1)
            mouseClick(findChild(page, "budgetApply"))
            tryVerify(() => { App.runtime.refresh(); return Math.abs(App.runtime.budgetBytes - target) < 0.1 * 1024 * 1024 }, 60000)
            // The slider follows the budget once it is not being dragged.
            const slider = findChild(page, "budgetSlider")
            tryVerify(() => Math.abs(slider.value - App.runtime.budgetBytes) < 0.2 * 1024 * 1024, 60000)
        }

        function test_quickButtonsAndTheSplitAfterAReplan() {
            const page = createTemporaryObject(pageComponent, root)
            const target = App.runtime.minimumBudget + App.runtime.expertBytes
            mouseClick(findChild(page, "budgetQuick100"))
            // The runtime reports the new budget once its plan is applied (on its own thread).
            tryVerify(() => { App.runtime.refresh(); return App.runtime.budgetBytes === target }, 60000)
            let total = 0
            for (const p of App.runtime.pools)
                total += p.ratio
            verify(Math.abs(total - 1) < 0.02, "the planned shares add up to the whole budget: " + total)
            verify(findChild(page, "budgetPoolBar").visible)
        }

        function test_refusedBudgetShowsTheReason() {
            const page = createTemporaryObject(pageComponent, root)
            const field = findChild(page, "budgetField")
            field.text = (mib(App.runtime.minimumBudget) / 4).toFixed(2)
            mouseClick(findChild(page, "budgetApply"))
            const error = findChild(page, "budgetError")
            tryVerify(() => error.visible && error.text.indexOf("minimum") >= 0, 60000)
        }

        function test_followSwitch() {
            const page = createTemporaryObject(pageComponent, root)
            const sw = findChild(page, "budgetFollowSwitch")
            const status = findChild(page, "budgetFollowStatus")
            verify(sw !== null && status !== null)
            verify(!App.runtime.following)
            verify(!sw.checked)
            mouseClick(sw)
            verify(App.runtime.following)
            verify(sw.checked)
            verify(App.runtime.followerActive, "the engine's follower is on")
            verify(App.runtime.budgetBytes >= App.runtime.minimumBudget && App.runtime.budgetBytes <= App.runtime.minimumBudget + App.runtime.expertBytes)
            // The status names the memory available once the follower has read it.
            tryVerify(() => { App.runtime.refresh(); return App.runtime.availableMemoryBytes > 0 }, 60000)
            verify(status.text.indexOf("available") >= 0, status.text)
            verify(status.text.indexOf("left to other programs") >= 0, status.text)

            // A budget typed in wins: the switch goes off and the status says why.
            const field = findChild(page, "budgetField")
            field.text = mib(App.runtime.minimumBudget + App.runtime.expertBytes * 0.3).toFixed(1)
            mouseClick(findChild(page, "budgetApply"))
            verify(!App.runtime.following)
            verify(!sw.checked)
            verify(!App.runtime.followerActive)
            verify(status.text.indexOf("you set the budget") >= 0, status.text)

            // On and off again by the switch.
            mouseClick(sw)
            verify(App.runtime.following && sw.checked)
            mouseClick(sw)
            verify(!App.runtime.following && !sw.checked)
            verify(!App.runtime.followerActive)
        }

        function test_poolCheckBoxes() {
            const page = createTemporaryObject(pageComponent, root)
            const poolC = findChild(page, "poolC"), poolS = findChild(page, "poolS")
            verify(poolC.checked && poolS.checked)
            mouseClick(poolC)
            tryCompare(App.runtime, "poolMask", 0xF & ~0x2, 60000)
            mouseClick(poolC)
            tryCompare(App.runtime, "poolMask", 0xF, 60000)
        }
    }
}
