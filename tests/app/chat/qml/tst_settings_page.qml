import QtQuick
import QtQuick.Controls
import QtTest
import ZipMoE.Chat

// The settings page: per-chat system prompt and sampling reach the controller (and the chat's
// stored settings), and the language switches the interface at run time.
Item {
    id: root
    width: 1000
    height: 900

    Component {
        id: pageComponent
        SettingsPage {
            width: root.width
            height: root.height
        }
    }

    TestCase {
        name: "SettingsPage"
        when: windowShown

        function test_systemPromptAndSamplingBelongToTheChat() {
            App.newChat()
            const page = createTemporaryObject(pageComponent, root)
            const area = findChild(page, "systemPromptArea")
            verify(area !== null && area.enabled)
            area.forceActiveFocus()
            area.text = "You are a herald of Verona."
            area.editingFinished()
            tryCompare(App, "systemPrompt", "You are a herald of Verona.", 60000)
            const field = findChild(page, "temperatureField")
            verify(field !== null)
            field.text = "0.35"
            field.accepted()
            tryVerify(() => Math.abs(App.sampling.temperature - 0.35) < 1e-9, 60000)

            // Another chat has its own settings; coming back restores these.
            const first = App.currentChatId
            App.newChat()
            compare(App.sampling.temperature, 0.35)  // a new chat starts from the current settings
            App.setSamplingValue("temperature", 1.1)
            App.systemPrompt = ""
            App.selectChat(first)
            compare(App.systemPrompt, "You are a herald of Verona.")
            compare(App.sampling.temperature, 0.35)
        }

        function test_languageSwitchesAtRunTime() {
            const page = createTemporaryObject(pageComponent, root)
            const box = findChild(page, "languageBox")
            verify(box !== null)
            const label = findChild(page, "languageLabel")
            verify(label !== null)
            const english = label.text
            App.language = "zh_CN"
            tryVerify(() => label.text !== english, 60000)
            verify(/[\u4e00-\u9fff]/.test(label.text), label.text)
            compare(box.currentIndex, 1)
            App.language = "en"
            tryCompare(label, "text", english, 60000)
        }
    }
}
