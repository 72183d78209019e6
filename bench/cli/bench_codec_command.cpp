// `zipmoe bench codec STORE`: every exponent codec on the same sample of a store's expert tensors,
// cut into the store's K shards: size as % of BF16 (E + SM), exponent bits per weight next to the
// sample's measured entropy, single-thread encode and decode speed, and BF16 split/merge speed per
// SIMD level. The Huffman and nibble codecs are decoded once per decoder level this CPU supports (rows
// "huffman8@scalar", "huffman8@bmi2", "nibble@avx2"; the level without a suffix in `--codecs` is the default, the
// widest). Every decode is checked bit-exact against the original exponents.
//
// Decode speed is measured twice: "to memory" decodes the whole sample into one array (tens of MB, so
// every output byte goes to DRAM), "in cache" decodes each chunk into one reused chunk-sized buffer,
// as the runtime decodes a tensor's chunks into its reused staging plane. The second is the decoder's
// own speed; the first adds this machine's write bandwidth.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "commands.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/base/error.h"
#include "bench/kernels/kernel_bench.h"
#include "zipmoe/format/store.h"

namespace zipmoe::cli {
namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double bestSeconds(int repeats, F&& f) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

struct Shard {
  size_t begin, size;
};

}  // namespace

int runBenchCodec(const Args& arguments) {
  static const CommandSpec command{
      "zipmoe bench codec STORE [OPTIONS]",
      "Every exponent codec on the same sample of STORE's expert tensors: size, bits per exponent, encode and\n"
      "decode speed on one core, BF16 split/merge speed per SIMD level, and the chunk checksum's speed.",
      {{"--sample-mb", "N", "millions of weights (2^20) sampled (1-65536, default 48)"},
       {"--repeat", "R", "timed runs, the best is reported (1-1000, default 5)"},
       {"--codecs", "LIST", "comma-separated codecs (default: every codec at its benchmark levels)"},
       {"--json", "FILE", "also write the figures as JSON"}},
      1, 1, ""};
  const CommandLine line = CommandLine::parse(command, arguments);
  if (line.help()) return printUsage(command);
  const uint64_t sampleWeights = line.integer<uint64_t>("--sample-mb", 1, 65536, 48) << 20;
  const int repeats = line.integer<int>("--repeat", 1, 1000, 5);
  std::vector<CodecSpec> specs = benchmarkCodecSpecs();
  if (const auto value = line.text("--codecs")) {
    specs.clear();
    size_t pos = 0;
    while (pos <= value->size()) {
      const size_t comma = value->find(',', pos);
      specs.push_back(parseCodecSpec(value->substr(pos, comma == std::string::npos ? std::string::npos : comma - pos)));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  const Args& args = line.positionals();

  // One core: pin to the CPU we start on so the figures are single-core figures.
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<unsigned>(sched_getcpu()), &set);
  sched_setaffinity(0, sizeof set, &set);

  const auto store = Store::open(args[0]);
  const Manifest& m = store->manifest();
  // Sample tensors spread evenly over layers, experts and kinds.
  const size_t totalTensors = m.experts.size();
  uint64_t totalWeights = 0;
  for (const auto& e : m.experts) totalWeights += e.numel;
  const size_t avg = static_cast<size_t>(std::max<uint64_t>(1, totalWeights / std::max<size_t>(1, totalTensors)));
  const size_t want = std::clamp<size_t>(static_cast<size_t>(sampleWeights / avg), 1, totalTensors);
  std::vector<uint16_t> words;
  std::vector<Shard> shards;
  for (size_t i = 0; i < want; ++i) {
    const size_t idx = i * totalTensors / want;
    const size_t l = idx / (static_cast<size_t>(m.numExperts) * m.tensorKinds.size());
    const size_t rest = idx % (static_cast<size_t>(m.numExperts) * m.tensorKinds.size());
    const auto& e = m.experts[idx];
    const size_t base = words.size();
    words.resize(base + static_cast<size_t>(e.numel));
    store->readExpertTensor(static_cast<int>(l), static_cast<int>(rest / m.tensorKinds.size()),
                            static_cast<int>(rest % m.tensorKinds.size()), words.data() + base, ReadMode::Buffered);
    size_t pos = base;
    for (const auto& c : e.eChunks) {
      shards.push_back({pos, static_cast<size_t>(c.count)});
      pos += static_cast<size_t>(c.count);
    }
  }
  const size_t n = words.size();
  std::vector<uint8_t> exps(n), sm(n), decoded(n);
  bf16::split(words.data(), n, exps.data(), sm.data());
  uint64_t hist[256] = {};
  for (uint8_t e : exps) hist[e]++;
  const double entropy = entropyBits(hist);

  std::printf("store %s: %s, %zu of %zu expert tensors sampled (%.1f M weights), K = %d shards, single thread\n",
              args[0].c_str(), familyName(m.family), want, totalTensors, static_cast<double>(n) / 1e6, m.shards);
  std::printf("measured exponent entropy %.3f bits -> bound %.2f%% of BF16 for this split\n\n", entropy,
              100.0 * (8.0 + entropy) / 16.0);
  nlohmann::ordered_json codecRows = nlohmann::ordered_json::array(), bf16Rows = nlohmann::ordered_json::array();
  size_t largestShard = 0;
  for (const auto& sh : shards) largestShard = std::max(largestShard, sh.size);
  std::vector<uint8_t> chunkOut(largestShard);
  std::printf("%-16s %10s %10s %9s %12s %16s %16s\n", "codec", "size/BF16", "E bits/w", "entropy", "encode MB/s",
              "decode G exp/s", "in cache G exp/s");
  for (const auto& spec : specs) {
    // One row per decoder level for the codecs that have levels, named "codec@level".
    std::vector<std::pair<std::string, std::unique_ptr<ExponentCodec>>> decoders;
    if (spec.id == CodecId::Huffman || spec.id == CodecId::Huffman8) {
      for (const auto level : supportedHuffmanDecodeLevels())
        decoders.emplace_back(describe(spec) + "@" + huffmanDecodeLevelName(level), makeCodec(spec, level));
    } else if (spec.id == CodecId::Nibble) {
      for (const auto level : supportedNibbleDecodeLevels())
        decoders.emplace_back(describe(spec) + "@" + nibbleDecodeLevelName(level), makeNibbleCodec(level));
    } else {
      decoders.emplace_back(describe(spec), makeCodec(spec));
    }
    const auto encoder = makeCodec(spec);
    std::vector<std::vector<uint8_t>> packed(shards.size());
    uint64_t compressed = 0;
    const auto t0 = Clock::now();
    for (size_t s = 0; s < shards.size(); ++s) {
      packed[s].resize(encoder->maxCompressedSize(shards[s].size));
      packed[s].resize(encoder->compress(exps.data() + shards[s].begin, shards[s].size, packed[s].data(), packed[s].size()));
      compressed += packed[s].size();
    }
    const double encodeSecs = std::chrono::duration<double>(Clock::now() - t0).count();
    for (const auto& [name, codec] : decoders) {
      std::fill(decoded.begin(), decoded.end(), uint8_t{0});
      const double decodeSecs = bestSeconds(repeats, [&] {
        for (size_t s = 0; s < shards.size(); ++s)
          codec->decompress(packed[s].data(), packed[s].size(), decoded.data() + shards[s].begin, shards[s].size);
      });
      if (std::memcmp(decoded.data(), exps.data(), n) != 0)
        throw Error("bench: codec " + name + " did not round-trip the sample bit-exactly");
      const double cachedSecs = bestSeconds(repeats, [&] {
        for (size_t s = 0; s < shards.size(); ++s)
          codec->decompress(packed[s].data(), packed[s].size(), chunkOut.data(), shards[s].size);
      });
      for (size_t s = 0; s < shards.size(); ++s) {
        std::fill(chunkOut.begin(), chunkOut.end(), uint8_t{0});
        codec->decompress(packed[s].data(), packed[s].size(), chunkOut.data(), shards[s].size);
        if (std::memcmp(chunkOut.data(), exps.data() + shards[s].begin, shards[s].size) != 0)
          throw Error("bench: codec " + name + " did not round-trip chunk " + std::to_string(s) + " bit-exactly");
      }
      const double sizeShare = static_cast<double>(compressed + n) / (2.0 * static_cast<double>(n));
      const double bitsPerWeight = 8.0 * static_cast<double>(compressed) / static_cast<double>(n);
      const double encodeMBs = static_cast<double>(n) / encodeSecs / 1e6;
      const double decodeG = static_cast<double>(n) / decodeSecs / 1e9;
      const double cachedG = static_cast<double>(n) / cachedSecs / 1e9;
      std::printf("%-16s %9.2f%% %10.3f %9.3f %12.0f %16.2f %16.2f\n", name.c_str(), 100.0 * sizeShare, bitsPerWeight,
                  entropy, encodeMBs, decodeG, cachedG);
      codecRows.push_back({{"codec", name},
                           {"size_share_of_bf16", sizeShare},
                           {"exponent_bits_per_weight", bitsPerWeight},
                           {"encode_mb_per_s", encodeMBs},
                           {"decode_g_exp_per_s_to_memory", decodeG},
                           {"decode_g_exp_per_s_in_cache", cachedG}});
    }
  }

  std::printf("\n%-10s %16s %16s\n", "bf16 level", "split GB/s", "merge GB/s");
  std::vector<uint16_t> merged(n);
  for (const auto level : bf16::supportedSimdLevels()) {
    const double splitSecs = bestSeconds(repeats, [&] { bf16::split(level, words.data(), n, exps.data(), sm.data()); });
    const double mergeSecs = bestSeconds(repeats, [&] { bf16::merge(level, exps.data(), sm.data(), n, merged.data()); });
    if (merged != words) throw Error(std::string("bench: bf16 merge (") + bf16::simdLevelName(level) + ") is not bit-exact");
    const double splitGBs = 2.0 * static_cast<double>(n) / splitSecs / 1e9;
    const double mergeGBs = 2.0 * static_cast<double>(n) / mergeSecs / 1e9;
    std::printf("%-10s %16.2f %16.2f\n", bf16::simdLevelName(level), splitGBs, mergeGBs);
    bf16Rows.push_back({{"level", bf16::simdLevelName(level)}, {"split_gb_per_s", splitGBs}, {"merge_gb_per_s", mergeGBs}});
  }
  std::printf("recovery merges with %s (the fastest level measured at first use)\n",
              bf16::simdLevelName(bf16::mergeSimdLevel()));
  // Every chunk read is checked on the I/O thread; the sample's size in SM bytes, cache-cold.
  const size_t checksumBytes = std::max<size_t>(n, size_t{64} << 20);
  const double crcThree = measureChecksum(checksumBytes, true, repeats), crcOne = measureChecksum(checksumBytes, false, repeats);
  std::printf("\nchunk checksum (CRC-32C, one thread, %zu MiB): %.2f GB/s in three streams, %.2f GB/s in one\n",
              checksumBytes >> 20, crcThree, crcOne);
  std::printf("\n(GB/s counts BF16 bytes; best of %d runs; size/BF16 = (E-chunks + SM bytes) / (2 bytes x weights),\n"
              " without the 4 KiB chunk padding, which `zipmoe inspect` reports)\n",
              repeats);
  if (const auto out = line.text("--json")) {
    nlohmann::ordered_json j;
    j["host"] = hostIdentity();
    j["store"] = args[0];
    j["family"] = familyName(m.family);
    j["sampled_tensors"] = want;
    j["sampled_weights"] = n;
    j["shards"] = m.shards;
    j["entropy_bits"] = entropy;
    j["repeat"] = repeats;
    j["codecs"] = codecRows;
    j["bf16"] = bf16Rows;
    j["merge_level"] = bf16::simdLevelName(bf16::mergeSimdLevel());
    j["checksum_gb_per_s"] = {{"three_streams", crcThree}, {"one_stream", crcOne}, {"bytes", checksumBytes}};
    std::ofstream f(*out);
    f << j.dump(2) << "\n";
    if (!f) throw Error(*out + ": cannot write");
  }
  return 0;
}

}  // namespace zipmoe::cli
