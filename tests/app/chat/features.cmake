# Issue 18's features against the real controller and engine on the demo model: the budget advisor,
# the schedule inspector and its Chrome-trace export, branching, code blocks, the model manager.
zipmoe_add_test(test_app_features SOURCES app/chat/test_app_features.cpp LIBS zipmoe_chat_ui zipmoe_chat_uiplugin)
target_compile_definitions(test_app_features PRIVATE ZIPMOE_DEMO_MODEL_DIR="${PROJECT_SOURCE_DIR}/resources/demo-model")
