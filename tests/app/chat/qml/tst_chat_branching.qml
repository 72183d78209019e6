import QtQuick
import QtQuick.Controls
import QtTest
import ZipMoE.Chat

// Branching from the chat page on the live engine: the Branch button of the first message opens a
// new chat holding only that message, with a banner leading back; the original then lists the
// branch under that message; a reply with a code block offers to copy it.
Item {
    id: root
    width: 1000
    height: 700

    Component {
        id: pageComponent
        ChatPage {
            width: root.width
            height: root.height
        }
    }

    TestCase {
        name: "ChatBranching"
        when: windowShown

        function test_branchFromTheFirstMessageAndComeBack() {
            const page = createTemporaryObject(pageComponent, root)
            App.newChat()
            App.setSamplingValue("maxTokens", 8)
            verify(App.send("ROMEO:"))
            tryCompare(App, "generating", false, 120000)
            const original = App.currentChatId
            const view = findChild(page, "messageView")
            tryVerify(() => view.count === 2 && view.itemAtIndex(0) !== null, 60000)
            const first = view.itemAtIndex(0)
            const branch = findChild(first, "branchButton")
            verify(branch !== null)
            // The message's actions show while the pointer hovers it (a HoverHandler, which the
            // offscreen test window does not hover): the button is pressed as a click would.
            branch.clicked()
            tryVerify(() => App.currentChatId !== original, 60000)
            tryCompare(view, "count", 1, 60000)
            const banner = findChild(page, "branchBanner")
            verify(banner.visible)
            compare(App.branchParent.id, original)
            const back = findChild(page, "openParentChat")
            tryVerify(() => back.visible && back.width > 0 && back.height > 0, 60000)
            waitForRendering(page)
            mouseClick(back)
            tryCompare(App, "currentChatId", original, 60000)
            tryCompare(view, "count", 2, 60000)
            verify(!banner.visible)
            tryVerify(() => view.itemAtIndex(0) !== null && findChild(view.itemAtIndex(0), "branchLinks").visible, 60000)
        }

        function test_codeBlocksGetCopyButtons() {
            const blocks = App.codeBlocks("Here:\n```cpp\nint main() {}\n```\n")
            compare(blocks.length, 1)
            compare(blocks[0].language, "cpp")
            compare(blocks[0].code, "int main() {}")
        }
    }
}
