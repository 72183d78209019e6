// CostProfile measurement, identity checks and JSON persistence (see zipmoe/profile/cost_profile.h).
#include "zipmoe/profile/cost_profile.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/crc32c.h"
#include "io/file_io.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"

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
  p.kernels = kernelsIdentity();
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
  // A missed tensor's E-chunks and SM-chunk in one request, as the runtime reads them (coalesceReads).
  {
    uint64_t maxTensor = 0;
    for (const auto& e : m.experts) {
      maxTensor = std::max(maxTensor, e.paddedEBytes() + e.smChunk.paddedSize);
    }
    io::AlignedBuffer whole(static_cast<size_t>(maxTensor));
    double t2 = 0;
    const int nT = std::max(4, n / 3);
    for (int i = 0; i < nT; ++i) {
      const int flat = static_cast<int>((static_cast<int64_t>(i) * 6007 + total / 3) % total);
      const int kind = flat % kinds, expert = (flat / kinds) % experts, layer = flat / kinds / experts;
      const auto t = Clock::now();
      const auto& entry = m.expert(layer, expert, kind);
      const uint64_t eBytes = entry.paddedEBytes();
      store.readTensorChunks(layer, expert, kind, {whole.data(), static_cast<size_t>(eBytes)},
                             {whole.data() + eBytes, static_cast<size_t>(entry.smChunk.paddedSize)}, mode);
      t2 += since(t);
    }
    p.tensorRead = t2 / nT;
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

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// `count` threads decoding real E-chunks of the store in a loop until stopped (what the runtime's
// decompression workers do), each counting its chunks and the seconds they took.
class BusyDecoders {
 public:
  BusyDecoders(const Store& store, ReadMode mode, int count) : stop_(false) {
    const Manifest& m = store.manifest();
    // A few chunks from different places in the store, read once (the decoders never touch the disk).
    const int kinds = m.numKinds(), total = m.numLayers() * m.numExperts * kinds;
    for (int i = 0; i < 4; ++i) {
      const int flat = static_cast<int>((static_cast<int64_t>(i) * 4001 + 17) % total);
      const int kind = flat % kinds, expert = (flat / kinds) % m.numExperts, layer = flat / kinds / m.numExperts;
      const ExpertTensorEntry& e = m.expert(layer, expert, kind);
      const int shard = i % m.shards;
      const ChunkRef& c = e.eChunks[static_cast<size_t>(shard)];
      Chunk ch;
      ch.data = io::AlignedBuffer(static_cast<size_t>(c.paddedSize));
      store.readChunk({layer, expert, kind, shard}, {ch.data.data(), ch.data.size()}, mode);
      ch.size = static_cast<size_t>(c.size);
      ch.count = static_cast<size_t>(c.count);
      chunks_.push_back(std::move(ch));
    }
    stats_.resize(static_cast<size_t>(count));
    for (int w = 0; w < count; ++w)
      threads_.emplace_back([this, &store, w] {
        std::vector<uint8_t> plane(64);
        Stat& st = stats_[static_cast<size_t>(w)];
        for (size_t i = static_cast<size_t>(w); !stop_.load(std::memory_order_relaxed); ++i) {
          const Chunk& c = chunks_[i % chunks_.size()];
          if (plane.size() < c.count) plane.resize(c.count);
          const auto t = Clock::now();
          store.codec().decompress(c.data.data(), c.size, plane.data(), c.count);
          st.seconds += since(t);
          ++st.chunks;
          done_.fetch_add(1, std::memory_order_relaxed);
        }
      });
  }
  uint64_t chunksDone() const { return done_.load(std::memory_order_relaxed); }
  // Stops the threads; returns the mean seconds per decoded chunk (0 when none finished).
  double stop() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
    threads_.clear();
    double s = 0;
    uint64_t n = 0;
    for (const Stat& st : stats_) {
      s += st.seconds;
      n += st.chunks;
    }
    return n ? s / static_cast<double>(n) : 0.0;
  }
  ~BusyDecoders() {
    if (!threads_.empty()) stop();
  }

 private:
  struct Chunk {
    io::AlignedBuffer data;
    size_t size = 0, count = 0;
  };
  struct Stat {
    double seconds = 0;
    uint64_t chunks = 0;
  };
  std::vector<Chunk> chunks_;
  std::vector<Stat> stats_;  // one per thread, read after join
  std::atomic<bool> stop_;
  std::atomic<uint64_t> done_{0};
  std::vector<std::thread> threads_;
};

}  // namespace

double CostProfile::computeSlowdown() const {
  if (!hasContention() || computeBusy[0] <= 0) return 1;
  return std::max(1.0, computeBusy.back() / computeBusy[0]);
}

double CostProfile::decompressSlowdown() const {
  if (decompressBusy <= 0 || decompress <= 0) return 1;
  return std::max(1.0, decompressBusy / decompress);
}

double CostProfile::readSlowdown() const {
  if (fullReadBusy <= 0 || fullRead <= 0) return 1;
  return std::max(1.0, fullReadBusy / fullRead);
}

void measureContention(CostProfile& p, const Store& store, ReadMode mode, int workers,
                       const std::function<double()>& computeOnce, int reps) {
  if (workers < 1) throw Error("cost profile: contention needs at least 1 busy worker");
  if (reps < 1) throw Error("cost profile: contention needs at least 1 repetition");
  p.contentionWorkers = workers;
  p.computeBusy.clear();
  if (computeOnce) {
    for (int i = 0; i < 2; ++i) (void)computeOnce();  // warm up
    for (int w = 0; w <= workers; ++w) {
      BusyDecoders busy(store, mode, w);
      std::vector<double> t;
      for (int i = 0; i < reps; ++i) t.push_back(computeOnce());
      // The decoders' pace needs finished chunks: compute on (unrecorded) until each did a few.
      while (busy.chunksDone() < 4 * static_cast<uint64_t>(w)) (void)computeOnce();
      const double perChunk = busy.stop();
      p.computeBusy.push_back(median(t));
      if (w == workers) p.decompressBusy = perChunk;  // the decoders' pace while the FFN ran
    }
  } else {
    // No FFN to run: one spinning thread stands in for the model's compute.
    std::atomic<bool> stop{false};
    std::thread spinner([&stop] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
    BusyDecoders busy(store, mode, workers);
    while (busy.chunksDone() < 4 * static_cast<uint64_t>(workers) * static_cast<uint64_t>(reps))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    p.decompressBusy = busy.stop();
    stop.store(true);
    spinner.join();  // computeBusy stays empty: the profile has no contention term yet
  }
  // A whole BF16 tensor read while the decoders keep the cores busy.
  const Manifest& m = store.manifest();
  uint64_t maxNumel = 0;
  for (const auto& e : m.experts) maxNumel = std::max(maxNumel, e.numel);
  const uint64_t fullBytes = io::alignUp(maxNumel * 2, 4096);
  io::AlignedBuffer full(static_cast<size_t>(fullBytes));
  const int flags = O_RDONLY | O_CLOEXEC | (mode == ReadMode::Direct ? O_DIRECT : 0);
  io::FileHandle file(store.dir() / "experts.bin", flags);
  const uint64_t size = file.size();
  if (size >= fullBytes) {
    BusyDecoders busy(store, mode, workers);
    const uint64_t span = (size - fullBytes) / 4096;
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      const uint64_t offset = span == 0 ? 0 : (static_cast<uint64_t>(i) * 7919 * 613 % span) * 4096;
      const auto start = Clock::now();
      file.readExact(full.data(), static_cast<size_t>(fullBytes), offset);
      t.push_back(since(start));
    }
    busy.stop();
    p.fullReadBusy = median(t);
  }
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
  if (profile.kernels != kernelsIdentity())
    throw Error(what + ": measured by other code (kernels '" + profile.kernels + "', this build's are '" +
                kernelsIdentity() + "'); run `zipmoe profile " + store.dir().string() + "` with this build");
}

void saveCostProfile(const CostProfile& p, const std::filesystem::path& path) {
  nlohmann::json j = {{"format", "zipmoe-cost-profile"},
                            {"version", kCostProfileVersion},
                            {"host", p.host},
                            {"store", p.storeId},
                            {"read_mode", p.readMode},
                            {"kernels", p.kernels},
                            {"sm_read_s", p.smRead},
                            {"e_read_s", p.eRead},
                            {"decompress_s", p.decompress},
                            {"recover_s", p.recover},
                            {"full_read_s", p.fullRead},
                            {"compute_base_s", p.computeBase},
                            {"compute_per_token_s", p.computePerToken},
                            {"tensor_read_s", p.tensorRead}};
  j["contention"] = {{"workers", p.contentionWorkers},
                     {"compute_busy_s", p.computeBusy},
                     {"decompress_busy_s", p.decompressBusy},
                     {"full_read_busy_s", p.fullReadBusy}};
  if (p.observed.any()) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [key, cost] : observedFigures(p.observed))
      if (cost->count > 0) o[key] = {{"s", cost->seconds}, {"n", cost->count}};
    j["observed"] = std::move(o);
  }
  io::writeFileAtomically(path, j.dump(2) + "\n");
}

namespace {
CostProfile loadProfile(const std::filesystem::path& path, int* version);
}  // namespace

namespace {
template <class Figures, class Costs>
Figures figuresOf(Costs& o) {
  return {{"tensor_read", &o.tensorRead}, {"e_read", &o.eRead},           {"sm_read", &o.smRead},
          {"full_read", &o.fullRead},     {"decompress", &o.decompress}, {"recover", &o.recover},
          {"cpu_layer", &o.cpuLayer},     {"read_layer", &o.readLayer}};
}
}  // namespace

std::vector<std::pair<const char*, ObservedCost*>> observedFigures(ObservedCosts& o) {
  return figuresOf<std::vector<std::pair<const char*, ObservedCost*>>>(o);
}

std::vector<std::pair<const char*, const ObservedCost*>> observedFigures(const ObservedCosts& o) {
  return figuresOf<std::vector<std::pair<const char*, const ObservedCost*>>>(o);
}

void checkObserved(const ObservedCosts& o, const std::string& what) {
  for (const auto& [key, cost] : observedFigures(o))
    if (!std::isfinite(cost->seconds) || cost->seconds < 0 || cost->seconds > 1e4 || cost->count > ObservedCost::kObservedWindow)
      throw Error(what + ": observed figure '" + key + "' = " + std::to_string(cost->seconds) + " over " +
                  std::to_string(cost->count) + " operations, expected a value in [0, 1e4] over at most " +
                  std::to_string(ObservedCost::kObservedWindow));
}

std::optional<CostProfile> loadMatchingProfile(const std::filesystem::path& path, const Store& store, ReadMode mode,
                                               std::string* whyNot) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  int version = 0;
  CostProfile p = loadProfile(path, &version);
  if (version < kCostProfileVersion) {
    // Loadable, but measured without something the runtime now relies on: measure it again.
    // Version 1 has no contention figures (the paper's cost model: the planner would not see this
    // machine's contention); version 2 does not name the code it timed (it may be an older kernel's).
    const char* lacks = version < 2 ? " has no contention figures (field 'contention'"
                                    : " does not name the code it timed (field 'kernels'";
    if (whyNot)
      *whyNot = path.string() + ": cost-profile version " + std::to_string(version) + lacks + ", version " +
                std::to_string(kCostProfileVersion) + ")";
    return std::nullopt;
  }
  try {
    checkProfile(p, store, mode, path.string());
  } catch (const Error& e) {
    if (whyNot) *whyNot = e.what();
    return std::nullopt;
  }
  return p;
}

CostProfile loadCostProfile(const std::filesystem::path& path) { return loadProfile(path, nullptr); }

namespace {
CostProfile loadProfile(const std::filesystem::path& path, int* versionOut) {
  const std::string what = path.string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(io::readTextFile(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || j.value("format", "") != "zipmoe-cost-profile")
    throw Error(what + ": not a ZipMoE cost profile (field 'format' must be \"zipmoe-cost-profile\")");
  const int version = j.contains("version") && j["version"].is_number_integer() ? j["version"].get<int>() : 0;
  if (version < 1 || version > kCostProfileVersion)
    throw Error(what + ": unsupported cost-profile version (field 'version' = " + j.value("version", nlohmann::json()).dump() +
                ", this build reads 1 to " + std::to_string(kCostProfileVersion) + ")");
  if (versionOut) *versionOut = version;
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
  if (version < 2) return p;  // version 1: no coalesced-read or contention figures (0: not measured)
  if (version >= 3) p.kernels = text("kernels");
  p.tensorRead = number("tensor_read_s");
  if (!j.contains("contention") || !j["contention"].is_object())
    throw Error(what + ": field 'contention' must be an object");
  const nlohmann::json& c = j["contention"];
  auto cnumber = [&](const char* key) {
    if (!c.contains(key) || !c[key].is_number())
      throw Error(what + ": field 'contention." + key + "' must be a number");
    const double x = c[key].get<double>();
    if (!(x >= 0) || x > 1e4)
      throw Error(what + ": field 'contention." + key + "' = " + std::to_string(x) + " is out of range");
    return x;
  };
  if (!c.contains("workers") || !c["workers"].is_number_integer() || c["workers"].get<int>() < 0 ||
      c["workers"].get<int>() > 4096)
    throw Error(what + ": field 'contention.workers' must be an integer in [0, 4096]");
  p.contentionWorkers = c["workers"].get<int>();
  if (!c.contains("compute_busy_s") || !c["compute_busy_s"].is_array())
    throw Error(what + ": field 'contention.compute_busy_s' must be an array of numbers");
  for (const auto& x : c["compute_busy_s"]) {
    if (!x.is_number() || !(x.get<double>() >= 0) || x.get<double>() > 1e4)
      throw Error(what + ": field 'contention.compute_busy_s' must hold numbers in [0, 1e4]");
    p.computeBusy.push_back(x.get<double>());
  }
  if (!p.computeBusy.empty() && p.computeBusy.size() != static_cast<size_t>(p.contentionWorkers) + 1)
    throw Error(what + ": field 'contention.compute_busy_s' has " + std::to_string(p.computeBusy.size()) +
                " entries, expected workers + 1 = " + std::to_string(p.contentionWorkers + 1));
  p.decompressBusy = cnumber("decompress_busy_s");
  p.fullReadBusy = cnumber("full_read_busy_s");
  if (j.contains("observed")) {
    const nlohmann::json& o = j["observed"];
    if (!o.is_object()) throw Error(what + ": field 'observed' must be an object");
    for (const auto& [key, cost] : observedFigures(p.observed)) {
      if (!o.contains(key)) continue;
      const nlohmann::json& f = o[key];
      const std::string field = std::string("observed.") + key;
      if (!f.is_object() || !f.contains("s") || !f["s"].is_number() || !f.contains("n") || !f["n"].is_number_unsigned())
        throw Error(what + ": field '" + field + "' must be {\"s\": seconds, \"n\": operations}");
      cost->seconds = f["s"].get<double>();
      cost->count = f["n"].get<uint64_t>();
    }
    checkObserved(p.observed, what);
  }
  return p;
}
}  // namespace

}  // namespace zipmoe

namespace zipmoe {

void ObservedCost::add(double s) {
  count = std::min(count + 1, kObservedWindow);
  seconds += (s - seconds) / static_cast<double>(count);
}

void ObservedCost::merge(const ObservedCost& other) {
  if (other.count == 0) return;
  // Other's operations are the newer: they keep their weight, ours fill what the window has left.
  const uint64_t ours = std::min(count, kObservedWindow - std::min(other.count, kObservedWindow));
  const uint64_t total = ours + std::min(other.count, kObservedWindow);
  seconds = (seconds * static_cast<double>(ours) + other.seconds * static_cast<double>(total - ours)) / static_cast<double>(total);
  count = total;
}

void ObservedCosts::merge(const ObservedCosts& other) {
  tensorRead.merge(other.tensorRead);
  eRead.merge(other.eRead);
  smRead.merge(other.smRead);
  fullRead.merge(other.fullRead);
  decompress.merge(other.decompress);
  recover.merge(other.recover);
  cpuLayer.merge(other.cpuLayer);
  readLayer.merge(other.readLayer);
}

bool ObservedCosts::any() const {
  return tensorRead.count + eRead.count + smRead.count + fullRead.count + decompress.count + recover.count > 0;
}

}  // namespace zipmoe
