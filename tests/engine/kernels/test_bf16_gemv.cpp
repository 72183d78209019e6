// BF16 GEMV: every SIMD level this CPU has against a double-precision sum, over shapes that exercise
// every tail (rows not a multiple of four, columns not a multiple of 8 or 32), batches of 1 to 9, row
// ranges that start and end anywhere; and the BF16 rounding helpers on every one of the 65536 words.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/amx_gemm.h"
#include "kernels/bf16_gemv.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/nibble_shard.h"

using namespace zipmoe::kernels;

namespace {

std::vector<uint16_t> randomBf16(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<uint16_t> v(n);
  for (auto& h : v) h = floatToBf16(d(rng));
  return v;
}

// A nibble-mode chunk of p[0, n) (format/nibble_codec.cpp) even where the codec would store a small
// one raw: the 15 most frequent exponents coded, the rest escaped.
std::vector<uint8_t> nibbleChunk(const uint8_t* p, size_t n) {
  std::vector<size_t> count(256, 0);
  for (size_t i = 0; i < n; ++i) ++count[p[i]];
  std::vector<uint8_t> bySymbol(256);
  for (size_t v = 0; v < 256; ++v) bySymbol[v] = static_cast<uint8_t>(v);
  std::stable_sort(bySymbol.begin(), bySymbol.end(), [&](uint8_t a, uint8_t b) { return count[a] > count[b]; });
  std::vector<uint8_t> dictionary(bySymbol.begin(), bySymbol.begin() + 15);
  while (dictionary.size() > 1 && count[dictionary.back()] == 0) dictionary.pop_back();
  std::sort(dictionary.begin(), dictionary.end());
  std::vector<uint8_t> code(256, 15), codes((n + 1) / 2, 0), escapes;
  for (size_t c = 0; c < dictionary.size(); ++c) code[dictionary[c]] = static_cast<uint8_t>(c);
  for (size_t i = 0; i < n; ++i) {
    codes[i / 2] |= static_cast<uint8_t>(code[p[i]] << (4 * (i % 2)));
    if (code[p[i]] == 15) escapes.push_back(p[i]);
  }
  std::vector<uint8_t> out{2};
  const auto varint = [&](uint64_t v) {
    do {
      out.push_back(static_cast<uint8_t>((v & 0x7F) | (v >= 0x80 ? 0x80 : 0)));
      v >>= 7;
    } while (v != 0);
  };
  varint(n);
  out.push_back(static_cast<uint8_t>(dictionary.size()));
  out.insert(out.end(), dictionary.begin(), dictionary.end());
  varint(escapes.size());
  out.insert(out.end(), codes.begin(), codes.end());
  out.insert(out.end(), escapes.begin(), escapes.end());
  return out;
}

// W's exponents as `nibble` codes in `shards` row ranges (as a store keeps a tensor), indexed for the
// kernels; the buffers the shards point into are kept in `coded` and `positions`.
std::vector<zipmoe::NibbleShard> nibbleShards(const std::vector<uint8_t>& exponents, size_t rows, size_t cols,
                                              size_t shards, std::vector<std::vector<uint8_t>>& coded,
                                              std::vector<std::vector<uint32_t>>& positions) {
  std::vector<zipmoe::NibbleShard> out;
  for (size_t s = 0; s < shards; ++s) {
    const size_t r0 = rows * s / shards, r1 = rows * (s + 1) / shards;
    if (r0 == r1) continue;
    const size_t n = (r1 - r0) * cols;
    const auto& chunk = coded.emplace_back(nibbleChunk(exponents.data() + r0 * cols, n));
    auto& where = positions.emplace_back(n);
    auto shard = zipmoe::indexNibbleChunk(chunk.data(), chunk.size(), n, where.data(), n);
    if (!shard) throw std::runtime_error("indexing refused a nibble-mode chunk");
    shard->rowBegin = r0;
    shard->rowEnd = r1;
    out.push_back(*shard);
  }
  return out;
}

}  // namespace

class TestBf16Gemv : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void everyLevelMatchesADoubleSum() {
    std::mt19937 rng(11);
    // 200 and 226: the AVX-512 kernel's 128-column steps, then 32-column ones, then a masked tail.
    const size_t colsList[] = {1, 7, 8, 9, 31, 32, 33, 63, 64, 100, 200, 226, 257, 1408, 2053};
    for (const GemvLevel level : supportedGemvLevels()) {
      for (const size_t cols : colsList) {
        for (const size_t rows : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{13}}) {
          const size_t batch = 1 + (cols + rows) % 9;
          const auto w = randomBf16(rows * cols, rng, 0.05f);
          const auto x = randomBf16(batch * cols, rng, 1.0f);
          const size_t ldy = rows + 3;
          std::vector<float> y(batch * ldy, -777.0f);
          gemvBf16(level, w.data(), cols, 0, rows, x.data(), batch, y.data(), ldy);
          for (size_t b = 0; b < batch; ++b) {
            for (size_t r = 0; r < rows; ++r) {
              double exact = 0, magnitude = 0;
              for (size_t c = 0; c < cols; ++c) {
                const double p = double(bf16ToFloat(w[r * cols + c])) * double(bf16ToFloat(x[b * cols + c]));
                exact += p;
                magnitude += std::fabs(p);
              }
              // fp32 accumulation in any order: within a few units of fp32 rounding of Σ|w·x|.
              const double tolerance = 1e-6 * magnitude * std::log2(double(cols) + 2) + 1e-30;
              const double got = y[b * ldy + r];
              QVERIFY2(std::fabs(got - exact) <= tolerance,
                       qPrintable(QString("%1 rows %2 cols %3 batch %4: y[%5][%6] = %7, exact %8")
                                      .arg(gemvLevelName(level)).arg(rows).arg(cols).arg(batch).arg(b).arg(r)
                                      .arg(got, 0, 'g', 9).arg(exact, 0, 'g', 9)));
            }
            for (size_t r = rows; r < ldy; ++r) QCOMPARE(y[b * ldy + r], -777.0f);  // nothing past rowEnd
          }
        }
      }
    }
  }

  void rowRangesWriteOnlyTheirRows() {
    std::mt19937 rng(5);
    const size_t rows = 23, cols = 70, batch = 2;
    const auto w = randomBf16(rows * cols, rng, 0.1f);
    const auto x = randomBf16(batch * cols, rng, 1.0f);
    std::vector<float> whole(batch * rows);
    gemvBf16(GemvLevel::Scalar, w.data(), cols, 0, rows, x.data(), batch, whole.data(), rows);
    for (const GemvLevel level : supportedGemvLevels()) {
      for (size_t begin = 0; begin < rows; begin += 3) {
        for (size_t end = begin + 1; end <= rows; end += 5) {
          std::vector<float> y(batch * rows, 12345.0f);
          gemvBf16(level, w.data(), cols, begin, end, x.data(), batch, y.data(), rows);
          for (size_t b = 0; b < batch; ++b)
            for (size_t r = 0; r < rows; ++r) {
              const float got = y[b * rows + r];
              if (r < begin || r >= end) QCOMPARE(got, 12345.0f);
              else QVERIFY(std::fabs(got - whole[b * rows + r]) <= 1e-4f * (1 + std::fabs(whole[b * rows + r])));
            }
        }
      }
    }
  }

  void theScalarLevelIsTheColumnOrderFp32Loop() {
    std::mt19937 rng(3);
    const size_t rows = 6, cols = 99;
    const auto w = randomBf16(rows * cols, rng, 0.2f);
    const auto x = randomBf16(cols, rng, 1.0f);
    std::vector<float> y(rows);
    gemvBf16(GemvLevel::Scalar, w.data(), cols, 0, rows, x.data(), 1, y.data(), rows);
    for (size_t r = 0; r < rows; ++r) {
      float acc = 0;
      for (size_t c = 0; c < cols; ++c) acc += bf16ToFloat(w[r * cols + c]) * bf16ToFloat(x[c]);
      QCOMPARE(y[r], acc);
    }
  }

  // Recovery fused into the product: the split planes give exactly the bits the merged words give, at
  // every level, for every shape and tail, row range and batch — and for all 65536 words (NaN,
  // infinities, denormals, -0 included).
  void theSplitPlanesAreBitIdenticalToTheWords() {
    std::mt19937 rng(17);
    const auto check = [](GemvLevel level, const std::vector<uint16_t>& w, size_t rows, size_t cols,
                          const std::vector<uint16_t>& x, size_t batch, size_t r0, size_t r1) {
      std::vector<uint8_t> e(w.size()), sm(w.size());
      zipmoe::bf16::split(w.data(), w.size(), e.data(), sm.data());
      std::vector<float> fromWords(batch * rows, -1.0f), fromPlanes(batch * rows, -1.0f);
      gemvBf16(level, w.data(), cols, r0, r1, x.data(), batch, fromWords.data(), rows);
      gemvSplitBf16(level, e.data(), sm.data(), cols, r0, r1, x.data(), batch, fromPlanes.data(), rows);
      QVERIFY2(std::memcmp(fromWords.data(), fromPlanes.data(), fromWords.size() * sizeof(float)) == 0,
               qPrintable(QString("%1: %2 rows x %3 cols, batch %4, rows %5..%6 differ")
                              .arg(gemvLevelName(level)).arg(rows).arg(cols).arg(batch).arg(r0).arg(r1)));
    };
    for (const GemvLevel level : supportedGemvLevels()) {
      for (const size_t cols : {size_t{1}, size_t{7}, size_t{8}, size_t{31}, size_t{32}, size_t{33}, size_t{100},
                                size_t{226}, size_t{1408}, size_t{2053}}) {
        for (const size_t rows : {size_t{1}, size_t{4}, size_t{5}, size_t{13}}) {
          const size_t batch = 1 + (cols + rows) % 8;
          const auto w = randomBf16(rows * cols, rng, 0.05f);
          const auto x = randomBf16(batch * cols, rng, 1.0f);
          check(level, w, rows, cols, x, batch, 0, rows);
          if (rows > 2) check(level, w, rows, cols, x, batch, 1, rows - 1);
        }
      }
      // Every 16-bit pattern once, in 256 rows of 256 (each row all exponents of one sign-mantissa
      // byte), against x with no specials so that each row's NaN or infinity is its own.
      std::vector<uint16_t> all(65536);
      for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
      const auto x = randomBf16(2 * 256, rng, 1.0f);
      check(level, all, 256, 256, x, 2, 0, 256);
    }
  }

  // The exponents as nibble codes read in place: the same bits as the merged words at every level, for
  // shapes with every tail, shard boundaries anywhere (also inside a 4-row group), row ranges that
  // cross them, escapes in many blocks (extreme weights in every row), and all 65536 words (where
  // most of each row's 256 exponents are escapes).
  void theNibbleCodesAreBitIdenticalToTheWords() {
    std::mt19937 rng(19);
    const auto check = [](GemvLevel level, const std::vector<uint16_t>& w, size_t rows, size_t cols, size_t shards,
                          const std::vector<uint16_t>& x, size_t batch, size_t r0, size_t r1) {
      std::vector<uint8_t> e(w.size()), sm(w.size());
      zipmoe::bf16::split(w.data(), w.size(), e.data(), sm.data());
      std::vector<std::vector<uint8_t>> coded;
      std::vector<std::vector<uint32_t>> positions;
      const auto nibble = nibbleShards(e, rows, cols, shards, coded, positions);
      std::vector<float> fromWords(batch * rows, -1.0f), fromCodes(batch * rows, -1.0f);
      gemvBf16(level, w.data(), cols, r0, r1, x.data(), batch, fromWords.data(), rows);
      gemvNibbleBf16(level, nibble, sm.data(), cols, r0, r1, x.data(), batch, fromCodes.data(), rows);
      // Bits equal; a NaN only as a NaN (its payload is the first NaN operand's, and which operand of an
      // addition comes first is the compiler's choice: it may differ between the kernels' instances).
      for (size_t i = 0; i < fromWords.size(); ++i)
        QVERIFY2(std::memcmp(&fromWords[i], &fromCodes[i], sizeof(float)) == 0 ||
                     (std::isnan(fromWords[i]) && std::isnan(fromCodes[i])),
                 qPrintable(QString("%1: %2 rows x %3 cols in %4 shards, batch %5, rows %6..%7: y[%8] = %9, words give %10")
                                .arg(gemvLevelName(level)).arg(rows).arg(cols).arg(shards).arg(batch).arg(r0).arg(r1)
                                .arg(i).arg(fromCodes[i], 0, 'g', 9).arg(fromWords[i], 0, 'g', 9)));
    };
    for (const GemvLevel level : supportedGemvLevels()) {
      for (const size_t cols : {size_t{2}, size_t{8}, size_t{30}, size_t{32}, size_t{34}, size_t{64}, size_t{100},
                                size_t{226}, size_t{1408}, size_t{2054}}) {
        for (const size_t rows : {size_t{1}, size_t{4}, size_t{5}, size_t{13}}) {
          const size_t batch = 1 + (cols + rows) % 8;
          auto w = randomBf16(rows * cols, rng, 0.05f);
          for (size_t r = 0; r < rows; ++r)  // rare exponents: escapes (a dictionary holds 15)
            for (const float rare : {1e-30f, 3e-20f, 1e-12f, 7e5f, 1e12f, 2e25f})
              w[r * cols + rng() % cols] = floatToBf16(rng() % 2 ? rare : -rare);
          const auto x = randomBf16(batch * cols, rng, 1.0f);
          for (const size_t shards : {size_t{1}, size_t{3}}) {
            check(level, w, rows, cols, shards, x, batch, 0, rows);
            if (rows > 2) check(level, w, rows, cols, shards, x, batch, 1, rows - 1);
          }
        }
      }
      std::vector<uint16_t> all(65536);
      for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
      const auto x = randomBf16(2 * 256, rng, 1.0f);
      check(level, all, 256, 256, 3, x, 2, 0, 256);
      check(level, all, 256, 256, 3, x, 2, 83, 171);
    }
    // An odd number of columns cannot be read in place: refused, naming the columns.
    std::vector<uint8_t> sm(3);
    std::vector<uint16_t> x(3);
    std::vector<float> y(1);
    QVERIFY_THROWS_EXCEPTION(zipmoe::Error, gemvNibbleBf16(GemvLevel::Scalar, {}, sm.data(), 3, 0, 1, x.data(), 1,
                                                            y.data(), 1));
  }

  // The words written from nibble codes (a prefill's C hits): exactly W's words at every level — no
  // arithmetic, so NaNs keep their bits too — for every tail, shard boundaries anywhere, escapes in
  // many blocks and all 65536 words; rows outside the range asked for are not written.
  void theWordsFromNibbleCodesAreTheWords() {
    std::mt19937 rng(23);
    const auto check = [](GemvLevel level, const std::vector<uint16_t>& w, size_t rows, size_t cols, size_t shards,
                          size_t r0, size_t r1) {
      std::vector<uint8_t> e(w.size()), sm(w.size());
      zipmoe::bf16::split(w.data(), w.size(), e.data(), sm.data());
      std::vector<std::vector<uint8_t>> coded;
      std::vector<std::vector<uint32_t>> positions;
      const auto nibble = nibbleShards(e, rows, cols, shards, coded, positions);
      constexpr uint16_t kUntouched = 0xDEAD;
      std::vector<uint16_t> out(w.size(), kUntouched);
      nibbleToBf16(level, nibble, sm.data(), cols, r0, r1, out.data());
      for (size_t i = 0; i < w.size(); ++i) {
        const size_t r = i / cols;
        const uint16_t want = r >= r0 && r < r1 ? w[i] : kUntouched;
        QVERIFY2(out[i] == want, qPrintable(QString("%1: %2 rows x %3 cols in %4 shards, rows %5..%6: word %7 is %8, expected %9")
                                                .arg(gemvLevelName(level)).arg(rows).arg(cols).arg(shards).arg(r0).arg(r1)
                                                .arg(i).arg(out[i], 4, 16).arg(want, 4, 16)));
      }
    };
    for (const GemvLevel level : supportedGemvLevels()) {
      for (const size_t cols : {size_t{2}, size_t{8}, size_t{30}, size_t{32}, size_t{34}, size_t{64}, size_t{100},
                                size_t{226}, size_t{1408}}) {
        for (const size_t rows : {size_t{1}, size_t{5}, size_t{13}}) {
          auto w = randomBf16(rows * cols, rng, 0.05f);
          for (size_t r = 0; r < rows; ++r)  // rare exponents: escapes
            for (const float rare : {1e-30f, 3e-20f, 7e5f, 2e25f}) w[r * cols + rng() % cols] = floatToBf16(rng() % 2 ? rare : -rare);
          for (const size_t shards : {size_t{1}, size_t{3}}) {
            check(level, w, rows, cols, shards, 0, rows);
            if (rows > 2) check(level, w, rows, cols, shards, 1, rows - 1);
          }
        }
      }
      std::vector<uint16_t> all(65536);
      for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
      check(level, all, 256, 256, 3, 0, 256);
      check(level, all, 256, 256, 3, 83, 171);
    }
    std::vector<uint8_t> sm(3);
    std::vector<uint16_t> out(3);
    QVERIFY_THROWS_EXCEPTION(zipmoe::Error, nibbleToBf16(GemvLevel::Scalar, {}, sm.data(), 3, 0, 1, out.data()));
  }

  // AMX tiles (prefill): against a double sum over batches that fill 1 to 4 tile blocks and more, the
  // three forms of W bit-identical, and each row's result the same whatever the batch around it.
  void amxTilesMatchADoubleSumInEveryForm() {
    if (!amxSupported()) QSKIP("this CPU or kernel runs no AMX-BF16 tiles");
    std::mt19937 rng(23);
    const size_t rows = 48, cols = 96;
    QVERIFY(amxTakes(rows, cols));
    QVERIFY(!amxTakes(rows + 8, cols) && !amxTakes(rows, cols + 16));
    const std::vector<uint16_t> w = randomBf16(rows * cols, rng, 0.05f);
    std::vector<uint8_t> e(rows * cols), sm(rows * cols);
    zipmoe::bf16::split(w.data(), rows * cols, e.data(), sm.data());
    std::vector<std::vector<uint8_t>> coded;
    std::vector<std::vector<uint32_t>> positions;
    const auto nibble = nibbleShards(e, rows, cols, 2, coded, positions);
    const RowBlockWords fromPlanes = [&](size_t r0, uint16_t* out) {
      zipmoe::bf16::merge(e.data() + r0 * cols, sm.data() + r0 * cols, 16 * cols, out);
    };
    const RowBlockWords fromCodes = [&](size_t r0, uint16_t* out) {
      nibbleToBf16(bestGemvLevel(), nibble, sm.data(), cols, r0, r0 + 16, out, r0);
    };
    std::vector<float> bias(rows);
    for (size_t r = 0; r < rows; ++r) bias[r] = static_cast<float>(r) * 0.01f;
    const std::vector<uint16_t> x = randomBf16(70 * cols, rng, 1.0f);
    std::vector<uint16_t> whole(70 * rows);
    {
      const std::vector<uint16_t> packed = packX(x.data(), 70, cols);
      amxProductRows(w.data(), {}, cols, packed.data(), 70, bias.data(), 0, rows / 16, whole.data(), rows);
    }
    for (const size_t batch : {9, 16, 17, 33, 64, 70}) {
      const std::vector<uint16_t> packed = packX(x.data(), batch, cols);
      std::vector<uint16_t> words(batch * rows, 0xFFFF), planes(batch * rows, 0xFFFF), codes(batch * rows, 0xFFFF);
      amxProductRows(w.data(), {}, cols, packed.data(), batch, bias.data(), 0, rows / 16, words.data(), rows);
      amxProductRows(nullptr, fromPlanes, cols, packed.data(), batch, bias.data(), 0, 1, planes.data(), rows);
      amxProductRows(nullptr, fromPlanes, cols, packed.data(), batch, bias.data(), 1, rows / 16, planes.data(), rows);
      amxProductRows(nullptr, fromCodes, cols, packed.data(), batch, bias.data(), 0, rows / 16, codes.data(), rows);
      QVERIFY2(words == planes, qPrintable(QString("batch %1: planes").arg(batch)));
      QVERIFY2(words == codes, qPrintable(QString("batch %1: nibble codes").arg(batch)));
      // Batch invariance: the first `batch` rows of the 70-row product, bit for bit.
      QVERIFY2(std::equal(words.begin(), words.end(), whole.begin()), qPrintable(QString("batch %1").arg(batch)));
      for (size_t m = 0; m < batch; ++m)
        for (size_t r = 0; r < rows; ++r) {
          double sum = bias[r];
          for (size_t c = 0; c < cols; ++c)
            sum += static_cast<double>(bf16ToFloat(w[r * cols + c])) * static_cast<double>(bf16ToFloat(x[m * cols + c]));
          const float got = bf16ToFloat(words[m * rows + r]);
          // One BF16 rounding of an fp32 sum: within 2⁻⁸ of the value, plus the sum's fp32 error.
          QVERIFY2(std::abs(got - sum) <= std::abs(sum) / 128 + 1e-3,
                   qPrintable(QString("batch %1 row %2 out %3: %4 vs %5").arg(batch).arg(m).arg(r).arg(got).arg(sum)));
        }
    }
  }

  void anUnsupportedLevelIsRefused() {
    for (const GemvLevel level : {GemvLevel::Avx2, GemvLevel::Avx512Bf16}) {
      if (gemvLevelSupported(level)) continue;
      std::vector<uint16_t> w(4), x(4);
      std::vector<float> y(1);
      QVERIFY_THROWS_EXCEPTION(zipmoe::Error, gemvBf16(level, w.data(), 4, 0, 1, x.data(), 1, y.data(), 1));
      std::vector<uint8_t> e(4), sm(4);
      QVERIFY_THROWS_EXCEPTION(zipmoe::Error,
                               gemvSplitBf16(level, e.data(), sm.data(), 4, 0, 1, x.data(), 1, y.data(), 1));
    }
    QCOMPARE(supportedGemvLevels().front(), GemvLevel::Scalar);
    QCOMPARE(bestGemvLevel(), supportedGemvLevels().back());
  }

  void bf16RoundingIsToNearestEven() {
    for (uint32_t h = 0; h < 65536; ++h) {  // widening then narrowing is the identity (NaNs stay NaN)
      const auto word = static_cast<uint16_t>(h);
      const float f = bf16ToFloat(word);
      if (std::isnan(f)) QVERIFY(std::isnan(bf16ToFloat(floatToBf16(f))));
      else QCOMPARE(floatToBf16(f), word);
    }
    const auto fromBits = [](uint32_t bits) {
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    };
    QCOMPARE(floatToBf16(fromBits(0x3F808000u)), uint16_t{0x3F80});  // halfway, even below: down
    QCOMPARE(floatToBf16(fromBits(0x3F818000u)), uint16_t{0x3F82});  // halfway, odd below: up
    QCOMPARE(floatToBf16(fromBits(0x3F808001u)), uint16_t{0x3F81});  // above halfway: up
    QCOMPARE(floatToBf16(fromBits(0x7F7FFFFFu)), uint16_t{0x7F80});  // FLT_MAX rounds to infinity
  }
};

QTEST_APPLESS_MAIN(TestBf16Gemv)
#include "test_bf16_gemv.moc"
