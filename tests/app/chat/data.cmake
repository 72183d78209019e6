# The chat app's SQLite data layer (app/chat/data): compiled into the suite itself, so that it runs
# without the QML module or the engine.
zipmoe_add_test(test_chat_database
  SOURCES app/chat/test_chat_database.cpp
          ${PROJECT_SOURCE_DIR}/app/chat/data/chat_database.cpp
          ${PROJECT_SOURCE_DIR}/app/chat/data/chat_branches.cpp
          ${PROJECT_SOURCE_DIR}/app/chat/data/schema_migrations.cpp
          ${PROJECT_SOURCE_DIR}/app/chat/data/chat_export.cpp
  LIBS Qt6::Sql)
target_include_directories(test_chat_database PRIVATE ${PROJECT_SOURCE_DIR}/app/chat/data)
