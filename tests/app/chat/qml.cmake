# Qt Quick Test of the QML pages with the real controller and engine (tests/app/chat/qml/tst_*.qml).
zipmoe_add_test(test_qml_pages SOURCES app/chat/test_qml_pages.cpp
  LIBS zipmoe_chat_ui zipmoe_chat_uiplugin Qt6::QuickTest)
target_compile_definitions(test_qml_pages PRIVATE
  QUICK_TEST_SOURCE_DIR="${CMAKE_CURRENT_SOURCE_DIR}/app/chat/qml"
  ZIPMOE_DEMO_MODEL_DIR="${PROJECT_SOURCE_DIR}/resources/demo-model")

# Screenshots of every page with real content, and the GUI thread's longest frame while the budget
# moves during a streaming reply. Pictures and figures go to ZIPMOE_ARTIFACTS_DIR (default:
# build/tests/artifacts); docs/images holds the same pictures, regenerated.
zipmoe_add_test(test_app_window SOURCES app/chat/test_app_window.cpp LIBS zipmoe_chat_ui zipmoe_chat_uiplugin Qt6::Network)
target_compile_definitions(test_app_window PRIVATE
  ZIPMOE_DEMO_MODEL_DIR="${PROJECT_SOURCE_DIR}/resources/demo-model"
  ZIPMOE_DEFAULT_ARTIFACTS_DIR="${CMAKE_CURRENT_BINARY_DIR}/artifacts")
