// The pools' names, bits and the parsing of a user's pool subset (zipmoe/base/pools.h), defined once for
// the CLI, the app, the planner and the cache.
#include <QtTest>

#include "test_support.h"
#include "zipmoe/base/error.h"
#include "zipmoe/base/pools.h"

using namespace zipmoe;

class TestPools : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void poolNamesAndBits() {
    QCOMPARE(poolLetter(Pool::F), 'F');
    QCOMPARE(poolLetter(Pool::C), 'C');
    QCOMPARE(poolLetter(Pool::S), 'S');
    QCOMPARE(poolLetter(Pool::E), 'E');
    QCOMPARE(poolBit(Pool::F) | poolBit(Pool::C) | poolBit(Pool::S) | poolBit(Pool::E), kAllPools);
    QVERIFY(hasPool(poolBit(Pool::S), Pool::S) && !hasPool(poolBit(Pool::S), Pool::F));
  }

  void whatEachPoolKeeps() {
    QVERIFY(keepsFullTensors(Pool::F) && !keepsExponents(Pool::F) && !keepsSignMantissa(Pool::F));
    QVERIFY(keepsExponents(Pool::C) && keepsSignMantissa(Pool::C) && !keepsFullTensors(Pool::C));
    QVERIFY(keepsSignMantissa(Pool::S) && !keepsExponents(Pool::S));
    QVERIFY(keepsExponents(Pool::E) && !keepsSignMantissa(Pool::E));
  }

  void lettersRoundTrip() {
    QCOMPARE(poolLetters(kAllPools), std::string("FCSE"));
    QCOMPARE(poolLetters(poolBit(Pool::S) | poolBit(Pool::F)), std::string("FS"));
    QCOMPARE(parsePoolMask("FS", "--pools"), poolBit(Pool::F) | poolBit(Pool::S));
    QCOMPARE(parsePoolMask("esfc", "--pools"), kAllPools);
    for (PoolMask m = 1; m <= kAllPools; ++m) QCOMPARE(parsePoolMask(poolLetters(m), "x"), m);
  }

  void badSubsetsAreRefusedByName() {
    ZIPMOE_EXPECT_ERROR(parsePoolMask("", "--pools"), "--pools", "no pool");
    ZIPMOE_EXPECT_ERROR(parsePoolMask("FX", "--pools"), "--pools 'FX'", "'X' is not a pool");
    ZIPMOE_EXPECT_ERROR(parsePoolMask("FF", "system zipmoe:FF"), "system zipmoe:FF", "named twice");
  }
};

QTEST_APPLESS_MAIN(TestPools)
#include "test_pools.moc"
