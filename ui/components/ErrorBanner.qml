import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

// The last error and the last notice, dismissable; the database problem (chats not saved) stays
// while it lasts.
ColumnLayout {
    spacing: 0
    visible: App.lastError !== "" || App.databaseError !== "" || App.notice !== ""

    Rectangle {
        objectName: "noticeBanner"
        Layout.fillWidth: true
        implicitHeight: Math.max(noticeText.implicitHeight, noticeClose.implicitHeight) + 8
        visible: App.notice !== ""
        color: App.darkMode ? "#0c3a52" : "#e0f2fe"
        RowLayout {
            anchors.fill: parent
            anchors.margins: 4
            anchors.leftMargin: 6
            Label {
                id: noticeText
                Layout.fillWidth: true
                wrapMode: Text.Wrap
                text: App.notice
            }
            ToolButton {
                id: noticeClose
                text: "✕"
                onClicked: App.clearNotice()
            }
        }
    }

    Rectangle {
        Layout.fillWidth: true
        implicitHeight: dbText.implicitHeight + 12
        visible: App.databaseError !== ""
        color: App.darkMode ? "#4a3a0a" : "#fef3c7"
        Label {
            id: dbText
            anchors.fill: parent
            anchors.margins: 6
            wrapMode: Text.Wrap
            text: qsTr("Chats are not being saved: %1").arg(App.databaseError)
        }
    }

    Rectangle {
        objectName: "errorBanner"
        Layout.fillWidth: true
        implicitHeight: Math.max(errorText.implicitHeight, closeButton.implicitHeight) + 12
        visible: App.lastError !== ""
        color: App.darkMode ? "#4c1d1d" : "#fee2e2"
        RowLayout {
            anchors.fill: parent
            anchors.margins: 6
            Label {
                id: errorText
                Layout.fillWidth: true
                wrapMode: Text.Wrap
                text: App.lastError
            }
            ToolButton {
                id: closeButton
                text: "✕"
                onClicked: App.clearError()
                ToolTip.visible: hovered
                ToolTip.text: qsTr("Dismiss")
            }
        }
    }
}
