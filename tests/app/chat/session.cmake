# The app's controller, worker and models against the real engine on the demo model.
zipmoe_add_test(test_chat_controller SOURCES app/chat/test_chat_controller.cpp LIBS zipmoe_chat_ui zipmoe_chat_uiplugin)
target_compile_definitions(test_chat_controller PRIVATE
  ZIPMOE_DEMO_MODEL_DIR="${PROJECT_SOURCE_DIR}/resources/demo-model"
  ZIPMOE_CHAT_APP_PATH="$<TARGET_FILE:zipmoe-chat>")
add_dependencies(test_chat_controller zipmoe-chat)

# The list models and the chat settings' JSON (no engine needed).
zipmoe_add_test(test_chat_models
  SOURCES app/chat/test_chat_models.cpp ${PROJECT_SOURCE_DIR}/app/chat/session/message_model.cpp
          ${PROJECT_SOURCE_DIR}/app/chat/session/chat_list_model.cpp ${PROJECT_SOURCE_DIR}/app/chat/session/chat_types.cpp
  LIBS Qt6::Gui)
target_include_directories(test_chat_models PRIVATE ${PROJECT_SOURCE_DIR}/app/chat/session)
