// Eviction policy names and MemoryBudget (see zipmoe/experts/runtime_options.h).
#include "zipmoe/experts/runtime_options.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "zipmoe/base/error.h"

namespace zipmoe {

const char* evictionPolicyName(EvictionPolicy p) {
  switch (p) {
    case EvictionPolicy::LeastFrequent: return "zipmoe";
    case EvictionPolicy::Lru: return "lru";
    case EvictionPolicy::Fifo: return "fifo";
    case EvictionPolicy::Lfu: return "lfu";
    case EvictionPolicy::Marking: return "marking";
    case EvictionPolicy::UsageProbability: return "usage";
  }
  return "?";
}

EvictionPolicy parseEvictionPolicy(const std::string& text) {
  if (text == "zipmoe" || text == "lfreq") return EvictionPolicy::LeastFrequent;
  if (text == "lru") return EvictionPolicy::Lru;
  if (text == "fifo") return EvictionPolicy::Fifo;
  if (text == "lfu") return EvictionPolicy::Lfu;
  if (text == "marking") return EvictionPolicy::Marking;
  if (text == "usage") return EvictionPolicy::UsageProbability;
  throw Error("unknown eviction policy '" + text + "' (expected zipmoe, lru, fifo, lfu, marking or usage)");
}

namespace {

std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB (%llu bytes)", static_cast<double>(bytes) / (1024.0 * 1024.0),
                static_cast<unsigned long long>(bytes));
  return buf;
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %%", share * 100);
  return buf;
}

}  // namespace

MemoryBudget MemoryBudget::bytes(uint64_t bytes) {
  MemoryBudget b;
  b.kind_ = Kind::Bytes;
  b.bytes_ = bytes;
  return b;
}

MemoryBudget MemoryBudget::shareOfExperts(double share) {
  MemoryBudget b;
  b.kind_ = Kind::ShareOfExperts;
  b.share_ = share;
  return b;
}

MemoryBudget MemoryBudget::poolsForShare(double share) {
  MemoryBudget b;
  b.kind_ = Kind::PoolsForShare;
  b.share_ = share;
  return b;
}

namespace {

// A whole-text finite decimal number (from_chars: no sign '+', no spaces, no hex); nullopt otherwise.
std::optional<double> wholeNumber(const std::string& text) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::general);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

MemoryBudget MemoryBudget::parse(const std::string& text) {
  std::string number = text;
  const auto endsWith = [&](const std::string& suffix) {
    if (number.size() > suffix.size() && number.compare(number.size() - suffix.size(), suffix.size(), suffix) == 0) {
      number.resize(number.size() - suffix.size());
      return true;
    }
    return false;
  };
  if (endsWith("%")) {
    const std::optional<double> v = wholeNumber(number);
    if (!v || !(*v > 0 && *v <= 100))
      throw Error("'" + text + "' is not a percentage in (0, 100] of the expert bytes");
    return shareOfExperts(*v / 100.0);
  }
  double scale = 1;
  if (endsWith("GiB") || endsWith("G")) scale = 1024.0 * 1024 * 1024;
  else if (endsWith("MiB") || endsWith("M")) scale = 1024.0 * 1024;
  else if (endsWith("KiB") || endsWith("K")) scale = 1024.0;
  const std::optional<double> v = wholeNumber(number);
  if (!v || *v < 0)
    throw Error("'" + text + "' is not a budget (bytes with an optional K/M/G or KiB/MiB/GiB suffix, or PCT% of the "
                "expert bytes)");
  const double bytes = std::floor(*v * scale);
  if (!(bytes >= 1) || bytes > 0x1p62) throw Error("'" + text + "' is out of range (1 byte to 4 EiB)");
  return MemoryBudget::bytes(static_cast<uint64_t>(bytes));
}

std::optional<uint64_t> MemoryBudget::fixedBytes() const {
  if (kind_ != Kind::Bytes) return std::nullopt;
  return bytes_;
}

MemoryBudget MemoryBudget::clamped() const {
  MemoryBudget b = *this;
  b.clamped_ = true;
  return b;
}

std::string MemoryBudget::describe() const {
  switch (kind_) {
    case Kind::Unset: return "no budget";
    case Kind::Bytes: return mib(bytes_);
    case Kind::ShareOfExperts: return percent(share_) + " of the expert bytes";
    case Kind::PoolsForShare: return "the working set + " + percent(share_) + " of the expert bytes";
  }
  return "?";
}

uint64_t MemoryBudget::shareBytes(double share, uint64_t expertBytes) {
  return static_cast<uint64_t>(share * static_cast<double>(expertBytes));
}

uint64_t MemoryBudget::resolve(uint64_t minimum, uint64_t expertBytes) const {
  const double experts = static_cast<double>(expertBytes);
  uint64_t bytes = 0;
  switch (kind_) {
    case Kind::Unset: throw Error("expert runtime: no memory budget given");
    case Kind::Bytes: bytes = bytes_; break;
    case Kind::ShareOfExperts:
      if (!(share_ > 0 && share_ <= 1)) throw Error("memory budget: a share of the expert bytes must be in (0, 1], got " + std::to_string(share_));
      bytes = shareBytes(share_, expertBytes);
      break;
    case Kind::PoolsForShare:
      if (!(share_ >= 0 && share_ <= 1)) throw Error("memory budget: the pools' share of the expert bytes must be in [0, 1], got " + std::to_string(share_));
      bytes = minimum + shareBytes(share_, expertBytes);
      break;
  }
  if (clamped_) return std::min(std::max(bytes, minimum), minimum + expertBytes);
  if (bytes < minimum)
    throw Error("memory budget " + describe() + " is " + mib(bytes) + ", below the minimum this model needs, " +
                mib(minimum) + " = " + percent(static_cast<double>(minimum) / std::max(1.0, experts)) + " of its " +
                mib(expertBytes) + " of expert bytes: the runtime's working set of staging and output slots");
  return bytes;
}

}  // namespace zipmoe
