import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

// The last error, dismissable; the database problem (chats not saved) stays while it lasts.
ColumnLayout {
    spacing: 0
    visible: App.lastError !== "" || App.databaseError !== ""

    Rectangle {
        Layout.fillWidth: true
        implicitHeight: dbText.implicitHeight + 12
        visible: App.databaseError !== ""
        color: "#fef3c7"
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
        color: "#fee2e2"
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
