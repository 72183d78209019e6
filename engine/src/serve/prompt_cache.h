// PromptCache — the serving scheduler's KV cache of finished conversations kept on disk, so that the
// next request whose prompt starts with the same token ids reuses it, also after the server restarts
// (`zipmoe serve --prompt-cache DIR`, docs/SERVER.md "Prompt cache on disk").
//
// One file per conversation, named by a hash of its token ids (HASH.kv), written to a temporary
// file and renamed, so that a crash never leaves a half file under a valid name. A file holds
// (little-endian, this machine's order): the magic "ZIPMOEKV", the format version (u32), the model's
// identity (u32 length + MoeModel::kvIdentity() text: config and norm digests, dtype, KV layout),
// the KV bytes per token (u64), the token count n (u64), the n token ids (i32), the KV of those n
// tokens (n × bytes per token, as MoeModel::saveSequence writes it) and a CRC-32C of everything
// before it (u32). Opening indexes the headers (not the KV); a file of another format, version,
// model, dtype or layout, or whose size is not what its header says, is skipped with a warning that
// names it and the reason, and left alone. Loading checks the checksum over the whole file before
// the sequence is used: a mismatch leaves the sequence empty (the request prefills all of its
// prompt) and the file is skipped from then on. The files' total size stays under a bound: the
// least recently used go first (use is the file's modification time, touched on each hit, so the
// order survives restarts); a file whose tokens are a prefix of a newer one is redundant and goes
// at once. One server per directory: its lock file (DIR/.lock) is held while the cache is open.
// Thread-safety: none (the scheduler's engine thread). Cost: opening reads each file's header and
// token ids; a save writes the conversation's KV (tokens × kvBytesPerToken) on the calling thread;
// a load reads one file whole.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zipmoe/model/model.h"

namespace zipmoe::serve {

class PromptCache {
 public:
  using Warn = std::function<void(const std::string&)>;  // one line, without "\n"
  static constexpr uint32_t kFormatVersion = 1;

  // Creates DIR when missing, takes its lock and indexes its files (warning about each one skipped;
  // stale temporary files of an earlier run are removed). Throws zipmoe::Error naming DIR when it
  // cannot be created or written, when another server holds it, or when `model` cannot export its
  // KV cache (an empty kvIdentity). `warn` null: lines go to stderr, prefixed "zipmoe: prompt cache: ".
  PromptCache(std::filesystem::path dir, uint64_t maxBytes, const MoeModel& model, Warn warn = nullptr);
  ~PromptCache();  // releases the lock
  PromptCache(const PromptCache&) = delete;
  PromptCache& operator=(const PromptCache&) = delete;

  struct Hit {
    std::string file;  // the entry's file name
    int64_t keep = 0;  // tokens of the prompt its KV covers
  };
  // The file sharing the longest prefix with `prompt` — at most prompt.size() − 1 tokens, so that
  // the prompt's last token is always prefilled (its logits start the reply) — when longer than
  // `longerThan`.
  std::optional<Hit> find(std::span<const int32_t> prompt, int64_t longerThan) const;
  // Loads the hit's KV into `seq` (reserve it first), which then holds hit.keep tokens. False, after a
  // warning naming the file and the reason, when the file does not check out (changed since it was
  // indexed, ends early, checksum mismatch): the sequence is then empty and the file is skipped
  // from then on. A hit becomes the most recently used.
  bool load(const Hit& hit, MoeModel& model, MoeModel::SequenceId seq);
  // Saves the first tokens.size() tokens of `seq` (a finished conversation); removes files made
  // redundant by it, then the least recently used while the total exceeds the bound. Never throws:
  // a failed write is warned about and leaves no file behind.
  void save(const MoeModel& model, MoeModel::SequenceId seq, std::span<const int32_t> tokens);

  size_t files() const { return entries_.size(); }
  uint64_t bytes() const;
  const std::filesystem::path& dir() const { return dir_; }

  // The file name of a conversation ("HASH.kv", HASH 16 hex digits of its token ids).
  static std::string fileName(std::span<const int32_t> tokens);

 private:
  struct Entry {
    std::string file;
    std::vector<int32_t> tokens;
    uint64_t size = 0;
    uint64_t lastUsed = 0;  // a tick of this process; the index starts in modification-time order
  };
  void index();
  std::optional<Entry> readHeader(const std::filesystem::path& path) const;  // nullopt: warned, skipped
  void evictOver(uint64_t bound);
  void erase(size_t i);  // deletes the file and its entry
  uint64_t fileSize(size_t tokens) const;

  std::filesystem::path dir_;
  uint64_t maxBytes_;
  std::string identity_;
  uint64_t bytesPerToken_;
  Warn warn_;
  int lockFd_ = -1;
  uint64_t tick_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace zipmoe::serve
