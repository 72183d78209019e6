// Activation statistics kept across runs (see activation_history.h).
#include "experts/activation_history.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/store.h"
#include "zipmoe/profile/cost_profile.h"

namespace zipmoe::history {
namespace {

constexpr const char* kFormat = "zipmoe-activation-history";
constexpr int kVersion = 1;

// An advisory lock on PATH.lock for the read-modify-write of a save.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path) {
    fd_ = ::open((path.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

std::string fileName(const std::string& identity) {
  std::string s;
  for (char c : identity) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return s + ".json";
}

}  // namespace

std::filesystem::path userStateDir() {
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "zipmoe";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".local" / "state" / "zipmoe";
  return std::filesystem::temp_directory_path() / "zipmoe";
}

std::filesystem::path defaultPath(const Store& store) {
  return userStateDir() / "activations" / fileName(storeIdentity(store));
}

std::string toJson(const std::string& identity, const ActivationCounts& c) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["store"] = identity;
  j["layers"] = c.layers;
  j["experts"] = c.experts;
  j["steps"] = c.steps;
  j["counts"] = c.counts;
  return j.dump() + "\n";
}

ActivationCounts fromJson(const std::string& text, const std::string& name, std::string* identity) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(name + ": not a JSON object");
  auto field = [&](const char* key) -> const nlohmann::json& {
    if (!j.contains(key)) throw Error(name + ": no field '" + key + "'");
    return j.at(key);
  };
  if (field("format") != kFormat) throw Error(name + ": field 'format' is not \"" + kFormat + "\"");
  if (!field("version").is_number_integer() || field("version").get<int>() != kVersion)
    throw Error(name + ": field 'version' is " + field("version").dump() + ", this build reads " + std::to_string(kVersion));
  if (!field("store").is_string()) throw Error(name + ": field 'store' is not a string");
  if (identity) *identity = field("store").get<std::string>();
  ActivationCounts c;
  for (const char* key : {"layers", "experts"})
    if (!field(key).is_number_integer() || field(key).get<int64_t>() <= 0 || field(key).get<int64_t>() > (1 << 20))
      throw Error(name + ": field '" + key + "' is " + field(key).dump() + ", expected a count in 1 … 1048576");
  c.layers = field("layers").get<int>();
  c.experts = field("experts").get<int>();
  auto numbers = [&](const char* key, size_t n) {
    const nlohmann::json& a = field(key);
    if (!a.is_array() || a.size() != n)
      throw Error(name + ": field '" + key + "' must be an array of " + std::to_string(n) + " counts");
    std::vector<uint64_t> v;
    v.reserve(n);
    for (const auto& x : a) {
      if (!x.is_number_unsigned()) throw Error(name + ": field '" + key + "' holds " + x.dump() + ", not a count");
      v.push_back(x.get<uint64_t>());
    }
    return v;
  };
  c.steps = numbers("steps", static_cast<size_t>(c.layers));
  c.counts = numbers("counts", static_cast<size_t>(c.layers) * static_cast<size_t>(c.experts));
  return c;
}

Loaded load(const std::filesystem::path& path, const std::string& identity, int layers, int experts) {
  Loaded out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  std::string stored;
  try {
    const ActivationCounts c = fromJson(io::readTextFile(path), path.string(), &stored);
    if (stored != identity) {
      out.note = path.string() + " is the history of another store (" + stored + ")";
      return out;
    }
    if (c.layers != layers || c.experts != experts) {
      out.note = path.string() + " has " + std::to_string(c.layers) + " layers × " + std::to_string(c.experts) +
                 " experts, the model " + std::to_string(layers) + " × " + std::to_string(experts);
      return out;
    }
    out.counts = c;
  } catch (const std::exception& e) {
    const auto aside = path.string() + ".unreadable";
    std::filesystem::rename(path, aside, ec);
    out.note = std::string(e.what()) + (ec ? "" : " (set aside as " + aside + ")");
  }
  return out;
}

void save(const std::filesystem::path& path, const std::string& identity, const ActivationCounts& now,
          const std::optional<ActivationCounts>& atOpen) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) throw Error("saving the activation history: cannot create " + path.parent_path().string() + ": " + ec.message());
  FileLock lock(path);
  ActivationCounts out = now;
  out.tokens.clear();
  const Loaded current = load(path, identity, now.layers, now.experts);
  if (current.counts) {
    // Another run may have saved since this one loaded: add this run's own counts (what it has now
    // less what it started with) to the file's.
    out = *current.counts;
    const bool sameShape = atOpen && atOpen->counts.size() == now.counts.size() && atOpen->steps.size() == now.steps.size();
    auto add = [&](std::vector<uint64_t>& into, const std::vector<uint64_t>& a, const std::vector<uint64_t>* b) {
      for (size_t i = 0; i < into.size(); ++i) {
        const uint64_t base = b ? (*b)[i] : 0;
        into[i] += a[i] > base ? a[i] - base : 0;
      }
    };
    add(out.counts, now.counts, sameShape ? &atOpen->counts : nullptr);
    add(out.steps, now.steps, sameShape ? &atOpen->steps : nullptr);
  }
  try {
    io::writeFileAtomically(path, toJson(identity, out));
  } catch (const std::exception& e) {
    throw Error(std::string("saving the activation history: ") + e.what());
  }
}

}  // namespace zipmoe::history
