// BF16 split/merge: every one of the 65536 words, every SIMD level this CPU has, every tail length.
#include <QtTest>

#include <algorithm>
#include <numeric>
#include <random>

#include "test_support.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/base/error.h"

using namespace zipmoe;

class TestBf16Split : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void formulasMatchTheDesign() {
    // docs/ARCHITECTURE.md: E = (w >> 7) & 0xFF; SM = ((w >> 15) << 7) | (w & 0x7F).
    QCOMPARE(bf16::exponentOf(0x3F80), uint8_t{0x7F});      // 1.0f
    QCOMPARE(bf16::signMantissaOf(0x3F80), uint8_t{0x00});
    QCOMPARE(bf16::exponentOf(0xBFC0), uint8_t{0x7F});      // -1.5f
    QCOMPARE(bf16::signMantissaOf(0xBFC0), uint8_t{0xC0});  // sign bit on top, mantissa 0x40
    QCOMPARE(bf16::mergeWord(0x7F, 0xC0), uint16_t{0xBFC0});
  }

  void everyWordRoundTripsAtEveryLevel() {
    std::vector<uint16_t> words(65536);
    std::iota(words.begin(), words.end(), uint16_t{0});
    for (const auto level : bf16::supportedSimdLevels()) {
      std::vector<uint8_t> e(words.size()), sm(words.size());
      bf16::split(level, words.data(), words.size(), e.data(), sm.data());
      for (size_t i = 0; i < words.size(); ++i) {
        QCOMPARE(e[i], bf16::exponentOf(words[i]));
        QCOMPARE(sm[i], bf16::signMantissaOf(words[i]));
      }
      std::vector<uint16_t> back(words.size(), 0xDEAD);
      bf16::merge(level, e.data(), sm.data(), e.size(), back.data());
      QVERIFY2(back == words, bf16::simdLevelName(level));
    }
  }

  void theDefaultMergeUsesAMeasuredSupportedLevel() {
    const auto levels = bf16::supportedSimdLevels();
    const bf16::SimdLevel chosen = bf16::mergeSimdLevel();
    QVERIFY(std::find(levels.begin(), levels.end(), chosen) != levels.end());
    if (levels.size() > 1) QVERIFY(chosen != bf16::SimdLevel::Scalar);  // a SIMD level always beats the loop
    QCOMPARE(bf16::mergeSimdLevel(), chosen);                              // measured once per process
    std::vector<uint16_t> words(4099);
    std::mt19937 rng(9);
    for (auto& w : words) w = static_cast<uint16_t>(rng());
    std::vector<uint8_t> e(words.size()), sm(words.size());
    bf16::split(words.data(), words.size(), e.data(), sm.data());
    std::vector<uint16_t> back(words.size());
    bf16::merge(e.data(), sm.data(), e.size(), back.data());
    QVERIFY(back == words);
  }

  void everyTailLengthAtEveryLevel() {
    std::mt19937 rng(7);
    for (const auto level : bf16::supportedSimdLevels()) {
      for (size_t n = 0; n <= 200; ++n) {
        std::vector<uint16_t> words(n + 1);
        for (auto& w : words) w = static_cast<uint16_t>(rng());
        const uint16_t guard = words[n];
        std::vector<uint8_t> e(n + 1, 0xAA), sm(n + 1, 0xBB);
        bf16::split(level, words.data(), n, e.data(), sm.data());
        QCOMPARE(e[n], uint8_t{0xAA});  // nothing written past n
        QCOMPARE(sm[n], uint8_t{0xBB});
        std::vector<uint16_t> back(n + 1, 0x5555);
        bf16::merge(level, e.data(), sm.data(), n, back.data());
        QCOMPARE(back[n], uint16_t{0x5555});
        back[n] = guard;
        QVERIFY(back == words);
      }
    }
  }

  void defaultDispatchAgreesWithScalar() {
    std::mt19937 rng(11);
    std::vector<uint16_t> words(100003);
    for (auto& w : words) w = static_cast<uint16_t>(rng());
    std::vector<uint8_t> e1(words.size()), s1(words.size()), e2(words.size()), s2(words.size());
    bf16::split(words.data(), words.size(), e1.data(), s1.data());
    bf16::split(bf16::SimdLevel::Scalar, words.data(), words.size(), e2.data(), s2.data());
    QVERIFY(e1 == e2);
    QVERIFY(s1 == s2);
    QVERIFY(bf16::supportedSimdLevels().front() == bf16::SimdLevel::Scalar);
  }

  void unsupportedLevelIsRefused() {
    const auto levels = bf16::supportedSimdLevels();
    if (levels.size() == 3) QSKIP("this CPU supports every level");
    const auto missing = levels.size() == 1 ? bf16::SimdLevel::Avx2 : bf16::SimdLevel::Avx512;
    uint16_t w = 0;
    uint8_t e = 0, sm = 0;
    ZIPMOE_EXPECT_ERROR(bf16::split(missing, &w, 1, &e, &sm), "does not support");
  }
};

QTEST_APPLESS_MAIN(TestBf16Split)
#include "test_bf16_split.moc"
