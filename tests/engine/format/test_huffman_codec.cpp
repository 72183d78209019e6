// Tests for the order-0 canonical Huffman exponent codecs (`huffman`, 4 streams, and `huffman8`, 8
// streams; the whole suite runs once per stream count and decoder level this CPU supports, and
// levelsAgree compares every level with the scalar reference) and their length-limited code construction:
// round trips at every size and distribution that reaches a distinct code path (raw, run, 2-symbol,
// 12-bit codes, 6-symbol table entries, tail loops), optimality of the code lengths against an
// independent exact dynamic program, compressed size against the entropy, and malformed input
// (truncations, bit flips, wrong n, garbage), which must throw zipmoe::Error and never crash.
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>
#include <random>
#include <string>
#include <cstdio>
#include <vector>

#include "format/codecs.h"
#include "format/huffman_code_lengths.h"
#include "test_support.h"
#include "zipmoe/base/error.h"

namespace {

using Bytes = std::vector<uint8_t>;

uint8_t bf16Exponent(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
  const auto w = static_cast<uint16_t>(rounded >> 16);
  return static_cast<uint8_t>((w >> 7) & 0xFF);
}

Bytes gaussianExponents(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 0.02);
  Bytes out(n);
  for (auto& e : out) e = bf16Exponent(static_cast<float>(normal(rng)));
  return out;
}

// Symbols drawn with probability proportional to weights[s].
Bytes drawn(size_t n, const std::vector<double>& weights, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::discrete_distribution<int> dist(weights.begin(), weights.end());
  Bytes out(n);
  for (auto& e : out) e = static_cast<uint8_t>(dist(rng));
  return out;
}

double entropyOf(const Bytes& data) {
  std::array<uint64_t, 256> h{};
  for (uint8_t b : data) ++h[b];
  double bits = 0;
  for (uint64_t c : h)
    if (c != 0) {
      const double p = static_cast<double>(c) / static_cast<double>(data.size());
      bits -= p * std::log2(p);
    }
  return bits;
}

Bytes compress(const zipmoe::ExponentCodec& codec, const Bytes& data) {
  Bytes out(codec.maxCompressedSize(data.size()));
  out.resize(codec.compress(data.data(), data.size(), out.data(), out.size()));
  out.shrink_to_fit();  // an exact-size buffer lets ASan see any over-read
  return out;
}

// Decodes into an exact-size heap buffer (ASan catches overruns) and returns it.
Bytes decompress(const zipmoe::ExponentCodec& codec, const Bytes& comp, size_t n) {
  Bytes src(comp);  // exact size, own allocation
  auto dst = std::make_unique<uint8_t[]>(n + 1);
  codec.decompress(src.data(), src.size(), dst.get(), n);
  return Bytes(dst.get(), dst.get() + n);
}

// Decoding must either throw zipmoe::Error or succeed; anything else fails the test (or crashes,
// which ASan reports).
bool decodesOrThrows(const zipmoe::ExponentCodec& codec, const Bytes& comp, size_t n) {
  try {
    (void)decompress(codec, comp, n);
    return true;
  } catch (const zipmoe::Error&) {
    return false;
  }
}

uint64_t cost(const std::array<uint64_t, 256>& counts, const std::array<uint8_t, 256>& lengths) {
  uint64_t total = 0;
  for (size_t s = 0; s < 256; ++s) total += counts[s] * lengths[s];
  return total;
}

// Kraft sum in units of 2^-maxBits.
uint64_t kraft(const std::array<uint8_t, 256>& lengths, int maxBits) {
  uint64_t sum = 0;
  for (uint8_t l : lengths)
    if (l != 0) sum += uint64_t{1} << (maxBits - l);
  return sum;
}

// Exact minimum cost of a prefix code with lengths <= maxBits: a knapsack over the Kraft budget
// (any length vector with Kraft sum <= 1 is a prefix code). Independent of package-merge.
uint64_t optimalLimitedCost(const std::array<uint64_t, 256>& counts, int maxBits) {
  const size_t budget = size_t{1} << maxBits;
  constexpr uint64_t kInf = ~uint64_t{0};
  std::vector<uint64_t> best(budget + 1, kInf), next(budget + 1);
  best[0] = 0;
  for (uint64_t c : counts) {
    if (c == 0) continue;
    std::fill(next.begin(), next.end(), kInf);
    for (size_t used = 0; used <= budget; ++used) {
      if (best[used] == kInf) continue;
      for (int l = 1; l <= maxBits; ++l) {
        const size_t u = used + (budget >> l);
        if (u <= budget) next[u] = std::min(next[u], best[used] + c * static_cast<uint64_t>(l));
      }
    }
    std::swap(best, next);
  }
  return *std::min_element(best.begin(), best.end());
}

// Cost and depth of the unlimited Huffman code (a textbook heap construction).
std::pair<uint64_t, int> unlimitedHuffman(const std::array<uint64_t, 256>& counts) {
  using Node = std::pair<uint64_t, int>;  // weight, depth of the deepest leaf below
  std::priority_queue<Node, std::vector<Node>, std::greater<>> heap;
  for (uint64_t c : counts)
    if (c != 0) heap.push({c, 0});
  uint64_t total = 0;
  while (heap.size() > 1) {
    const Node a = heap.top();
    heap.pop();
    const Node b = heap.top();
    heap.pop();
    total += a.first + b.first;  // each merge adds one bit to every symbol below it
    heap.push({a.first + b.first, std::max(a.second, b.second) + 1});
  }
  return {total, heap.empty() ? 0 : heap.top().second};
}

std::array<uint64_t, 256> histogram(const Bytes& data) {
  std::array<uint64_t, 256> h{};
  for (uint8_t b : data) ++h[b];
  return h;
}

std::array<uint8_t, 256> lengthsFor(const std::array<uint64_t, 256>& counts, int maxBits) {
  std::array<uint8_t, 256> lengths{};
  zipmoe::detail::huffmanCodeLengths(counts.data(), maxBits, lengths.data());
  return lengths;
}

// Fibonacci weights force an unlimited Huffman code as deep as the number of symbols.
std::vector<double> fibonacciWeights(int symbols) {
  std::vector<double> w(256, 0.0);
  double a = 1, b = 1;
  for (int i = 0; i < symbols; ++i) {
    w[static_cast<size_t>(100 + i)] = a;
    const double c = a + b;
    a = b;
    b = c;
  }
  return w;
}

}  // namespace

class TestHuffmanCodec : public QObject {
  Q_OBJECT

 public:
  TestHuffmanCodec(int streams, zipmoe::HuffmanDecodeLevel level)
      : streams_(streams), level_(level), codec_(zipmoe::detail::makeHuffmanCodec(streams, level)) {}

 private:
  int streams_;
  zipmoe::HuffmanDecodeLevel level_;
  std::unique_ptr<zipmoe::ExponentCodec> codec_;

  // Decodes at every supported level; each must give `data` exactly (or, for bad input, throw the same
  // message at every level).
  static void checkEveryLevel(int streams, const Bytes& comp, size_t n, const Bytes* expected) {
    std::string firstError;
    bool first = true;
    for (const auto level : zipmoe::supportedHuffmanDecodeLevels()) {
      const auto codec = zipmoe::detail::makeHuffmanCodec(streams, level);
      std::string error;
      Bytes out;
      try {
        out = decompress(*codec, comp, n);
      } catch (const zipmoe::Error& e) {
        error = e.what();
      }
      if (expected != nullptr)
        QVERIFY2(error.empty() && out == *expected,
                 qPrintable(QString("level %1, %2 streams, n=%3: %4")
                                .arg(zipmoe::huffmanDecodeLevelName(level))
                                .arg(streams)
                                .arg(n)
                                .arg(error.empty() ? "output differs" : error.c_str())));
      if (first) firstError = error;
      QCOMPARE(error, firstError);
      first = false;
    }
  }

  void checkRoundTrip(const Bytes& data) {
    const Bytes comp = compress(*codec_, data);
    QVERIFY(comp.size() <= codec_->maxCompressedSize(data.size()));
    const Bytes back = decompress(*codec_, comp, data.size());
    QVERIFY2(back == data, qPrintable(QString("round trip differs for n=%1").arg(data.size())));
  }

 private Q_SLOTS:
  void specIsHuffman() {
    const auto id = streams_ == 8 ? zipmoe::CodecId::Huffman8 : zipmoe::CodecId::Huffman;
    QVERIFY(codec_->spec() == (zipmoe::CodecSpec{id, 0}));
    QVERIFY(zipmoe::makeCodec({id, 0}, level_)->spec() == (zipmoe::CodecSpec{id, 0}));
  }

  void levelsAgree() {
    // Sizes 0..400 (every tail split), around the fast loop's batch limits (a round is 4 lookups of up
    // to 6 symbols per stream), and chunk-sized; random, skewed, exponent-like and constant data.
    std::vector<size_t> sizes;
    for (size_t n = 0; n <= 400; ++n) sizes.push_back(n);
    for (size_t base : {size_t{26}, size_t{24 * 4}, size_t{24 * 8}, size_t{1024}, size_t{4096}, size_t{65536}})
      for (size_t k : {size_t{1}, size_t{4}, size_t{8}})
        for (size_t d = 0; d < 5; ++d) sizes.push_back(base * k + d), sizes.push_back(base * k - 1 - d);
    sizes.push_back(720896);
    sizes.push_back(720896 + 7);
    std::vector<double> skew(256, 0.0);
    skew[126] = 95, skew[125] = 3, skew[127] = 1.5, skew[0] = 0.5;
    std::mt19937_64 rng(2024);
    for (size_t n : sizes) {
      const bool big = n > 20000;
      std::vector<Bytes> inputs{gaussianExponents(n, n + 1), drawn(n, skew, n + 2), Bytes(n, 0x7A)};
      if (!big || n == 720896) {
        Bytes random(n);
        for (auto& b : random) b = static_cast<uint8_t>(rng());
        inputs.push_back(random);
        inputs.push_back(drawn(n, fibonacciWeights(24), n + 3));
      }
      for (const Bytes& data : inputs) {
        const Bytes comp = compress(*codec_, data);
        checkEveryLevel(streams_, comp, n, &data);
        if (QTest::currentTestFailed()) return;
      }
    }
  }

  void levelsRejectAlike() {
    std::mt19937_64 rng(5150);
    for (const Bytes& data : {gaussianExponents(5000, 3), gaussianExponents(211, 4), drawn(3000, fibonacciWeights(20), 5)}) {
      const Bytes comp = compress(*codec_, data);
      for (size_t cut = 0; cut < comp.size(); cut += 1 + comp.size() / 64)
        checkEveryLevel(streams_, Bytes(comp.begin(), comp.begin() + static_cast<std::ptrdiff_t>(cut)), data.size(), nullptr);
      for (int t = 0; t < 300; ++t) {
        Bytes bad = comp;
        bad[rng() % bad.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        checkEveryLevel(streams_, bad, data.size(), nullptr);
        if (QTest::currentTestFailed()) return;
      }
      checkEveryLevel(streams_, comp, data.size() + 1, nullptr);
    }
  }

  void otherStreamCountIsRejected() {
    // A chunk written with the other stream count never decodes as this one's (the stream sizes differ).
    const Bytes data = gaussianExponents(100000, 8);
    const auto other = zipmoe::detail::makeHuffmanCodec(streams_ == 8 ? 4 : 8, level_);
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, compress(*other, data), data.size()), "huffman chunk");
  }

  void roundTripGaussianSizes() {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{3000}, size_t{720896}}) {
      checkRoundTrip(gaussianExponents(n, 7 + n));
      if (QTest::currentTestFailed()) return;
    }
  }

  void roundTripEveryLengthUpTo100() {
    for (size_t n = 0; n <= 100; ++n) {
      checkRoundTrip(gaussianExponents(n, n));
      checkRoundTrip(drawn(n, fibonacciWeights(20), n));
      if (QTest::currentTestFailed()) return;
    }
  }

  void emptyInputIsTiny() {
    const Bytes comp = compress(*codec_, {});
    QCOMPARE(comp.size(), size_t{2});
    QCOMPARE(decompress(*codec_, comp, 0).size(), size_t{0});
  }

  void allEqualIsARun() {
    for (size_t n : {size_t{1}, size_t{5}, size_t{100000}}) {
      const Bytes data(n, 0x7A);
      const Bytes comp = compress(*codec_, data);
      QVERIFY2(comp.size() <= 6, qPrintable(QString("run of %1 took %2 bytes").arg(n).arg(comp.size())));
      QVERIFY(decompress(*codec_, comp, n) == data);
    }
  }

  void twoSymbolsUseOneBitEach() {
    std::vector<double> w(256, 0.0);
    w[0] = 1;
    w[255] = 1;
    const Bytes data = drawn(80000, w, 3);
    const Bytes comp = compress(*codec_, data);
    // 1 bit per symbol; the header spends a nibble per symbol value in 0..255 (128 bytes) here, plus
    // up to 7 stream-size varints and a padding byte per stream.
    QVERIFY2(comp.size() <= 80000 / 8 + 150, qPrintable(QString::number(comp.size())));
    QVERIFY(comp.size() >= 80000 / 8);
    QVERIFY(decompress(*codec_, comp, data.size()) == data);
  }

  void uniformFallsBackToRaw() {
    Bytes data(65536);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 167 + (i >> 8));
    const Bytes comp = compress(*codec_, data);
    QVERIFY2(comp.size() <= data.size() + 11, qPrintable(QString::number(comp.size())));
    QCOMPARE(comp.size(), codec_->maxCompressedSize(data.size()));
    QVERIFY(decompress(*codec_, comp, data.size()) == data);
    // Tiny inputs, where the code lengths would cost more than they save, round-trip too.
    checkRoundTrip({1, 2});
    checkRoundTrip({9, 200, 9, 3});
  }

  void skewedDataFillsMultiSymbolEntries() {
    // One symbol at 95%: its 1-bit code packs 6 symbols into many table entries (the entry cap).
    std::vector<double> w(256, 0.0);
    w[126] = 95;
    w[125] = 3;
    w[127] = 1.5;
    w[0] = 0.5;
    for (size_t n : {size_t{17}, size_t{999}, size_t{200000}}) checkRoundTrip(drawn(n, w, n));
  }

  void deepCodesRoundTrip() {
    // 24 Fibonacci-weighted symbols: unlimited Huffman would need 23 bits; the cap is 12.
    for (size_t n : {size_t{50}, size_t{4096}, size_t{300000}}) {
      const Bytes data = drawn(n, fibonacciWeights(24), 11 + n);
      checkRoundTrip(data);
    }
    // Every symbol present once plus a heavy one: 256 symbols with codes up to 12 bits.
    Bytes data = drawn(100000, fibonacciWeights(30), 5);
    for (int s = 0; s < 256; ++s) data.push_back(static_cast<uint8_t>(s));
    checkRoundTrip(data);
  }

  void lengthsAreCappedAndOptimal() {
    std::mt19937_64 rng(99);
    std::vector<std::array<uint64_t, 256>> cases;
    {
      std::array<uint64_t, 256> fib{};
      uint64_t a = 1, b = 1;
      for (size_t i = 0; i < 40; ++i) {  // depth 39 unlimited
        fib[i * 3] = a;
        const uint64_t c = a + b;
        a = b;
        b = c;
      }
      cases.push_back(fib);
    }
    {
      std::array<uint64_t, 256> geometric{};
      for (size_t i = 0; i < 60; ++i) geometric[i] = uint64_t{1} << (59 - i) / 2;
      cases.push_back(geometric);
    }
    cases.push_back(histogram(gaussianExponents(200000, 1)));
    for (int t = 0; t < 20; ++t) {
      std::array<uint64_t, 256> random{};
      const int symbols = 2 + static_cast<int>(rng() % 255);
      for (int i = 0; i < symbols; ++i)
        random[rng() % 256] = 1 + (rng() % 2 == 0 ? rng() % 10 : rng() % 100000);
      cases.push_back(random);
    }
    for (const auto& counts : cases) {
      const auto lengths = lengthsFor(counts, zipmoe::detail::kHuffmanMaxCodeBits);
      for (size_t s = 0; s < 256; ++s) {
        QVERIFY((counts[s] == 0) == (lengths[s] == 0));
        QVERIFY(lengths[s] <= 12);
      }
      QCOMPARE(kraft(lengths, 12), uint64_t{4096});
      QCOMPARE(cost(counts, lengths), optimalLimitedCost(counts, 12));
      const auto [huffmanCost, depth] = unlimitedHuffman(counts);
      if (depth <= 12) QCOMPARE(cost(counts, lengths), huffmanCost);
    }
  }

  void lengthsMatchBruteForceForSmallLimits() {
    // Exhaustive search over all length vectors for up to 7 symbols and limits 3..5.
    std::mt19937_64 rng(5);
    for (int t = 0; t < 60; ++t) {
      const int symbols = 2 + static_cast<int>(rng() % 6);
      const int maxBits = 3 + static_cast<int>(rng() % 3);
      if (symbols > (1 << maxBits)) continue;
      std::array<uint64_t, 256> counts{};
      for (int i = 0; i < symbols; ++i)
        counts[static_cast<size_t>(i)] = 1 + rng() % (t % 2 == 0 ? 5 : 100000);
      uint64_t best = ~uint64_t{0};
      std::vector<int> len(static_cast<size_t>(symbols), 1);
      for (;;) {
        double k = 0;
        uint64_t c = 0;
        for (int i = 0; i < symbols; ++i) {
          k += std::ldexp(1.0, -len[static_cast<size_t>(i)]);
          c += counts[static_cast<size_t>(i)] * static_cast<uint64_t>(len[static_cast<size_t>(i)]);
        }
        if (k <= 1.0) best = std::min(best, c);
        int i = 0;
        while (i < symbols && ++len[static_cast<size_t>(i)] > maxBits) len[static_cast<size_t>(i++)] = 1;
        if (i == symbols) break;
      }
      const auto lengths = lengthsFor(counts, maxBits);
      QCOMPARE(cost(counts, lengths), best);
      QVERIFY(kraft(lengths, maxBits) <= (uint64_t{1} << maxBits));
    }
  }

  void lengthsForDegenerateHistograms() {
    std::array<uint64_t, 256> counts{};
    QCOMPARE(kraft(lengthsFor(counts, 12), 12), uint64_t{0});
    counts[42] = 7;
    const auto one = lengthsFor(counts, 12);
    QCOMPARE(int{one[42]}, 1);
    counts.fill(1);  // 256 equal symbols: all 8 bits
    const auto flat = lengthsFor(counts, 12);
    QVERIFY(std::all_of(flat.begin(), flat.end(), [](uint8_t l) { return l == 8; }));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, lengthsFor(counts, 7));
  }

  void compressedSizeIsNearEntropy() {
    const Bytes data = gaussianExponents(720896, 2024);
    const Bytes comp = compress(*codec_, data);
    const double bits = 8.0 * static_cast<double>(comp.size()) / static_cast<double>(data.size());
    const double entropy = entropyOf(data);
    QVERIFY2(bits <= entropy + 0.06,
             qPrintable(QString("%1 bits/exponent vs entropy %2").arg(bits).arg(entropy)));
    QVERIFY2((8.0 + bits) / 16.0 <= 0.668, qPrintable(QString("store ratio %1").arg((8.0 + bits) / 16.0)));
    // The chunk header is a few dozen bytes, not a 256-entry table.
    QVERIFY(comp.size() <= static_cast<size_t>(std::ceil(entropy * 720896 / 8 * 1.03)));
  }

  void outputBeyondNIsUntouched() {
    const Bytes data = gaussianExponents(1000, 8);
    const Bytes comp = compress(*codec_, data);
    Bytes dst(1000 + 64, 0xEE);
    codec_->decompress(comp.data(), comp.size(), dst.data(), 1000);
    QVERIFY(std::equal(data.begin(), data.end(), dst.begin()));
    QVERIFY(std::all_of(dst.begin() + 1000, dst.end(), [](uint8_t b) { return b == 0xEE; }));
  }

  void wrongCountIsRejected() {
    for (size_t n : {size_t{0}, size_t{1}, size_t{10}, size_t{3000}}) {
      for (const Bytes& data : {gaussianExponents(n, 4), Bytes(n, 3)}) {
        const Bytes comp = compress(*codec_, data);
        ZIPMOE_EXPECT_ERROR(decompress(*codec_, comp, n + 1), "huffman chunk", "symbols");
        if (n > 0) ZIPMOE_EXPECT_ERROR(decompress(*codec_, comp, n - 1), "huffman chunk", "symbols");
      }
    }
  }

  void truncationsAreRejected() {
    for (const Bytes& data :
         {gaussianExponents(3000, 21), drawn(5000, fibonacciWeights(24), 2), Bytes(40, 1), Bytes{1, 2, 3}}) {
      const Bytes comp = compress(*codec_, data);
      for (size_t cut = 0; cut < comp.size(); ++cut) {
        const Bytes part(comp.begin(), comp.begin() + static_cast<std::ptrdiff_t>(cut));
        ZIPMOE_EXPECT_ERROR(decompress(*codec_, part, data.size()), "huffman chunk");
      }
      Bytes longer = comp;
      longer.push_back(0);
      ZIPMOE_EXPECT_ERROR(decompress(*codec_, longer, data.size()), "huffman chunk");
    }
  }

  void bitFlipsNeverCrash() {
    std::mt19937_64 rng(77);
    for (const Bytes& data :
         {gaussianExponents(3000, 31), drawn(2000, fibonacciWeights(24), 3), gaussianExponents(37, 2)}) {
      const Bytes comp = compress(*codec_, data);
      // Every single bit of the first 48 bytes (the header and the starts of the streams).
      for (size_t bit = 0; bit < std::min<size_t>(comp.size(), 48) * 8; ++bit) {
        Bytes bad = comp;
        bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        (void)decodesOrThrows(*codec_, bad, data.size());
      }
      int decoded = 0;
      for (int t = 0; t < 1500; ++t) {
        Bytes bad = comp;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        decoded += decodesOrThrows(*codec_, bad, data.size()) ? 1 : 0;
      }
      QVERIFY2(decoded < 1500, "corruption was never detected");
    }
  }

  void garbageIsRejectedSafely() {
    std::mt19937_64 rng(13);
    for (int t = 0; t < 5000; ++t) {
      Bytes junk(rng() % 200);
      for (auto& b : junk) b = static_cast<uint8_t>(rng());
      if (!junk.empty()) junk[0] = static_cast<uint8_t>(rng() % 4);      // mostly valid modes
      if (junk.size() > 1) junk[1] = static_cast<uint8_t>(rng() % 128);  // a plausible count
      (void)decodesOrThrows(*codec_, junk, junk.size() > 1 ? junk[1] : rng() % 100);
    }
  }

  void specificMessages() {
    if (streams_ == 8) {
      // Lengths 1,1 (symbol 10 = bit 0); 16 symbols, 2 per stream: 2 bits each; streams of 1 byte.
      QCOMPARE(decompress(*codec_, {2, 16, 10, 11, 0x11, 1, 1, 1, 1, 1, 1, 1, 0, 1, 2, 3, 0, 1, 2, 3}, 16),
               (Bytes{10, 10, 11, 10, 10, 11, 11, 11, 10, 10, 11, 10, 10, 11, 11, 11}));
      ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 16, 10, 11, 0x11, 1, 1, 1, 1, 1, 1, 1, 0, 1, 2, 3, 0, 1, 2}, 16),
                          "stream 7", "overruns its 0 bytes");
      ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 16, 10, 11, 0x11, 1, 1, 1, 1, 1, 1, 1, 0, 1, 2, 3, 0, 1, 2, 0x83}, 16),
                          "stream 7", "non-zero padding");
      ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 16, 10, 11, 0x11, 1, 1, 1, 1, 1, 9, 1, 0, 1, 2, 3}, 16), "exceed");
      ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 8, 10, 11, 0x21, 0, 0, 0, 0}, 8), "Kraft sum 3072/4096");
      return;
    }
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {}, 0), "huffman chunk", "empty");
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {9, 0}, 0), "huffman chunk", "unknown mode 9");
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {0, 3, 1, 2}, 3), "raw mode holds 2 bytes");
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {1, 0, 5}, 0), "run mode with 0 symbols");
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {0, 0x80}, 0), "symbol count truncated");
    // Huffman, 8 symbols, range 10..11 with lengths 1 and 2: Kraft sum 3/4.
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 8, 10, 11, 0x21, 0, 0, 0, 0}, 8), "Kraft sum 3072/4096");
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 8, 10, 11, 0xD1}, 8), "code length 13");
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 8, 11, 10, 0x11}, 8), "fewer than 2 symbols");
    // Lengths 1,1; stream sizes 1, 1, 5 but only 2 bytes follow.
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 8, 10, 11, 0x11, 1, 1, 5, 0, 0}, 8), "exceed");
    // Lengths 1,1 (symbol 10 = bit 0); 2 symbols per stream: 2 bits each; streams of 1 byte each.
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 8, 10, 11, 0x11, 1, 1, 1, 0, 0, 0}, 8), "stream 3",
                        "overruns its 0 bytes");
    QCOMPARE(decompress(*codec_, {2, 8, 10, 11, 0x11, 1, 1, 1, 0, 1, 2, 3}, 8),
             (Bytes{10, 10, 11, 10, 10, 11, 11, 11}));
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 8, 10, 11, 0x11, 1, 1, 1, 0, 1, 2, 0x83}, 8), "stream 3",
                        "non-zero padding");
    ZIPMOE_EXPECT_ERROR(decompress(*codec_, {2, 8, 10, 11, 0x11, 1, 1, 1, 0, 1, 2, 3, 0}, 8), "stream 3",
                        "unused");
  }
};

// The suite once per stream count (4, 8) and supported decoder level; every run after the first
// writes its QtTest log files with a "-<streams>-<level>" suffix, so no run overwrites another's.
int main(int argc, char** argv) {
  int status = 0;
  bool first = true;
  for (int streams : {4, 8})
    for (const auto level : zipmoe::supportedHuffmanDecodeLevels()) {
      std::vector<std::string> args(argv, argv + argc);
      const std::string suffix = "-" + std::to_string(streams) + "-" + zipmoe::huffmanDecodeLevelName(level);
      if (!first)
        for (auto& a : args) {
          const auto dot = a.rfind(".txt,");
          if (dot != std::string::npos) a.insert(dot, suffix);
        }
      first = false;
      std::vector<char*> ptrs;
      for (auto& a : args) ptrs.push_back(a.data());
      std::printf("=== huffman, %d streams, decoder level %s ===\n", streams, zipmoe::huffmanDecodeLevelName(level));
      TestHuffmanCodec test(streams, level);
      status |= QTest::qExec(&test, static_cast<int>(ptrs.size()), ptrs.data());
    }
  return status;
}
#include "test_huffman_codec.moc"
