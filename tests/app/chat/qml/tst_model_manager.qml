import QtQuick
import QtQuick.Controls
import QtTest
import ZipMoE.Chat

// The model manager on the live app: it lists the open demo store with its family, codec and size,
// and neither opens nor deletes the store that is open.
Item {
    id: root
    width: 1000
    height: 700

    Component {
        id: dialogComponent
        ModelManagerDialog {
            parent: root
        }
    }

    TestCase {
        name: "ModelManager"
        when: windowShown

        function test_listsTheOpenStoreAndProtectsIt() {
            const dialog = createTemporaryObject(dialogComponent, root)
            dialog.open()
            tryVerify(() => dialog.opened, 60000)
            tryVerify(() => App.stores.count >= 1, 60000)
            const list = findChild(dialog.contentItem, "storeList")
            verify(list !== null)
            tryVerify(() => list.itemAtIndex(0) !== null, 60000)
            const row = list.itemAtIndex(0)
            verify(row.isOpen, "the most recently used store is the open demo store")
            compare(row.family, "mixtral")
            // measured for this machine when the app converted the demo model
            verify(["huffman8", "nibble", "zstd"].indexOf(row.codec) >= 0, row.codec)
            verify(row.sizeBytes > 1e6)
            verify(!findChild(row, "openStore0").enabled)
            verify(!findChild(row, "deleteStore0").enabled)
            verify(!App.stores.remove(row.path), "the open store is refused")
            verify(App.stores.error.length > 0)
            dialog.close()
        }
    }
}
