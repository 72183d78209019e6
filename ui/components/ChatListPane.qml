import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

// The chat list: search (titles and message text), new chat, and per chat rename and delete.
Pane {
    id: pane
    padding: Style.itemSpacing

    ColumnLayout {
        anchors.fill: parent
        spacing: Style.itemSpacing

        Button {
            objectName: "newChatButton"
            Layout.fillWidth: true
            text: qsTr("New chat")
            onClicked: App.newChat()
        }

        TextField {
            objectName: "chatSearch"
            Layout.fillWidth: true
            placeholderText: qsTr("Search chats…")
            text: App.searchText
            onTextEdited: App.searchText = text
        }

        ListView {
            id: list
            objectName: "chatListView"
            Layout.fillWidth: true
            Layout.fillHeight: true
            clip: true
            model: App.chats
            spacing: 2
            ScrollBar.vertical: ScrollBar {}

            delegate: ItemDelegate {
                id: row
                required property int index
                required property var chatId
                required property string title
                required property var updatedAt
                required property var parentId
                property bool editing: false
                width: ListView.view.width
                highlighted: chatId === App.currentChatId
                text: editing ? "" : (parentId > 0 ? "↳ " + title : title)
                onClicked: App.selectChat(chatId)
                onDoubleClicked: editing = true
                ToolTip.visible: hovered && !editing
                ToolTip.delay: 800
                ToolTip.text: Qt.formatDateTime(updatedAt, Qt.DefaultLocaleShortDate)

                TextField {
                    anchors.fill: parent
                    visible: row.editing
                    text: row.title
                    onVisibleChanged: if (visible) { forceActiveFocus(); selectAll() }
                    onAccepted: { App.renameChat(row.chatId, text); row.editing = false }
                    onActiveFocusChanged: if (!activeFocus) row.editing = false
                    Keys.onEscapePressed: row.editing = false
                }

                ToolButton {
                    anchors.right: parent.right
                    anchors.verticalCenter: parent.verticalCenter
                    visible: row.hovered || row.highlighted
                    text: "⋯"
                    onClicked: menu.popup()
                    Menu {
                        id: menu
                        MenuItem {
                            text: qsTr("Rename")
                            onTriggered: row.editing = true
                        }
                        MenuItem {
                            text: qsTr("Delete")
                            onTriggered: confirm.open()
                        }
                    }
                }

                Dialog {
                    id: confirm
                    parent: Overlay.overlay
                    anchors.centerIn: parent
                    modal: true
                    title: qsTr("Delete chat")
                    standardButtons: Dialog.Ok | Dialog.Cancel
                    Label { text: qsTr("Delete “%1” and all its messages?").arg(row.title) }
                    onAccepted: App.deleteChat(row.chatId)
                }
            }

            Label {
                anchors.centerIn: parent
                visible: list.count === 0
                text: App.searchText !== "" ? qsTr("No chat matches.") : qsTr("No chats yet.")
                opacity: Style.captionOpacity
            }
        }
    }
}
