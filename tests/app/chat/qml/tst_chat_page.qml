import QtQuick
import QtQuick.Controls
import QtTest
import ZipMoE.Chat

// The chat page driven like a user would: type, send, watch the reply stream, stop, regenerate,
// and scroll up during a reply without the view pulling back.
Item {
    id: root
    width: 900
    height: 640

    Component {
        id: pageComponent
        ChatPage {
            width: root.width
            height: root.height
        }
    }

    Component {
        id: smallPageComponent
        ChatPage {
            width: 600
            height: 280
        }
    }

    TestCase {
        name: "ChatPage"
        when: windowShown

        function cleanup() {
            App.setGenerationPaused(false)  // also when a test failed while a reply was held
        }

        function send(page, text) {
            const input = findChild(page, "messageInput")
            input.text = text
            const button = findChild(page, "sendButton")
            verify(button.enabled, "send is enabled once there is text")
            mouseClick(button)
        }

        function test_1_sendShowsTheStreamingReplyAndItsStats() {
            const page = createTemporaryObject(pageComponent, root)
            App.newChat()
            App.setSamplingValue("maxTokens", 32)
            send(page, "ROMEO:\nWhat light through yonder window breaks")
            verify(App.generating)
            compare(App.messages.count, 2)
            verify(findChild(page, "stopButton").visible)
            tryCompare(App, "generating", false, 120000)
            compare(findChild(page, "messageInput").text, "")
            const view = findChild(page, "messageView")
            const reply = view.itemAtIndex(view.count - 1)
            verify(reply !== null)
            const stats = findChild(reply, "replyStats")
            verify(stats !== null)
            tryVerify(() => stats.visible && stats.text.indexOf("TTFT") >= 0, 60000)
            verify(stats.text.indexOf("tok/s") >= 0, stats.text)
            verify(stats.text.indexOf("expert hit rate") >= 0, stats.text)
        }

        function test_2_stopAndRegenerate() {
            const page = createTemporaryObject(pageComponent, root)
            App.newChat()
            App.setSamplingValue("maxTokens", 200)
            send(page, "JULIET:")
            tryVerify(() => App.messages.count === 2, 60000)
            mouseClick(findChild(page, "stopButton"))
            tryCompare(App, "generating", false, 120000)
            App.setSamplingValue("maxTokens", 16)
            verify(App.regenerate())
            tryCompare(App, "generating", false, 120000)
            compare(App.messages.count, 2)
        }

        function test_3_scrollingUpIsNotFought() {
            const page = createTemporaryObject(smallPageComponent, root)
            App.newChat()
            App.setSamplingValue("maxTokens", 16)
            for (let i = 0; i < 3; ++i) {
                send(page, "Line " + i + " of a long conversation, so that the view must scroll.")
                tryCompare(App, "generating", false, 120000)
            }
            const view = findChild(page, "messageView")
            App.setSamplingValue("maxTokens", 200)
            App.setSamplingValue("seed", 7)  // the same reply every run (it does not end at once)
            // The reply is held after its first token until the user has scrolled: the test acts
            // while it streams without racing the model.
            App.setGenerationPaused(true)
            send(page, "ROMEO:")
            // The view follows the reply down first…
            tryVerify(() => view.contentHeight > view.height && !view.atYBeginning && view.nearEnd, 60000)
            // …then the user scrolls to the top while the reply streams: the view stays there.
            mouseWheel(view, view.width / 2, view.height / 2, 0, 12000)
            tryVerify(() => !view.moving, 60000)
            verify(view.atYBeginning)
            const topIndex = view.indexAt(20, view.contentY + 20)
            verify(App.generating, "the reply is still streaming after the user scrolled up")
            App.setGenerationPaused(false)
            tryCompare(App, "generating", false, 120000)
            wait(100)
            // contentY itself may shift with the origin as delegates resize; what the user sees may not.
            verify(view.atYBeginning)
            compare(view.indexAt(20, view.contentY + 20), topIndex)
            verify(findChild(page, "jumpToLatest").visible)
        }
    }
}
