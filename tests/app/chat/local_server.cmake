# The app's "Local server" switch: the loaded model served on loopback with a generated key, spoken
# to with curl, while the app's own chat goes on through the same scheduler.
zipmoe_add_test(test_local_server SOURCES app/chat/test_local_server.cpp LIBS zipmoe_chat_ui zipmoe_chat_uiplugin)
target_compile_definitions(test_local_server PRIVATE ZIPMOE_DEMO_MODEL_DIR="${PROJECT_SOURCE_DIR}/resources/demo-model")
