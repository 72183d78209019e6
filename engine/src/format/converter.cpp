// HF checkpoint → ZipMoE store, and the bit-exact verification of a store against its source.
#include "zipmoe/format/converter.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "base/crc32c.h"
#include "io/file_io.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/model_family.h"
#include "zipmoe/hf/safetensors.h"
#include "zipmoe/format/store.h"

namespace zipmoe {
namespace {

constexpr size_t kCopyBlock = 8u << 20;
// Tokenizer and generation files that travel with the store so that it is self-contained.
constexpr const char* kCompanionFiles[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json",
                                           "special_tokens_map.json", "vocab.json", "merges.txt", "spiece.model",
                                           "tokenizer.model"};

struct ExpertSlot {
  const HfCheckpoint::Entry* entry = nullptr;
};

// Removes the temporary files of an unfinished conversion.
class PartialFiles {
 public:
  void add(std::filesystem::path p) { paths_.push_back(std::move(p)); }
  void release() { paths_.clear(); }
  ~PartialFiles() {
    for (const auto& p : paths_) ::unlink(p.c_str());
  }

 private:
  std::vector<std::filesystem::path> paths_;
};

// Appends 4 KiB-aligned records to a file.
class AlignedAppender {
 public:
  explicit AlignedAppender(io::FileHandle& file) : file_(file) {}
  uint64_t position() const { return pos_; }
  void write(const void* data, size_t n) {
    file_.writeAll(data, n);
    pos_ += n;
  }
  void padToAlignment() {
    static const std::vector<uint8_t> zeros(kChunkAlignment, 0);
    const uint64_t target = io::alignUp(pos_, kChunkAlignment);
    if (target > pos_) write(zeros.data(), static_cast<size_t>(target - pos_));
  }

 private:
  io::FileHandle& file_;
  uint64_t pos_ = 0;
};

void checkCancel(const ConvertOptions& o) {
  if (o.cancel && o.cancel->load(std::memory_order_relaxed)) throw Cancelled("conversion cancelled");
}

// The sample the codecs are measured on: the first E-chunk's exponents (capped) of a few expert
// tensors spread over the layers and kinds, so that measuring stays short whatever the model's size.
constexpr size_t kSampleTensors = 4;
constexpr uint64_t kSampleWeightsPerTensor = uint64_t{1} << 20;

std::vector<std::vector<uint8_t>> sampleExponentPlanes(const std::vector<const HfCheckpoint::Entry*>& experts,
                                                       int shards) {
  std::vector<std::vector<uint8_t>> planes;
  std::vector<uint16_t> words;
  std::vector<uint8_t> sm;
  const size_t n = std::min(kSampleTensors, experts.size());
  for (size_t i = 0; i < n; ++i) {
    const HfCheckpoint::Entry* e = experts[i * experts.size() / n];
    if (e->info->numel() == 0) continue;
    const uint64_t firstShard = std::max<uint64_t>(1, e->info->numel() / static_cast<uint64_t>(shards));
    const uint64_t weights = std::min(kSampleWeightsPerTensor, firstShard);
    words.resize(static_cast<size_t>(weights));
    sm.resize(words.size());
    e->file->read(*e->info, 0, 2 * weights, words.data());
    std::vector<uint8_t> exps(words.size());
    bf16::split(words.data(), words.size(), exps.data(), sm.data());
    planes.push_back(std::move(exps));
  }
  return planes;
}

CodecChoice givenCodec(const CodecSpec& spec) {
  CodecChoice c;
  c.chosen = spec;
  c.by = CodecChosenBy::Option;
  c.reason = describe(spec) + ": named by the caller (zipmoe convert --codec), not measured";
  return c;
}

}  // namespace

ConvertReport convertCheckpoint(const std::filesystem::path& hfDir, const std::filesystem::path& outDir,
                                const ConvertOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.shards < 1 || options.shards > 64)
    throw Error("--shards " + std::to_string(options.shards) + " is out of range (1..64)");
  if (options.codec) makeCodec(*options.codec);  // a bad level fails before any work

  HfCheckpoint ckpt(hfDir);
  const ModelFamily family = familyFromConfig(ckpt.config(), (hfDir / "config.json").string());
  const auto& kinds = expertTensorKinds(family);

  // Classify: routed-expert tensors are chunked, everything else stays dense.
  std::map<std::tuple<int, int, int, int>, const HfCheckpoint::Entry*> expertByKey;  // (stack, block, expert, kind)
  std::vector<const HfCheckpoint::Entry*> dense;
  std::set<std::pair<int, int>> layerSet;
  int numExperts = 0;
  for (const auto& e : ckpt.tensors()) {
    const auto name = classifyTensor(family, e.info->name);
    if (!name) {
      dense.push_back(&e);
      continue;
    }
    if (e.info->dtype != DType::BF16)
      throw Error(e.file->path().string() + ": expert tensor '" + e.info->name + "' has dtype " + dtypeName(e.info->dtype) +
                  "; ZipMoE stores BF16 expert weights losslessly (save the checkpoint in bfloat16 first)");
    expertByKey[{name->stack, name->block, name->expert, name->kind}] = &e;
    layerSet.insert({name->stack, name->block});
    numExperts = std::max(numExperts, name->expert + 1);
  }
  if (layerSet.empty())
    throw Error(hfDir.string() + ": no routed-expert tensors found for family " + familyName(family) +
                " (is config.json's model_type right?)");
  const std::vector<std::pair<int, int>> layers(layerSet.begin(), layerSet.end());
  for (const auto& [stack, block] : layers)
    for (int x = 0; x < numExperts; ++x)
      for (size_t k = 0; k < kinds.size(); ++k)
        if (!expertByKey.count({stack, block, x, static_cast<int>(k)}))
          throw Error(hfDir.string() + ": block " + std::to_string(block) + (stack ? " (decoder)" : "") +
                      " has no '" + kinds[k] + "' tensor for expert " + std::to_string(x) + " (checkpoint incomplete?)");

  // Output directory: any previous manifest goes first, so a half-overwritten store never opens.
  std::error_code ec;
  std::filesystem::create_directories(outDir, ec);
  if (ec) throw Error("cannot create output directory " + outDir.string() + ": " + ec.message());
  const auto manifestPath = outDir / "manifest.json";
  if (std::filesystem::exists(manifestPath) && ::unlink(manifestPath.c_str()) != 0)
    throw Error(systemErrorMessage("cannot remove the old " + manifestPath.string(), errno));

  PartialFiles partial;
  const auto expertsPartial = outDir / "experts.bin.partial";
  const auto densePartial = outDir / "dense.bin.partial";
  partial.add(expertsPartial);
  partial.add(densePartial);
  io::FileHandle expertsFile(expertsPartial, O_WRONLY | O_CREAT | O_TRUNC);
  io::FileHandle denseFile(densePartial, O_WRONLY | O_CREAT | O_TRUNC);

  // The codec: given, or measured on a sample of this checkpoint and on OUT_DIR's disk (once
  // the output files exist, so that an unwritable OUT_DIR is reported as such).
  CodecChoice choice;
  if (options.codec) {
    choice = givenCodec(*options.codec);
  } else {
    std::vector<const HfCheckpoint::Entry*> sample;
    for (const auto& [key, e] : expertByKey) sample.push_back(e);
    choice = chooseExponentCodec(measureCodecs(sampleExponentPlanes(sample, options.shards), outDir));
  }
  if (options.onCodecChosen) options.onCodecChosen(choice);
  const auto codec = makeCodec(choice.chosen);
  checkCancel(options);

  Manifest m;
  m.family = family;
  m.modelType = ckpt.modelType();
  m.config = std::make_shared<const nlohmann::json>(ckpt.config());
  m.codec = choice.chosen;
  m.codecChoice = choice;
  m.shards = options.shards;
  m.tensorKinds = kinds;
  m.numExperts = numExperts;
  for (const auto& [stack, block] : layers) m.layers.push_back({stack, block});
  m.exponentHistograms.assign(kinds.size(), std::vector<uint64_t>(256, 0));

  ConvertProgress progress;
  progress.tensorsTotal = ckpt.tensors().size();
  for (const auto& e : ckpt.tensors()) progress.bytesTotal += e.info->size;
  ConvertReport report;
  report.codecChoice = choice;
  auto tick = [&](const std::string& name, uint64_t bytes) {
    progress.tensorsDone++;
    progress.bytesDone += bytes;
    progress.currentTensor = name;
    if (options.onProgress) options.onProgress(progress);
  };

  // Dense tensors: raw, each 4 KiB-aligned, copied in blocks so memory stays bounded.
  {
    AlignedAppender out(denseFile);
    std::vector<uint8_t> block;
    for (const auto* e : dense) {
      checkCancel(options);
      DenseTensorEntry d;
      d.name = e->info->name;
      d.dtype = e->info->dtype;
      d.shape = e->info->shape;
      d.offset = out.position();
      d.size = e->info->size;
      uint32_t crc = 0;
      for (uint64_t off = 0; off < d.size; off += kCopyBlock) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kCopyBlock, d.size - off));
        block.resize(n);
        e->file->read(*e->info, off, n, block.data());
        crc = detail::crc32c(block.data(), n, crc);
        out.write(block.data(), n);
      }
      d.crc32c = crc;
      out.padToAlignment();
      m.dense.push_back(std::move(d));
      report.denseBytes += e->info->size;
      tick(e->info->name, e->info->size);
    }
    m.denseFileSize = out.position();
  }

  // Expert tensors: K E-chunks then the SM-chunk, each 4 KiB-aligned and padded.
  {
    AlignedAppender out(expertsFile);
    std::vector<uint16_t> words;
    std::vector<uint8_t> exps, sm, packed;
    for (size_t l = 0; l < layers.size(); ++l) {
      for (int x = 0; x < numExperts; ++x) {
        for (size_t k = 0; k < kinds.size(); ++k) {
          checkCancel(options);
          const auto* e = expertByKey.at({layers[l].first, layers[l].second, x, static_cast<int>(k)});
          const uint64_t numel = e->info->numel();
          words.resize(static_cast<size_t>(numel));
          exps.resize(words.size());
          sm.resize(words.size());
          e->file->read(*e->info, 0, e->info->size, words.data());
          bf16::split(words.data(), words.size(), exps.data(), sm.data());
          auto& hist = m.exponentHistograms[k];
          for (uint8_t v : exps) hist[v]++;

          ExpertTensorEntry t;
          t.name = e->info->name;
          t.shape = e->info->shape;
          t.numel = numel;
          for (int s = 0; s < options.shards; ++s) {
            const uint64_t begin = numel * static_cast<uint64_t>(s) / static_cast<uint64_t>(options.shards);
            const uint64_t end = numel * static_cast<uint64_t>(s + 1) / static_cast<uint64_t>(options.shards);
            const size_t n = static_cast<size_t>(end - begin);
            packed.resize(codec->maxCompressedSize(n));
            const size_t csize = codec->compress(exps.data() + begin, n, packed.data(), packed.size());
            ChunkRef c;
            c.offset = out.position();
            c.size = csize;
            c.paddedSize = io::alignUp(csize, kChunkAlignment);
            c.count = n;
            c.crc32c = detail::crc32c(packed.data(), csize);
            out.write(packed.data(), csize);
            out.padToAlignment();
            t.eChunks.push_back(c);
            report.expertBytesStored += csize;
          }
          t.smChunk.offset = out.position();
          t.smChunk.size = numel;
          t.smChunk.paddedSize = io::alignUp(numel, kChunkAlignment);
          t.smChunk.count = numel;
          t.smChunk.crc32c = detail::crc32c(sm.data(), sm.size());
          out.write(sm.data(), sm.size());
          out.padToAlignment();
          report.expertBytesStored += numel;
          report.expertWeights += numel;
          report.expertBytesBf16 += 2 * numel;
          m.experts.push_back(std::move(t));
          tick(e->info->name, e->info->size);
        }
      }
    }
    m.expertsFileSize = out.position();
  }

  checkCancel(options);
  expertsFile.sync();
  denseFile.sync();
  expertsFile.close();
  denseFile.close();
  for (const char* name : {"experts.bin", "dense.bin"}) {
    const auto from = outDir / (std::string(name) + ".partial");
    if (::rename(from.c_str(), (outDir / name).c_str()) != 0)
      throw Error(systemErrorMessage("cannot rename " + from.string() + " to " + (outDir / name).string(), errno));
  }
  partial.release();
  for (const char* name : kCompanionFiles) {
    const auto from = hfDir / name;
    const auto to = outDir / name;
    if (!std::filesystem::exists(from) || (std::filesystem::exists(to) && std::filesystem::equivalent(from, to))) continue;
    io::writeFileAtomically(to, io::readTextFile(from));
  }
  // The manifest is the commit point: written last, atomically.
  io::writeFileAtomically(manifestPath, serializeManifest(m));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

VerifyReport verifyStore(const std::filesystem::path& storeDir, const std::filesystem::path& hfDir,
                         const std::function<void(size_t, size_t)>& onProgress) {
  const auto store = Store::open(storeDir);
  const Manifest& m = store->manifest();
  HfCheckpoint ckpt(hfDir);
  std::map<std::string, std::tuple<int, int, int>> expertIndex;
  for (int l = 0; l < m.numLayers(); ++l)
    for (int x = 0; x < m.numExperts; ++x)
      for (int k = 0; k < m.numKinds(); ++k) expertIndex[m.expert(l, x, k).name] = {l, x, k};
  std::map<std::string, const DenseTensorEntry*> denseIndex;
  for (const auto& d : m.dense) denseIndex[d.name] = &d;

  const size_t total = ckpt.tensors().size();
  if (total != expertIndex.size() + denseIndex.size())
    throw Error("verify: the checkpoint has " + std::to_string(total) + " tensors, the store " +
                std::to_string(expertIndex.size() + denseIndex.size()));
  VerifyReport report;
  std::vector<uint8_t> source, stored;
  size_t done = 0;
  for (const auto& e : ckpt.tensors()) {
    const std::string& name = e.info->name;
    source.resize(static_cast<size_t>(e.info->size));
    e.file->read(*e.info, 0, e.info->size, source.data());
    stored.assign(source.size(), 0);
    if (const auto it = expertIndex.find(name); it != expertIndex.end()) {
      const auto [l, x, k] = it->second;
      if (m.expert(l, x, k).numel * 2 != e.info->size)
        throw Error("verify: expert tensor '" + name + "' has a different size in the store");
      store->readExpertTensor(l, x, k, reinterpret_cast<uint16_t*>(stored.data()), ReadMode::Buffered);
      report.expertTensors++;
    } else if (const auto dt = denseIndex.find(name); dt != denseIndex.end()) {
      if (dt->second->size != e.info->size || dt->second->dtype != e.info->dtype)
        throw Error("verify: dense tensor '" + name + "' has a different size or dtype in the store");
      store->readDenseTensor(*dt->second, stored.data());
      report.denseTensors++;
    } else {
      throw Error("verify: tensor '" + name + "' of " + e.file->path().string() + " is not in the store");
    }
    if (source != stored) {
      const auto diff = std::mismatch(source.begin(), source.end(), stored.begin());
      throw Error("verify: tensor '" + name + "' differs from " + e.file->path().string() + " at byte " +
                  std::to_string(diff.first - source.begin()));
    }
    report.bytesCompared += source.size();
    if (onProgress) onProgress(++done, total);
  }
  return report;
}

}  // namespace zipmoe
