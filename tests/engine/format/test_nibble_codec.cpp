// Tests for the `nibble` exponent codec: round trips at every decoder level this CPU supports for
// every path the format has (raw, run, dictionary only, escapes in and across the AVX2 loop's
// 64-symbol blocks, odd sizes, tails), the size it reaches on exponent-like data, every level equal
// to the scalar reference byte for byte (outputs and error messages, also on corrupted chunks), and
// malformed chunks, each rejected with an error naming what is wrong.
#include <QtTest>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/exponent_codec.h"
#include "zipmoe/format/nibble_shard.h"

using namespace zipmoe;

namespace {

using Bytes = std::vector<uint8_t>;

Bytes gaussianExponents(size_t n, double sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, sigma);
  Bytes out(n);
  for (auto& e : out) {
    const auto f = static_cast<float>(normal(rng));
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    e = static_cast<uint8_t>((u >> 23) & 0xFF);
  }
  return out;
}

Bytes compress(const ExponentCodec& c, const Bytes& in) {
  Bytes packed(c.maxCompressedSize(in.size()));
  packed.resize(c.compress(in.data(), in.size(), packed.data(), packed.size()));
  return packed;
}

// Decodes into a buffer with guard bytes after n; fails the test if any guard changed.
Bytes decompress(const ExponentCodec& c, const Bytes& packed, size_t n) {
  Bytes out(n + 64, 0xEE);
  c.decompress(packed.data(), packed.size(), out.data(), n);
  for (size_t i = n; i < out.size(); ++i)
    if (out[i] != 0xEE) throw std::runtime_error("decompress wrote past n at byte " + std::to_string(i));
  out.resize(n);
  return out;
}

// The plane a NibbleShard describes, symbol by symbol (what the GEMV kernels read in place).
Bytes planeOf(const NibbleShard& s, size_t n) {
  Bytes out(n);
  size_t escape = 0;
  for (size_t j = 0; j < n; ++j) {
    const unsigned c = (s.codes[j / 2] >> (4 * (j % 2))) & 0xF;
    if (c < s.size) {
      out[j] = s.dictionary[c];
    } else {
      if (c != 15 || escape >= s.escapeCount || s.escapePositions[escape] != j)
        throw std::runtime_error("code " + std::to_string(c) + " at " + std::to_string(j) + " is not an indexed escape");
      out[j] = s.escapes[escape++];
    }
  }
  if (escape != s.escapeCount) throw std::runtime_error("positions left over");
  return out;
}

// What indexing a chunk gives: the plane it describes, "none" (not a nibble-mode chunk, or the
// positions do not fit), or the error message.
std::string indexOutcome(const Bytes& packed, size_t n, size_t capacity, NibbleDecodeLevel level) {
  try {
    std::vector<uint32_t> positions(capacity + 1, 0xDEADBEEF);
    const auto shard = indexNibbleChunk(packed.data(), packed.size(), n, positions.data(), capacity, level);
    if (positions[capacity] != 0xDEADBEEF) throw std::runtime_error("indexing wrote past its capacity");
    if (!shard) return "none";
    const Bytes plane = planeOf(*shard, n);
    return std::string(plane.begin(), plane.end());
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

// Output or error message: what every level must agree on.
std::string outcome(const ExponentCodec& c, const Bytes& packed, size_t n) {
  try {
    const Bytes out = decompress(c, packed, n);
    return std::string(out.begin(), out.end());
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

// A chunk of n symbols over dictionary symbols 100..(100+d-1), with symbols `rare` placed at the
// given positions (they become escapes when the dictionary is full).
Bytes withRare(size_t n, int d, const std::vector<size_t>& positions, uint8_t rare, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes out(n);
  for (auto& b : out) b = static_cast<uint8_t>(100 + rng() % static_cast<uint64_t>(d));
  for (size_t p : positions)
    if (p < n) out[p] = rare;
  return out;
}

}  // namespace

class TestNibbleCodec : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void roundTripsAtEveryLevel() {
    std::vector<Bytes> inputs;
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{63}, size_t{64}, size_t{65}, size_t{127},
                     size_t{128}, size_t{1000}, size_t{4097}, size_t{720896}, size_t{720897}})
      inputs.push_back(gaussianExponents(n, 0.02, n + 7));
    inputs.push_back(Bytes(5000, 0x7A));                                  // run
    inputs.push_back(withRare(9001, 2, {}, 0, 1));                        // 2-symbol dictionary
    inputs.push_back(withRare(9001, 15, {}, 0, 2));                       // full dictionary, no escape
    // 16 symbols: one of them (the rarest) escapes, at block starts, ends, both nibbles, the tail.
    inputs.push_back(withRare(4097, 15, {0, 1, 62, 63, 64, 65, 127, 128, 4000, 4095, 4096}, 7, 3));
    inputs.push_back(withRare(130, 15, {129}, 7, 4));
    Bytes wide(70000);  // many distinct symbols: escapes are common, nibble coding still smaller
    std::mt19937_64 rng(5);
    for (auto& b : wide) b = static_cast<uint8_t>(rng() % 64 < 60 ? 120 + rng() % 15 : rng() % 256);
    inputs.push_back(wide);
    Bytes uniform(3000);  // every byte value: raw is smaller
    for (auto& b : uniform) b = static_cast<uint8_t>(rng());
    inputs.push_back(uniform);
    for (const auto level : supportedNibbleDecodeLevels()) {
      const auto codec = makeNibbleCodec(level);
      QCOMPARE(codec->spec().id, CodecId::Nibble);
      for (const Bytes& in : inputs) {
        const Bytes packed = compress(*codec, in);
        QVERIFY(packed.size() <= codec->maxCompressedSize(in.size()));
        QVERIFY2(decompress(*codec, packed, in.size()) == in,
                 qPrintable(QString("level %1, n %2").arg(nibbleDecodeLevelName(level)).arg(in.size())));
      }
    }
  }

  void chooseModes() {
    const auto codec = makeCodec({CodecId::Nibble, 0});
    QCOMPARE(compress(*codec, {})[0], uint8_t{0});                 // n = 0: raw
    QCOMPARE(compress(*codec, Bytes(100, 9)).size(), size_t{3});   // run: mode, n, symbol
    Bytes uniform(3000);
    for (size_t i = 0; i < uniform.size(); ++i) uniform[i] = static_cast<uint8_t>(i * 97);
    QCOMPARE(compress(*codec, uniform)[0], uint8_t{0});            // raw beats codes + escapes
    // Exponent-like data: 4 bits a symbol plus a few escapes and the header.
    const Bytes g = gaussianExponents(720896, 0.02, 11);
    const Bytes packed = compress(*codec, g);
    QCOMPARE(packed[0], uint8_t{2});
    QVERIFY2(packed.size() < g.size() / 2 + g.size() / 1000,
             qPrintable(QString("%1 bytes for %2 symbols").arg(packed.size()).arg(g.size())));
  }

  void everyLevelMatchesTheReference() {
    const auto levels = supportedNibbleDecodeLevels();
    const auto reference = makeNibbleCodec(NibbleDecodeLevel::Scalar);
    std::mt19937_64 rng(77);
    for (size_t n : {size_t{64}, size_t{200}, size_t{4096}, size_t{65537}}) {
      const Bytes in = withRare(n, 15, {3, n / 2, n - 1}, 250, n);
      const Bytes good = compress(*reference, in);
      for (int trial = 0; trial < 300; ++trial) {
        Bytes bad = good;
        // Flip 1-3 random bits anywhere, also in the header.
        for (int f = 0; f < 1 + trial % 3; ++f) bad[rng() % bad.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        const std::string expected = outcome(*reference, bad, n);
        for (const auto level : levels)
          QCOMPARE(outcome(*makeNibbleCodec(level), bad, n), expected);
      }
    }
  }

  // Indexing for the GEMV kernels (zipmoe/format/nibble_shard.h) checks a nibble-mode chunk exactly as
  // decoding does, at every level: the plane it describes is the decoded plane, its error the
  // decoder's error — on the same corrupted chunks as above. A raw or run chunk whose prelude is sound
  // is "none" (decoding checks its body), and so are escapes past the capacity.
  void indexingAgreesWithDecoding() {
    const auto reference = makeNibbleCodec(NibbleDecodeLevel::Scalar);
    std::mt19937_64 rng(78);
    // Escapes in many 32- and 64-symbol blocks (every 997th symbol), and dense (every 3rd: several
    // in each block, whose positions the AVX2 level lists from compare masks).
    for (const auto& [n, every] : std::vector<std::pair<size_t, size_t>>{
             {64, 997}, {200, 997}, {4096, 997}, {65537, 997}, {200, 3}, {4096, 3}}) {
      std::vector<size_t> rare{3, n / 2, n - 1};
      for (size_t p = 65; p < n; p += every) rare.push_back(p);
      const Bytes in = withRare(n, 15, rare, 250, n);
      const Bytes good = compress(*reference, in);
      QCOMPARE(good[0], uint8_t{2});
      for (const auto level : supportedNibbleDecodeLevels()) {
        QCOMPARE(indexOutcome(good, n, n, level), std::string(in.begin(), in.end()));
        if (n >= 4096) QCOMPARE(indexOutcome(good, n, 2, level), std::string("none"));  // 250 is escaped > twice
      }
      for (int trial = 0; trial < 300; ++trial) {
        Bytes bad = good;
        for (int f = 0; f < 1 + trial % 3; ++f) bad[rng() % bad.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        const std::string expected = outcome(*reference, bad, n);
        for (const auto level : supportedNibbleDecodeLevels()) {
          const std::string got = indexOutcome(bad, n, n, level);
          if (bad[0] == 0 || bad[0] == 1) {  // raw or run: the prelude's errors, else none
            if (got != "none") QCOMPARE(got, expected);
          } else {
            QCOMPARE(got, expected);
          }
        }
      }
    }
    const Bytes run = compress(*reference, Bytes(100, 7));
    QCOMPARE(run[0], uint8_t{1});
    QCOMPARE(indexOutcome(run, 100, 100, NibbleDecodeLevel::Scalar), std::string("none"));
    ZIPMOE_EXPECT_ERROR(indexNibbleChunk(run.data(), run.size(), 99, nullptr, 0), "encodes 100 symbols but 99");
    ZIPMOE_EXPECT_ERROR(indexNibbleChunk(Bytes{7, 4}.data(), 2, 4, nullptr, 0), "unknown mode 7");
    ZIPMOE_EXPECT_ERROR(indexNibbleChunk(nullptr, 0, 4, nullptr, 0), "empty");
    ZIPMOE_EXPECT_ERROR(indexNibbleChunk(Bytes{2, 4, 2, 1, 2, 0, 0x10, 0x31}.data(), 8, 4, nullptr, 0),
                        "code 3 at symbol 3");
  }

  void rejectsMalformedChunks() {
    for (const auto level : supportedNibbleDecodeLevels()) {
      const auto codec = makeNibbleCodec(level);
      auto run = [&](const Bytes& chunk, size_t n) { decompress(*codec, chunk, n); };
      ZIPMOE_EXPECT_ERROR(run({}, 4), "empty");
      ZIPMOE_EXPECT_ERROR(run({3, 4}, 4), "unknown mode 3");
      ZIPMOE_EXPECT_ERROR(run({2, 5}, 4), "encodes 5 symbols but 4");
      ZIPMOE_EXPECT_ERROR(run({2, 4}, 4), "before the dictionary size");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 0, 0}, 4), "dictionary size 0");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 16, 0}, 4), "dictionary size 16");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 3, 1, 2}, 4), "truncated in the dictionary");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 2, 5, 5, 0, 0, 0}, 4), "not strictly increasing at entry 1", "5 then 5");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 2, 1, 2}, 4), "escape count", "truncated");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 2, 1, 2, 5, 0, 0, 0, 0, 0, 0}, 4), "escape count 5 exceeds the 4");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 2, 1, 2, 0, 0x10}, 4), "holds 1 bytes", "expected 2 code bytes + 0");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 2, 1, 2, 0, 0x10, 0x01, 9}, 4), "holds 3 bytes");
      ZIPMOE_EXPECT_ERROR(run({2, 3, 2, 1, 2, 0, 0x10, 0x11}, 3), "unused last code nibble");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 2, 1, 2, 0, 0x10, 0x31}, 4), "code 3 at symbol 3", "dictionary of 2");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 2, 1, 2, 0, 0x10, 0xF1}, 4), "escape code at symbol 3", "only 0");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 2, 1, 2, 1, 0x10, 0x11, 9}, 4), "1 escaped symbols are stored", "use 0");
      ZIPMOE_EXPECT_ERROR(run({2, 4, 2, 1, 2, 1, 0x10, 0xF1, 2}, 4), "escaped symbol 0 (2) is in the dictionary");
      ZIPMOE_EXPECT_ERROR(run({0, 4, 1, 2, 3}, 4), "raw mode holds 3 bytes");
      ZIPMOE_EXPECT_ERROR(run({1, 0, 7}, 0), "run mode with 0 symbols");
      ZIPMOE_EXPECT_ERROR(run({1, 4, 7, 7}, 4), "run mode holds 2 bytes");
      // A valid chunk of 4 symbols with one escape decodes.
      QCOMPARE(decompress(*codec, {2, 4, 2, 1, 2, 1, 0x10, 0xF1, 9}, 4), (Bytes{1, 2, 2, 9}));
      // Escapes and invalid codes inside an AVX2 block: 64 symbols (32 code bytes), code 5 at 40.
      Bytes chunk{2, 64, 2, 1, 2, 0};
      for (int i = 0; i < 32; ++i) chunk.push_back(i == 20 ? 0x05 : 0x10);
      ZIPMOE_EXPECT_ERROR(run(chunk, 64), "code 5 at symbol 40");
    }
  }

  void parsesItsName() {
    QCOMPARE(parseCodecSpec("nibble").id, CodecId::Nibble);
    QCOMPARE(codecName(CodecId::Nibble), std::string("nibble"));
    QCOMPARE(describe({CodecId::Nibble, 0}), std::string("nibble"));
    ZIPMOE_EXPECT_ERROR(parseCodecSpec("nibble:3"), "nibble takes no level");
  }
};

QTEST_GUILESS_MAIN(TestNibbleCodec)
#include "test_nibble_codec.moc"
