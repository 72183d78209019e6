import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

// One message: who wrote it, its text as markdown (selectable), per-reply statistics, and actions
// (copy; edit and resend a user message; regenerate the last reply).
Item {
    id: root
    required property int index
    required property var messageId
    required property int position
    required property string role
    required property string content
    required property string markdown
    required property string messageState
    required property double ttftMs
    required property double tokensPerSecond
    required property double hitRate
    required property int generatedTokens
    required property string stopReason
    property bool lastMessage: false
    property bool editing: false
    readonly property bool isUser: role === "user"
    // The chats branched from this message, and its code blocks (copied one by one).
    readonly property var branchesHere: App.branches.filter(b => b.position === root.position)
    readonly property var blocks: root.isUser || root.messageState === "streaming" ? [] : App.codeBlocks(root.content)

    // The gap between a bubble and the view's edge: the page's margin.
    property int sideMargin: Style.pageMargin

    implicitHeight: bubble.height + 4

    HoverHandler { id: hover }

    Rectangle {
        id: bubble
        x: root.isUser ? root.width - width - root.sideMargin : root.sideMargin
        width: Math.min(root.width - 2 * root.sideMargin, Math.max(body.implicitWidth, 260) + 24)
        height: column.implicitHeight + 16
        radius: Style.radius
        color: root.isUser ? (Style.userBubble) : (root.messageState === "error" ? (Style.errorBackground) : palette.base)
        border.color: root.messageState === "incomplete" ? Style.warning : Qt.darker(color, 1.08)

        ColumnLayout {
            id: column
            x: 12
            y: 8
            width: parent.width - 24
            spacing: Style.tightSpacing

            RowLayout {
                Layout.fillWidth: true
                Label {
                    text: root.isUser ? qsTr("You") : (root.role === "assistant" ? qsTr("Model") : qsTr("System"))
                    font.bold: true
                    opacity: Style.captionOpacity
                }
                BusyIndicator {
                    visible: root.messageState === "streaming"
                    running: visible
                    Layout.preferredHeight: 18
                    Layout.preferredWidth: 18
                }
                Item { Layout.fillWidth: true }
                Row {
                    visible: hover.hovered && root.messageState !== "streaming" && !root.editing
                    spacing: 2
                    ToolButton {
                        text: qsTr("Copy")
                        font.pixelSize: Style.captionSize
                        onClicked: App.copyMessage(root.position)
                    }
                    ToolButton {
                        objectName: "branchButton"
                        visible: !App.generating
                        text: qsTr("Branch")
                        font.pixelSize: Style.captionSize
                        ToolTip.visible: hovered
                        ToolTip.delay: 500
                        ToolTip.text: qsTr("Continue the conversation from here in a new chat; this one stays as it is.")
                        onClicked: App.branchFrom(root.position)
                    }
                    ToolButton {
                        visible: root.isUser && !App.generating
                        text: qsTr("Edit")
                        font.pixelSize: Style.captionSize
                        onClicked: { editor.text = root.content; root.editing = true }
                    }
                    ToolButton {
                        objectName: "regenerateButton"
                        visible: !root.isUser && root.lastMessage && !App.generating
                        text: qsTr("Regenerate")
                        font.pixelSize: Style.captionSize
                        onClicked: App.regenerate()
                    }
                }
            }

            TextEdit {
                id: body
                objectName: "messageText"
                visible: !root.editing
                Layout.fillWidth: true
                readOnly: true
                selectByMouse: true
                wrapMode: TextEdit.Wrap
                textFormat: root.isUser ? TextEdit.PlainText : TextEdit.MarkdownText
                text: (root.isUser ? root.content : root.markdown) + (root.messageState === "streaming" ? " ▍" : "")
                color: palette.text
                selectionColor: palette.highlight
                selectedTextColor: palette.highlightedText
            }

            ColumnLayout {
                visible: root.editing
                Layout.fillWidth: true
                TextArea {
                    id: editor
                    Layout.fillWidth: true
                    wrapMode: TextArea.Wrap
                }
                RowLayout {
                    Button {
                        text: qsTr("Save and resend")
                        highlighted: true
                        onClicked: { root.editing = false; App.editAndResend(root.position, editor.text) }
                    }
                    Button {
                        text: qsTr("Cancel")
                        onClicked: root.editing = false
                    }
                }
            }

            Flow {
                objectName: "codeBlockButtons"
                visible: root.blocks.length > 0 && !root.editing
                Layout.fillWidth: true
                spacing: Style.tightSpacing

                Repeater {
                    model: root.blocks

                    delegate: Button {
                        required property int index
                        required property var modelData

                        objectName: "copyCode" + index
                        flat: true
                        font.pixelSize: Style.captionSize
                        text: modelData.language !== "" ? qsTr("Copy %1 code (%2)").arg(modelData.language).arg(index + 1) : qsTr("Copy code (%1)").arg(index + 1)
                        onClicked: {
                            if (App.copyText(modelData.code))
                                text = qsTr("Copied");
                        }
                    }
                }
            }

            Flow {
                objectName: "branchLinks"
                visible: root.branchesHere.length > 0
                Layout.fillWidth: true
                spacing: Style.tightSpacing

                Label {
                    height: Style.iconButtonSize  // level with the branch buttons beside it
                    verticalAlignment: Text.AlignVCenter
                    font.pixelSize: Style.captionSize
                    opacity: Style.captionOpacity
                    text: qsTr("Branches from here:")
                }
                Repeater {
                    model: root.branchesHere

                    delegate: Button {
                        required property var modelData

                        width: Math.min(implicitWidth, parent ? parent.width : implicitWidth)  // elided inside the bubble
                        flat: true
                        font.pixelSize: Style.captionSize
                        text: "↳ " + modelData.title
                        onClicked: App.selectChat(modelData.id)
                    }
                }
            }

            Label {
                objectName: "replyStats"
                visible: !root.isUser && (root.messageState === "complete" || root.messageState === "incomplete" || root.messageState === "error")
                Layout.fillWidth: true
                wrapMode: Text.Wrap
                font.pixelSize: Style.captionSize
                opacity: Style.captionOpacity
                text: {
                    if (root.messageState === "incomplete")
                        return qsTr("Incomplete: the app stopped while this reply was being written.")
                    if (root.messageState === "error")
                        return qsTr("Failed: %1").arg(root.stopReason)
                    let parts = [qsTr("TTFT %1 ms").arg(root.ttftMs.toFixed(0))]
                    if (root.tokensPerSecond > 0)
                        parts.push(qsTr("%1 tok/s").arg(root.tokensPerSecond.toFixed(1)))
                    parts.push(qsTr("%n token(s)", "", root.generatedTokens))
                    if (root.hitRate >= 0)
                        parts.push(qsTr("expert hit rate %1 %").arg((root.hitRate * 100).toFixed(0)))
                    if (root.stopReason === "stopped")
                        parts.push(qsTr("stopped"))
                    else if (root.stopReason === "max_tokens")
                        parts.push(qsTr("length limit"))
                    else if (root.stopReason === "context_window")
                        parts.push(qsTr("context full"))
                    return parts.join(" · ")
                }
            }
        }
    }
}
