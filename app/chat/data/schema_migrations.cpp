// Times are INTEGER milliseconds since the Unix epoch, UTC. Message states are text so that the
// file reads without this code ("complete", "streaming", "incomplete", "error").
#include "schema_migrations.h"

namespace zipmoe::app {

const std::vector<SchemaMigration>& schemaMigrations() {
  static const std::vector<SchemaMigration> steps = {
      {1,
       "chats, messages and settings",
       {
           "CREATE TABLE chats ("
           " id INTEGER PRIMARY KEY AUTOINCREMENT,"
           " title TEXT NOT NULL,"
           " created_at INTEGER NOT NULL,"
           " updated_at INTEGER NOT NULL,"
           " system_prompt TEXT NOT NULL DEFAULT '',"
           " sampling_json TEXT NOT NULL DEFAULT '',"
           " model_key TEXT NOT NULL DEFAULT '')",
           "CREATE INDEX chats_by_update ON chats(updated_at)",
           "CREATE TABLE messages ("
           " id INTEGER PRIMARY KEY AUTOINCREMENT,"
           " chat_id INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,"
           " position INTEGER NOT NULL,"
           " role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),"
           " content TEXT NOT NULL,"
           " state TEXT NOT NULL CHECK (state IN ('complete', 'streaming', 'incomplete', 'error')),"
           " created_at INTEGER NOT NULL,"
           " UNIQUE (chat_id, position))",
           // Untyped value: SQLite keeps each setting's storage class (integer, real, text, blob).
           "CREATE TABLE settings (key TEXT PRIMARY KEY NOT NULL, value)",
       }},
      {2,
       "message stats, activation_stats, plans and profiles",
       {
           "ALTER TABLE messages ADD COLUMN ttft_ms REAL NOT NULL DEFAULT -1",
           "ALTER TABLE messages ADD COLUMN tokens_per_second REAL NOT NULL DEFAULT -1",
           "ALTER TABLE messages ADD COLUMN prompt_tokens INTEGER NOT NULL DEFAULT 0",
           "ALTER TABLE messages ADD COLUMN generated_tokens INTEGER NOT NULL DEFAULT 0",
           "ALTER TABLE messages ADD COLUMN expert_hit_rate REAL NOT NULL DEFAULT -1",
           "ALTER TABLE messages ADD COLUMN stop_reason TEXT NOT NULL DEFAULT ''",
           // recoverInterruptedReplies() at every start finds the few Streaming rows without a scan.
           "CREATE INDEX messages_streaming ON messages(id) WHERE state = 'streaming'",
           // One row per (model, layer): `counts` is `experts` little-endian uint64s, so 60 layers ×
           // 256 experts is 60 rows of 2 KiB rather than 15,360 rows.
           "CREATE TABLE activation_stats ("
           " model_key TEXT NOT NULL,"
           " layer INTEGER NOT NULL CHECK (layer >= 0),"
           " experts INTEGER NOT NULL CHECK (experts > 0),"
           " steps INTEGER NOT NULL CHECK (steps >= 0),"
           " counts BLOB NOT NULL,"
           " PRIMARY KEY (model_key, layer)) WITHOUT ROWID",
           "CREATE TABLE plans ("
           " id INTEGER PRIMARY KEY AUTOINCREMENT,"
           " model_key TEXT NOT NULL,"
           " budget_bytes INTEGER NOT NULL CHECK (budget_bytes >= 0),"
           " pool_mask INTEGER NOT NULL CHECK (pool_mask >= 0),"
           " plan_json TEXT NOT NULL,"
           " created_at INTEGER NOT NULL)",
           "CREATE INDEX plans_by_model ON plans(model_key, id)",
           "CREATE TABLE profiles ("
           " model_key TEXT PRIMARY KEY NOT NULL,"
           " profile_json TEXT NOT NULL,"
           " updated_at INTEGER NOT NULL)",
       }},
      {3,
       "branches, measured replies and model stores",
       {
           // A branch is a chat of its own that starts with a copy of its parent's messages up to
           // branch_position; deleting the parent keeps the branch (it becomes a root).
           "ALTER TABLE chats ADD COLUMN parent_chat_id INTEGER REFERENCES chats(id) ON DELETE SET NULL",
           "ALTER TABLE chats ADD COLUMN branch_position INTEGER NOT NULL DEFAULT -1",
           "CREATE INDEX chats_by_parent ON chats(parent_chat_id) WHERE parent_chat_id IS NOT NULL",
           // What the budget advisor plots: a reply's model, the budget it ran under (0: unknown, or
           // moved while it streamed) and its measured time per output token.
           "ALTER TABLE messages ADD COLUMN model_key TEXT NOT NULL DEFAULT ''",
           "ALTER TABLE messages ADD COLUMN budget_bytes INTEGER NOT NULL DEFAULT 0",
           "ALTER TABLE messages ADD COLUMN tpot_ms REAL NOT NULL DEFAULT -1",
           "CREATE INDEX messages_measured ON messages(model_key, id) WHERE tpot_ms > 0 AND budget_bytes > 0",
           // The model manager's "last used", per store directory.
           "CREATE TABLE model_stores ("
           " path TEXT PRIMARY KEY NOT NULL,"
           " model_key TEXT NOT NULL DEFAULT '',"
           " last_used INTEGER NOT NULL)",
       }},
  };
  return steps;
}

}  // namespace zipmoe::app
