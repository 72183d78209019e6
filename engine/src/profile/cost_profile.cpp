// CostProfile measurement, identity checks and JSON persistence (see zipmoe/cost_profile.h).
#include "zipmoe/cost_profile.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/crc32c.h"
#include "io/file_io.h"
#include "zipmoe/bf16_split.h"
#include "zipmoe/error.h"

namespace zipmoe {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

const char* modeName(ReadMode m) { return m == ReadMode::Direct ? "direct" : "buffered"; }

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

}  // namespace

std::string hostIdentity() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) std::snprintf(name, sizeof name, "unknown-host");
  return std::string(name) + " | " + cpuModel() + " | " + std::to_string(std::thread::hardware_concurrency()) + " cores";
}

std::string storeIdentity(const Store& store) {
  const std::string text = io::readTextFile(store.dir() / "manifest.json");
  char buf[64];
  std::snprintf(buf, sizeof buf, "crc32c:%08x size:%zu", detail::crc32c(text.data(), text.size()), text.size());
  return buf;
}

CostProfile measureCostProfile(const Store& store, ReadMode mode, int samples) {
  const Manifest& m = store.manifest();
  if (samples < 1) throw Error("cost profile: samples must be at least 1");
  CostProfile p;
  p.host = hostIdentity();
  p.storeId = storeIdentity(store);
  p.readMode = modeName(mode);
  const int layers = m.numLayers(), experts = m.numExperts, kinds = m.numKinds();
  const int total = layers * experts * kinds;
  uint64_t maxChunk = 0, maxNumel = 0;
  for (const auto& e : m.experts) {
    maxChunk = std::max(maxChunk, e.smChunk.paddedSize);
    for (const auto& c : e.eChunks) maxChunk = std::max(maxChunk, c.paddedSize);
    maxNumel = std::max(maxNumel, e.numel);
  }
  io::AlignedBuffer chunk(static_cast<size_t>(maxChunk)), sm(static_cast<size_t>(io::alignUp(maxNumel, 4096)));
  std::vector<uint8_t> plane(static_cast<size_t>(maxNumel));
  std::vector<uint16_t> out(static_cast<size_t>(maxNumel));
  double u = 0, v = 0, c = 0, r = 0;
  int nE = 0;
  // Tensors spread evenly over the store (a stride coprime with nothing in particular), so reads
  // land far apart on the device.
  const int n = std::min(samples, total);
  for (int i = 0; i < n; ++i) {
    const int flat = static_cast<int>((static_cast<int64_t>(i) * 7919 + total / 2) % total);
    const int kind = flat % kinds, expert = (flat / kinds) % experts, layer = flat / kinds / experts;
    const ExpertTensorEntry& e = m.expert(layer, expert, kind);
    const int shard = i % m.shards;
    const ChunkRef& ec = e.eChunks[static_cast<size_t>(shard)];
    auto t = Clock::now();
    store.readChunk({layer, expert, kind, shard}, {chunk.data(), chunk.size()}, mode);
    v += since(t);
    t = Clock::now();
    store.codec().decompress(chunk.data(), static_cast<size_t>(ec.size), plane.data(), static_cast<size_t>(ec.count));
    c += since(t);
    ++nE;
    t = Clock::now();
    store.readChunk({layer, expert, kind, kSmShard}, {sm.data(), sm.size()}, mode);
    u += since(t);
    t = Clock::now();
    bf16::merge(plane.data(), sm.data(), static_cast<size_t>(e.numel), out.data());
    r += since(t);
  }
  p.smRead = u / n;
  p.eRead = v / nE;
  p.decompress = c / nE;
  p.recover = r / n;
  // A whole BF16 tensor's bytes in one read, as the full-tensor baselines do.
  const uint64_t fullBytes = io::alignUp(maxNumel * 2, 4096);
  io::AlignedBuffer full(static_cast<size_t>(fullBytes));
  const int flags = O_RDONLY | O_CLOEXEC | (mode == ReadMode::Direct ? O_DIRECT : 0);
  io::FileHandle file(store.dir() / "experts.bin", flags);
  const uint64_t size = file.size();
  double f = 0;
  int nF = 0;
  if (size >= fullBytes) {
    const uint64_t span = (size - fullBytes) / 4096;
    for (int i = 0; i < std::max(4, n / 3); ++i) {
      const uint64_t offset = span == 0 ? 0 : (static_cast<uint64_t>(i) * 7919 * 613 % span) * 4096;
      const auto t = Clock::now();
      file.readExact(full.data(), static_cast<size_t>(fullBytes), offset);
      f += since(t);
      ++nF;
    }
  }
  p.fullRead = nF ? f / nF : p.smRead * 2;
  return p;
}

void checkProfile(const CostProfile& profile, const Store& store, ReadMode mode, const std::string& what) {
  if (profile.smRead <= 0 || profile.eRead <= 0 || profile.decompress <= 0 || profile.recover <= 0)
    throw Error(what + ": not measured (u, v, c and recovery must be positive; run `zipmoe profile " +
                store.dir().string() + "`)");
  if (profile.host != hostIdentity())
    throw Error(what + ": measured on another machine (host '" + profile.host + "', this is '" + hostIdentity() +
                "'); run `zipmoe profile " + store.dir().string() + "` here");
  const std::string id = storeIdentity(store);
  if (profile.storeId != id)
    throw Error(what + ": measured on another store (store '" + profile.storeId + "', " + store.dir().string() +
                " is '" + id + "'); run `zipmoe profile " + store.dir().string() + "`");
  if (profile.readMode != modeName(mode))
    throw Error(what + ": measured with " + profile.readMode + " reads, the runtime uses " + modeName(mode) + " reads");
}

void saveCostProfile(const CostProfile& p, const std::filesystem::path& path) {
  const nlohmann::json j = {{"format", "zipmoe-cost-profile"},
                            {"version", 1},
                            {"host", p.host},
                            {"store", p.storeId},
                            {"read_mode", p.readMode},
                            {"sm_read_s", p.smRead},
                            {"e_read_s", p.eRead},
                            {"decompress_s", p.decompress},
                            {"recover_s", p.recover},
                            {"full_read_s", p.fullRead},
                            {"compute_base_s", p.computeBase},
                            {"compute_per_token_s", p.computePerToken}};
  io::writeFileAtomically(path, j.dump(2) + "\n");
}

std::optional<CostProfile> loadMatchingProfile(const std::filesystem::path& path, const Store& store, ReadMode mode,
                                               std::string* whyNot) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  CostProfile p = loadCostProfile(path);
  try {
    checkProfile(p, store, mode, path.string());
  } catch (const Error& e) {
    if (whyNot) *whyNot = e.what();
    return std::nullopt;
  }
  return p;
}

CostProfile loadCostProfile(const std::filesystem::path& path) {
  const std::string what = path.string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(io::readTextFile(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || j.value("format", "") != "zipmoe-cost-profile")
    throw Error(what + ": not a ZipMoE cost profile (field 'format' must be \"zipmoe-cost-profile\")");
  if (j.value("version", 0) != 1) throw Error(what + ": unsupported cost-profile version (field 'version')");
  CostProfile p;
  auto text = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_string()) throw Error(what + ": field '" + key + "' must be a string");
    return j[key].get<std::string>();
  };
  auto number = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number()) throw Error(what + ": field '" + key + "' must be a number");
    const double x = j[key].get<double>();
    if (!(x >= 0) || x > 1e4) throw Error(what + ": field '" + key + "' = " + std::to_string(x) + " is out of range");
    return x;
  };
  p.host = text("host");
  p.storeId = text("store");
  p.readMode = text("read_mode");
  if (p.readMode != "direct" && p.readMode != "buffered")
    throw Error(what + ": field 'read_mode' must be \"direct\" or \"buffered\", not \"" + p.readMode + "\"");
  p.smRead = number("sm_read_s");
  p.eRead = number("e_read_s");
  p.decompress = number("decompress_s");
  p.recover = number("recover_s");
  p.fullRead = number("full_read_s");
  p.computeBase = number("compute_base_s");
  p.computePerToken = number("compute_per_token_s");
  return p;
}

}  // namespace zipmoe
