// CRC-32C of every store chunk (base/crc32c.h): the three-stream hardware form, the one-stream form
// and the portable table agree on every length around the three-stream block (3 × 8 KiB), at every
// start alignment, chained across calls, and on the standard check value.
#include <QtTest>

#include <cstring>
#include <random>
#include <vector>

#include "base/crc32c.h"

using namespace zipmoe::detail;

class TestCrc32c : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void checkValue() {
    const char* text = "123456789";
    QCOMPARE(crc32c(text, 9), 0xE3069283u);
    QCOMPARE(crc32cOneStream(text, 9), 0xE3069283u);
    QCOMPARE(crc32cPortable(text, 9), 0xE3069283u);
    QCOMPARE(crc32c(text, 0), 0u);
  }

  void everyFormAgrees() {
    std::mt19937_64 rng(7);
    std::vector<uint8_t> data(4 * 3 * 8192 + 64);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    std::vector<size_t> lengths;
    for (size_t n = 0; n < 80; ++n) lengths.push_back(n);
    for (size_t block : {size_t{3 * 8192}, size_t{2 * 3 * 8192}, size_t{3 * 3 * 8192}})
      for (size_t d = 0; d < 20; ++d) lengths.push_back(block - 10 + d);
    for (int i = 0; i < 40; ++i) lengths.push_back(static_cast<size_t>(rng() % (data.size() - 8)));
    for (size_t offset = 0; offset < 8; ++offset)
      for (size_t n : lengths) {
        const uint8_t* p = data.data() + offset;
        const uint32_t want = crc32cPortable(p, n);
        if (crc32c(p, n) != want || crc32cOneStream(p, n) != want)
          QFAIL(qPrintable(QString("length %1 at offset %2: %3 / %4, table %5")
                               .arg(n).arg(offset).arg(crc32c(p, n)).arg(crc32cOneStream(p, n)).arg(want)));
      }
  }

  void chainedCallsEqualOneCall() {
    std::mt19937_64 rng(11);
    std::vector<uint8_t> data(200000);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    const uint32_t whole = crc32c(data.data(), data.size());
    QCOMPARE(whole, crc32cPortable(data.data(), data.size()));
    for (size_t cut : {size_t{1}, size_t{7}, size_t{24576}, size_t{100003}, size_t{199999}}) {
      const uint32_t first = crc32c(data.data(), cut);
      QCOMPARE(crc32c(data.data() + cut, data.size() - cut, first), whole);
      QCOMPARE(crc32cPortable(data.data() + cut, data.size() - cut, crc32cPortable(data.data(), cut)), whole);
    }
  }
};

QTEST_APPLESS_MAIN(TestCrc32c)
#include "test_crc32c.moc"
