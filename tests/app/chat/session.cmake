# The app's controller, worker and models against the real engine on the demo model.
zipmoe_add_test(test_chat_controller SOURCES app/chat/test_chat_controller.cpp LIBS zipmoe_chat_ui zipmoe_chat_uiplugin)
target_compile_definitions(test_chat_controller PRIVATE
  ZIPMOE_DEMO_MODEL_DIR="${PROJECT_SOURCE_DIR}/resources/demo-model"
  ZIPMOE_CHAT_APP_PATH="$<TARGET_FILE:zipmoe-chat>")
add_dependencies(test_chat_controller zipmoe-chat)
