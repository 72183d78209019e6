// The store manifest: serialisation and complete validation. Everything a reader later trusts
// (offsets, sizes, counts, alignment) is checked here once, so chunk reads need no further checks
// beyond the CRC.
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/store.h"

namespace zipmoe {
namespace {

using json = nlohmann::json;

// Typed access that names the field path in every error.
class Fields {
 public:
  Fields(const json& j, std::string path, const std::string& what) : j_(j), path_(std::move(path)), what_(what) {
    if (!j_.is_object()) fail("is not an object");
  }
  const json& at(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) throw Error(what_ + ": missing field '" + sub(key) + "'");
    return *it;
  }
  bool has(const char* key) const { return j_.contains(key); }
  uint64_t u64(const char* key) const { return asU64(at(key), sub(key)); }
  int i32(const char* key, int lo, int hi) const {
    const json& v = at(key);
    if (!v.is_number_integer()) throw Error(what_ + ": field '" + sub(key) + "' is not an integer");
    const auto x = v.get<int64_t>();
    if (x < lo || x > hi)
      throw Error(what_ + ": field '" + sub(key) + "' = " + std::to_string(x) + " is out of range [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int>(x);
  }
  std::string str(const char* key) const {
    const json& v = at(key);
    if (!v.is_string()) throw Error(what_ + ": field '" + sub(key) + "' is not a string");
    return v.get<std::string>();
  }
  const json& array(const char* key) const {
    const json& v = at(key);
    if (!v.is_array()) throw Error(what_ + ": field '" + sub(key) + "' is not an array");
    return v;
  }
  uint64_t asU64(const json& v, const std::string& field) const {
    if (!v.is_number_unsigned()) throw Error(what_ + ": field '" + field + "' is not a non-negative integer");
    return v.get<uint64_t>();
  }
  std::string sub(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& what() const { return what_; }
  [[noreturn]] void fail(const std::string& msg) const { throw Error(what_ + ": " + (path_.empty() ? "manifest" : path_) + " " + msg); }

 private:
  const json& j_;
  std::string path_;
  const std::string& what_;
};

std::vector<int64_t> parseShape(const Fields& f, const char* key, uint64_t& numel) {
  std::vector<int64_t> shape;
  numel = 1;
  for (const auto& d : f.array(key)) {
    const uint64_t v = f.asU64(d, f.sub(key));
    if (v > (1ull << 40) || (v != 0 && numel > (1ull << 48) / v)) f.fail("shape is implausibly large");
    numel *= v;
    shape.push_back(static_cast<int64_t>(v));
  }
  return shape;
}

ChunkRef parseChunk(const Fields& f, const json& arr, const std::string& field) {
  if (!arr.is_array() || arr.size() != 4)
    throw Error(f.sub(field) + " must be [offset, size, count, crc32c]");
  ChunkRef c;
  c.offset = f.asU64(arr[0], field + "[0]");
  c.size = f.asU64(arr[1], field + "[1]");
  c.count = f.asU64(arr[2], field + "[2]");
  const uint64_t crc = f.asU64(arr[3], field + "[3]");
  if (crc > 0xFFFFFFFFull) throw Error(f.sub(field) + ": crc32c does not fit 32 bits");
  c.crc32c = static_cast<uint32_t>(crc);
  if (c.size > (1ull << 40)) throw Error(f.sub(field) + ": size is implausibly large");
  c.paddedSize = io::alignUp(c.size, kChunkAlignment);
  return c;
}

json chunkJson(const ChunkRef& c) { return json::array({c.offset, c.size, c.count, c.crc32c}); }

json codecChoiceJson(const CodecChoice& c) {
  json j = {{"chosen", describe(c.chosen)}, {"by", codecChosenByName(c.by)}, {"reason", c.reason}};
  if (c.measurements) {
    const CodecMeasurements& m = *c.measurements;
    json codecs = json::array();
    for (const auto& x : m.codecs)
      codecs.push_back({{"codec", describe(x.codec)},
                        {"decode_bytes_per_s_per_core", x.decodeBytesPerSecondPerCore},
                        {"stored_ratio", x.storedRatio}});
    j["measurements"] = {{"cores", m.cores},
                         {"disk_read_bytes_per_s", m.diskReadBytesPerSecond},
                         {"disk_read_direct", m.diskReadDirect},
                         {"sample_weights", m.sampleWeights},
                         {"codecs", codecs}};
  }
  return j;
}

// A positive, finite number (a measured speed or ratio).
double positiveNumber(const Fields& f, const char* key) {
  const json& v = f.at(key);
  if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
    throw Error(f.what() + ": field '" + f.sub(key) + "' is not a positive number");
  return v.get<double>();
}

CodecSpec parseCodecField(const Fields& f, const char* key) {
  const std::string text = f.str(key);
  try {
    return parseCodecSpec(text);
  } catch (const Error& e) {
    throw Error(f.what() + ": field '" + f.sub(key) + "': " + e.what());
  }
}

// "codec_choice": informational, but a malformed one means an edited or broken manifest, so it is an
// error like any other field; `chosen` must be the store's codec.
CodecChoice parseCodecChoice(const json& j, const CodecSpec& storeCodec, const std::string& what) {
  const Fields f(j, "codec_choice", what);
  CodecChoice c;
  c.chosen = parseCodecField(f, "chosen");
  if (describe(c.chosen) != describe(storeCodec))
    throw Error(what + ": field 'codec_choice.chosen' = '" + describe(c.chosen) + "' is not the store's codec '" +
                describe(storeCodec) + "'");
  const std::string by = f.str("by");
  if (by == codecChosenByName(CodecChosenBy::Measured)) c.by = CodecChosenBy::Measured;
  else if (by == codecChosenByName(CodecChosenBy::Option)) c.by = CodecChosenBy::Option;
  else throw Error(what + ": field 'codec_choice.by' = '" + by + "' is neither \"measured\" nor \"--codec\"");
  c.reason = f.str("reason");
  if (f.has("measurements")) {
    const Fields mf(f.at("measurements"), "codec_choice.measurements", what);
    CodecMeasurements m;
    m.cores = mf.i32("cores", 1, 1 << 20);
    m.diskReadBytesPerSecond = positiveNumber(mf, "disk_read_bytes_per_s");
    const json& direct = mf.at("disk_read_direct");
    if (!direct.is_boolean())
      throw Error(what + ": field 'codec_choice.measurements.disk_read_direct' is not a boolean");
    m.diskReadDirect = direct.get<bool>();
    m.sampleWeights = mf.u64("sample_weights");
    for (const auto& x : mf.array("codecs")) {
      const Fields xf(x, "codec_choice.measurements.codecs[]", what);
      CodecMeasurement cm;
      cm.codec = parseCodecField(xf, "codec");
      cm.decodeBytesPerSecondPerCore = positiveNumber(xf, "decode_bytes_per_s_per_core");
      cm.storedRatio = positiveNumber(xf, "stored_ratio");
      m.codecs.push_back(cm);
    }
    c.measurements = std::move(m);
  }
  return c;
}

}  // namespace

uint64_t Manifest::routedExpertBytes() const {
  uint64_t total = 0;
  for (const ExpertTensorEntry& e : experts) total += e.numel * 2;
  return total;
}

const ExpertTensorEntry& Manifest::expert(int layer, int expertIndex, int kind) const {
  return experts[(static_cast<size_t>(layer) * static_cast<size_t>(numExperts) + static_cast<size_t>(expertIndex)) *
                     tensorKinds.size() +
                 static_cast<size_t>(kind)];
}

std::string serializeManifest(const Manifest& m) {
  json j;
  j["format"] = kStoreFormatName;
  j["version"] = m.version;
  j["family"] = familyName(m.family);
  j["model_type"] = m.modelType;
  j["config"] = m.config ? *m.config : json::object();
  j["codec"] = {{"name", codecName(m.codec.id)}, {"level", m.codec.level}};
  if (m.codecChoice) j["codec_choice"] = codecChoiceJson(*m.codecChoice);
  j["shards"] = m.shards;
  j["alignment"] = kChunkAlignment;
  j["tensor_kinds"] = m.tensorKinds;
  j["num_experts"] = m.numExperts;
  j["files"] = {{"experts.bin", m.expertsFileSize}, {"dense.bin", m.denseFileSize}};
  json layers = json::array();
  for (const auto& l : m.layers) layers.push_back({{"stack", l.stack}, {"block", l.block}});
  j["layers"] = layers;
  json experts = json::array();
  for (const auto& e : m.experts) {
    json chunks = json::array();
    for (const auto& c : e.eChunks) chunks.push_back(chunkJson(c));
    experts.push_back({{"name", e.name}, {"shape", e.shape}, {"e", chunks}, {"sm", chunkJson(e.smChunk)}});
  }
  j["experts"] = experts;
  json dense = json::array();
  for (const auto& d : m.dense)
    dense.push_back({{"name", d.name}, {"dtype", dtypeName(d.dtype)}, {"shape", d.shape}, {"offset", d.offset},
                     {"size", d.size}, {"crc32c", d.crc32c}});
  j["dense"] = dense;
  json hist = json::object();
  for (size_t k = 0; k < m.exponentHistograms.size() && k < m.tensorKinds.size(); ++k)
    hist[m.tensorKinds[k]] = m.exponentHistograms[k];
  j["exponent_histograms"] = hist;
  return j.dump(1);
}

Manifest parseManifest(std::string_view text, const std::string& what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(what + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(what + ": not a JSON object");
  const Fields f(j, "", what);
  if (!j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != kStoreFormatName)
    throw Error(what + ": not a ZipMoE store manifest (field 'format' is not \"" + kStoreFormatName + "\")");
  Manifest m;
  m.version = f.i32("version", std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  if (m.version != kStoreFormatVersion)
    throw Error(what + ": store format version " + std::to_string(m.version) + " is not supported (this build reads version " +
                std::to_string(kStoreFormatVersion) + "; re-run zipmoe convert)");
  const std::string familyText = f.str("family");
  const auto family = familyFromName(familyText);
  if (!family) throw Error(what + ": unknown family '" + familyText + "' (supported: " + supportedFamilyList() + ")");
  m.family = *family;
  m.modelType = f.str("model_type");
  const json& config = f.at("config");
  if (!config.is_object()) throw Error(what + ": field 'config' is not an object");
  m.config = std::make_shared<const json>(config);

  const Fields codec(f.at("codec"), "codec", what);
  m.codec = parseCodecSpec(codec.str("name"));
  m.codec.level = codec.i32("level", -1000, 100000);
  try {
    makeCodec(m.codec);
  } catch (const Error& e) {
    throw Error(what + ": field 'codec': " + e.what());
  }
  if (f.has("codec_choice")) m.codecChoice = parseCodecChoice(f.at("codec_choice"), m.codec, what);
  m.shards = f.i32("shards", 1, 256);
  if (f.u64("alignment") != kChunkAlignment)
    throw Error(what + ": field 'alignment' must be " + std::to_string(kChunkAlignment));
  for (const auto& k : f.array("tensor_kinds")) {
    if (!k.is_string()) throw Error(what + ": field 'tensor_kinds' holds a non-string");
    m.tensorKinds.push_back(k.get<std::string>());
  }
  if (m.tensorKinds != expertTensorKinds(m.family))
    throw Error(what + ": field 'tensor_kinds' does not match family " + familyText);
  m.numExperts = f.i32("num_experts", 1, 1 << 16);
  const Fields files(f.at("files"), "files", what);
  m.expertsFileSize = files.u64("experts.bin");
  m.denseFileSize = files.u64("dense.bin");
  for (const auto& l : f.array("layers")) {
    const Fields lf(l, "layers[]", what);
    m.layers.push_back({lf.i32("stack", 0, 1), lf.i32("block", 0, 1 << 20)});
  }
  if (m.layers.size() > (1u << 16)) throw Error(what + ": too many layers");

  const json& experts = f.array("experts");
  const size_t expected = m.layers.size() * static_cast<size_t>(m.numExperts) * m.tensorKinds.size();
  if (experts.size() != expected)
    throw Error(what + ": field 'experts' has " + std::to_string(experts.size()) + " entries, expected " +
                std::to_string(expected) + " (layers × experts × kinds)");
  m.experts.reserve(expected);
  std::vector<std::pair<uint64_t, uint64_t>> extents;  // (offset, padded end) of every chunk
  for (size_t i = 0; i < experts.size(); ++i) {
    const std::string path = "experts[" + std::to_string(i) + "]";
    const Fields ef(experts[i], path, what);
    ExpertTensorEntry e;
    e.name = ef.str("name");
    e.shape = parseShape(ef, "shape", e.numel);
    const json& chunks = ef.array("e");
    if (chunks.size() != static_cast<size_t>(m.shards))
      throw Error(what + ": " + path + " has " + std::to_string(chunks.size()) + " E-chunks, expected K = " +
                  std::to_string(m.shards));
    uint64_t total = 0;
    for (size_t s = 0; s < chunks.size(); ++s) {
      e.eChunks.push_back(parseChunk(ef, chunks[s], "e[" + std::to_string(s) + "]"));
      total += e.eChunks.back().count;
    }
    e.smChunk = parseChunk(ef, ef.at("sm"), "sm");
    if (total != e.numel)
      throw Error(what + ": " + path + " ('" + e.name + "'): E-chunks hold " + std::to_string(total) +
                  " exponents, the shape has " + std::to_string(e.numel));
    if (e.smChunk.count != e.numel || e.smChunk.size != e.numel)
      throw Error(what + ": " + path + " ('" + e.name + "'): SM-chunk size " + std::to_string(e.smChunk.size) +
                  " does not match the shape's " + std::to_string(e.numel) + " weights");
    extents.emplace_back(e.smChunk.offset, e.smChunk.offset + e.smChunk.paddedSize);
    for (const auto& c : e.eChunks) extents.emplace_back(c.offset, c.offset + c.paddedSize);
    m.experts.push_back(std::move(e));
  }
  std::sort(extents.begin(), extents.end());
  uint64_t end = 0;
  for (const auto& [off, padEnd] : extents) {
    if (off % kChunkAlignment != 0)
      throw Error(what + ": chunk offset " + std::to_string(off) + " is not 4 KiB-aligned");
    if (off < end) throw Error(what + ": chunks overlap at offset " + std::to_string(off) + " of experts.bin");
    if (padEnd > m.expertsFileSize)
      throw Error(what + ": a chunk at offset " + std::to_string(off) + " ends at " + std::to_string(padEnd) +
                  ", beyond experts.bin's " + std::to_string(m.expertsFileSize) + " bytes");
    end = padEnd;
  }

  for (const auto& d : f.array("dense")) {
    const Fields df(d, "dense[]", what);
    DenseTensorEntry e;
    e.name = df.str("name");
    e.dtype = parseDType(df.str("dtype"), what + ": dense tensor '" + e.name + "'");
    uint64_t numel = 0;
    e.shape = parseShape(df, "shape", numel);
    e.offset = df.u64("offset");
    e.size = df.u64("size");
    const uint64_t crc = df.u64("crc32c");
    if (crc > 0xFFFFFFFFull) throw Error(what + ": dense tensor '" + e.name + "': crc32c does not fit 32 bits");
    e.crc32c = static_cast<uint32_t>(crc);
    if (e.size != numel * dtypeSize(e.dtype))
      throw Error(what + ": dense tensor '" + e.name + "': size " + std::to_string(e.size) + " does not match its shape");
    if (e.offset > m.denseFileSize || e.size > m.denseFileSize - e.offset)
      throw Error(what + ": dense tensor '" + e.name + "' lies beyond dense.bin's " + std::to_string(m.denseFileSize) +
                  " bytes");
    m.dense.push_back(std::move(e));
  }

  if (f.has("exponent_histograms")) {
    const json& h = f.at("exponent_histograms");
    if (!h.is_object()) throw Error(what + ": field 'exponent_histograms' is not an object");
    for (const auto& kind : m.tensorKinds) {
      std::vector<uint64_t> counts(256, 0);
      const auto it = h.find(kind);
      if (it != h.end()) {
        if (!it->is_array() || it->size() != 256)
          throw Error(what + ": exponent_histograms." + kind + " must hold 256 counts");
        for (size_t i = 0; i < 256; ++i) counts[i] = f.asU64((*it)[i], "exponent_histograms." + kind);
      }
      m.exponentHistograms.push_back(std::move(counts));
    }
  }
  return m;
}

}  // namespace zipmoe
