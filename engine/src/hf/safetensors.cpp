// Safetensors reading and writing. The header is validated as strictly as the reference
// implementation: tensors must cover the data section exactly, without overlaps or holes, and each
// tensor's byte size must equal its element count times its dtype size.
#include "zipmoe/hf/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "io/file_io.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the safetensors spec's limit

struct DTypeEntry {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::BF16, "BF16", 2}, {DType::F16, "F16", 2},   {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},   {DType::I8, "I8", 1},     {DType::I16, "I16", 2},
    {DType::I32, "I32", 4},   {DType::I64, "I64", 8},   {DType::U8, "U8", 1},
    {DType::U16, "U16", 2},   {DType::U32, "U32", 4},   {DType::U64, "U64", 8},
    {DType::BOOL, "BOOL", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};

uint64_t checkedNumel(const std::vector<int64_t>& shape, const std::string& context) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(context + ": negative dimension " + std::to_string(d));
    const auto ud = static_cast<uint64_t>(d);
    if (ud != 0 && n > std::numeric_limits<uint64_t>::max() / ud)
      throw Error(context + ": shape overflows 64 bits");
    n *= ud;
  }
  return n;
}

}  // namespace

const char* dtypeName(DType dtype) {
  for (const auto& e : kDTypes)
    if (e.dtype == dtype) return e.name;
  return "?";
}

size_t dtypeSize(DType dtype) {
  for (const auto& e : kDTypes)
    if (e.dtype == dtype) return e.size;
  return 0;
}

DType parseDType(const std::string& name, const std::string& context) {
  for (const auto& e : kDTypes)
    if (name == e.name) return e.dtype;
  throw Error(context + ": unknown dtype '" + name + "'");
}

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

SafetensorsHeader parseSafetensorsHeader(std::span<const uint8_t> bytes, uint64_t fileSize, const std::string& what) {
  if (fileSize < 8 || bytes.size() < 8)
    throw Error(what + ": not a safetensors file (" + std::to_string(fileSize) +
                " bytes, shorter than the 8-byte header length)");
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i) headerLen = (headerLen << 8) | bytes[static_cast<size_t>(i)];
  if (headerLen > kMaxHeaderBytes)
    throw Error(what + ": header length " + std::to_string(headerLen) + " exceeds the 100 MiB limit (corrupt file?)");
  if (8 + headerLen > fileSize)
    throw Error(what + ": truncated: header of " + std::to_string(headerLen) + " bytes does not fit in the file of " +
                std::to_string(fileSize) + " bytes");
  if (8 + headerLen > bytes.size()) throw Error(what + ": header bytes not provided");

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(headerLen));
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + ": header is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(what + ": header is not a JSON object");

  SafetensorsHeader h;
  h.dataStart = 8 + headerLen;
  const uint64_t dataSize = fileSize - h.dataStart;
  for (const auto& [name, value] : j.items()) {
    const std::string ctx = what + ": tensor '" + name + "'";
    if (name == "__metadata__") {
      if (!value.is_object()) throw Error(what + ": __metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) throw Error(what + ": __metadata__ value of '" + k + "' is not a string");
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (!value.is_object()) throw Error(ctx + " is not an object");
    const auto dt = value.find("dtype");
    const auto sh = value.find("shape");
    const auto off = value.find("data_offsets");
    if (dt == value.end() || !dt->is_string()) throw Error(ctx + ": missing or non-string 'dtype'");
    if (sh == value.end() || !sh->is_array()) throw Error(ctx + ": missing or non-array 'shape'");
    if (off == value.end() || !off->is_array() || off->size() != 2)
      throw Error(ctx + ": 'data_offsets' must be an array of two integers");
    TensorInfo t;
    t.name = name;
    t.dtype = parseDType(dt->get<std::string>(), ctx);
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) throw Error(ctx + ": shape entries must be non-negative integers");
      const auto v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) throw Error(ctx + ": dimension too large");
      t.shape.push_back(static_cast<int64_t>(v));
    }
    if (!(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
      throw Error(ctx + ": 'data_offsets' must be non-negative integers");
    const auto begin = (*off)[0].get<uint64_t>();
    const auto end = (*off)[1].get<uint64_t>();
    if (begin > end) throw Error(ctx + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] are reversed");
    if (end > dataSize)
      throw Error(ctx + ": data ends at byte " + std::to_string(end) + " but the data section holds only " +
                  std::to_string(dataSize) + " bytes (file truncated?)");
    const uint64_t numel = checkedNumel(t.shape, ctx);
    if (numel > std::numeric_limits<uint64_t>::max() / dtypeSize(t.dtype)) throw Error(ctx + ": size overflows");
    if (end - begin != numel * dtypeSize(t.dtype))
      throw Error(ctx + ": " + std::to_string(end - begin) + " bytes of data, but shape and dtype " +
                  dtypeName(t.dtype) + " need " + std::to_string(numel * dtypeSize(t.dtype)));
    t.offset = h.dataStart + begin;
    t.size = end - begin;
    h.tensors.push_back(std::move(t));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.size < b.size;
  });
  uint64_t cursor = h.dataStart;
  for (const auto& t : h.tensors) {
    if (t.offset < cursor) throw Error(what + ": tensor '" + t.name + "' overlaps the previous tensor's data");
    if (t.offset > cursor)
      throw Error(what + ": " + std::to_string(t.offset - cursor) + " unindexed bytes before tensor '" + t.name + "'");
    cursor = t.offset + t.size;
  }
  if (cursor != fileSize)
    throw Error(what + ": " + std::to_string(fileSize - cursor) + " bytes after the last tensor are not indexed");
  return h;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  io::FileHandle f(path, O_RDONLY);
  const uint64_t size = f.size();
  std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(size, 8)));
  if (!head.empty()) f.readExact(head.data(), head.size(), 0);
  if (size >= 8) {
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = (len << 8) | head[static_cast<size_t>(i)];
    if (len <= kMaxHeaderBytes && 8 + len <= size) {
      head.resize(static_cast<size_t>(8 + len));
      f.readExact(head.data() + 8, static_cast<size_t>(len), 8);
    }
  }
  header_ = parseSafetensorsHeader(head, size, path.string());
  for (size_t i = 0; i < header_.tensors.size(); ++i) byName_[header_.tensors[i].name] = i;
  fd_ = ::dup(f.fd());
  if (fd_ < 0) throw Error(systemErrorMessage("dup of " + path.string(), errno));
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  const auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : &header_.tensors[it->second];
}

void SafetensorsFile::read(const TensorInfo& tensor, uint64_t offsetInTensor, uint64_t length, void* dst) const {
  if (offsetInTensor > tensor.size || length > tensor.size - offsetInTensor)
    throw Error(path_.string() + ": read past the end of tensor '" + tensor.name + "'");
  auto* p = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < length) {
    const ssize_t r = ::pread(fd_, p + done, static_cast<size_t>(length - done),
                              static_cast<off_t>(tensor.offset + offsetInTensor + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(systemErrorMessage(path_.string() + ": reading tensor '" + tensor.name + "'", errno));
    if (r == 0) throw Error(path_.string() + ": truncated while reading tensor '" + tensor.name + "'");
    done += static_cast<uint64_t>(r);
  }
}

// ---- HfCheckpoint ---------------------------------------------------------------------------------

HfCheckpoint::HfCheckpoint(const std::filesystem::path& dir) : dir_(dir) {
  if (!std::filesystem::is_directory(dir)) throw Error(dir.string() + " is not a directory");
  const auto configPath = dir / "config.json";
  if (!std::filesystem::exists(configPath)) throw Error(configPath.string() + " is missing");
  try {
    config_ = std::make_unique<nlohmann::json>(nlohmann::json::parse(io::readTextFile(configPath)));
  } catch (const nlohmann::json::exception& e) {
    throw Error(configPath.string() + " is not valid JSON: " + e.what());
  }
  if (!config_->is_object()) throw Error(configPath.string() + " is not a JSON object");

  const auto single = dir / "model.safetensors";
  const auto indexPath = dir / "model.safetensors.index.json";
  std::map<std::string, std::string> weightMap;  // tensor -> file (sharded checkpoints)
  if (std::filesystem::exists(indexPath)) {
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(io::readTextFile(indexPath));
    } catch (const nlohmann::json::exception& e) {
      throw Error(indexPath.string() + " is not valid JSON: " + e.what());
    }
    const auto wm = index.is_object() ? index.find("weight_map") : index.end();
    if (!index.is_object() || wm == index.end() || !wm->is_object())
      throw Error(indexPath.string() + ": missing 'weight_map' object");
    std::set<std::string> shardNames;
    for (const auto& [name, file] : wm->items()) {
      if (!file.is_string()) throw Error(indexPath.string() + ": weight_map entry '" + name + "' is not a string");
      const auto f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "..")
        throw Error(indexPath.string() + ": weight_map entry '" + name + "' names an invalid file '" + f + "'");
      weightMap[name] = f;
      shardNames.insert(f);
    }
    for (const auto& s : shardNames) {
      const auto p = dir / s;
      if (!std::filesystem::exists(p))
        throw Error("missing shard " + p.string() + " (listed in " + indexPath.string() + ")");
      files_.push_back(std::make_unique<SafetensorsFile>(p));
    }
  } else if (std::filesystem::exists(single)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single));
  } else {
    throw Error(dir.string() + " has neither model.safetensors nor model.safetensors.index.json");
  }

  std::map<std::string, Entry> all;
  for (const auto& f : files_) {
    for (const auto& t : f->tensors()) {
      if (!weightMap.empty()) {
        const auto it = weightMap.find(t.name);
        if (it == weightMap.end() || it->second != f->path().filename().string()) continue;
      }
      if (!all.emplace(t.name, Entry{&t, f.get()}).second)
        throw Error(f->path().string() + ": tensor '" + t.name + "' appears in more than one file");
    }
  }
  for (const auto& [name, file] : weightMap)
    if (!all.count(name))
      throw Error((dir / file).string() + ": tensor '" + name + "' listed in the index is not in the file");
  for (auto& [name, e] : all) entries_.push_back(e);
}

HfCheckpoint::~HfCheckpoint() = default;

std::string HfCheckpoint::modelType() const {
  const auto it = config_->find("model_type");
  return it != config_->end() && it->is_string() ? it->get<std::string>() : std::string();
}

const HfCheckpoint::Entry* HfCheckpoint::find(const std::string& name) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                                   [](const Entry& e, const std::string& n) { return e.info->name < n; });
  return it != entries_.end() && it->info->name == name ? &*it : nullptr;
}

// ---- SafetensorsWriter ----------------------------------------------------------------------------

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& path, const std::vector<Declared>& tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), partial_(path.string() + ".partial") {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    const uint64_t bytes = checkedNumel(t.shape, path.string() + ": tensor '" + t.name + "'") * dtypeSize(t.dtype);
    header[t.name] = {{"dtype", dtypeName(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned, as the reference writer does
  expectedTotal_ = offset;
  fd_ = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(systemErrorMessage("cannot create " + partial_.string(), errno));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  append(len, 8);
  append(text.data(), text.size());
  written_ = 0;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(partial_.c_str());
}

void SafetensorsWriter::append(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t r = ::write(fd_, p + done, bytes - done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(systemErrorMessage("writing " + partial_.string() + " failed", errno));
    done += static_cast<size_t>(r);
  }
  written_ += bytes;
}

void SafetensorsWriter::finish() {
  if (written_ != expectedTotal_)
    throw Error(path_.string() + ": wrote " + std::to_string(written_) + " data bytes, declared " +
                std::to_string(expectedTotal_));
  if (::fsync(fd_) != 0) throw Error(systemErrorMessage("fsync of " + partial_.string(), errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw Error(systemErrorMessage("closing " + partial_.string(), errno));
  if (::rename(partial_.c_str(), path_.c_str()) != 0)
    throw Error(systemErrorMessage("cannot rename " + partial_.string() + " to " + path_.string(), errno));
  finished_ = true;
}

}  // namespace zipmoe
