// SettingsPage — the app's language, the open chat's system prompt and sampling settings (each chat
// keeps its own), what the open model is, where the history is kept, and the chat's export.
pragma ComponentBehavior: Bound

import QtQuick
import QtQuick.Controls
import QtQuick.Dialogs
import QtQuick.Layouts
import ZipMoE.Chat

Page {
    id: page

    // The page's margin on the shared scale (narrower in a small window).
    readonly property int margin: Style.marginFor(width)

    readonly property bool hasChat: App.currentChatId !== 0
    property string exportStatus: ""
    property bool exportFailed: false

    // The system prompt is written back when its editing ends, and only to the chat it was edited
    // for: switching chats while typing drops the edit instead of giving it to the other chat.
    property real promptChatId: 0

    function syncPrompt(force: bool) {
        if (force || !promptArea.activeFocus)
            promptArea.text = App.systemPrompt;
    }

    function sampling(name: string): real {
        return Number(App.sampling[name]) || 0;
    }

    function exportTo(fileUrl: url, suffix: string) {
        let target = String(fileUrl);
        // The export picks its format by the suffix: make sure the file has the one chosen.
        if (!target.toLowerCase().endsWith("." + suffix))
            target += "." + suffix;
        page.exportFailed = !App.exportChat(App.currentChatId, target);
        page.exportStatus = page.exportFailed ? (App.lastError !== "" ? App.lastError : qsTr("The export failed.")) : qsTr("Exported to %1").arg(decodeURIComponent(target.replace(/^file:\/\//, "")));
    }

    // Suggests "<chat title>.<suffix>" in the dialog's folder, then opens it.
    function openExport(dialog: FileDialog, suffix: string) {
        const name = (App.currentChatTitle || qsTr("chat")).replace(/[\\/:*?"<>|\x00-\x1f]+/g, " ").trim().slice(0, 80) || qsTr("chat");
        const folder = String(dialog.currentFolder);
        if (folder !== "")
            dialog.selectedFile = folder.replace(/\/+$/, "") + "/" + encodeURIComponent(name + "." + suffix);
        dialog.open();
    }

    title: qsTr("Settings")
    objectName: "settingsPage"
    Component.onCompleted: syncPrompt(true)

    Connections {
        target: App

        function onChatSettingsChanged() {
            page.syncPrompt(false);
        }
        function onCurrentChatChanged() {
            page.syncPrompt(true);
            page.exportStatus = "";
        }
    }

    FileDialog {
        id: markdownDialog

        objectName: "exportMarkdownDialog"
        title: qsTr("Export the chat as Markdown")
        fileMode: FileDialog.SaveFile
        defaultSuffix: "md"
        nameFilters: [qsTr("Markdown files (*.md)"), qsTr("All files (*)")]
        onAccepted: page.exportTo(selectedFile, "md")
    }

    FileDialog {
        id: jsonDialog

        objectName: "exportJsonDialog"
        title: qsTr("Export the chat as JSON")
        fileMode: FileDialog.SaveFile
        defaultSuffix: "json"
        nameFilters: [qsTr("JSON files (*.json)"), qsTr("All files (*)")]
        onAccepted: page.exportTo(selectedFile, "json")
    }

    ScrollView {
        id: scroll

        anchors.fill: parent
        contentWidth: availableWidth

        ColumnLayout {
            x: Math.max(page.margin, (scroll.availableWidth - width) / 2)
            width: Math.min(scroll.availableWidth - 2 * page.margin, Style.maxContentWidth)
            spacing: Style.groupSpacing

            Item {
                implicitHeight: page.margin - Style.groupSpacing
            }

            GroupBox {
                Layout.fillWidth: true
                title: qsTr("Language")

                RowLayout {
                    anchors.fill: parent
                    spacing: Style.itemSpacing

                    Label {
                        objectName: "languageLabel"
                        Layout.preferredWidth: Style.labelWidth
                        text: qsTr("Interface language")
                    }

                    ComboBox {
                        id: languageBox

                        objectName: "languageBox"
                        Layout.preferredWidth: Style.comboWidth
                        textRole: "text"
                        valueRole: "value"
                        // Each language under its own name, so that anyone can find theirs.
                        model: [{ "text": "English", "value": "en" }, { "text": "简体中文", "value": "zh_CN" }]
                        currentIndex: App.language === "zh_CN" ? 1 : 0
                        onActivated: App.language = currentValue
                    }

                    Item {
                        Layout.fillWidth: true
                    }
                }
            }

            GroupBox {
                Layout.fillWidth: true
                title: page.hasChat ? qsTr("This chat: %1").arg(App.currentChatTitle) : qsTr("This chat")

                ColumnLayout {
                    anchors.fill: parent
                    spacing: Style.itemSpacing

                    Label {
                        objectName: "noChatNote"
                        Layout.fillWidth: true
                        visible: !page.hasChat
                        wrapMode: Text.Wrap
                        opacity: Style.captionOpacity
                        text: qsTr("Open a chat or start a new one to edit its system prompt and sampling settings: every chat keeps its own.")
                    }

                    Label {
                        text: qsTr("System prompt")
                        font.bold: true
                    }

                    ScrollView {
                        Layout.fillWidth: true
                        Layout.preferredHeight: 110
                        enabled: page.hasChat
                        background: Rectangle {
                            color: page.palette.base
                            border.color: promptArea.activeFocus ? page.palette.highlight : page.palette.mid
                            radius: 2
                        }

                        TextArea {
                            id: promptArea

                            objectName: "systemPromptArea"
                            wrapMode: TextEdit.Wrap
                            selectByMouse: true
                            placeholderText: qsTr("e.g. You are a concise assistant. (Saved when you leave the field.)")
                            onActiveFocusChanged: {
                                if (activeFocus)
                                    page.promptChatId = App.currentChatId;
                            }
                            onEditingFinished: {
                                if (page.hasChat && App.currentChatId === page.promptChatId && text !== App.systemPrompt)
                                    App.systemPrompt = text;
                            }
                        }
                    }

                    Label {
                        Layout.topMargin: Style.rowSpacing
                        text: qsTr("Sampling")
                        font.bold: true
                    }

                    ColumnLayout {
                        Layout.fillWidth: true
                        enabled: page.hasChat
                        spacing: Style.tightSpacing

                        Repeater {
                            // name, caption, from, to, step, decimals, hint
                            model: [["temperature", qsTr("Temperature"), 0, 2, 0.01, 2, qsTr("0 = always the most likely token (greedy).")], ["topK", qsTr("Top-k"), 0, 200, 1, 0, qsTr("Keep the k most likely tokens; 0 = off.")], ["topP", qsTr("Top-p"), 0.01, 1, 0.01, 2, qsTr("Keep the most likely tokens up to this total probability; 1 = off.")], ["minP", qsTr("Min-p"), 0, 1, 0.01, 2, qsTr("Drop tokens less likely than this fraction of the most likely one; 0 = off.")], ["repetitionPenalty", qsTr("Repetition penalty"), 1, 2, 0.01, 2, qsTr("1 = off; higher values discourage repeating tokens.")], ["maxTokens", qsTr("Max new tokens"), 1, 4096, 1, 0, qsTr("The reply stops after this many tokens.")]]

                            delegate: SettingsSlider {
                                required property var modelData

                                objectName: modelData[0] + "Setting"
                                Layout.fillWidth: true
                                settingName: modelData[0]
                                label: modelData[1]
                                from: modelData[2]
                                to: modelData[3]
                                stepSize: modelData[4]
                                decimals: modelData[5]
                                hint: modelData[6]
                                value: page.sampling(settingName)
                                onCommitted: v => App.setSamplingValue(settingName, v)
                            }
                        }

                        RowLayout {
                            spacing: Style.itemSpacing

                            Label {
                                Layout.preferredWidth: Style.labelWidth
                                text: qsTr("Seed")
                            }

                            TextField {
                                id: seedField

                                objectName: "seedField"
                                Layout.preferredWidth: Style.valueWidth
                                horizontalAlignment: TextInput.AlignRight
                                selectByMouse: true
                                validator: RegularExpressionValidator {
                                    regularExpression: /^\d{0,15}$/
                                }
                                onAccepted: App.setSamplingValue("seed", text === "" ? 0 : Number(text))
                                onActiveFocusChanged: {
                                    if (!activeFocus && acceptableInput && Number(text) !== page.sampling("seed"))
                                        App.setSamplingValue("seed", text === "" ? 0 : Number(text));
                                }

                                Binding {
                                    target: seedField
                                    property: "text"
                                    value: page.sampling("seed").toFixed(0)
                                    when: !seedField.activeFocus
                                    restoreMode: Binding.RestoreNone
                                }
                            }

                            Button {
                                objectName: "seedRandomButton"
                                text: qsTr("Random")
                                enabled: page.sampling("seed") !== 0
                                onClicked: App.setSamplingValue("seed", 0)
                            }

                            Label {
                                Layout.fillWidth: true
                                wrapMode: Text.Wrap
                                opacity: Style.captionOpacity
                                text: qsTr("0 = a new random seed for every reply; any other value repeats the same reply.")
                            }
                        }
                    }
                }
            }

            GroupBox {
                Layout.fillWidth: true
                title: qsTr("Model")

                ColumnLayout {
                    anchors.fill: parent
                    spacing: Style.rowSpacing

                    Label {
                        visible: App.modelState !== "ready"
                        Layout.fillWidth: true
                        wrapMode: Text.Wrap
                        opacity: Style.captionOpacity
                        text: App.modelState === "loading" ? qsTr("A model is loading…") : qsTr("No model is open.")
                    }

                    GridLayout {
                        objectName: "modelInfoGrid"
                        Layout.fillWidth: true
                        visible: App.modelState === "ready"
                        columns: 2
                        columnSpacing: Style.itemSpacing
                        rowSpacing: Style.rowSpacing

                        Repeater {
                            // Caption, value, caption, value, …: one label per grid cell.
                            model: {
                                const m = App.modelInfo;
                                const n = v => v === undefined || v === null || v === "" ? "–" : String(v);
                                return [qsTr("Name"), n(m.name), qsTr("Family"), n(m.family), qsTr("Layers"), n(m.layers), qsTr("Experts per layer"), n(m.experts), qsTr("Experts per token"), n(m.expertsPerToken), qsTr("Context length"), m.contextLength ? qsTr("%1 tokens").arg(m.contextLength) : "–", qsTr("Expert bytes (BF16)"), m.expertBytes ? App.formatBytes(m.expertBytes) : "–", qsTr("Compute dtype"), n(m.computeDtype), qsTr("Load time"), m.loadSeconds !== undefined ? qsTr("%1 s").arg(Number(m.loadSeconds).toFixed(1)) : "–", qsTr("Source"), n(m.sourcePath), qsTr("Store"), n(m.storePath)];
                            }

                            delegate: Label {
                                required property string modelData
                                required property int index

                                Layout.fillWidth: index % 2 === 1
                                Layout.preferredWidth: index % 2 === 0 ? Style.labelWidth : -1
                                Layout.alignment: Qt.AlignTop
                                text: modelData
                                elide: index % 2 === 0 ? Text.ElideRight : Text.ElideNone
                                opacity: index % 2 === 0 ? Style.captionOpacity : 1
                                wrapMode: index % 2 === 1 ? Text.WrapAnywhere : Text.NoWrap
                            }
                        }
                    }
                }
            }

            GroupBox {
                objectName: "localServerBox"
                Layout.fillWidth: true
                title: qsTr("Local server")

                ColumnLayout {
                    anchors.fill: parent
                    spacing: Style.rowSpacing

                    Switch {
                        objectName: "localServerSwitch"
                        text: qsTr("Serve the loaded model on this computer (OpenAI-compatible API)")
                        checked: App.localServer.running
                        enabled: !App.localServer.busy && (App.modelState === "ready" || App.localServer.running)
                        onToggled: App.localServer.setEnabled(checked)
                    }

                    GridLayout {
                        visible: App.localServer.running
                        Layout.fillWidth: true
                        columns: 2
                        columnSpacing: Style.itemSpacing
                        rowSpacing: Style.rowSpacing

                        Label {
                            Layout.preferredWidth: Style.labelWidth
                            text: qsTr("URL")
                            opacity: Style.captionOpacity
                        }
                        TextField {
                            objectName: "localServerUrl"
                            Layout.fillWidth: true
                            readOnly: true
                            selectByMouse: true
                            text: App.localServer.url
                        }
                        Label {
                            text: qsTr("API key")
                            opacity: Style.captionOpacity
                        }
                        TextField {
                            objectName: "localServerKey"
                            Layout.fillWidth: true
                            readOnly: true
                            selectByMouse: true
                            text: App.localServer.apiKey
                        }
                    }

                    Label {
                        objectName: "localServerError"
                        Layout.fillWidth: true
                        visible: App.localServer.error !== ""
                        text: App.localServer.error
                        color: Style.error
                        wrapMode: Text.Wrap
                    }
                }
            }

            GroupBox {
                Layout.fillWidth: true
                title: qsTr("History")

                ColumnLayout {
                    anchors.fill: parent
                    spacing: Style.rowSpacing

                    RowLayout {
                        Layout.fillWidth: true
                        spacing: Style.itemSpacing

                        Label {
                            Layout.preferredWidth: Style.labelWidth
                            text: qsTr("Database")
                            opacity: Style.captionOpacity
                        }

                        TextField {
                            objectName: "databasePathField"
                            Layout.fillWidth: true
                            readOnly: true
                            selectByMouse: true
                            text: App.databasePath !== "" ? App.databasePath : qsTr("None: chats are not kept after the app closes.")
                        }
                    }

                    Label {
                        objectName: "databaseError"
                        Layout.fillWidth: true
                        visible: App.databaseError !== ""
                        text: qsTr("The database could not be opened: %1").arg(App.databaseError)
                        color: Style.error
                        wrapMode: Text.Wrap
                    }
                }
            }

            GroupBox {
                Layout.fillWidth: true
                title: qsTr("Export")

                ColumnLayout {
                    anchors.fill: parent
                    spacing: Style.itemSpacing

                    Label {
                        Layout.fillWidth: true
                        wrapMode: Text.Wrap
                        opacity: Style.captionOpacity
                        text: page.hasChat ? qsTr("Save the chat “%1” with its settings and messages.").arg(App.currentChatTitle) : qsTr("Open a chat to export it.")
                    }

                    RowLayout {
                        spacing: Style.itemSpacing

                        Button {
                            objectName: "exportMarkdownButton"
                            text: qsTr("Export as Markdown…")
                            enabled: page.hasChat
                            onClicked: page.openExport(markdownDialog, "md")
                        }

                        Button {
                            objectName: "exportJsonButton"
                            text: qsTr("Export as JSON…")
                            enabled: page.hasChat
                            onClicked: page.openExport(jsonDialog, "json")
                        }
                    }

                    Label {
                        objectName: "exportStatus"
                        Layout.fillWidth: true
                        visible: page.exportStatus !== ""
                        text: page.exportStatus
                        color: page.exportFailed ? Style.error : page.palette.text
                        wrapMode: Text.WrapAnywhere
                    }
                }
            }

            Item {
                implicitHeight: page.margin - Style.groupSpacing
            }
        }
    }
}
