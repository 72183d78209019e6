// SettingsSlider — one numeric setting: a caption, a slider and an exact-value field. It shows
// `value` (bound by the user of the component, e.g. to App.sampling[name]) and emits `committed`
// when the user settles on a new value: on releasing the slider, on a keyboard step, or on Return
// in the field. While dragging, only the field follows the slider; nothing is committed.
// objectNames: <settingName>Slider, <settingName>Field.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import ZipMoE.Chat

RowLayout {
    id: root

    required property string label
    required property string settingName
    property string hint: ""
    property real value: 0
    property real from: 0
    property real to: 1
    property real stepSize: 0.01
    property int decimals: 2

    signal committed(real value)

    function format(v: real): string {
        return Number(v).toFixed(root.decimals);
    }

    function commit(v: real) {
        const stepped = root.stepSize > 0 ? Math.round(v / root.stepSize) * root.stepSize : v;
        const clamped = Math.min(root.to, Math.max(root.from, stepped));
        const rounded = Number(clamped.toFixed(root.decimals));
        if (rounded !== root.value)
            root.committed(rounded);
        // Whatever happened, show the stored value again (a refused value snaps back).
        field.text = Qt.binding(() => root.format(root.value));
    }

    spacing: Style.itemSpacing

    Label {
        Layout.preferredWidth: Style.labelWidth
        text: root.label
        elide: Text.ElideRight

        HoverHandler {
            id: labelHover
        }

        ToolTip.visible: labelHover.hovered && root.hint !== ""
        ToolTip.delay: 400
        ToolTip.text: root.hint
    }

    Slider {
        id: slider

        objectName: root.settingName + "Slider"
        Layout.fillWidth: true
        Layout.minimumWidth: 120
        from: root.from
        to: root.to
        stepSize: root.stepSize
        snapMode: Slider.SnapAlways
        // True from press to release: the slider shows the user's value, not the stored one.
        property bool dragging: false

        onMoved: {
            if (dragging)
                field.text = root.format(value);
            else
                root.commit(value); // keyboard
        }
        onPressedChanged: {
            if (pressed) {
                dragging = true;
            } else {
                root.commit(value);
                dragging = false;
            }
        }

        Binding {
            target: slider
            property: "value"
            value: root.value
            when: !slider.dragging
            restoreMode: Binding.RestoreNone
        }
    }

    TextField {
        id: field

        objectName: root.settingName + "Field"
        Layout.preferredWidth: Style.fieldWidth
        horizontalAlignment: TextInput.AlignRight
        selectByMouse: true
        text: root.format(root.value)
        validator: RegularExpressionValidator {
            regularExpression: root.decimals > 0 ? /^\d{0,6}([.,]\d*)?$/ : /^\d{0,7}$/
        }
        onAccepted: {
            const v = parseFloat(text.replace(",", "."));
            if (isNaN(v))
                text = Qt.binding(() => root.format(root.value));
            else
                root.commit(v);
        }
        onActiveFocusChanged: {
            if (!activeFocus)
                text = Qt.binding(() => root.format(root.value));
        }
    }
}
