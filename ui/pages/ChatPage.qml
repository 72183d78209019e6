import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

// The conversation: messages (markdown, code blocks), the reply streaming in, and the input box.
// The view follows a streaming reply only while the user is at the bottom: scrolling up is never
// fought; a button brings the view back to the newest text.
Page {
    id: page

    // The page's margin on the shared scale (narrower in a small window).
    readonly property int margin: Style.marginFor(width)

    ColumnLayout {
        anchors.fill: parent
        spacing: 0

        // A branch says where it came from and leads back.
        Pane {
            objectName: "branchBanner"
            Layout.fillWidth: true
            visible: App.branchParent.id !== undefined
            leftPadding: page.margin
            rightPadding: page.margin
            topPadding: Style.tightSpacing
            bottomPadding: Style.tightSpacing

            RowLayout {
                anchors.fill: parent
                spacing: Style.itemSpacing

                Label {
                    Layout.fillWidth: true
                    elide: Text.ElideRight
                    text: App.branchParent.id !== undefined ? qsTr("↳ A branch of “%1”, from message %2.").arg(App.branchParent.title).arg(App.branchParent.position + 1) : ""
                }
                Button {
                    objectName: "openParentChat"
                    flat: true
                    text: qsTr("Open the original")
                    onClicked: App.selectChat(App.branchParent.id)
                }
            }
        }

        ListView {
            id: view
            objectName: "messageView"
            Layout.fillWidth: true
            Layout.fillHeight: true
            clip: true
            model: App.messages
            spacing: Style.itemSpacing
            topMargin: Style.groupSpacing
            bottomMargin: Style.groupSpacing
            boundsBehavior: Flickable.StopAtBounds
            ScrollBar.vertical: ScrollBar {
                onPressedChanged: view.stickToBottom = !pressed && view.nearEnd
            }

            // True while the newest text should stay in view. Only the user's own scrolling (wheel,
            // drag, flick: movement signals; the scroll bar) stops the following, and scrolling
            // back to the end resumes it; the view's own layout adjustments never do.
            property bool stickToBottom: true
            // At the end, margins or not (positionViewAtEnd leaves the bottom margin out).
            readonly property bool nearEnd: contentY + height >= originY + contentHeight - 2
            function scrollToEnd() {
                if (!stickToBottom)
                    return  // the user scrolled away after this was queued
                positionViewAtEnd()
            }
            onMovementStarted: stickToBottom = false
            onMovementEnded: stickToBottom = nearEnd
            onContentHeightChanged: if (stickToBottom) Qt.callLater(scrollToEnd)
            onCountChanged: if (stickToBottom) Qt.callLater(scrollToEnd)

            delegate: MessageDelegate {
                width: ListView.view.width
                lastMessage: index === view.count - 1
                sideMargin: page.margin
            }

            Label {
                anchors.centerIn: parent
                visible: view.count === 0
                width: parent.width * 0.7
                horizontalAlignment: Text.AlignHCenter
                wrapMode: Text.Wrap
                opacity: Style.captionOpacity
                text: App.modelState === "ready"
                      ? qsTr("Say something to %1. The demo model was trained on Shakespeare: try “ROMEO:” or a line of verse.").arg(App.modelInfo.name)
                      : qsTr("Opening the model…")
            }
        }

        Button {
            objectName: "jumpToLatest"
            Layout.alignment: Qt.AlignHCenter
            visible: !view.stickToBottom && view.count > 0 && !view.nearEnd
            text: App.generating ? qsTr("↓ Follow the reply") : qsTr("↓ Latest")
            onClicked: { view.stickToBottom = true; view.scrollToEnd() }
        }

        Pane {
            Layout.fillWidth: true
            leftPadding: page.margin
            rightPadding: page.margin
            topPadding: Style.barPadding
            bottomPadding: Style.barPadding

            RowLayout {
                anchors.fill: parent
                spacing: Style.itemSpacing

                ScrollView {
                    Layout.fillWidth: true
                    Layout.preferredHeight: Math.min(140, Math.max(40, input.implicitHeight))
                    TextArea {
                        id: input
                        objectName: "messageInput"
                        placeholderText: App.modelState === "ready" ? qsTr("Message (Enter sends, Shift+Enter for a new line)")
                                                                    : qsTr("Waiting for the model…")
                        wrapMode: TextArea.Wrap
                        Keys.onReturnPressed: (event) => {
                            if (event.modifiers & Qt.ShiftModifier) { event.accepted = false; return }
                            sendButton.clicked()
                        }
                    }
                }

                Button {
                    id: sendButton
                    objectName: "sendButton"
                    visible: !App.generating
                    enabled: App.modelState === "ready" && input.text.trim().length > 0
                    text: qsTr("Send")
                    highlighted: true
                    onClicked: {
                        if (App.send(input.text)) {
                            input.clear()
                            view.stickToBottom = true
                        }
                    }
                }
                Button {
                    objectName: "stopButton"
                    visible: App.generating
                    text: qsTr("Stop")
                    onClicked: App.stop()
                }
            }
        }
    }
}
