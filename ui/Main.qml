import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import QtQuick.Dialogs
import ZipMoE.Chat

// The main window: the chat list on the left, the pages (chat, memory budget, schedule, settings)
// on the right, and the model bar on top (what is open, loading progress, open another model).
ApplicationWindow {
    id: window
    objectName: "mainWindow"
    visible: true
    width: 1180
    height: 780
    minimumWidth: 760
    minimumHeight: 480
    title: App.modelState === "ready" ? qsTr("ZipMoE — %1").arg(App.modelInfo.name) : qsTr("ZipMoE")

    property alias currentPage: pages.currentIndex

    header: ModelBar {
        objectName: "modelBar"
        onOpenRequested: folderDialog.open()
        onManageRequested: modelManager.open()
    }

    ModelManagerDialog {
        id: modelManager
    }

    FolderDialog {
        id: folderDialog
        title: qsTr("Open a model directory (Hugging Face checkpoint or ZipMoE store)")
        onAccepted: App.openModel(selectedFolder)
    }

    SplitView {
        anchors.fill: parent
        orientation: Qt.Horizontal

        ChatListPane {
            objectName: "chatList"
            SplitView.preferredWidth: window.width < Style.narrowWidth ? Style.sidebarWidthNarrow : Style.sidebarWidth
            SplitView.minimumWidth: 180
        }

        ColumnLayout {
            SplitView.fillWidth: true
            spacing: 0

            TabBar {
                id: tabs
                objectName: "pageTabs"
                Layout.fillWidth: true
                currentIndex: pages.currentIndex
                onCurrentIndexChanged: pages.currentIndex = currentIndex
                TabButton { text: qsTr("Chat") }
                TabButton { text: qsTr("Memory budget") }
                TabButton { text: qsTr("Schedule") }
                TabButton { text: qsTr("Settings") }
            }

            ErrorBanner {
                Layout.fillWidth: true
            }

            StackLayout {
                id: pages
                objectName: "pages"
                Layout.fillWidth: true
                Layout.fillHeight: true

                ChatPage { objectName: "chatPage" }
                BudgetPage { objectName: "budgetPage" }
                SchedulePage {
                    objectName: "schedulePage"
                    timeline: App.timeline
                }
                SettingsPage { objectName: "settingsPage" }
            }
        }
    }
}
