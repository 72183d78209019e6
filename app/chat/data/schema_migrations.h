// The chat database's schema history: the ordered steps that take a file from version N − 1 to N
// (PRAGMA user_version; 0 is an empty file). ChatDatabase applies the missing ones on open, each
// step and its version bump in one transaction.
//
// A step is never edited once released: a database written by an older app must replay exactly
// what that app's successors ran. A change to the schema is a new step at the end. Steps are plain
// SQL, one statement per entry (QSQLITE executes one statement per query).
//
// Thread-safety: immutable data. Cost: none until applied.
#pragma once

#include <vector>

namespace zipmoe::app {

struct SchemaMigration {
  int version;              // the user_version the file has after this step
  const char* description;  // for error messages: "version 2 (message stats, ...)"
  std::vector<const char*> statements;
};

// Ordered by version: 1, 2, … with no gap.
const std::vector<SchemaMigration>& schemaMigrations();

}  // namespace zipmoe::app
