import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

// The last error and the last notice, dismissable; the database problem (chats not saved) stays
// while it lasts.
ColumnLayout {
    id: banners

    // Text lines up with the page below (the same margin).
    readonly property int margin: Style.marginFor(width)

    spacing: 0
    visible: App.lastError !== "" || App.databaseError !== "" || App.notice !== ""

    Rectangle {
        objectName: "noticeBanner"
        Layout.fillWidth: true
        implicitHeight: Math.max(noticeText.implicitHeight, noticeClose.implicitHeight) + 8
        visible: App.notice !== ""
        color: Style.infoBackground
        RowLayout {
            anchors.fill: parent
            anchors.leftMargin: banners.margin
            anchors.rightMargin: banners.margin - Style.rowSpacing
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
        color: Style.warningBackground
        Label {
            id: dbText
            anchors.fill: parent
            anchors.leftMargin: banners.margin
            anchors.rightMargin: banners.margin
            anchors.topMargin: Style.rowSpacing
            anchors.bottomMargin: Style.rowSpacing
            wrapMode: Text.Wrap
            text: qsTr("Chats are not being saved: %1").arg(App.databaseError)
        }
    }

    Rectangle {
        objectName: "errorBanner"
        Layout.fillWidth: true
        implicitHeight: Math.max(errorText.implicitHeight, closeButton.implicitHeight) + 12
        visible: App.lastError !== ""
        color: Style.errorBackground
        RowLayout {
            anchors.fill: parent
            anchors.leftMargin: banners.margin
            anchors.rightMargin: banners.margin - Style.rowSpacing
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
