// PromptCache (see prompt_cache.h): the file format, the index and the size bound.
#include "serve/prompt_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "base/crc32c_stream.h"
#include "zipmoe/base/error.h"

namespace zipmoe::serve {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'Z', 'I', 'P', 'M', 'O', 'E', 'K', 'V'};
constexpr uint32_t kMaxIdentity = 1 << 16;
constexpr const char* kSuffix = ".kv";
constexpr const char* kTempSuffix = ".kv.tmp";

template <typename T>
void put(std::ostream& out, const T& value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof value);
}

template <typename T>
bool get(std::istream& in, T& value) {
  in.read(reinterpret_cast<char*>(&value), sizeof value);
  return in.gcount() == static_cast<std::streamsize>(sizeof value);
}

// The header after the magic and the version's bytes: identity, bytes per token, the tokens.
struct Header {
  uint32_t version = 0;
  std::string identity;
  uint64_t bytesPerToken = 0;
  std::vector<int32_t> tokens;
};

uint64_t headerBytes(size_t identity, size_t tokens) {
  return sizeof kMagic + 4 + 4 + identity + 8 + 8 + 4 * static_cast<uint64_t>(tokens);
}

void writeHeader(std::ostream& out, const std::string& identity, uint64_t bytesPerToken, std::span<const int32_t> tokens) {
  out.write(kMagic, sizeof kMagic);
  put(out, PromptCache::kFormatVersion);
  put(out, static_cast<uint32_t>(identity.size()));
  out.write(identity.data(), static_cast<std::streamsize>(identity.size()));
  put(out, bytesPerToken);
  put(out, static_cast<uint64_t>(tokens.size()));
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * sizeof(int32_t)));
}

// Reads a header; returns why it is not one of this format (empty: read, not yet compared with the
// model). `fileBytes` bounds the lengths it believes.
std::string parseHeader(std::istream& in, uint64_t fileBytes, Header& h) {
  char magic[sizeof kMagic];
  in.read(magic, sizeof magic);
  if (in.gcount() != static_cast<std::streamsize>(sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0)
    return "not a prompt cache file (no ZIPMOEKV magic)";
  if (!get(in, h.version)) return "truncated header";
  if (h.version != PromptCache::kFormatVersion)
    return "format version " + std::to_string(h.version) + ", this server reads version " +
           std::to_string(PromptCache::kFormatVersion);
  uint32_t identityBytes = 0;
  if (!get(in, identityBytes) || identityBytes > kMaxIdentity || identityBytes > fileBytes) return "truncated header";
  h.identity.resize(identityBytes);
  in.read(h.identity.data(), identityBytes);
  uint64_t count = 0;
  if (in.gcount() != static_cast<std::streamsize>(identityBytes) || !get(in, h.bytesPerToken) || !get(in, count)) return "truncated header";
  if (count == 0 || count > fileBytes / 4) return "truncated header (" + std::to_string(count) + " tokens)";
  h.tokens.resize(static_cast<size_t>(count));
  const auto tokenBytes = static_cast<std::streamsize>(count * 4);
  in.read(reinterpret_cast<char*>(h.tokens.data()), tokenBytes);
  if (in.gcount() != tokenBytes) return "truncated header (its token ids)";
  return {};
}

uint64_t fnv1a(std::span<const int32_t> tokens) {
  uint64_t h = 1469598103934665603ull;
  for (const int32_t t : tokens)
    for (int b = 0; b < 4; ++b) {
      h ^= (static_cast<uint32_t>(t) >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
  return h;
}

}  // namespace

std::string PromptCache::fileName(std::span<const int32_t> tokens) {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(fnv1a(tokens)));
  return std::string(name) + kSuffix;
}

PromptCache::PromptCache(fs::path dir, uint64_t maxBytes, const MoeModel& model, Warn warn)
    : dir_(std::move(dir)),
      maxBytes_(maxBytes),
      identity_(model.kvIdentity()),
      bytesPerToken_(model.kvBytesPerToken()),
      warn_(std::move(warn)) {
  const std::string where = "prompt cache directory " + dir_.string();
  if (identity_.empty()) throw Error(where + ": this model cannot save its KV cache");
  if (!warn_) warn_ = [](const std::string& line) { std::fprintf(stderr, "zipmoe: prompt cache: %s\n", line.c_str()); };
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) throw Error(where + " cannot be created: " + (ec ? ec.message() : "not a directory"));
  const fs::path lock = dir_ / ".lock";
  lockFd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lockFd_ < 0) throw Error(systemErrorMessage(where + " cannot be written (" + lock.string() + ")", errno));
  if (::flock(lockFd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(lockFd_);
    lockFd_ = -1;
    if (err == EWOULDBLOCK) throw Error(where + " is in use by another zipmoe serve (it holds " + lock.string() + ")");
    throw Error(systemErrorMessage(where + ": cannot lock " + lock.string(), err));
  }
  // The lock file may be writable in a directory that is not: a file must be creatable.
  const fs::path probe = dir_ / (".probe" + std::string(kTempSuffix));
  if (!std::ofstream(probe, std::ios::binary)) {
    ::close(lockFd_);
    lockFd_ = -1;
    throw Error(where + " cannot be written: cannot create " + probe.string());
  }
  fs::remove(probe, ec);
  index();
}

PromptCache::~PromptCache() {
  if (lockFd_ >= 0) ::close(lockFd_);  // releases the flock
}

uint64_t PromptCache::fileSize(size_t tokens) const {
  return headerBytes(identity_.size(), tokens) + bytesPerToken_ * tokens + 4;
}

uint64_t PromptCache::bytes() const {
  uint64_t sum = 0;
  for (const Entry& e : entries_) sum += e.size;
  return sum;
}

std::optional<PromptCache::Entry> PromptCache::readHeader(const fs::path& path) const {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  const auto skip = [&](const std::string& why) {
    warn_(path.string() + ": " + why + "; skipped");
    return std::nullopt;
  };
  if (ec || !in) return skip("cannot be read");
  Header h;
  if (std::string why = parseHeader(in, size, h); !why.empty()) return skip(why);
  if (h.identity != identity_) return skip("written by another model, dtype or KV layout (" + h.identity + ")");
  if (h.bytesPerToken != bytesPerToken_)
    return skip("KV of " + std::to_string(h.bytesPerToken) + " bytes per token, this model's is " +
                std::to_string(bytesPerToken_));
  const uint64_t expected = fileSize(h.tokens.size());
  if (size != expected)
    return skip(std::string(size < expected ? "truncated" : "too long") + ": " + std::to_string(size) + " bytes, its header (" +
                std::to_string(h.tokens.size()) + " tokens) says " + std::to_string(expected));
  return Entry{path.filename().string(), std::move(h.tokens), size, 0};
}

void PromptCache::index() {
  struct Found {
    Entry entry;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  std::error_code listing;
  for (const fs::directory_entry& d : fs::directory_iterator(dir_, listing)) {
    const std::string name = d.path().filename().string();
    std::error_code ec;
    if (name.ends_with(kTempSuffix)) {
      fs::remove(d.path(), ec);  // a save cut short (this directory is ours: we hold its lock)
      continue;
    }
    if (!name.ends_with(kSuffix) || !d.is_regular_file(ec)) continue;
    if (auto e = readHeader(d.path())) {
      const fs::file_time_type mtime = d.last_write_time(ec);
      found.push_back({std::move(*e), mtime});
    }
  }
  if (listing) warn_(dir_.string() + ": cannot be listed: " + listing.message() + "; starting without its files");
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.mtime != b.mtime ? a.mtime < b.mtime : a.entry.file < b.entry.file;
  });
  for (Found& f : found) {
    f.entry.lastUsed = ++tick_;
    entries_.push_back(std::move(f.entry));
  }
  evictOver(maxBytes_);  // a smaller bound than the last run's
}

std::optional<PromptCache::Hit> PromptCache::find(std::span<const int32_t> prompt, int64_t longerThan) const {
  std::optional<Hit> best;
  if (prompt.empty()) return best;
  for (const Entry& e : entries_) {
    size_t keep = 0;
    while (keep < e.tokens.size() && keep < prompt.size() && e.tokens[keep] == prompt[keep]) ++keep;
    keep = std::min(keep, prompt.size() - 1);
    const int64_t k = static_cast<int64_t>(keep);
    if (k > longerThan && (!best || k > best->keep)) best = Hit{e.file, k};
  }
  return best;
}

bool PromptCache::load(const Hit& hit, MoeModel& model, MoeModel::SequenceId seq) {
  const auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.file == hit.file; });
  if (it == entries_.end()) return false;
  const fs::path path = dir_ / hit.file;
  const auto fail = [&](const std::string& why) {
    warn_(path.string() + ": " + why + "; skipped");
    entries_.erase(std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.file == hit.file; }));
    try {
      model.truncateSequence(seq, 0);
    } catch (const Error&) {  // loadSequence left it empty already
    }
    return false;
  };
  std::ifstream file(path, std::ios::binary);
  if (!file) return fail("cannot be read");
  detail::Crc32cReader crcBuf(file, it->size - 4);
  std::istream in(&crcBuf);
  Header h;
  if (std::string why = parseHeader(in, it->size, h); !why.empty()) return fail("changed since it was indexed: " + why);
  if (h.identity != identity_ || h.tokens != it->tokens || h.bytesPerToken != bytesPerToken_)
    return fail("changed since it was indexed");
  try {
    model.loadSequence(seq, in, static_cast<int64_t>(h.tokens.size()), hit.keep);
  } catch (const std::exception& e) {  // a short file, or no memory for the staging rows
    return fail(e.what());
  }
  uint32_t stored = 0;
  if (crcBuf.left() != 0 || !get(file, stored)) return fail("truncated");
  if (stored != crcBuf.crc()) {
    char why[96];
    std::snprintf(why, sizeof why, "checksum mismatch (stored %08x, computed %08x)", stored, crcBuf.crc());
    return fail(why);
  }
  it->lastUsed = ++tick_;
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // the order survives a restart
  return true;
}

void PromptCache::save(const MoeModel& model, MoeModel::SequenceId seq, std::span<const int32_t> tokens) {
  if (tokens.empty()) return;
  const uint64_t size = fileSize(tokens.size());
  if (size > maxBytes_) {
    warn_("a conversation of " + std::to_string(tokens.size()) + " tokens takes " + std::to_string(size) +
          " bytes, more than the cache's bound of " + std::to_string(maxBytes_) + "; not saved");
    return;
  }
  const std::string name = fileName(tokens);
  for (Entry& e : entries_)
    if (e.file == name && std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end())) {
      e.lastUsed = ++tick_;  // saved already (the KV of the same ids is the same)
      return;
    }
  const fs::path path = dir_ / name;
  const fs::path temp = dir_ / (name + "." + std::to_string(::getpid()) + kTempSuffix);
  std::error_code ec;
  try {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    if (!file) throw Error("cannot create " + temp.string());
    detail::Crc32cWriter crcBuf(file);
    std::ostream out(&crcBuf);
    writeHeader(out, identity_, bytesPerToken_, tokens);
    model.saveSequence(seq, static_cast<int64_t>(tokens.size()), out);
    out.flush();
    const uint32_t crc = crcBuf.crc();
    put(file, crc);
    file.close();
    if (!out || !file) throw Error("cannot write " + temp.string() + " (disk full?)");
    fs::rename(temp, path);
    fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // finer than the file system's clock
  } catch (const std::exception& e) {
    fs::remove(temp, ec);
    warn_(path.string() + ": not saved: " + e.what());
    return;
  }
  // Files whose tokens this one starts with are redundant (every prompt they match, it matches at
  // least as far); one of the same name was overwritten.
  for (size_t i = entries_.size(); i-- > 0;) {
    const Entry& e = entries_[i];
    if (e.file == name) {
      entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (e.tokens.size() <= tokens.size() && std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin())) {
      erase(i);
    }
  }
  entries_.push_back({name, std::vector<int32_t>(tokens.begin(), tokens.end()), size, ++tick_});
  evictOver(maxBytes_);
}

void PromptCache::erase(size_t i) {
  std::error_code ec;
  fs::remove(dir_ / entries_[i].file, ec);
  if (ec) warn_((dir_ / entries_[i].file).string() + ": cannot be removed: " + ec.message());
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
}

void PromptCache::evictOver(uint64_t bound) {
  uint64_t total = bytes();
  while (total > bound && !entries_.empty()) {
    size_t oldest = 0;
    for (size_t i = 1; i < entries_.size(); ++i)
      if (entries_[i].lastUsed < entries_[oldest].lastUsed) oldest = i;
    total -= entries_[oldest].size;
    erase(oldest);
  }
}

}  // namespace zipmoe::serve
