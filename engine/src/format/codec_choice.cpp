// The exponent codec for this machine: the cost model, the decision, and the measurement behind it.
#include "zipmoe/format/codec_choice.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "io/file_io.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Within this fraction of the cheapest cost, the smaller store wins: the model is not that precise.
constexpr double kTieFraction = 0.01;

// Decode timing: passes over the whole sample until this long has been spent (at least kMinPasses);
// the fastest pass counts, since a busy machine only ever slows a pass down.
constexpr double kDecodeSeconds = 0.03;
constexpr int kMinPasses = 3;

// Disk probe: a scratch file of up to kProbeBlocks × kProbeBlockBytes, written for at most
// kProbeWriteSeconds, read back until kProbeReadSeconds have passed (one pass at least, at most
// kProbeReadSecondsCap).
constexpr size_t kProbeBlockBytes = size_t{4} << 20;
constexpr int kProbeBlocks = 8;
constexpr double kProbeWriteSeconds = 1.0;
constexpr double kProbeReadSeconds = 0.1;
constexpr double kProbeReadSecondsCap = 1.0;

void requirePositive(double v, const std::string& what) {
  if (!(v > 0) || !std::isfinite(v))
    throw Error("codec choice: " + what + " = " + std::to_string(v) + " is not a positive number");
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Removes the disk probe's scratch file whatever happens.
class ScratchFile {
 public:
  explicit ScratchFile(std::filesystem::path path) : path_(std::move(path)) {}
  ~ScratchFile() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::filesystem::path& path() const { return path_; }
  int fd() const { return fd_; }
  void reopen(int flags, int mode = 0600) {
    closeFd();
    fd_ = ::open(path_.c_str(), flags | O_CLOEXEC, mode);
  }
  void closeFd() {
    if (fd_ >= 0 && ::close(fd_) != 0) {
      fd_ = -1;
      throw Error(systemErrorMessage("cannot close the disk-speed scratch file " + path_.string(), errno));
    }
    fd_ = -1;
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

void writeAllAt(const ScratchFile& f, const uint8_t* p, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t w = ::pwrite(f.fd(), p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw Error(systemErrorMessage("writing " + f.path().string() + " (the scratch file that measures the disk's read speed)",
                                     w < 0 ? errno : EIO));
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

void readAllAt(const ScratchFile& f, uint8_t* p, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t r = ::pread(f.fd(), p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw Error(systemErrorMessage("cannot read the disk-speed scratch file " + f.path().string() + " at offset " +
                                         std::to_string(offset),
                                     r < 0 ? errno : EIO));
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

// Sequential read speed of `dir`'s filesystem as the store reader sees it: O_DIRECT requests of
// 4 MiB into a huge-page buffer. The file holds pseudo-random bytes so that a compressing
// filesystem cannot shrink it.
void measureDisk(const std::filesystem::path& dir, CodecMeasurements& m) {
  ScratchFile f(dir / (".zipmoe-disk-probe-" + std::to_string(::getpid())));
  io::AlignedBuffer block(kProbeBlockBytes);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i + 8 <= block.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::copy_n(reinterpret_cast<const uint8_t*>(&x), 8, block.data() + i);
  }
  f.reopen(O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT);
  m.diskReadDirect = f.fd() >= 0;
  if (f.fd() < 0) {
    if (errno != EINVAL)
      throw Error(systemErrorMessage("cannot create the disk-speed scratch file " + f.path().string(), errno));
    f.reopen(O_WRONLY | O_CREAT | O_TRUNC);  // a filesystem without O_DIRECT (tmpfs)
    if (f.fd() < 0) throw Error(systemErrorMessage("cannot create the disk-speed scratch file " + f.path().string(), errno));
  }
  const auto writeStart = Clock::now();
  uint64_t fileBytes = 0;
  for (int b = 0; b < kProbeBlocks && (b == 0 || secondsSince(writeStart) < kProbeWriteSeconds); ++b) {
    block.data()[0] = static_cast<uint8_t>(b);  // no two blocks alike (deduplicating filesystems)
    writeAllAt(f, block.data(), block.size(), fileBytes);
    fileBytes += block.size();
  }
  if (::fsync(f.fd()) != 0)
    throw Error(systemErrorMessage("cannot sync the disk-speed scratch file " + f.path().string(), errno));

  f.reopen(O_RDONLY | (m.diskReadDirect ? O_DIRECT : 0));
  if (f.fd() < 0) throw Error(systemErrorMessage("cannot open the disk-speed scratch file " + f.path().string(), errno));
  if (!m.diskReadDirect) ::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_DONTNEED);  // best effort: tmpfs keeps it anyway
  const auto readStart = Clock::now();
  uint64_t bytesRead = 0;
  do {
    for (uint64_t off = 0; off < fileBytes; off += block.size()) readAllAt(f, block.data(), block.size(), off);
    bytesRead += fileBytes;
  } while (secondsSince(readStart) < kProbeReadSeconds && secondsSince(readStart) < kProbeReadSecondsCap);
  const double seconds = std::max(secondsSince(readStart), 1e-9);
  f.closeFd();
  m.diskReadBytesPerSecond = static_cast<double>(bytesRead) / seconds;
}

CodecMeasurement measureCodec(const CodecSpec& spec, const std::vector<std::vector<uint8_t>>& planes) {
  const auto codec = makeCodec(spec);
  std::vector<std::vector<uint8_t>> packed(planes.size());
  uint64_t weights = 0, stored = 0;
  size_t largest = 0;
  for (size_t i = 0; i < planes.size(); ++i) {
    packed[i].resize(codec->maxCompressedSize(planes[i].size()));
    packed[i].resize(codec->compress(planes[i].data(), planes[i].size(), packed[i].data(), packed[i].size()));
    weights += planes[i].size();
    stored += packed[i].size() + planes[i].size();  // E-chunk + the raw SM-chunk
    largest = std::max(largest, planes[i].size());
  }
  std::vector<uint8_t> out(largest);
  double fastest = 0;
  const auto start = Clock::now();
  for (int pass = 0; pass < kMinPasses || secondsSince(start) < kDecodeSeconds; ++pass) {
    const auto t = Clock::now();
    for (size_t i = 0; i < planes.size(); ++i)
      codec->decompress(packed[i].data(), packed[i].size(), out.data(), planes[i].size());
    const double s = secondsSince(t);
    if (pass == 0 || s < fastest) fastest = s;
  }
  CodecMeasurement r;
  r.codec = spec;
  r.decodeBytesPerSecondPerCore = 2.0 * static_cast<double>(weights) / std::max(fastest, 1e-9);
  r.storedRatio = static_cast<double>(stored) / (2.0 * static_cast<double>(weights));
  return r;
}

}  // namespace

std::vector<CodecSpec> codecChoiceCandidates() {
  return {{CodecId::Huffman8, 0}, {CodecId::Nibble, 0}, {CodecId::Zstd, 0}};
}

const char* codecChosenByName(CodecChosenBy by) { return by == CodecChosenBy::Measured ? "measured" : "--codec"; }

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

CodecCost codecCost(const CodecMeasurement& c, double diskReadBytesPerSecond, int cores) {
  const std::string name = describe(c.codec);
  requirePositive(c.decodeBytesPerSecondPerCore, name + " decode speed");
  requirePositive(c.storedRatio, name + " stored ratio");
  requirePositive(diskReadBytesPerSecond, "disk read speed");
  if (cores < 1) throw Error("codec choice: cores = " + std::to_string(cores) + " (at least 1)");
  const double read = c.storedRatio / diskReadBytesPerSecond;
  const double decode = 1.0 / (c.decodeBytesPerSecondPerCore * static_cast<double>(cores));
  CodecCost cost;
  cost.missSecondsPerByte = std::max(read, decode);
  cost.hitSecondsPerByte = c.codec.id == CodecId::Nibble ? 0.0 : decode;  // nibble hits: read in place
  return cost;
}

CodecChoice chooseExponentCodec(const CodecMeasurements& m) {
  if (m.codecs.empty()) throw Error("codec choice: no candidate codec was measured");
  std::vector<double> cost;
  for (const auto& c : m.codecs) cost.push_back(codecCost(c, m.diskReadBytesPerSecond, m.cores).total());
  const double cheapest = *std::min_element(cost.begin(), cost.end());
  size_t best = m.codecs.size();
  for (size_t i = 0; i < m.codecs.size(); ++i) {
    const bool tied = cost[i] <= cheapest * (1 + kTieFraction);
    if (tied && (best == m.codecs.size() || m.codecs[i].storedRatio < m.codecs[best].storedRatio)) best = i;
  }

  // "nibble: a miss plus a C-pool hit costs 0.42 s per GB of BF16 experts, huffman8 0.47, zstd 1.10
  // (disk 2.10 GB/s O_DIRECT, 2 cores; decode per core nibble 18.2, huffman8 8.6, zstd 1.9 GB/s
  // of BF16; stored nibble 75.0 %, huffman8 66.3 %, zstd 70.9 % of BF16)".
  std::string costs, speeds, ratios;
  std::vector<size_t> order{best};
  for (size_t i = 0; i < m.codecs.size(); ++i)
    if (i != best) order.push_back(i);
  for (size_t i : order) {
    const std::string name = describe(m.codecs[i].codec);
    const char* sep = i == best ? "" : ", ";
    if (i != best) costs += ", " + name + " " + fixed(cost[i] * 1e9, 2);
    speeds += sep + name + " " + fixed(m.codecs[i].decodeBytesPerSecondPerCore / 1e9, 1);
    ratios += sep + name + " " + fixed(100 * m.codecs[i].storedRatio, 1) + " %";
  }
  CodecChoice choice;
  choice.chosen = m.codecs[best].codec;
  choice.by = CodecChosenBy::Measured;
  choice.reason = describe(choice.chosen) + ": a miss plus a C-pool hit costs " + fixed(cost[best] * 1e9, 2) +
                  " s per GB of BF16 experts" + costs + " (disk " +
                  fixed(m.diskReadBytesPerSecond / 1e9, 2) + " GB/s" + (m.diskReadDirect ? " O_DIRECT" : " buffered") +
                  ", " + std::to_string(m.cores) + (m.cores == 1 ? " core" : " cores") + "; decode per core " + speeds +
                  " GB/s of BF16; stored " + ratios + " of BF16)";
  choice.measurements = m;
  return choice;
}

CodecMeasurements measureCodecs(const std::vector<std::vector<uint8_t>>& exponentPlanes,
                                const std::filesystem::path& storeDir, int cores) {
  CodecMeasurements m;
  for (const auto& p : exponentPlanes) m.sampleWeights += p.size();
  if (m.sampleWeights == 0) throw Error("codec choice: the sample of exponents to measure the codecs on is empty");
  m.cores = cores >= 1 ? cores : usableCores();
  for (const CodecSpec& spec : codecChoiceCandidates()) m.codecs.push_back(measureCodec(spec, exponentPlanes));
  measureDisk(storeDir, m);
  return m;
}

}  // namespace zipmoe
