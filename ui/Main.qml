import QtQuick
import QtQuick.Controls

ApplicationWindow {
    visible: true
    width: 1100
    height: 760
    title: qsTr("ZipMoE")
}
