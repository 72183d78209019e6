# Schema version 3 of the chat database: branches, measured replies, model stores, and the upgrade
# of a version-2 file (app/chat/data, compiled into the suite like test_chat_database).
zipmoe_add_test(test_chat_branches
  SOURCES app/chat/test_chat_branches.cpp
          ${PROJECT_SOURCE_DIR}/app/chat/data/chat_database.cpp
          ${PROJECT_SOURCE_DIR}/app/chat/data/chat_branches.cpp
          ${PROJECT_SOURCE_DIR}/app/chat/data/schema_migrations.cpp
  LIBS Qt6::Sql)
target_include_directories(test_chat_branches PRIVATE ${PROJECT_SOURCE_DIR}/app/chat/data)
