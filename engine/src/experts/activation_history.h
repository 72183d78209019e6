// The activation statistics an engine keeps across runs (EngineOptions::persistHistory): every door
// — the CLI, the app, `zipmoe serve` — plans from, and warm-starts from, the counts of all earlier
// runs on the same store, and adds its own when it closes.
//
// One JSON file per store, keyed by the store's identity (storeIdentity: the manifest's checksum and
// size), in one per-user place: $XDG_STATE_HOME/zipmoe/activations/ (default ~/.local/state/...).
// A store moved or copied keeps its history; a reconverted store (another manifest) starts anew.
// Saving adds this run's counts to what the file holds then (another process may have saved since
// this one loaded), under an advisory lock, and replaces the file atomically.
// A file that cannot be parsed is set aside as FILE.unreadable (never deleted) and the run goes on
// without history: statistics are an optimisation, never a reason not to start.
// Thread-safety: plain functions; concurrent processes are serialised by the lock. Cost: one small
// file read at open and one read + write at close.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "zipmoe/experts/runtime_options.h"

namespace zipmoe {
class Store;

namespace history {

// $XDG_STATE_HOME/zipmoe, or ~/.local/state/zipmoe, or the temporary directory's zipmoe/.
std::filesystem::path userStateDir();
// Where the statistics of this store are kept: userStateDir()/activations/<identity>.json.
std::filesystem::path defaultPath(const Store& store);

struct Loaded {
  std::optional<ActivationCounts> counts;  // none: no file, another store's, another shape, unreadable
  std::string note;                         // why none, for the status line ("" when there was no file)
};
// Reads the statistics for a model of `layers` × `experts` on the store `identity`.
Loaded load(const std::filesystem::path& path, const std::string& identity, int layers, int experts);

// Adds (now − atOpen) to what `path` holds (or, without a usable file, writes `now`). Throws
// zipmoe::Error naming the file when it cannot be written.
void save(const std::filesystem::path& path, const std::string& identity, const ActivationCounts& now,
          const std::optional<ActivationCounts>& atOpen);

std::string toJson(const std::string& identity, const ActivationCounts& counts);
// Throws zipmoe::Error naming `name` and the field that is wrong.
ActivationCounts fromJson(const std::string& text, const std::string& name, std::string* identity);

}  // namespace history
}  // namespace zipmoe
