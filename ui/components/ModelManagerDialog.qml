// ModelManagerDialog — the stores on disk (App.stores): name, family, codec, shape, size and last
// use; open one, delete one (after a confirmation that names it and its size; the open store and the
// user's own stores outside the app's folder are only forgotten, never deleted), or convert another
// Hugging Face checkpoint (opening it converts it into the app's stores folder, with progress).
pragma ComponentBehavior: Bound

import QtQuick
import QtQuick.Controls
import QtQuick.Dialogs
import QtQuick.Layouts
import ZipMoE.Chat

Dialog {
    id: dialog

    property string pendingDelete: ""
    property string pendingName: ""
    property real pendingSize: 0

    objectName: "modelManager"
    title: qsTr("Models on this computer")
    modal: true
    standardButtons: Dialog.Close
    width: Math.min(parent ? parent.width - 60 : 800, 860)
    height: Math.min(parent ? parent.height - 60 : 560, 560)
    anchors.centerIn: parent
    // The shared scale: the title, the list and the buttons share one inset.
    padding: Style.groupSpacing
    topPadding: Style.itemSpacing
    header: Label {
        text: dialog.title
        font.bold: true
        elide: Text.ElideRight
        leftPadding: Style.groupSpacing
        rightPadding: Style.groupSpacing
        topPadding: Style.groupSpacing
    }
    footer: DialogButtonBox {
        leftPadding: Style.groupSpacing
        rightPadding: Style.groupSpacing
        bottomPadding: Style.groupSpacing
        topPadding: 0
    }
    onOpened: App.stores.refresh()

    ColumnLayout {
        anchors.fill: parent
        spacing: Style.itemSpacing

        Label {
            Layout.fillWidth: true
            wrapMode: Text.Wrap
            opacity: Style.captionOpacity
            text: qsTr("Stores the app converted live in %1; stores opened from elsewhere are listed too.").arg(App.stores.storesDir)
        }

        ListView {
            id: list

            objectName: "storeList"
            Layout.fillWidth: true
            Layout.fillHeight: true
            clip: true
            model: App.stores
            spacing: Style.tightSpacing
            ScrollBar.vertical: ScrollBar {}

            delegate: Pane {
                id: row

                required property int index
                required property string path
                required property string name
                required property string family
                required property string codec
                required property real sizeBytes
                required property int layers
                required property int experts
                required property var lastUsed
                required property bool managed
                required property bool isOpen

                width: ListView.view.width
                padding: Style.itemSpacing
                background: Rectangle {
                    color: row.index % 2 ? row.palette.alternateBase : row.palette.base
                    border.color: row.isOpen ? row.palette.highlight : "transparent"
                    radius: 4
                }

                RowLayout {
                    anchors.fill: parent
                    spacing: Style.itemSpacing

                    ColumnLayout {
                        Layout.fillWidth: true
                        spacing: 2

                        Label {
                            Layout.fillWidth: true
                            elide: Text.ElideMiddle
                            font.bold: true
                            text: row.isOpen ? qsTr("%1 (open)").arg(row.name) : row.name
                        }
                        Label {
                            Layout.fillWidth: true
                            elide: Text.ElideRight
                            font.pixelSize: Style.captionSize
                            text: qsTr("%1 · %2 layers × %3 experts · codec %4 · %5 on disk").arg(row.family).arg(row.layers).arg(row.experts).arg(row.codec).arg(App.formatBytes(row.sizeBytes))
                        }
                        Label {
                            Layout.fillWidth: true
                            elide: Text.ElideMiddle
                            font.pixelSize: Style.captionSize
                            opacity: Style.captionOpacity
                            text: (row.lastUsed && !isNaN(row.lastUsed.getTime()) ? qsTr("last used %1").arg(Qt.formatDateTime(row.lastUsed, Qt.DefaultLocaleShortDate)) : qsTr("never opened")) + " · " + row.path
                        }
                    }
                    Button {
                        objectName: "openStore" + row.index
                        text: qsTr("Open")
                        enabled: !row.isOpen && App.modelState !== "loading"
                        onClicked: {
                            App.openModel(row.path);
                            dialog.close();
                        }
                    }
                    Button {
                        objectName: "deleteStore" + row.index
                        text: row.managed ? qsTr("Delete…") : qsTr("Forget…")
                        enabled: !row.isOpen
                        onClicked: {
                            dialog.pendingDelete = row.path;
                            dialog.pendingName = row.name;
                            dialog.pendingSize = row.managed ? row.sizeBytes : 0;
                            confirm.open();
                        }
                    }
                }
            }

            Label {
                anchors.centerIn: parent
                visible: list.count === 0
                opacity: Style.captionOpacity
                text: qsTr("No stores yet: open a Hugging Face checkpoint to convert it.")
            }
        }

        Label {
            objectName: "storeError"
            Layout.fillWidth: true
            visible: text !== ""
            wrapMode: Text.Wrap
            color: Style.error
            text: App.stores.error
        }

        RowLayout {
            Layout.fillWidth: true

            Button {
                objectName: "convertAnother"
                text: qsTr("Convert another checkpoint…")
                enabled: App.modelState !== "loading"
                onClicked: convertDialog.open()
            }
            Item {
                Layout.fillWidth: true
            }
            Button {
                text: qsTr("Refresh")
                onClicked: App.stores.refresh()
            }
        }
    }

    Dialog {
        id: confirm

        objectName: "confirmDelete"
        anchors.centerIn: parent
        modal: true
        title: dialog.pendingSize > 0 ? qsTr("Delete this store?") : qsTr("Forget this store?")
        standardButtons: Dialog.Yes | Dialog.Cancel
        onAccepted: App.stores.remove(dialog.pendingDelete)

        Label {
            width: 420
            wrapMode: Text.Wrap
            text: dialog.pendingSize > 0 ? qsTr("“%1” and its %2 on disk will be deleted. Its chats stay; the model can be converted again from its checkpoint.").arg(dialog.pendingName).arg(App.formatBytes(dialog.pendingSize)) : qsTr("“%1” is not in the app's stores folder: it stays on disk, the app only stops listing it.").arg(dialog.pendingName)
        }
    }

    FolderDialog {
        id: convertDialog

        title: qsTr("Choose a Hugging Face checkpoint to convert")
        onAccepted: {
            App.openModel(selectedFolder);
            dialog.close();
        }
    }
}
