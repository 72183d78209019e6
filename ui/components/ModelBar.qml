import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

// The model on top of the window: its name and runtime, the loading / conversion progress with a
// Cancel button, the error when it failed, and the buttons to open another model or the demo.
ToolBar {
    id: bar
    signal openRequested()
    signal manageRequested()

    // Lines up with the chat list below it.
    leftPadding: Style.itemSpacing
    rightPadding: Style.itemSpacing

    RowLayout {
        anchors.fill: parent
        spacing: Style.itemSpacing

        Label {
            text: "ZipMoE"
            font.bold: true
            font.pixelSize: Style.brandSize
        }

        Label {
            objectName: "modelLabel"
            visible: App.modelState === "ready"
            text: qsTr("%1 · %2 · %3 layers × %4 experts · budget %5")
                .arg(App.modelInfo.name).arg(App.modelInfo.family)
                .arg(App.modelInfo.layers).arg(App.modelInfo.experts)
                .arg(App.formatBytes(App.runtime.budgetBytes))
            elide: Text.ElideRight
            Layout.fillWidth: true
        }

        ColumnLayout {
            visible: App.modelState === "loading"
            Layout.fillWidth: true
            spacing: 2
            Label {
                text: App.loadStage
                elide: Text.ElideMiddle
                Layout.fillWidth: true
            }
            ProgressBar {
                objectName: "loadProgress"
                Layout.fillWidth: true
                from: 0
                to: 1
                value: App.loadProgress < 0 ? 0 : App.loadProgress
                indeterminate: App.loadProgress < 0
            }
        }

        Label {
            visible: App.modelState === "failed"
            text: qsTr("The model did not open: %1").arg(App.modelError)
            color: Style.error
            elide: Text.ElideRight
            Layout.fillWidth: true
        }

        Item {
            visible: App.modelState === "none"
            Layout.fillWidth: true
        }

        Button {
            visible: App.modelState === "loading"
            text: qsTr("Cancel")
            onClicked: App.cancelLoading()
        }
        Button {
            objectName: "openModelButton"
            text: qsTr("Open model…")
            enabled: App.modelState !== "loading"
            onClicked: bar.openRequested()
        }
        Button {
            objectName: "manageModelsButton"
            text: qsTr("Models…")
            onClicked: bar.manageRequested()
        }
        Button {
            text: qsTr("Demo model")
            enabled: App.modelState !== "loading"
            onClicked: App.openModel("")
        }
    }
}
